"""Monte Carlo engine for the parameter-free decoder of Eq. 1 (Sections 4.1, 5.1, App. B, D).

One layer: Y = Norm(X); Q = K = RoPE(Y) (or Y); S = QK^T / scale;
A = softmax(mask(S)); X' = AY + X (or AY without residual). The mask is causal
(optionally a sliding window: query i sees keys i - window < j <= i) or none.

The engine streams: samples are drawn in seeded blocks and only per-entry sums
and sums of squares of S and A are kept, so memory does not grow with N, and
the score sums of each group of consecutive blocks (sampling.SE_GROUPS), from
which the claims take a metric's standard error (`groups_frame`).

The inputs (`Variant.sampler`: the paper's construction, "official", the
default; or our exact-moment law in the full or the reduced basis) and the
per-block seeding are in `sampling`, shared with the CPU kernel.

Two implementations of the decoder run the samples:
- "numba" (CPU): one sample at a time in a compiled kernel whose buffers stay
  in cache and which skips the work that structure makes zero (see the
  kernel section below). Blocks run on a pool of threads.
- "torch" (CUDA, or CPU on request): batched tensor ops, `run_layers`.
Both see the same law; they use different random streams, so their results
agree statistically, not bitwise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from causalpos.runtime.devices import resolve_device
from causalpos.matrices import diagonal_normalise, visible_pairs
from causalpos.simulation.cpu_kernel import simulate_blocks
from causalpos.simulation.sampling import (
    INPUT_SAMPLERS,
    RNG_BLOCK,
    block_generator,
    block_groups,
    block_sizes,
    mean_sem,
    rope_tables,
)
from causalpos.catalogue.tables import SIMULATION_GROUP_COLUMNS
from causalpos.tril import packed_pairs
from causalpos.simulation.variant import LAYERNORM_EPS, Variant

BACKENDS = ("auto", "numba", "torch")


@dataclass
class SimulationResult:
    variant: Variant
    score_mean: np.ndarray  # [layer, query_pos, key_pos], float64; every pair's score q.k, masked or not
    score_sem: np.ndarray
    prob_mean: np.ndarray  # 0 where the mask hides the key
    prob_sem: np.ndarray
    sampler: str
    device: str
    seconds: float
    group_score_sums: np.ndarray  # [group, layer, query_pos, key_pos]: score sums over each group of blocks
    group_sizes: np.ndarray  # [group]: samples in each (sampling.block_groups)


# ---------------------------------------------------------------- the decoder (torch)


def visible(v: Variant) -> np.ndarray:
    """[n, n] bool, query x key: the pairs the variant's mask lets through (causal j <= i, within the sliding
    window i - j < window when there is one; every pair without a mask). The tables hold these pairs only."""
    return visible_pairs(v.seq_len, v.mask, v.window)


def additive_mask(v: Variant, dev) -> torch.Tensor | None:
    """The mask added to the scores before the softmax: -inf where `visible` is False; None without a mask."""
    if v.mask != "causal":
        return None
    n = v.seq_len
    mask = torch.full((n, n), float("-inf"), device=dev).triu_(1)
    if v.window is not None:
        mask += torch.full((n, n), float("-inf"), device=dev).tril_(-v.window)  # disjoint from triu(1)
    return mask


def apply_rope(y: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = y.shape[-1] // 2
    rotated = torch.cat([-y[..., half:], y[..., :half]], dim=-1)
    return y * cos + rotated * sin


def normalise(x: torch.Tensor, norm: str) -> torch.Tensor:
    if norm == "l2":
        return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    # LayerNorm without affine parameters: rows of norm sqrt(d)
    return torch.nn.functional.layer_norm(x, x.shape[-1:], eps=LAYERNORM_EPS)


def run_layers(x: torch.Tensor, v: Variant, additive_mask: torch.Tensor | None, rope=None):
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
        return mean_sem(self.shift.double(), self.total, self.total_sq, self.count)


def _simulate_torch(v: Variant, sampler: str, dev: torch.device, chunk_size: int, progress):
    """Batched torch decoder (the CUDA path). Returns (score mean, sem), (prob mean, sem), [layer, n, n], and
    (score sums per group of blocks [G, layer, n, n], samples per group [G])."""
    draw = INPUT_SAMPLERS[sampler]
    chunk_size = max(RNG_BLOCK, chunk_size - chunk_size % RNG_BLOCK)
    n = v.seq_len
    mask = additive_mask(v, dev)
    rope = rope_tables(n, v.d, v.rope_theta, dev) if v.pe == "rope" else None

    def run(blocks):
        x = torch.cat([draw(size, n, v.d, v.alpha, block_generator(v.seed, b, dev), dev) for b, size in blocks])
        return run_layers(x, v, mask, rope)

    blocks = block_sizes(v.n_samples)
    groups = block_groups(len(blocks))
    group_sizes = np.bincount(groups, weights=[size for _, size in blocks]).astype(np.int64)
    with torch.inference_mode():
        moments = [(_Moments(s.mean(0)), _Moments(p.mean(0))) for s, p in run(blocks[:1])]
        group_sums = torch.zeros((v.n_layers, len(group_sizes), n, n), dtype=torch.float64, device=dev)
        per_chunk = chunk_size // RNG_BLOCK
        for first in range(0, len(blocks), per_chunk):
            chunk = blocks[first : first + per_chunk]
            sample_group = torch.as_tensor(
                np.repeat(groups[first : first + len(chunk)], [s for _, s in chunk]), device=dev
            )
            for layer, ((score_m, prob_m), (scores, probs)) in enumerate(zip(moments, run(chunk))):
                score_m.add(scores)
                prob_m.add(probs)
                group_sums[layer].index_add_(0, sample_group, (scores - score_m.shift).double())
            if progress is not None:
                progress(min((first + len(chunk)) * RNG_BLOCK, v.n_samples), v.n_samples)
    score = [m[0].mean_sem() for m in moments]
    prob = [m[1].mean_sem() for m in moments]
    shifts = torch.stack([m[0].shift for m in moments]).double()  # [layer, n, n]
    sums = (
        group_sums
        + torch.as_tensor(group_sizes, device=dev, dtype=torch.float64)[None, :, None, None] * shifts[:, None]
    ).transpose(0, 1)
    return (
        (np.stack([s[0] for s in score]), np.stack([s[1] for s in score])),
        (np.stack([p[0] for p in prob]), np.stack([p[1] for p in prob])),
        (sums.cpu().numpy(), group_sizes),
    )


# ---------------------------------------------------------------- entry point


def simulate(
    v: Variant,
    device: str | None = "auto",
    chunk_size: int = 1024,
    progress=None,
    backend: str = "auto",
    threads: int | None = None,
) -> SimulationResult:
    """Average scores and probabilities of every layer over v.n_samples samples.

    The input law is v.sampler's (the result's `sampler` names the one drawn).
    backend "auto" runs the CPU kernel on CPU and torch on CUDA. Deterministic
    for a given variant, seed, backend and device type: sample block
    b is always drawn from a generator seeded by (seed, b). The CPU kernel's
    result is bitwise independent of chunk_size and threads (blocks are summed
    in order; threads defaults to torch's thread count). chunk_size sets the
    torch path's batch; its result depends on chunk_size and on torch's thread
    count only through float rounding. `seconds` includes compiling the kernel
    on the first call in a fresh numba cache (~10 s; later calls load it).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    sampler = v.resolved_sampler
    dev = resolve_device(device, "device")
    if backend == "auto":
        backend = "numba" if dev.type == "cpu" else "torch"
    if backend == "numba" and dev.type != "cpu":
        raise ValueError("the numba backend runs on the CPU only")

    start = time.perf_counter()
    if backend == "numba":
        score, prob, groups = simulate_blocks(v, sampler, threads or torch.get_num_threads(), progress)
    else:
        score, prob, groups = _simulate_torch(v, sampler, dev, chunk_size, progress)
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
        group_score_sums=np.asarray(groups[0], dtype=np.float64),
        group_sizes=np.asarray(groups[1], dtype=np.int64),
    )


# ---------------------------------------------------------------- tables


def result_frame(result: SimulationResult, name: str) -> pd.DataFrame:
    """Long table: one row per layer and visible (query_pos, key_pos), 0-based: the pairs a sliding window
    hides are left out, as those above the causal diagonal. `window` is a nullable integer, <NA> for None."""
    v = result.variant
    shown = visible(v)
    query, key = np.nonzero(shown)
    diagnorm = diagonal_normalise(result.score_mean, shown)
    frames = []
    for layer in range(v.n_layers):
        frames.append(
            pd.DataFrame(
                {
                    "variant": name,
                    "layer": layer,
                    "query_pos": query,
                    "key_pos": key,
                    "score_mean": result.score_mean[layer][query, key],
                    "score_sem": result.score_sem[layer][query, key],
                    "score_diagnorm": diagnorm[layer][query, key],
                    "prob_mean": result.prob_mean[layer][query, key],
                    "prob_sem": result.prob_sem[layer][query, key],
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    for key_name, value in v.params().items():
        frame[key_name] = value
    frame["sampler"] = result.sampler  # the resolved name, never "auto"
    frame["window"] = pd.array([v.window] * len(frame), dtype="Int64")  # <NA>: every key (not an object column)
    return frame


def groups_frame(result: SimulationResult, name: str) -> pd.DataFrame:
    """The score sums of every group of blocks (sampling.SE_GROUPS), per layer: one row per layer and group
    with `sums`, the packed lower triangle (causalpos.tril's order, diagonal included) of the group's score
    sums over its `n_samples` samples. The claims' standard errors come from these (a bootstrap over groups).
    The vectors keep their length S (S + 1) / 2; the pairs a sliding window hides (absent from the simulation
    table) are NaN."""
    v = result.variant
    query, key = packed_pairs(v.seq_len)
    hidden = ~visible(v)[query, key]
    sums = result.group_score_sums[:, :, query, key]  # [group, layer, pair], a copy
    sums[:, :, hidden] = np.nan
    rows = [
        {
            "variant": name,
            "layer": layer,
            "group": group,
            "n_samples": int(result.group_sizes[group]),
            "seq_len": v.seq_len,
            "sums": sums[group, layer],
        }
        for layer in range(v.n_layers)
        for group in range(len(result.group_sizes))
    ]
    return pd.DataFrame(rows, columns=SIMULATION_GROUP_COLUMNS)
