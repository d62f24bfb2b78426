"""Monte Carlo engine for the parameter-free decoder of Eq. 1 (Sections 4.1, 5.1, App. B, D).

One layer: Y = Norm(X); Q = K = RoPE(Y) (or Y); S = QK^T / scale;
A = softmax(mask(S)); X' = AY + X (or AY without residual).

The engine streams: samples are drawn in seeded blocks and only per-entry sums
and sums of squares of S and A are kept, so memory does not grow with N.

Two exact samplers feed it:
- "full": token vectors in R^d, x_i = sqrt(a) u + sqrt(1-a) w_i with u a
  random unit vector and w_i independent random unit vectors orthogonal to u.
  Then ||x_i|| = 1 and E<x_i, x_j> = a exactly.
- "reduced": the same distribution written in a basis of dimension
  1 + min(n, d-1). Without RoPE and with l2 normalisation the decoder only
  sees inner products, which are rotation invariant, so the Bartlett
  decomposition of the Wishart Gram of the w_i gives the same law with far
  fewer random numbers and flops when d > n (the convergence sweep in d).

Two implementations of the decoder run the samples:
- "numba" (CPU): one sample at a time in a compiled kernel whose buffers stay
  in cache and which skips the work that structure makes zero (see the
  kernel section below). Blocks run on a pool of threads.
- "torch" (CUDA, or CPU on request): batched tensor ops, `decoder_layers`.
Both see the same law; they use different random streams, so their results
agree statistically, not bitwise.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from causalpos.matrices import diagonal_normalise, visible_pairs  # noqa: F401  (re-exported)
from causalpos.variant import LAYERNORM_EPS, MASKS, NORMS, PES, SCALES, Variant  # noqa: F401

SAMPLERS = ("auto", "full", "reduced")
BACKENDS = ("auto", "numba", "torch")
RNG_BLOCK = 256  # samples per seeded random block: results do not depend on the chunk size


@dataclass
class SimulationResult:
    variant: Variant
    score_mean: np.ndarray  # [layer, query_pos, key_pos], float64
    score_sem: np.ndarray
    prob_mean: np.ndarray
    prob_sem: np.ndarray
    sampler: str
    device: str
    seconds: float


# ---------------------------------------------------------------- sampling


def _block_generator(seed: int, block: int, device: torch.device) -> torch.Generator:
    state = np.random.SeedSequence([seed, block]).generate_state(1, dtype=np.uint64)[0]
    gen = torch.Generator(device=device)
    gen.manual_seed(int(state) & 0x7FFF_FFFF_FFFF_FFFF)
    return gen


def sample_inputs(batch: int, n: int, d: int, alpha: float, gen: torch.Generator,
                  device="cpu", dtype=torch.float32) -> torch.Tensor:
    """Unit vectors [batch, n, d] with exact E<x_i, x_j> = alpha (the "full" sampler)."""
    shared = torch.randn(batch, 1, d, generator=gen, device=device, dtype=dtype)
    shared = shared / torch.linalg.vector_norm(shared, dim=-1, keepdim=True)
    noise = torch.randn(batch, n, d, generator=gen, device=device, dtype=dtype)
    noise = noise - (noise * shared).sum(-1, keepdim=True) * shared
    noise = noise / torch.linalg.vector_norm(noise, dim=-1, keepdim=True)
    return math.sqrt(alpha) * shared + math.sqrt(1.0 - alpha) * noise


def _chi_dof(n: int, d: int) -> torch.Tensor:
    """Degrees of freedom d-1, d-2, ... of the Bartlett diagonal (one per row of the triangle)."""
    m = d - 1
    return torch.arange(m, m - min(n, m), -1, dtype=torch.float32)


def _sample_chi(batch: int, n: int, d: int, gen: torch.Generator, device="cpu", dtype=torch.float32):
    dof = _chi_dof(n, d).to(device, dtype).expand(batch, -1)
    return (2.0 * torch._standard_gamma(dof / 2.0, generator=gen)).sqrt_()


def sample_inputs_reduced(batch: int, n: int, d: int, alpha: float, gen: torch.Generator,
                          device="cpu", dtype=torch.float32) -> torch.Tensor:
    """The law of `sample_inputs` up to a rotation, in 1 + min(n, d-1) coordinates.

    Coordinate 0 is the shared direction u. The noise vectors live in the
    (d-1)-dimensional complement of u; their Gram matrix is Wishart, and its
    Bartlett factor L (lower trapezoidal: N(0,1) below the diagonal, chi with
    d-1-i degrees of freedom on it) has rows with the same inner products.
    """
    k = min(n, d - 1)
    lower = torch.randn(batch, n, k, generator=gen, device=device, dtype=dtype).tril_(-1)
    chi = _sample_chi(batch, n, d, gen, device, dtype)
    lower[:, :k, :].diagonal(dim1=1, dim2=2).copy_(chi)
    lower = lower / torch.linalg.vector_norm(lower, dim=-1, keepdim=True)
    x = torch.empty(batch, n, k + 1, device=device, dtype=dtype)
    x[..., 0] = math.sqrt(alpha)
    x[..., 1:] = math.sqrt(1.0 - alpha) * lower
    return x


# ---------------------------------------------------------------- the decoder (torch)


def rope_tables(n: int, d: int, theta: float, device="cpu", dtype=torch.float32):
    """cos and sin of shape [n, d] for the half-split RoPE (pairs i and i + d/2)."""
    inv_freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(device, dtype), angles.sin().to(device, dtype)


def apply_rope(y: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = y.shape[-1] // 2
    rotated = torch.cat([-y[..., half:], y[..., :half]], dim=-1)
    return y * cos + rotated * sin


def normalise(x: torch.Tensor, norm: str) -> torch.Tensor:
    if norm == "l2":
        return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    # LayerNorm without affine parameters: rows of norm sqrt(d)
    return torch.nn.functional.layer_norm(x, x.shape[-1:], eps=LAYERNORM_EPS)


def decoder_layers(x: torch.Tensor, v: Variant, additive_mask: torch.Tensor | None, rope=None):
    """Yield (scores, probs) of each layer for a batch x [batch, n, dim]."""
    divisor = v.score_divisor
    for layer in range(v.n_layers):
        y = normalise(x, v.norm)
        q = apply_rope(y, *rope) if rope is not None else y
        scores = torch.bmm(q, q.transpose(1, 2))
        if divisor != 1.0:
            scores = scores / divisor
        logits = scores + additive_mask if additive_mask is not None else scores
        probs = torch.softmax(logits, dim=-1)
        yield scores, probs
        if layer + 1 < v.n_layers:
            x = torch.baddbmm(x, probs, y) if v.residual else torch.bmm(probs, y)


class _Moments:
    """Running sum and sum of squares per entry, shifted by a fixed reference.

    The shift (the mean of sample block 0) keeps the float64 difference
    sum2 - sum^2/N free of cancellation even where the variance is tiny next
    to the mean, and does not depend on how the samples are chunked.
    """

    def __init__(self, shift: torch.Tensor):
        self.shift = shift
        self.total = torch.zeros(shift.shape, dtype=torch.float64, device=shift.device)
        self.total_sq = torch.zeros_like(self.total)
        self.count = 0

    def add(self, values: torch.Tensor) -> None:
        dev = values - self.shift
        self.total += dev.sum(0, dtype=torch.float64)
        self.total_sq += (dev * dev).sum(0, dtype=torch.float64)
        self.count += values.shape[0]

    def mean_sem(self):
        return _mean_sem(self.shift.double(), self.total, self.total_sq, self.count)


def _mean_sem(shift, total, total_sq, n):
    """Mean and standard error from shifted sums (torch or numpy, float64)."""
    mean_dev = total / n
    var = (total_sq - n * mean_dev**2).clip(min=0) / (n - 1)
    mean = shift + mean_dev
    sem = (var / n) ** 0.5
    if isinstance(mean, torch.Tensor):
        return mean.cpu().numpy(), sem.cpu().numpy()
    return mean, sem


def resolve_device(device: str | None) -> torch.device:
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _resolve_sampler(v: Variant, sampler: str) -> str:
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    if sampler == "reduced" and not v.rotation_invariant:
        raise ValueError("the reduced sampler needs norm 'l2' and pe 'none'")
    if sampler == "auto":
        return "reduced" if v.rotation_invariant and v.d - 1 > v.seq_len else "full"
    return sampler


def _block_sizes(n_samples: int):
    """(block index, samples in it) for every seeded block."""
    return [(b, min(RNG_BLOCK, n_samples - b * RNG_BLOCK)) for b in range(-(-n_samples // RNG_BLOCK))]


def _simulate_torch(v: Variant, sampler: str, dev: torch.device, chunk_size: int, progress):
    """Batched torch decoder (the CUDA path). Returns (score mean, sem), (prob mean, sem), [layer, n, n]."""
    draw = sample_inputs_reduced if sampler == "reduced" else sample_inputs
    chunk_size = max(RNG_BLOCK, chunk_size - chunk_size % RNG_BLOCK)
    n = v.seq_len
    mask = None
    if v.mask == "causal":
        mask = torch.full((n, n), float("-inf"), device=dev).triu_(1)
    rope = rope_tables(n, v.d, v.rope_theta, dev) if v.pe == "rope" else None

    def run(blocks):
        x = torch.cat([draw(size, n, v.d, v.alpha, _block_generator(v.seed, b, dev), dev) for b, size in blocks])
        return decoder_layers(x, v, mask, rope)

    blocks = _block_sizes(v.n_samples)
    with torch.inference_mode():
        moments = [(_Moments(s.mean(0)), _Moments(p.mean(0))) for s, p in run(blocks[:1])]
        per_chunk = chunk_size // RNG_BLOCK
        for first in range(0, len(blocks), per_chunk):
            group = blocks[first:first + per_chunk]
            for (score_m, prob_m), (scores, probs) in zip(moments, run(group)):
                score_m.add(scores)
                prob_m.add(probs)
            if progress is not None:
                progress(min((first + len(group)) * RNG_BLOCK, v.n_samples), v.n_samples)
    score = [m[0].mean_sem() for m in moments]
    prob = [m[1].mean_sem() for m in moments]
    return ((np.stack([s[0] for s in score]), np.stack([s[1] for s in score])),
            (np.stack([p[0] for p in prob]), np.stack([p[1] for p in prob])))


# ---------------------------------------------------------------- entry point


def simulate(v: Variant, device: str | None = "auto", chunk_size: int = 1024,
             sampler: str = "auto", progress=None, backend: str = "auto",
             threads: int | None = None) -> SimulationResult:
    """Average scores and probabilities of every layer over v.n_samples samples.

    backend "auto" runs the CPU kernel on CPU and torch on CUDA. Deterministic
    for a given variant, seed, sampler, backend and device type: sample block
    b is always drawn from a generator seeded by (seed, b). The CPU kernel's
    result is bitwise independent of chunk_size and threads (blocks are summed
    in order; threads defaults to torch's thread count). chunk_size sets the
    torch path's batch; its result depends on chunk_size and on torch's thread
    count only through float rounding. `seconds` includes compiling the kernel
    on the first call in a fresh numba cache (~10 s; later calls load it).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    sampler = _resolve_sampler(v, sampler)
    dev = resolve_device(device)
    if backend == "auto":
        backend = "numba" if dev.type == "cpu" else "torch"
    if backend == "numba" and dev.type != "cpu":
        raise ValueError("the numba backend runs on the CPU only")

    start = time.perf_counter()
    if backend == "numba":
        from causalpos.cpu_kernel import simulate_blocks  # numba compiles on first use: import lazily

        score, prob = simulate_blocks(v, sampler, threads or torch.get_num_threads(), progress)
    else:
        score, prob = _simulate_torch(v, sampler, dev, chunk_size, progress)
    seconds = time.perf_counter() - start

    return SimulationResult(
        variant=v,
        score_mean=np.asarray(score[0], dtype=np.float64),
        score_sem=np.asarray(score[1], dtype=np.float64),
        prob_mean=np.asarray(prob[0], dtype=np.float64),
        prob_sem=np.asarray(prob[1], dtype=np.float64),
        sampler=sampler,
        device=dev.type,
        seconds=seconds,
    )


# ---------------------------------------------------------------- tables


def result_frame(result: SimulationResult, name: str) -> pd.DataFrame:
    """Long table: one row per layer and visible (query_pos, key_pos), 0-based."""
    v = result.variant
    visible = visible_pairs(v.seq_len, v.mask)
    query, key = np.nonzero(visible)
    diagnorm = diagonal_normalise(result.score_mean, visible)
    frames = []
    for layer in range(v.n_layers):
        frames.append(pd.DataFrame({
            "variant": name,
            "layer": layer,
            "query_pos": query,
            "key_pos": key,
            "score_mean": result.score_mean[layer][query, key],
            "score_sem": result.score_sem[layer][query, key],
            "score_diagnorm": diagnorm[layer][query, key],
            "prob_mean": result.prob_mean[layer][query, key],
            "prob_sem": result.prob_sem[layer][query, key],
        }))
    frame = pd.concat(frames, ignore_index=True)
    for key_name, value in v.params().items():
        frame[key_name] = value
    frame["sampler"] = result.sampler
    return frame
