"""Statistics of [query, key] matrices stored as packed lower triangles, with replicates.

A quantity is an array x [P, N]: P = S(S+1)/2 pairs of the packed lower triangle (diagonal included,
row-major: pair (q, k <= q) at q(q+1)/2 + k, the order of np.nonzero(np.tril(np.ones((S, S))))), and N
columns: column 0 the estimate, the others its replicates (or one column for a plain matrix). Pairs
first, so that picking pairs copies contiguous rows (4-5x faster than picking columns of a [N, P] array
at S = 256). Every metric returns [N].

The per-layer summary (analysis.summary) and the claims ledger (analysis.claims) both compute their
numbers here, so a summary column and the ledger metric of the same name are the same number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

LEFT_FRACTION = 0.25  # the "left region": keys in the first quarter of the positions


@dataclass(frozen=True)
class Tri:
    size: int
    q: np.ndarray
    k: np.ndarray


@lru_cache(maxsize=16)
def tri(size: int) -> Tri:
    q, k = np.tril_indices(size)
    return Tri(size, q, k)


def packed_index(q, k) -> np.ndarray:
    q = np.asarray(q, dtype=np.int64)
    return q * (q + 1) // 2 + np.asarray(k, dtype=np.int64)


@lru_cache(maxsize=64)
def off_diagonal(size: int, kmin: int) -> np.ndarray:
    """Packed positions of the off-diagonal pairs k < q with k >= kmin."""
    t = tri(size)
    return np.flatnonzero((t.k < t.q) & (t.k >= kmin))


@lru_cache(maxsize=64)
def sorted_pairs(size: int, kmin: int, by: str):
    """Off-diagonal pairs (k >= kmin) sorted by band (q - k) or by key, stably (so within a band by key):
    (positions, starts, counts, keys of the sorted pairs)."""
    t = tri(size)
    sel = off_diagonal(size, kmin)
    label = (t.q - t.k)[sel] if by == "band" else t.k[sel]
    order = np.argsort(label, kind="stable")
    _, starts, counts = np.unique(label[order], return_index=True, return_counts=True)
    return sel[order], starts, counts, t.k[sel[order]]


def safe_ratio(num, den) -> np.ndarray:
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def pack(frame: pd.DataFrame, columns, size: int) -> list[np.ndarray]:
    """Packed lower-triangle vectors of `columns` (NaN where no row); rows above the diagonal are ignored."""
    q = frame["query_pos"].to_numpy(np.int64)
    k = frame["key_pos"].to_numpy(np.int64)
    keep = (k <= q) & (q < size) & (k >= 0)
    where = packed_index(q[keep], k[keep])
    out = []
    for column in columns:
        vector = np.full(size * (size + 1) // 2, np.nan)
        vector[where] = frame[column].to_numpy(float)[keep]
        out.append(vector)
    return out


def band_statistics(x: np.ndarray, size: int, left_fraction: float = LEFT_FRACTION) -> dict:
    """The non-relative share and the left-region deficit, with every key (kmin 0) and without key 0 (kmin 1),
    from one pass over the off-diagonal pairs sorted by band.

    With p = s minus the mean of its band {i - j = const} (summary.nonrelativeness's pattern):
    ``share{k}`` = Var(p) / Var(s) (summary's ``index`` for k = 0, ``index_no_sink`` for k = 1: the share of
    the score variance that the distance i - j does not explain; 0 for a relative matrix) and
    ``deficit{k}`` = mean of p over the keys k <= j < max(2, ceil(left_fraction S)), divided by SD(s)
    (summary's ``deficit`` in units of the scores' spread; < 0 = the left region is darker than its bands).
    Without key 0 the bands are recentred without it. Also ``left{k}``, the left-region mean of p itself
    (summary's ``deficit``), and ``var{k}``, the population variance of s over the same pairs.
    """
    positions, starts, counts, keys = sorted_pairs(size, 0, "band")
    s = x[positions]
    sums = np.add.reduceat(s, starts, axis=0)  # [bands, N]
    sumsq = np.einsum("pn,pn->n", s, s)
    left_keys = max(2, math.ceil(left_fraction * size))
    first = s[starts]  # within each band the pairs go by key: the first is key 0
    out = {}
    for kmin in (0, 1):
        n = counts.astype(float)
        band_sums, total_sq = sums, sumsq
        left = (keys < left_keys) & (keys >= kmin)
        if kmin:
            band_sums, total_sq, n = sums - first, sumsq - np.einsum("bn,bn->n", first, first), n - 1
        keep = n > 0
        total = n.sum()
        mean = band_sums[keep].sum(axis=0) / total
        var = total_sq / total - mean ** 2
        between = (band_sums[keep] ** 2 / n[keep, None]).sum(axis=0)
        out[f"share{kmin}"] = safe_ratio((total_sq - between) / total, var)
        # sum over the left pairs of p = sum of s there - sum over bands of (band mean x left pairs in the band)
        left_per_band = np.add.reduceat(left.astype(float), starts)
        band_means = np.where(keep[:, None], band_sums / np.where(keep, n, 1.0)[:, None], 0.0)
        left_p = left.astype(float) @ s - left_per_band @ band_means
        left_mean = left_p / max(left.sum(), 1) if left.any() else np.full(x.shape[1], np.nan)
        out[f"left{kmin}"], out[f"var{kmin}"] = left_mean, var
        out[f"deficit{kmin}"] = safe_ratio(left_mean, np.sqrt(np.clip(var, 0, None))) \
            if left.any() else np.full(x.shape[1], np.nan)
    return out


def band_centred(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """p = s minus the mean of its band, over the off-diagonal pairs with key >= kmin (bands recentred
    without the keys below kmin), [pairs, N] in band order: the diagonal-normalised pattern of Section 5.1."""
    positions, starts, counts, _ = sorted_pairs(size, kmin, "band")
    s = x[positions]
    means = np.add.reduceat(s, starts, axis=0) / counts[:, None]
    return s - np.repeat(means, counts, axis=0)


def nonrelative_share(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """Var(score minus its band mean) / Var(score), off-diagonal pairs with key >= kmin (kmin 0 or 1): the
    same number as summary.nonrelativeness's ``index`` / ``index_no_sink``. See band_statistics."""
    return band_statistics(x, size)[f"share{kmin}"]


def left_deficit(x: np.ndarray, size: int, kmin: int = 0, left_fraction: float = LEFT_FRACTION) -> np.ndarray:
    """summary.nonrelativeness's ``deficit`` (kmin 0) / ``deficit_no_sink`` (kmin 1) in units of SD(score)."""
    return band_statistics(x, size, left_fraction)[f"deficit{kmin}"]


def antisymmetric_share(x: np.ndarray, size: int) -> np.ndarray:
    """Var of the part antisymmetric about the anti-diagonal / Var(score), off-diagonal pairs.

    Reflection about the anti-diagonal maps (i, j) to (S-1-j, S-1-i), the lower triangle onto itself;
    s = sym + anti with anti = (s - s_mirrored) / 2 orthogonal to sym, so the share is in [0, 1]. A
    relative (Toeplitz) matrix and the absolute encodings of Wang and Chen (2020) give 0."""
    sel = off_diagonal(size, 0)
    t = tri(size)
    mirror = packed_index(size - 1 - t.k[sel], size - 1 - t.q[sel])
    s = x[sel]
    anti = (s - x[mirror]) / 2
    return safe_ratio((anti ** 2).mean(axis=0), s.var(axis=0))


def query_share(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """Share of the off-diagonal score variance that the key position does not explain (1 - eta² of the score
    on the key, keys >= kmin): 0 when the score is a function of the key alone, whatever the query."""
    positions, starts, counts, _ = sorted_pairs(size, kmin, "key")
    s = x[positions]
    means = np.add.reduceat(s, starts, axis=0) / counts[:, None]
    within = s - np.repeat(means, counts, axis=0)
    return safe_ratio((within ** 2).mean(axis=0), s.var(axis=0))


@lru_cache(maxsize=64)
def advantage_weights(size: int, kmin: int) -> tuple[np.ndarray, np.ndarray, float]:
    t = tri(size)
    sel = off_diagonal(size, kmin)
    n = (t.q[sel] - kmin).astype(float)  # keys kmin .. q-1 in the row
    rank = (t.k[sel] - kmin).astype(float)
    keep = n >= 2
    rows = np.arange(kmin + 2, size) - kmin  # keys per row, over the rows with at least two
    pairs = float((rows * (rows - 1) / 2).sum())
    return sel[keep], (2 * rank - n + 1)[keep], pairs


def nearer_key_advantage(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """Mean over all key pairs j < j' < i of a row (keys >= kmin) of s(i, j') - s(i, j): how much more the
    nearer of two keys scores, on average. Linear in the scores: sum_j s(i, j) (2 rank_j - n_i + 1) / pairs.
    Positive = nearer keys score higher (as positional encodings do); 0 = no preference."""
    sel, weights, pairs = advantage_weights(size, kmin)
    if pairs == 0:
        return np.full(x.shape[1], np.nan)
    return weights @ x[sel] / pairs


def concordance(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """Share of key pairs j < j' < i (keys >= kmin, diagonal excluded) of every row in which the nearer key
    j' scores higher (ties count one half), pooled over rows: 1 = every row strictly increasing, 0.5 = no
    order, 0 = strictly decreasing. A Kendall-type statistic: it does not depend on the size of the steps,
    so a faint but monotone pattern counts as much as a vivid one."""
    total = np.zeros(x.shape[1])
    pairs = 0
    for q in range(kmin + 2, size):
        start = q * (q + 1) // 2
        row = x[start + kmin:start + q]  # [n, N]
        n = row.shape[0]
        j, jj = np.triu_indices(n, 1)
        d = row[jj] - row[j]  # [pairs, N]: s(j') - s(j), j' the nearer key
        total += (d > 0).sum(axis=0) + 0.5 * (d == 0).sum(axis=0)
        pairs += len(j)
    if not pairs:
        return np.full(x.shape[1], np.nan)
    missing = np.isnan(x[off_diagonal(size, kmin)]).any(axis=0)  # a comparison with NaN is not an order
    return np.where(missing, np.nan, total / pairs)


def off_diagonal_std(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    return x[off_diagonal(size, kmin)].std(axis=0)


def diagonal_mean(x: np.ndarray, size: int) -> np.ndarray:
    return x[packed_index(np.arange(size), np.arange(size))].mean(axis=0)


def eq4_r2(x: np.ndarray, closed_form: np.ndarray, size: int) -> np.ndarray:
    """1 - SS(MC - Eq. 4) / SS(MC - its mean) over the off-diagonal pairs."""
    sel = off_diagonal(size, 0)
    y = x[sel]
    residual = ((y - closed_form[sel, None]) ** 2).sum(axis=0)
    return 1.0 - safe_ratio(residual, ((y - y.mean(axis=0)) ** 2).sum(axis=0))


def mean_squared_gap(x: np.ndarray, closed_form: np.ndarray, size: int) -> np.ndarray:
    sel = off_diagonal(size, 0)
    return ((x[sel] - closed_form[sel, None]) ** 2).mean(axis=0)
