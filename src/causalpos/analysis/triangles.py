"""Statistics of [query, key] matrices stored as packed lower triangles, with replicates.

A quantity is an array x [P, N]: P = S(S+1)/2 pairs of the packed lower triangle (causalpos.tril: diagonal
included, row-major, pair (q, k <= q) at q(q+1)/2 + k), and N columns: column 0 the estimate, the others its
replicates (or one column for a plain matrix). Pairs first, so that picking pairs copies contiguous rows (4-5x
faster than picking columns of a [N, P] array at S = 256). Every metric returns [N].

The per-layer summary (analysis.summary) and the claims ledger (analysis.claims) both compute their
numbers here, so a summary column and the ledger metric of the same name are the same number.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pandas as pd

from causalpos.tril import packed_index, packed_pairs, packed_size

COLUMN_CHUNK = 32  # replicate columns per pass of a column-wise metric (by_columns): the same numbers, with
# temporaries of 32 columns instead of 1 + R (at S = 1,024, 200 replicates of a layer are 0.84 GB in float64)
LEFT_FRACTION = 0.25  # the "left region": keys in the first quarter of the positions
FIRST_KEYS = 4  # Section 5.2's "first few keys": keys 1-4 (key 0, the attention sink, is reported apart)


@lru_cache(maxsize=64)
def off_diagonal(size: int, kmin: int, window: int | None = None) -> np.ndarray:
    """Packed positions of the off-diagonal pairs k < q with k >= kmin (and q - k < window, if given)."""
    query, key = packed_pairs(size)
    keep = (key < query) & (key >= kmin)
    if window is not None:
        keep &= query - key < window
    return np.flatnonzero(keep)


def visible_window(values: np.ndarray, size: int) -> int | None:
    """The sliding window of a layer from its packed scores: None when every off-diagonal pair has a score,
    else W such that exactly the pairs with q - k >= W are NaN (a sliding-window layer, e.g. Gemma-3's, gives
    no logit to keys W or more positions back). Any other pattern of missing pairs is an error: the
    statistics below know how to leave out whole bands, not scattered pairs."""
    values = np.asarray(values)
    sel = off_diagonal(size, 0)
    missing = np.isnan(values[sel])
    if not missing.any():
        return None
    query, key = packed_pairs(size)
    distance = (query - key)[sel]
    window = int(distance[missing].min())
    if not np.array_equal(missing, distance >= window):
        raise ValueError(
            f"scores of seq_len {size}: {int(missing.sum())} off-diagonal pairs have no score, "
            f"and they are not the bands of a sliding window (q - k >= {window})"
        )
    return window


@lru_cache(maxsize=64)
def sorted_pairs(size: int, kmin: int, by: str, window: int | None = None):
    """Off-diagonal pairs (k >= kmin, q - k < window if given) sorted by band (q - k) or by key, stably (so
    within a band by key): (positions, starts, counts, keys of the sorted pairs)."""
    query, key = packed_pairs(size)
    sel = off_diagonal(size, kmin, window)
    label = (query - key)[sel] if by == "band" else key[sel]
    order = np.argsort(label, kind="stable")
    _, starts, counts = np.unique(label[order], return_index=True, return_counts=True)
    return sel[order], starts, counts, key[sel[order]]


def by_columns(metric, x: np.ndarray, width: int = COLUMN_CHUNK):
    """metric(x[:, chunk]) over chunks of `width` columns, joined: the same [N] result (or dict of them) as
    metric(x) for a metric that works column by column, as every one here does, with a fraction of the
    temporaries (sorted copies, centred patterns, quantile buffers)."""
    parts = [metric(x[:, start : start + width]) for start in range(0, x.shape[1], width)]
    if isinstance(parts[0], dict):
        return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    return np.concatenate(parts)


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
        vector = np.full(packed_size(size), np.nan)
        vector[where] = frame[column].to_numpy(float)[keep]
        out.append(vector)
    return out


def band_statistics(
    x: np.ndarray, size: int, left_fraction: float = LEFT_FRACTION, extras: bool = False, window: int | None = None
) -> dict:
    """The non-relative share and the left-region deficit, with every key (kmin 0) and without key 0 (kmin 1),
    from one pass over the off-diagonal pairs sorted by band.

    With p = s minus the mean of its band {i - j = const} (summary.nonrelativeness's pattern):
    ``share{k}`` = Var(p) / Var(s) (summary's ``index`` for k = 0, ``index_no_sink`` for k = 1: the share of
    the score variance that the distance i - j does not explain; 0 for a relative matrix) and
    ``deficit{k}`` = mean of p over the keys k <= j < max(2, ceil(left_fraction S)), divided by SD(s)
    (summary's ``deficit`` in units of the scores' spread; < 0 = the left region is darker than its bands).
    Without key 0 the bands are recentred without it. Also ``left{k}``, the left-region mean of p itself
    (summary's ``deficit``), and ``var{k}``, the population variance of s over the same pairs.
    With `extras` (the claims ledger's claim 8, from the same pass): ``first1`` and ``sink0`` as
    first_keys_emphasis' ``first`` and ``sink``, and ``range1`` as pattern_range_ratio(x, size, 1).
    With `window` (visible_window) only the pairs q - k < window count: the bands a sliding window hides
    are left out whole, and every band that remains still starts at key 0.
    """
    positions, starts, counts, keys = sorted_pairs(size, 0, "band", window)
    s = x[positions]
    sums = np.add.reduceat(s, starts, axis=0)  # [bands, N]
    sumsq = np.einsum("pn,pn->n", s, s)
    left_keys = max(2, math.ceil(left_fraction * size))
    first = s[starts]  # within each band the pairs go by key: the first is key 0
    out, means = {}, {}
    for kmin in (0, 1):
        n = counts.astype(float)
        band_sums, total_sq = sums, sumsq
        left = (keys < left_keys) & (keys >= kmin)
        if kmin:
            band_sums, total_sq, n = sums - first, sumsq - np.einsum("bn,bn->n", first, first), n - 1
        keep = n > 0
        total = n.sum()
        mean = band_sums[keep].sum(axis=0) / total
        var = total_sq / total - mean**2
        between = (band_sums[keep] ** 2 / n[keep, None]).sum(axis=0)
        out[f"share{kmin}"] = safe_ratio((total_sq - between) / total, var)
        # sum over the left pairs of p = sum of s there - sum over bands of (band mean x left pairs in the band)
        left_per_band = np.add.reduceat(left.astype(float), starts)
        band_means = np.where(keep[:, None], band_sums / np.where(keep, n, 1.0)[:, None], 0.0)
        means[kmin] = (band_means, n.astype(np.int64))
        left_p = left.astype(float) @ s - left_per_band @ band_means
        left_mean = left_p / max(left.sum(), 1) if left.any() else np.full(x.shape[1], np.nan)
        out[f"left{kmin}"], out[f"var{kmin}"] = left_mean, var
        out[f"deficit{kmin}"] = (
            safe_ratio(left_mean, np.sqrt(np.clip(var, 0, None))) if left.any() else np.full(x.shape[1], np.nan)
        )
    if extras:
        sd1 = np.sqrt(np.clip(out["var1"], 0, None))
        band = np.repeat(np.arange(len(starts)), counts)
        for name, kmin, mask in (("first1", 1, (keys >= 1) & (keys <= FIRST_KEYS)), ("sink0", 0, keys == 0)):
            if not mask.any():
                out[name] = np.full(x.shape[1], np.nan)
                continue
            per_band = np.bincount(band[mask], minlength=len(starts)).astype(float)
            total = s[mask].sum(axis=0) - per_band @ means[kmin][0]
            out[name] = safe_ratio(total / mask.sum(), sd1)
        later = keys >= 1
        raw = s[later]
        pattern = raw - np.repeat(means[1][0], means[1][1], axis=0)
        out["range1"] = range_ratio_of(pattern, raw)
    return out


def band_centred(x: np.ndarray, size: int, kmin: int = 0, window: int | None = None) -> np.ndarray:
    """p = s minus the mean of its band, over the off-diagonal pairs with key >= kmin (bands recentred
    without the keys below kmin; only bands q - k < window if given), [pairs, N] in band order: the
    diagonal-normalised pattern of Section 5.1."""
    positions, starts, counts, _ = sorted_pairs(size, kmin, "band", window)
    s = x[positions]
    means = np.add.reduceat(s, starts, axis=0) / counts[:, None]
    return s - np.repeat(means, counts, axis=0)


def band_centred_map(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """x packed, with every off-diagonal pair of key >= kmin replaced by its band_centred value (the map as the
    paper's diagonal-normalised rows draw it, bands recentred without the keys below kmin); the diagonal and the
    keys below kmin as they were. Replicate columns as band_centred's (models.outputs.diagonal_normalised is the
    extraction's one-column version over every key, for scores.parquet)."""
    positions, _, _, _ = sorted_pairs(size, kmin, "band")
    out = np.array(x, dtype=float, copy=True)
    out[positions] = band_centred(x, size, kmin)
    return out


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
    query, key = packed_pairs(size)
    mirror = packed_index(size - 1 - key[sel], size - 1 - query[sel])
    s = x[sel]
    anti = (s - x[mirror]) / 2
    return safe_ratio((anti**2).mean(axis=0), s.var(axis=0))


def query_share(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """Share of the off-diagonal score variance that the key position does not explain (1 - eta² of the score
    on the key, keys >= kmin): 0 when the score is a function of the key alone, whatever the query."""
    positions, starts, counts, _ = sorted_pairs(size, kmin, "key")
    s = x[positions]
    means = np.add.reduceat(s, starts, axis=0) / counts[:, None]
    within = s - np.repeat(means, counts, axis=0)
    return safe_ratio((within**2).mean(axis=0), s.var(axis=0))


@lru_cache(maxsize=64)
def advantage_weights(size: int, kmin: int) -> tuple[np.ndarray, np.ndarray, float]:
    query, key = packed_pairs(size)
    sel = off_diagonal(size, kmin)
    n = (query[sel] - kmin).astype(float)  # keys kmin .. q-1 in the row
    rank = (key[sel] - kmin).astype(float)
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
    rows = (x[packed_size(q) + kmin : packed_size(q) + q] for q in range(kmin + 2, size))  # keys kmin .. q-1
    return nearer_higher_share(rows, x, size, kmin)


def nearer_higher_share(lines, x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """Share of the pairs of entries within each line (a [n, N] stack of off-diagonal entries ordered so that
    the one nearer the diagonal comes later) in which the nearer one scores higher, ties one half, pooled
    over the lines; NaN for a replicate with a NaN among the off-diagonal entries of keys >= kmin."""
    total = np.zeros(x.shape[1])
    pairs = 0
    for line in lines:
        far, near = np.triu_indices(line.shape[0], 1)
        d = line[near] - line[far]  # [pairs, N]
        total += (d > 0).sum(axis=0) + 0.5 * (d == 0).sum(axis=0)
        pairs += len(far)
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
    return explained_share(x[sel], closed_form[sel])


def explained_share(y: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    """R² = 1 - SS(y - prediction) / SS(y - its mean), per column of y [n, N], for a prediction [n]."""
    residual = ((y - prediction[:, None]) ** 2).sum(axis=0)
    return 1.0 - safe_ratio(residual, ((y - y.mean(axis=0)) ** 2).sum(axis=0))


def mean_squared_gap(x: np.ndarray, closed_form: np.ndarray, size: int) -> np.ndarray:
    sel = off_diagonal(size, 0)
    return ((x[sel] - closed_form[sel, None]) ** 2).mean(axis=0)


# ---------------------------------------------------------------- the claims ledger's finer statistics


def key_share(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """Share of the off-diagonal variance (keys >= kmin) that the query position does not explain (1 - eta² of
    the value on the query): 0 when every row is constant in the key (a function of the query alone)."""
    sel = off_diagonal(size, kmin)  # packed order is row by row: the pairs of one query are contiguous
    queries = packed_pairs(size)[0][sel]
    _, starts, counts = np.unique(queries, return_index=True, return_counts=True)
    s = x[sel]
    means = np.add.reduceat(s, starts, axis=0) / counts[:, None]
    within = s - np.repeat(means, counts, axis=0)
    return safe_ratio((within**2).mean(axis=0), s.var(axis=0))


def diagonal_concordance(x: np.ndarray, size: int, start: int = 0) -> np.ndarray:
    """Share of position pairs i < i' (both >= start) whose diagonal entry falls, d(i') < d(i) (ties one half):
    1 = the diagonal decreases strictly with the position, 0.5 = no order."""
    d = x[packed_index(np.arange(start, size), np.arange(start, size))]
    a, b = np.triu_indices(d.shape[0], 1)
    if not len(a):
        return np.full(x.shape[1], np.nan)
    step = d[b] - d[a]
    share = ((step < 0).sum(axis=0) + 0.5 * (step == 0).sum(axis=0)) / len(a)
    return np.where(np.isnan(d).any(axis=0), np.nan, share)  # a comparison with NaN is not an order


def off_to_diagonal_rms(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """RMS of the off-diagonal entries (keys >= kmin) over the RMS of the diagonal (positions >= kmin): the
    off-diagonal to diagonal ratio of a Gram matrix in magnitude (a cosine-like number for a Gram matrix)."""
    d = x[packed_index(np.arange(kmin, size), np.arange(kmin, size))]
    off = x[off_diagonal(size, kmin)]
    return safe_ratio(np.sqrt((off**2).mean(axis=0)), np.sqrt((d**2).mean(axis=0)))


def family_z(n_tests: int, level: float) -> float:
    """One-sided z of a Bonferroni test: each of n_tests at level / n_tests (family-wise error <= level)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(1.0 - level / max(int(n_tests), 1))


def strict_increase(x: np.ndarray, size: int, kmin: int = 0, level: float = 0.05) -> dict:
    """Is every row strictly increasing in the key (keys kmin .. i-1, the diagonal left out)? A test, row by row.

    Every pair of keys j < j' < i of a row is compared: d = s(i, j') - s(i, j), its standard error the SD of d
    over the replicates (columns 1..). The pairs of the whole matrix are one family (Bonferroni, family-wise
    error `level`, z = family_z(pairs, level)). A row is *violated* when some earlier key scores resolvedly
    higher than a later one (d < -z SE), *rising* when none does and its nearest key resolvedly beats its
    first (s(i, i-1) - s(i, kmin) > z SE), else *unresolved* (flat within the noise). Comparing every pair,
    not only adjacent keys, finds a slow decline of many steps each below the noise (a row that peaks
    early). Returns counts of rows, `rising_share` (rising rows / rows), `z`, and `violations`: one
    (row, earlier key, later key, d / SE) per violated row, its largest violation, and `peaks`: per violated
    row, the key of its off-diagonal maximum and how many SE it stands above the nearest key i - 1."""
    est, reps = x[:, 0], x[:, 1:]
    rows = list(range(kmin + 2, size))
    n_pairs = sum((q - kmin) * (q - kmin - 1) // 2 for q in rows)
    z = family_z(n_pairs, level)
    rising, violations, peaks, unresolved = 0, [], [], 0
    for q in rows:
        start = packed_size(q)
        keys = np.arange(kmin, q)
        j, jj = np.triu_indices(len(keys), 1)
        d = est[start + kmin + jj] - est[start + kmin + j]
        se = (
            (reps[start + kmin + jj] - reps[start + kmin + j]).std(axis=1, ddof=1)
            if reps.shape[1] > 1
            else np.full(d.shape, np.nan)
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(se > 0, d / np.where(se > 0, se, 1.0), np.sign(d) * np.inf)
        worst = int(np.argmin(t))
        if t[worst] < -z:
            violations.append((q, int(keys[j[worst]]), int(keys[jj[worst]]), float(t[worst])))
            row = est[start + kmin : start + q]
            peak = int(np.argmax(row))
            last = len(keys) - 1
            pick = np.flatnonzero((j == peak) & (jj == last))
            peaks.append((q, int(keys[peak]), float(-t[pick[0]]) if len(pick) else 0.0))
        elif t[(j == 0) & (jj == len(keys) - 1)][0] > z:
            rising += 1
        else:
            unresolved += 1
    return {
        "rows": len(rows),
        "rising": rising,
        "violated": len(violations),
        "unresolved": unresolved,
        "rising_share": rising / len(rows) if rows else math.nan,
        "z": z,
        "violations": violations,
        "peaks": peaks,
    }


def unsaturated_share(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """How slowly a row reaches its end value: sum over rows i and keys kmin <= j < i of s(i, i-1) - s(i, j),
    over the sum over rows of (number of keys) x (s(i, i-1) - s(i, kmin)) (rows with >= 2 keys). A linear rise
    gives 1/2; a row that jumps to its end value after its first key gives 1/(keys); a smaller share =
    the row saturates to a constant in j sooner. Pooled over rows, so faint rows weigh by their range."""
    query = packed_pairs(size)[0]
    sel = off_diagonal(size, kmin)
    sel = sel[query[sel] - kmin >= 2]
    q = query[sel]
    gap = (x[packed_index(q, q - 1)] - x[sel]).sum(axis=0)
    rows = np.arange(kmin + 2, size)
    ends = packed_index(rows, rows - 1)
    starts = packed_index(rows, np.full(rows.shape, kmin))
    span = ((rows - kmin)[:, None] * (x[ends] - x[starts])).sum(axis=0)
    return safe_ratio(gap, span)


def _region_masks(size: int, left_fraction: float = LEFT_FRACTION) -> dict:
    """Named left regions of the off-diagonal pairs (packed order over off_diagonal(size, 0))."""
    query, key = packed_pairs(size)
    sel = off_diagonal(size, 0)
    q, k = query[sel], key[sel]
    quarter = max(2, math.ceil(left_fraction * size))
    return {
        "key 0": k == 0,
        "keys 0-1": k <= 1,
        "first quarter of keys, queries past the first quarter": (k < quarter) & (q >= quarter),
        "first quarter of keys, all queries": k < quarter,
    }


def region_deficits(x: np.ndarray, size: int, left_fraction: float = LEFT_FRACTION) -> dict:
    """The left-region deficit under several definitions of the region: {name: [N]} the mean band-centred score
    (s minus the mean of its band i - j, every off-diagonal pair) over the region, divided by the SD of the
    off-diagonal scores. < 0 = the region is darker (lower) than its diagonals. The last region is
    band_statistics' ``deficit0``."""
    positions, starts, counts, _ = sorted_pairs(size, 0, "band")
    sel = off_diagonal(size, 0)
    order = np.empty(packed_size(size), dtype=np.int64)
    order[positions] = np.arange(len(positions))
    p = band_centred(x, size, 0)[order[sel]]  # back in packed order
    sd = x[sel].std(axis=0)
    return {
        name: safe_ratio(p[mask].mean(axis=0), sd) if mask.any() else np.full(x.shape[1], np.nan)
        for name, mask in _region_masks(size, left_fraction).items()
    }


def first_keys_emphasis(x: np.ndarray, size: int) -> dict:
    """Section 5.2's emphasis on the first few keys, in units of the SD of the scores over keys >= 1:
    ``first``: the mean band-centred score (bands recentred without key 0) over keys 1 .. FIRST_KEYS;
    ``sink``: the same for key 0 alone (bands with every key). > 0 = those keys score above their diagonals.
    From band_statistics' pass (the sum of p over a set of pairs = their sum of s minus, band by band, the
    band mean times the number of the set's pairs in the band)."""
    stats = band_statistics(x, size, extras=True)
    return {"first": stats["first1"], "sink": stats["sink0"]}


def tail_quantiles(a: np.ndarray, quantiles, dtype=np.float64) -> np.ndarray:
    """np.quantile(a, quantiles, axis=0) (linear interpolation) for a [P, N] array, by one single-pivot
    partition per quantile of a contiguous [N, P] copy in `dtype` (several pivots at once are 3-5x slower)."""
    rows = np.ascontiguousarray(a.T, dtype=dtype)
    n = rows.shape[1]
    out = []
    for q in quantiles:
        pos = q * (n - 1)
        lo = int(math.floor(pos))
        rows.partition(lo, axis=1)  # in place: later pivots only refine the order
        low = rows[:, lo].astype(np.float64)
        high = rows[:, lo + 1 :].min(axis=1).astype(np.float64) if lo + 1 < n else low
        out.append(low + (pos - lo) * (high - low))
    return np.stack(out)


RANGE_QUANTILES = (0.01, 0.99)  # Figure 5's colour scale: "adjusted using the 1% and 99% quantiles"


def range_ratio_of(pattern: np.ndarray, raw: np.ndarray, quantiles=RANGE_QUANTILES) -> np.ndarray:
    """(quantile range of pattern) / (quantile range of raw), column by column; float32 quantiles (1e-7
    relative, far below any sampling error, and half the memory traffic)."""
    qp = tail_quantiles(pattern, quantiles, np.float32)
    qs = tail_quantiles(raw, quantiles, np.float32)
    return safe_ratio(qp[-1] - qp[0], qs[-1] - qs[0])


def pattern_range_ratio(x: np.ndarray, size: int, kmin: int = 1, quantiles=RANGE_QUANTILES) -> np.ndarray:
    """Section 5.2's comparison of scales: the range of the diagonal-normalised pattern (s minus its band mean)
    over the range of the raw scores, each between the `quantiles` (1% and 99%, as Figure 5's colour
    scale), off-diagonal pairs with key >= kmin. The paper's pattern in [-1, 1] next to scores in
    [-10, 10] is 0.1."""
    return range_ratio_of(band_centred(x, size, kmin), x[off_diagonal(size, kmin)], quantiles)


def noise_units_nonrelative(x: np.ndarray, size: int) -> np.ndarray:
    """Sum over the off-diagonal pairs of (s minus its band mean)², over what Monte Carlo noise alone would give:
    sum over bands b of (1 - 1/n_b) x the sum of the entries' noise variances (the variance of each entry over
    the replicates, columns 1..; entries taken as independent). About 1 for a matrix that is relative up
    to noise, 1 + (pattern RMS / noise RMS)² otherwise; the replicates, which carry the noise twice, about
    2 + the same: the bootstrap bias correction (claims.replicates.debias) leaves (pattern / noise)²."""
    positions, starts, counts, _ = sorted_pairs(size, 0, "band")
    p = band_centred(x, size, 0)
    noise = x[positions, 1:].var(axis=1, ddof=1) if x.shape[1] > 2 else np.zeros(len(positions))
    factor = np.repeat(1.0 - 1.0 / counts, counts)
    expected = float((factor * noise).sum())
    return safe_ratio((p**2).sum(axis=0), np.full(x.shape[1], expected))


# ---------------------------------------------------------------- Figure 3's stages (c)-(e) against each other and A.2


def pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of a [n, N] and b [n, N] (or [n, 1]) column by column; NaN where either is constant."""
    a = a - a.mean(axis=0)
    b = b - b.mean(axis=0)
    return safe_ratio((a * b).sum(axis=0), np.sqrt((a * a).sum(axis=0) * (b * b).sum(axis=0)))


def diagonal_and_off_correlation(x: np.ndarray, y: np.ndarray, size: int, kmin: int = 0) -> tuple:
    """(r over the diagonal, positions >= kmin; r over the off-diagonal pairs, keys >= kmin) of two matrices with
    paired columns (replicates drawn from the same sequences). Apart, because the diagonal and the off-diagonal of
    a Gram matrix differ in size: pooled, that contrast alone would make any two Gram matrices correlate."""
    diagonal = packed_index(np.arange(kmin, size), np.arange(kmin, size))
    off = off_diagonal(size, kmin)
    return pearson(x[diagonal], y[diagonal]), pearson(x[off], y[off])


def diagonal_curve_correlation(x: np.ndarray, curve: np.ndarray, start: int = 0) -> np.ndarray:
    """Pearson r of the diagonal at positions start .. start + len(curve) - 1 with `curve` at the same positions:
    the agreement of the shapes up to a scale and an offset (r < 0: the diagonal moves against the curve)."""
    positions = np.arange(start, start + len(curve))
    return pearson(x[packed_index(positions, positions)], np.asarray(curve, dtype=float)[:, None])


def query_spread_ratio(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """How much the off-diagonal changes with the query next to how much the diagonal does: the SD over queries
    of each row's mean off-diagonal entry (keys >= kmin, rows with at least one) over the SD of the diagonal
    (positions >= kmin). 0 when every row has the same mean; 1 when the rows move as much as the diagonal."""
    sel = off_diagonal(size, kmin)  # row by row in packed order
    queries = packed_pairs(size)[0][sel]
    _, starts, counts = np.unique(queries, return_index=True, return_counts=True)
    row_means = np.add.reduceat(x[sel], starts, axis=0) / counts[:, None]
    diagonal = x[packed_index(np.arange(kmin, size), np.arange(kmin, size))]
    return safe_ratio(row_means.std(axis=0), diagonal.std(axis=0))
