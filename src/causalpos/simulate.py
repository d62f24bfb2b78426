"""Monte Carlo engine for the parameter-free decoder of Eq. 1 (Sections 4.1, 5.1, App. B, D).

One layer: Y = Norm(X); Q = K = RoPE(Y) (or Y); S = QK^T / scale;
A = softmax(mask(S)); X' = AY + X (or AY without residual).

The engine streams: samples are drawn in chunks and only per-entry sums and
sums of squares of S and A are kept, so memory does not grow with N.

Two exact samplers feed it:
- "full": token vectors in R^d, x_i = sqrt(a) u + sqrt(1-a) w_i with u a
  random unit vector and w_i independent random unit vectors orthogonal to u.
  Then ||x_i|| = 1 and E<x_i, x_j> = a exactly.
- "reduced": the same distribution written in a basis of dimension
  1 + min(n, d-1). Without RoPE and with l2 normalisation the decoder only
  sees inner products, which are rotation invariant, so the Bartlett
  decomposition of the Wishart Gram of the w_i gives the same law with far
  fewer random numbers and flops when d > n (the convergence sweep in d).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

NORMS = ("l2", "layernorm")
SCALES = ("none", "sqrt_d", "d")
PES = ("none", "rope")
MASKS = ("causal", "none")
SAMPLERS = ("auto", "full", "reduced")
LAYERNORM_EPS = 1e-5  # torch.nn.LayerNorm's default
RNG_BLOCK = 256  # samples per seeded random block: results do not depend on the chunk size


@dataclass(frozen=True)
class Variant:
    """One simulated decoder. Field names are the config keys and the Parquet columns."""

    norm: str = "l2"
    scale: str = "none"
    alpha: float = 0.0
    pe: str = "none"
    rope_theta: float = 10000.0
    mask: str = "causal"
    residual: bool = True
    d: int = 64
    seq_len: int = 50
    n_layers: int = 4
    n_samples: int = 100_000
    seed: int = 0

    def __post_init__(self):
        def bad(key, value, allowed):
            raise ValueError(f"simulation setting '{key}' = {value!r} is invalid; allowed: {allowed}")

        if self.norm not in NORMS:
            bad("norm", self.norm, list(NORMS))
        if self.scale not in SCALES:
            bad("scale", self.scale, list(SCALES))
        if self.pe not in PES:
            bad("pe", self.pe, list(PES))
        if self.mask not in MASKS:
            bad("mask", self.mask, list(MASKS))
        if not 0.0 <= self.alpha < 1.0:
            bad("alpha", self.alpha, "0 <= alpha < 1")
        if self.seq_len < 2:
            bad("seq_len", self.seq_len, "an integer >= 2")
        if self.d < 2 or (self.pe == "rope" and self.d % 2):
            bad("d", self.d, "an integer >= 2, even when pe is rope")
        if self.n_layers < 1:
            bad("n_layers", self.n_layers, "an integer >= 1")
        if self.n_samples < 2:
            bad("n_samples", self.n_samples, "an integer >= 2")
        if self.rope_theta <= 0:
            bad("rope_theta", self.rope_theta, "a positive number")

    @property
    def score_divisor(self) -> float:
        return {"none": 1.0, "sqrt_d": math.sqrt(self.d), "d": float(self.d)}[self.scale]

    @property
    def rotation_invariant(self) -> bool:
        """True when the decoder depends on the inputs only through their inner products."""
        return self.norm == "l2" and self.pe == "none"

    def params(self) -> dict:
        return dataclasses.asdict(self)


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


def sample_inputs_reduced(batch: int, n: int, d: int, alpha: float, gen: torch.Generator,
                          device="cpu", dtype=torch.float32) -> torch.Tensor:
    """The law of `sample_inputs` up to a rotation, in 1 + min(n, d-1) coordinates.

    Coordinate 0 is the shared direction u. The noise vectors live in the
    (d-1)-dimensional complement of u; their Gram matrix is Wishart, and its
    Bartlett factor L (lower trapezoidal: N(0,1) below the diagonal, chi with
    d-1-i degrees of freedom on it) has rows with the same inner products.
    """
    m = d - 1
    k = min(n, m)
    lower = torch.randn(batch, n, k, generator=gen, device=device, dtype=dtype).tril_(-1)
    dof = torch.arange(m, m - k, -1, device=device, dtype=dtype).expand(batch, k)
    chi = (2.0 * torch._standard_gamma(dof / 2.0, generator=gen)).sqrt_()
    lower[:, :k, :].diagonal(dim1=1, dim2=2).copy_(chi)
    lower = lower / torch.linalg.vector_norm(lower, dim=-1, keepdim=True)
    x = torch.empty(batch, n, k + 1, device=device, dtype=dtype)
    x[..., 0] = math.sqrt(alpha)
    x[..., 1:] = math.sqrt(1.0 - alpha) * lower
    return x


# ---------------------------------------------------------------- the decoder


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
    """Running sum and sum of squares per entry, shifted by the first chunk's mean.

    The shift keeps the float64 difference sum2 - sum^2/N free of cancellation
    even where the variance is tiny next to the mean.
    """

    def __init__(self):
        self.shift = None
        self.total = None
        self.total_sq = None
        self.count = 0

    def add(self, values: torch.Tensor) -> None:
        if self.shift is None:
            self.shift = values.mean(0)
            self.total = torch.zeros(values.shape[1:], dtype=torch.float64, device=values.device)
            self.total_sq = torch.zeros_like(self.total)
        dev = values - self.shift
        self.total += dev.sum(0, dtype=torch.float64)
        self.total_sq += (dev * dev).sum(0, dtype=torch.float64)
        self.count += values.shape[0]

    def mean_sem(self):
        n = self.count
        mean_dev = self.total / n
        var = (self.total_sq - n * mean_dev**2).clamp_min(0) / (n - 1)
        mean = self.shift.double() + mean_dev
        return mean.cpu().numpy(), (var / n).sqrt().cpu().numpy()


def resolve_device(device: str | None) -> torch.device:
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def simulate(v: Variant, device: str | None = "auto", chunk_size: int = 1024,
             sampler: str = "auto", progress=None) -> SimulationResult:
    """Average scores and probabilities of every layer over v.n_samples samples.

    Deterministic for a given variant, seed, sampler and device type: sample
    block b is always drawn from a generator seeded by (seed, b).
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    if sampler == "reduced" and not v.rotation_invariant:
        raise ValueError("the reduced sampler needs norm 'l2' and pe 'none'")
    if sampler == "auto":
        sampler = "reduced" if v.rotation_invariant and v.d - 1 > v.seq_len else "full"
    dev = resolve_device(device)
    draw = sample_inputs_reduced if sampler == "reduced" else sample_inputs
    chunk_size = max(RNG_BLOCK, chunk_size - chunk_size % RNG_BLOCK)
    n = v.seq_len
    mask = None
    if v.mask == "causal":
        mask = torch.full((n, n), float("-inf"), device=dev).triu_(1)
    rope = rope_tables(n, v.d, v.rope_theta, dev) if v.pe == "rope" else None
    moments = [(_Moments(), _Moments()) for _ in range(v.n_layers)]

    start = time.perf_counter()
    with torch.inference_mode():
        for first in range(0, v.n_samples, chunk_size):
            size = min(chunk_size, v.n_samples - first)
            parts = []
            for offset in range(0, size, RNG_BLOCK):
                gen = _block_generator(v.seed, (first + offset) // RNG_BLOCK, dev)
                parts.append(draw(min(RNG_BLOCK, size - offset), n, v.d, v.alpha, gen, dev))
            x = torch.cat(parts) if len(parts) > 1 else parts[0]
            for (score_m, prob_m), (scores, probs) in zip(moments, decoder_layers(x, v, mask, rope)):
                score_m.add(scores)
                prob_m.add(probs)
            if progress is not None:
                progress(first + size, v.n_samples)
    seconds = time.perf_counter() - start

    score = [m[0].mean_sem() for m in moments]
    prob = [m[1].mean_sem() for m in moments]
    return SimulationResult(
        variant=v,
        score_mean=np.stack([s[0] for s in score]),
        score_sem=np.stack([s[1] for s in score]),
        prob_mean=np.stack([p[0] for p in prob]),
        prob_sem=np.stack([p[1] for p in prob]),
        sampler=sampler,
        device=dev.type,
        seconds=seconds,
    )


# ---------------------------------------------------------------- tables


def diagonal_normalise(matrix: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """Subtract from every visible entry the mean of its diagonal (key - query offset)."""
    n = matrix.shape[-1]
    offset = np.arange(n)[None, :] - np.arange(n)[:, None]
    out = np.full_like(matrix, np.nan, dtype=float)
    for k in np.unique(offset[visible]):
        band = visible & (offset == k)
        out[..., band] = matrix[..., band] - matrix[..., band].mean(axis=-1, keepdims=True)
    return out


def visible_pairs(n: int, mask: str) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool)) if mask == "causal" else np.ones((n, n), dtype=bool)


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
