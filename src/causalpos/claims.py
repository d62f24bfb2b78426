"""The claims ledger: every claim of the paper as a measured number, its uncertainty and a verdict.

`build_ledger(simulations, theory, scores, intermediates, groups)` reads the tables of the other stages
(long format, lower triangle with the diagonal, 0-based layers and positions) and returns one row per
claim and setting: the columns LEDGER_COLUMNS (``claim_id, section, statement, setting, metric, value,
uncertainty, threshold, verdict``), then EXTRA_COLUMNS (``claim`` 1-8, a short ``title``, the
``direction`` of the threshold, ``unit``, the verdict margin ``z``, ``model``, ``layer`` (0-based), a short
``label`` for plots, a ``note`` naming the variants or the source of the uncertainty, and for claim 8a
the amplitude with the attention-sink key 0 and the left-region deficit). `ledger_markdown(ledger)`
renders it for results/summary/claims.md; `plot_ledger(ledger, options)` draws one panel per claim.

Claims (issue 6; each has a docstring in its builder, `_claim1` .. `_claim8`, saying why its metric
measures it). Layers are 0-based in the data; statements and settings say "layer L (paper)" = 1-based.

====  ===========================================================================================
1a    R² of the Monte Carlo layer-2 scores on Eq. 4 (off-diagonal pairs)                   > 0.9
1b    slope of log RMS(Monte Carlo - Eq. 4) against log d                                   < 0
2a    key-order concordance at layer 2 (share of key pairs where the nearer key scores higher) > 0.75
2b    mean score advantage of the nearer key at layer 3, 4 over that at layer 2            > 1
3a    share of the layer-2 score variance that is not explained by the key position        < 0.1
3b    layer-2 nearer-key advantage at alpha > 0 over that at alpha = 0                      > 1
4a    non-relative amplitude (RMS of score minus its band mean / RMS spread of the scores)  > 0.1
4b    anti-diagonal antisymmetric amplitude (RMS of (s - mirrored s) / 2 / spread)          > 0.1
5a    nearer-key advantage of LayerNorm + sqrt(d) over l2, in cosine units, worst layer     < 1
5b    nearer-key advantage of LayerNorm + d over l2, weakest layer                          > 0.5
6a    non-relative amplitude of RoPE + causal mask, weakest layer from layer 2 on           > 0.1
6b    left-region deficit (mean band-centred score of the first quarter of keys, in SDs)    < 0
6c    non-relative amplitude of RoPE without a mask, largest layer                          < 0.1
7a    key-order concordance of the trained NoPE model at (f) LN(O) and (i), keys >= 1       > 0.75
7b    standardised nearer-key advantage of the NoPE model's (i) over the alpha = 0 simulation > 1
8a    non-relative amplitude of a pretrained RoPE LLM, per layer, keys >= 1                 > 0.1
8b    the same, median over the layers from layer 2 (paper) on                              > 0.1
====  ===========================================================================================

Uncertainty. Every metric is computed on the point estimate and on `n_bootstrap` replicates of its
input matrices (seeded numpy Generators, derived from `seed` and the setting's name, so adding a
setting does not change the others):

- Monte Carlo tables: parametric replicates score_mean + score_sem * N(0, 1), entry by entry. This
  treats the entries as independent; they share samples, so for averages over many entries the
  standard error is a lower bound.
- trained and pretrained models: a bootstrap over sequences through the `groups` table (whole groups
  of sequences drawn with replacement, G draws; replicate mean = sum of the drawn groups' sums / sum of
  their n), one set of draws per model shared by all its layers and stages. Without a groups table the
  scores fall back to parametric replicates from score_sem, and intermediates have no uncertainty.

``uncertainty`` is the standard deviation of the metric over the replicates (one standard error).
Variance-share metrics (R², non-relative, antisymmetric and query shares) are biased upwards by
sampling noise (noise adds variance to the band-centred scores even of an exactly relative matrix,
the "noise floor" of summary.nonrelativeness); their value is bootstrap bias-corrected:
value = estimate - (mean of the replicates - estimate), since each replicate adds the same amount of
noise once more. Concordances and advantages are reported as estimated.

Verdict (THRESHOLDS["z"] = 2): a claim of the form "metric > t" is *supported* when
value - z * uncertainty > t, *not supported* when value + z * uncertainty < t, and *inconclusive*
in between (mirrored for "metric < t"). A missing setting, a NaN value or a missing uncertainty gives
*inconclusive* with a note. Verdicts depend only on the data and the thresholds, never on the paper.
"""

from __future__ import annotations

import math
import textwrap
import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from causalpos.summary import LEFT_FRACTION

LEDGER_COLUMNS = ["claim_id", "section", "statement", "setting", "metric", "value", "uncertainty", "threshold",
                  "verdict"]
EXTRA_COLUMNS = ["claim", "title", "direction", "unit", "z", "model", "layer", "label", "note", "value_with_sink",
                 "uncertainty_with_sink", "left_deficit", "left_deficit_uncertainty"]
VERDICTS = ("supported", "not supported", "inconclusive")

THRESHOLDS = {
    # Margin of the verdict in standard errors: about a two-sided 95% interval, so a verdict is
    # "supported" or "not supported" only when the threshold lies outside value ± 2 SE.
    "z": 2.0,
    # 1a: the closed form must explain at least 90% of the variance of the Monte Carlo layer-2 scores
    # (R² = 1 - SS(MC - Eq.4) / SS(MC - mean)). Eq. 4 replaces inner products by their expectations,
    # exact only as d grows, so agreement at finite d is a tolerance, not an equality within noise.
    "eq4_r2": 0.9,
    # 1b: "the gap shrinks as d grows" = the log-log slope of the RMS gap against d is negative.
    "gap_slope": 0.0,
    # 2a, 7a: "the score increases with the key position": in at least 3 of 4 key pairs of a row the
    # nearer key scores higher (Kendall's tau >= 0.5, a strong rank association). Strict increase
    # (1.0) cannot be reached where adjacent steps are smaller than the sampling noise; 0.5 = no order.
    "concordance": 0.75,
    # 2b: "grows stronger in layers 3 and 4": the nearer-key advantage exceeds layer 2's (ratio > 1).
    "layer_growth": 1.0,
    # 3a: "nearly independent of the query position": less than 10% of the off-diagonal score
    # variance at layer 2 changes with the query once the key is fixed.
    "query_share": 0.1,
    # 3b: "appears faster": the layer-2 nearer-key advantage is larger than at alpha = 0 (ratio > 1).
    "alpha_gain": 1.0,
    # 4a, 6a, 6c, 8: a non-relative pattern is "not negligible" when its RMS is at least a tenth of the
    # RMS spread of the scores it sits in: the paper's own yardstick (Section 5.2: a pattern in [-1, 1]
    # next to scores in [-10, 10] "could not be dismissed as negligible"). 6c must stay below it.
    "nonrelative": 0.1,
    # 4b: the same yardstick for the part of the map that is antisymmetric about the anti-diagonal.
    "asymmetry": 0.1,
    # 5a: "weakens": LayerNorm + sqrt(d) has a smaller nearer-key advantage (cosine units) than l2 in
    # every layer from 2 on (the largest ratio < 1).
    "sqrt_d_ratio": 1.0,
    # 5b: "recovers": LayerNorm + d keeps at least half of l2's nearer-key advantage in every layer.
    "d_ratio": 0.5,
    # 6b: "the left region is lower": its mean band-centred score is below 0 (sign claim).
    "left_deficit": 0.0,
    # 7b: "stronger than the alpha = 0 simulation": ratio of standardised nearer-key advantages > 1.
    "trained_gain": 1.0,
}

CLAIMS = {  # claim_id -> (section, statement, metric, unit, direction, threshold key)
    "1a": ("3.2 (Eq. 4), 4.1",
           "Eq. 4: the layer-2 (paper) score of the parameter-free l2 decoder is g(i)/(h(i)h(j)); "
           "Monte Carlo agrees with the closed form",
           "R² of Monte Carlo on Eq. 4, off-diagonal pairs, layer 2 (paper)", "R²", ">", "eq4_r2"),
    "1b": ("3.2 (Eq. 4)", "The gap between Monte Carlo and Eq. 4 shrinks as d grows",
           "slope of log RMS gap against log d", "log-log slope", "<", "gap_slope"),
    "2a": ("3.2, 4.1",
           "h is strictly decreasing, so for a fixed query the layer-2 (paper) score increases with the key "
           "position (nearer keys score higher)",
           "key-order concordance at layer 2 (paper)", "share of key pairs", ">", "concordance"),
    "2b": ("4.1", "The increasing pattern grows stronger in layers 3 and 4 (paper) (alpha = 0)",
           "nearer-key advantage relative to layer 2 (paper)", "ratio", ">", "layer_growth"),
    "3a": ("4.1, App. B",
           "With alpha > 0 the pattern saturates: at layer 2 (paper) it is nearly independent of the "
           "query position",
           "share of layer-2 (paper) score variance that depends on the query at fixed key", "variance share",
           "<", "query_share"),
    "3b": ("4.1, App. B", "With alpha > 0 the pattern appears faster: clearer at layer 2 (paper) than at alpha = 0",
           "layer-2 (paper) nearer-key advantage relative to alpha = 0", "ratio", ">", "alpha_gain"),
    "4a": ("4.1", "Within each diagonal band the scores are not uniform, unlike a relative encoding "
                  "(every layer from 2 (paper) on)",
           "non-relative amplitude, weakest layer from layer 2 (paper) on", "fraction of score RMS", ">",
           "nonrelative"),
    "4b": ("4.1", "The map is not symmetric about the anti-diagonal, unlike absolute encodings "
                  "(Wang and Chen 2020) (every layer from 2 (paper) on)",
           "anti-diagonal antisymmetric amplitude, weakest layer from layer 2 (paper) on", "fraction of score RMS",
           ">", "asymmetry"),
    "5a": ("App. B", "LayerNorm with sqrt(d) scaling weakens the pattern relative to l2",
           "nearer-key advantage (cosine units) relative to l2, largest over layers 2+ (paper)", "ratio", "<",
           "sqrt_d_ratio"),
    "5b": ("App. B", "LayerNorm with d scaling recovers l2-like behaviour",
           "nearer-key advantage relative to l2, smallest over layers 2+ (paper)", "ratio", ">", "d_ratio"),
    "6a": ("5.1, App. D", "RoPE with the causal mask gives a non-relative pattern from layer 2 (paper) on (Fig. 4, 9)",
           "non-relative amplitude, weakest layer from layer 2 (paper) on", "fraction of score RMS", ">",
           "nonrelative"),
    "6b": ("5.1", "With RoPE and the causal mask the left region of the map is lower than its diagonals (Fig. 4)",
           "left-region deficit: mean band-centred score of the first quarter of keys / score SD", "score SDs",
           "<", "left_deficit"),
    "6c": ("5.1, App. D", "RoPE without the causal mask gives a relative pattern (Fig. 10)",
           "non-relative amplitude, largest over layers 2+ (paper)", "fraction of score RMS", "<", "nonrelative"),
    "7a": ("4.2", "The trained NoPE model shows the increasing pattern by (f) LN(O) and in the layer-2 (paper) "
                  "scores (i) (keys >= 1: the attention-sink column left out)",
           "key-order concordance, keys >= 1", "share of key pairs", ">", "concordance"),
    "7b": ("4.2", "Its learned parameters make the layer-2 (paper) pattern stronger than the alpha = 0 simulation",
           "standardised nearer-key advantage of (i) relative to the alpha = 0 simulation", "ratio", ">",
           "trained_gain"),
    "8a": ("5.2", "Pretrained RoPE LLMs show a non-relative pattern at a scale that is not negligible next to "
                  "the raw scores (per layer; keys >= 1, the attention-sink column separately)",
           "non-relative amplitude, keys >= 1", "fraction of score RMS", ">", "nonrelative"),
    "8b": ("5.2", "The same over the layers from layer 2 (paper) on",
           "median non-relative amplitude over layers 2+ (paper), keys >= 1", "fraction of score RMS", ">",
           "nonrelative"),
}
TITLES = {  # short names for the figure's panels
    "1a": "Eq. 4 matches Monte Carlo", "1b": "Monte Carlo gap shrinks with d",
    "2a": "layer 2: nearer keys score higher", "2b": "stronger in layers 3, 4",
    "3a": "α > 0: layer 2 independent of the query",
    "3b": "α > 0: clearer at layer 2 than α = 0", "4a": "bands not uniform (not relative)",
    "4b": "not anti-diagonal symmetric (not absolute)", "5a": "LayerNorm + √d weakens the pattern",
    "5b": "LayerNorm + d recovers it", "6a": "RoPE + mask: non-relative", "6b": "RoPE + mask: left region lower",
    "6c": "RoPE without mask: relative", "7a": "trained NoPE: increasing at (f), (i)",
    "7b": "trained NoPE stronger than α = 0", "8a": "LLM: non-relative pattern, per layer",
    "8b": "LLM: non-relative, median of layers 2+",
}
PAPER_D = 64  # the paper's hidden size; the reference d where several d share the other parameters
SIM_PARAMS = ["norm", "scale", "alpha", "pe", "rope_theta", "mask", "residual", "d", "seq_len", "n_layers"]
SIM_NEEDS = ["variant", "layer", "query_pos", "key_pos", "score_mean", "score_sem"] + SIM_PARAMS
THEORY_NEEDS = ["alpha", "residual", "query_pos", "key_pos", "score"]
SCORE_NEEDS = ["model", "kind", "layer", "query_pos", "key_pos", "score_mean", "score_sem", "seq_len"]
INTERMEDIATE_NEEDS = ["model", "layer", "stage", "query_pos", "key_pos", "value", "seq_len"]
GROUP_NEEDS = ["model", "quantity", "stage", "layer", "group", "n_sequences", "seq_len", "sums"]


# ---------------------------------------------------------------- packed lower triangles
#
# A quantity is an array x [P, N]: P = S(S+1)/2 pairs of the packed lower triangle (diagonal included,
# row-major: pair (q, k <= q) at q(q+1)/2 + k, the order of np.nonzero(np.tril(np.ones((S, S))))), and N
# columns: column 0 the estimate, the others its replicates. Pairs first, so that picking pairs copies
# contiguous rows (4-5x faster than picking columns of a [N, P] array at S = 256). Every metric returns [N].


@dataclass(frozen=True)
class _Tri:
    size: int
    q: np.ndarray
    k: np.ndarray


@lru_cache(maxsize=16)
def _tri(size: int) -> _Tri:
    q, k = np.tril_indices(size)
    return _Tri(size, q, k)


def _pos(q, k) -> np.ndarray:
    q = np.asarray(q, dtype=np.int64)
    return q * (q + 1) // 2 + np.asarray(k, dtype=np.int64)


@lru_cache(maxsize=64)
def _selection(size: int, kmin: int) -> np.ndarray:
    """Packed positions of the off-diagonal pairs k < q with k >= kmin."""
    t = _tri(size)
    return np.flatnonzero((t.k < t.q) & (t.k >= kmin))


@lru_cache(maxsize=64)
def _grouping(size: int, kmin: int, by: str):
    """Off-diagonal pairs (k >= kmin) sorted by band (q - k) or by key, stably (so within a band by key):
    (positions, starts, counts, keys of the sorted pairs)."""
    t = _tri(size)
    sel = _selection(size, kmin)
    label = (t.q - t.k)[sel] if by == "band" else t.k[sel]
    order = np.argsort(label, kind="stable")
    _, starts, counts = np.unique(label[order], return_index=True, return_counts=True)
    return sel[order], starts, counts, t.k[sel[order]]


def _ratio(num, den) -> np.ndarray:
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def band_statistics(x: np.ndarray, size: int, left_fraction: float = LEFT_FRACTION) -> dict:
    """The non-relative share and the left-region deficit, with every key (kmin 0) and without key 0 (kmin 1),
    from one pass over the off-diagonal pairs sorted by band.

    With p = s minus the mean of its band {i - j = const} (summary.nonrelativeness's pattern):
    ``share{k}`` = Var(p) / Var(s) (summary's ``index`` for k = 0, ``index_no_sink`` for k = 1: the share of
    the score variance that the distance i - j does not explain; 0 for a relative matrix) and
    ``deficit{k}`` = mean of p over the keys k <= j < max(2, ceil(left_fraction S)), divided by SD(s)
    (summary's ``deficit`` in units of the scores' spread; < 0 = the left region is darker than its bands).
    Without key 0 the bands are recentred without it, as in summary.
    """
    positions, starts, counts, keys = _grouping(size, 0, "band")
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
        out[f"share{kmin}"] = _ratio((total_sq - between) / total, var)
        # sum over the left pairs of p = sum of s there - sum over bands of (band mean x left pairs in the band)
        left_per_band = np.add.reduceat(left.astype(float), starts)
        band_means = np.where(keep[:, None], band_sums / np.where(keep, n, 1.0)[:, None], 0.0)
        left_p = left.astype(float) @ s - left_per_band @ band_means
        out[f"deficit{kmin}"] = _ratio(left_p / max(left.sum(), 1), np.sqrt(np.clip(var, 0, None))) \
            if left.any() else np.full(x.shape[1], np.nan)
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
    sel = _selection(size, 0)
    t = _tri(size)
    mirror = _pos(size - 1 - t.k[sel], size - 1 - t.q[sel])
    s = x[sel]
    anti = (s - x[mirror]) / 2
    return _ratio((anti ** 2).mean(axis=0), s.var(axis=0))


def query_share(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    """Share of the off-diagonal score variance that the key position does not explain (1 - eta² of the score
    on the key, keys >= kmin): 0 when the score is a function of the key alone, whatever the query."""
    positions, starts, counts, _ = _grouping(size, kmin, "key")
    s = x[positions]
    means = np.add.reduceat(s, starts, axis=0) / counts[:, None]
    within = s - np.repeat(means, counts, axis=0)
    return _ratio((within ** 2).mean(axis=0), s.var(axis=0))


@lru_cache(maxsize=64)
def _advantage_weights(size: int, kmin: int) -> tuple[np.ndarray, np.ndarray, float]:
    t = _tri(size)
    sel = _selection(size, kmin)
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
    sel, weights, pairs = _advantage_weights(size, kmin)
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
    missing = np.isnan(x[_selection(size, kmin)]).any(axis=0)  # a comparison with NaN is not an order
    return np.where(missing, np.nan, total / pairs)


def off_diagonal_std(x: np.ndarray, size: int, kmin: int = 0) -> np.ndarray:
    return x[_selection(size, kmin)].std(axis=0)


def diagonal_mean(x: np.ndarray, size: int) -> np.ndarray:
    return x[_pos(np.arange(size), np.arange(size))].mean(axis=0)


def eq4_r2(x: np.ndarray, closed_form: np.ndarray, size: int) -> np.ndarray:
    """1 - SS(MC - Eq. 4) / SS(MC - its mean) over the off-diagonal pairs."""
    sel = _selection(size, 0)
    y = x[sel]
    residual = ((y - closed_form[sel, None]) ** 2).sum(axis=0)
    return 1.0 - _ratio(residual, ((y - y.mean(axis=0)) ** 2).sum(axis=0))


def mean_squared_gap(x: np.ndarray, closed_form: np.ndarray, size: int) -> np.ndarray:
    sel = _selection(size, 0)
    return ((x[sel] - closed_form[sel, None]) ** 2).mean(axis=0)


# ---------------------------------------------------------------- estimates and verdicts


def _debias(values: np.ndarray) -> np.ndarray:
    """Shift [estimate, replicates...] by the bootstrap bias (mean of the replicates - estimate)."""
    reps = values[1:]
    finite = reps[np.isfinite(reps)]
    if finite.size < 2 or not np.isfinite(values[0]):
        return values
    return values - (finite.mean() - values[0])


def _amplitude(values: np.ndarray) -> np.ndarray:
    """sqrt of a bias-corrected variance share, clipped at 0 (an RMS ratio)."""
    return np.sqrt(np.clip(_debias(values), 0.0, None))


def _estimate(values: np.ndarray) -> tuple[float, float]:
    """(estimate, SD of the replicates); NaN SD where fewer than half the replicates are finite."""
    values = np.asarray(values, dtype=float)
    reps = values[1:]
    finite = reps[np.isfinite(reps)]
    se = float(finite.std(ddof=1)) if finite.size >= max(2, reps.size / 2) else math.nan
    return float(values[0]), se


def verdict(value: float, uncertainty: float, threshold: float, direction: str, z: float = THRESHOLDS["z"]) -> str:
    """'supported' if value clears the threshold in `direction` by more than z uncertainties, 'not
    supported' if it misses it by more than that, else 'inconclusive' (also for NaN value or uncertainty)."""
    if direction not in (">", "<"):
        raise ValueError(f"direction must be '>' or '<', got {direction!r}")
    if not (np.isfinite(value) and np.isfinite(uncertainty) and np.isfinite(threshold)):
        return "inconclusive"
    sign = 1.0 if direction == ">" else -1.0
    margin = z * uncertainty
    if sign * (value - threshold) > margin:
        return "supported"
    if sign * (threshold - value) > margin:
        return "not supported"
    return "inconclusive"


def _seed(seed: int, *parts) -> np.random.Generator:
    return np.random.default_rng([seed] + [zlib.crc32(str(p).encode()) for p in parts])


# ---------------------------------------------------------------- inputs as stacks of replicates


@dataclass
class _Field:
    """One [S, S] quantity as x [P, 1 + R]: column 0 the estimate, then its replicates (packed lower triangle)."""

    x: np.ndarray
    size: int
    source: str


def _table(frame, columns, name):
    """None for a missing or empty table; ValueError for one that lacks a needed column."""
    if frame is None or len(frame) == 0:
        return None
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise ValueError(f"the {name} table lacks column(s) {absent}")
    return frame


def _pack(frame: pd.DataFrame, columns, size: int) -> list[np.ndarray]:
    """Packed lower-triangle vectors of `columns` (NaN where no row); rows above the diagonal are ignored."""
    q = frame["query_pos"].to_numpy(np.int64)
    k = frame["key_pos"].to_numpy(np.int64)
    keep = (k <= q) & (q < size) & (k >= 0)
    where = _pos(q[keep], k[keep])
    out = []
    for column in columns:
        vector = np.full(size * (size + 1) // 2, np.nan)
        vector[where] = frame[column].to_numpy(float)[keep]
        out.append(vector)
    return out


def _stack(point: np.ndarray, replicates) -> np.ndarray:
    """[P] estimate and [P, R] replicates (or ([P, R] sums, [R] divisors)) as one [P, 1 + R] float64 array."""
    if isinstance(replicates, tuple):
        sums, divisors = replicates
        x = np.empty((point.size, sums.shape[1] + 1))
        np.divide(sums, divisors[None, :].astype(sums.dtype), out=x[:, 1:])
    else:
        x = np.empty((point.size, replicates.shape[1] + 1))
        x[:, 1:] = replicates
    x[:, 0] = point
    return x


def _list_matrix(column: pd.Series, dtype=np.float64) -> np.ndarray:
    """A column of equal-length float lists (object arrays or Arrow lists) as a [rows, length] array."""
    values = column.array
    if hasattr(values, "_pa_array"):  # pandas ArrowExtensionArray: flatten the list array without Python objects
        import pyarrow as pa

        chunked = values._pa_array.combine_chunks() if hasattr(values._pa_array, "combine_chunks") else values._pa_array
        if isinstance(chunked, (pa.ListArray, pa.LargeListArray)) and chunked.null_count == 0:
            flat = chunked.flatten().to_numpy(zero_copy_only=False).astype(dtype, copy=False)
            lengths = np.diff(chunked.offsets.to_numpy())
            if len(set(lengths.tolist())) == 1:
                return flat.reshape(len(column), -1)
    rows = [np.asarray(v, dtype=dtype) for v in column]
    if len({r.size for r in rows}) != 1:
        raise ValueError("groups table: sums of different lengths within one quantity")
    return np.stack(rows)


def _split(frame: pd.DataFrame, keys) -> dict:
    return {key if isinstance(key, tuple) else (key,): rows for key, rows in frame.groupby(keys, sort=True)}


class _Inputs:
    """The tables, indexed once, and their replicates (drawn on first use and kept)."""

    def __init__(self, simulations, theory, scores, intermediates, groups, n_bootstrap, seed):
        self.n_bootstrap, self.seed = n_bootstrap, seed
        self.sim = _table(simulations, SIM_NEEDS, "simulations")
        self.theory = _table(theory, THEORY_NEEDS, "theory")
        self.scores = _table(scores, SCORE_NEEDS, "scores")
        self.intermediates = _table(intermediates, INTERMEDIATE_NEEDS, "intermediates")
        self.groups = _table(groups, GROUP_NEEDS, "groups")
        self._sim = _split(self.sim, ["variant", "layer"]) if self.sim is not None else {}
        self._scores = _split(self.scores, ["model", "layer"]) if self.scores is not None else {}
        self._inter = _split(self.intermediates, ["model", "stage"]) if self.intermediates is not None else {}
        self._groups = {}
        if self.groups is not None:
            stage = self.groups["stage"].astype(object).where(self.groups["stage"].notna(), "").astype(str)
            self._groups = _split(self.groups.assign(stage=stage), ["model", "quantity", "stage", "layer"])
        self._kinds = {}
        for table in (self.groups, self.scores):
            if table is not None and "kind" in table.columns:
                pairs = table[["model", "kind"]].drop_duplicates()
                self._kinds.update({str(m): str(k) for m, k in zip(pairs["model"], pairs["kind"])})
        self._counts = {}
        self._cache = {}
        self.params = None
        if self.sim is not None:
            params = self.sim.drop_duplicates("variant").set_index("variant")[SIM_PARAMS].copy()
            params["residual"] = params["residual"].astype(bool)
            params["alpha"] = params["alpha"].astype(float).round(9)
            params["n_layers"] = self.sim.groupby("variant")["layer"].max().reindex(params.index) + 1
            self.params = params.sort_index()
            # replicates are seeded by a variant's parameters, not its name: renaming changes no number
            extra = [c for c in ("n_samples", "seed") if c in self.sim.columns]
            ident = self.sim.drop_duplicates("variant").set_index("variant")[extra]
            self._identity = {v: repr(tuple(params.loc[v].tolist()) + tuple(ident.loc[v].tolist()))
                              for v in params.index}

    # -- simulations: parametric replicates from the Monte Carlo standard errors

    def sim_field(self, variant: str, layer: int) -> _Field | None:
        key = ("sim", variant, layer)
        if key not in self._cache:
            rows = self._sim.get((variant, layer))
            field = None
            if rows is not None:
                size = int(rows["seq_len"].max())
                mean, sem = _pack(rows, ["score_mean", "score_sem"], size)
                z = _seed(self.seed, "sim", self._identity[variant], layer).standard_normal((mean.size,
                                                                                          self.n_bootstrap))
                field = _Field(_stack(mean, mean[:, None] + np.nan_to_num(sem, nan=0.0)[:, None] * z), size,
                               "Monte Carlo standard errors")
            self._cache[key] = field
        return self._cache[key]

    # -- models: bootstrap over groups of sequences

    def models(self, kind: str) -> list[str]:
        return sorted(m for m, k in self._kinds.items() if k == kind)

    def score_layers(self, model: str) -> list[int]:
        return sorted(int(layer) for (m, layer) in self._scores if m == model)

    def _group_counts(self, model: str, n_groups: int) -> np.ndarray:
        """[G, R] times each group is drawn in each replicate (G draws with replacement); one set per model,
        shared by its layers and stages."""
        key = (model, n_groups)
        if key not in self._counts:
            draws = _seed(self.seed, "bootstrap", model).integers(0, n_groups, size=(self.n_bootstrap, n_groups))
            counts = np.zeros((n_groups, self.n_bootstrap))
            np.add.at(counts, (draws.ravel(), np.repeat(np.arange(self.n_bootstrap), n_groups)), 1.0)
            self._counts[key] = counts
        return self._counts[key]

    def _bootstrap(self, model, quantity, stage, layer, size) -> tuple[np.ndarray, np.ndarray] | None:
        """Bootstrap replicates of one quantity as ([P, R] sums of the drawn groups, [R] their numbers of
        sequences), or None where the groups table lacks it."""
        if layer is None:  # intermediates: the stage under whatever layer it was recorded
            hits = [k for k in self._groups if k[:3] == (model, quantity, stage)]
            rows = self._groups[min(hits, key=lambda k: k[3])] if hits else None
        else:
            rows = self._groups.get((model, quantity, stage, layer))
        if rows is None:
            return None
        rows = rows.sort_values("group")
        label = f"groups table, model {model!r}, {quantity} {stage}".rstrip()
        if int(rows["seq_len"].max()) != size:
            raise ValueError(f"{label}: seq_len {int(rows['seq_len'].max())}, but {size} in the {quantity} table")
        sums = _list_matrix(rows["sums"], np.float32)
        if sums.shape[1] != size * (size + 1) // 2:
            raise ValueError(f"{label}: sums of length {sums.shape[1]}, expected S(S+1)/2 = {size * (size + 1) // 2}")
        n = rows["n_sequences"].to_numpy(float)
        counts = self._group_counts(model, len(rows))
        # the sums are float32 already: a float32 product is as exact and 5-10x faster than float64 here
        product = sums.T.astype(np.float32) @ counts.astype(np.float32)
        return product, (n @ counts)

    def score_field(self, model: str, layer: int) -> _Field | None:
        """One layer's scores of a model; not kept (a pretrained model's layers are ~50 MB each at S = 256)."""
        rows = self._scores.get((model, layer))
        if rows is None:
            return None
        size = int(rows["seq_len"].max())
        mean, sem = _pack(rows, ["score_mean", "score_sem"], size)
        reps = self._bootstrap(model, "scores", "", layer, size)
        source = "bootstrap over groups of sequences"
        if reps is None:
            z = _seed(self.seed, "score", model, layer).standard_normal((mean.size, self.n_bootstrap))
            reps = mean[:, None] + np.nan_to_num(sem, nan=0.0)[:, None] * z
            source = "no groups table: parametric replicates from score_sem"
        return _Field(_stack(mean, reps), size, source)

    def intermediate_field(self, model: str, stage: str) -> tuple[_Field | None, int | None]:
        """Stage `stage` of Figure 3 for `model` (the lowest layer it was recorded under) and that layer."""
        key = ("inter", model, stage)
        if key not in self._cache:
            rows = self._inter.get((model, stage))
            field, layer = None, None
            if rows is not None:
                layer = int(rows["layer"].min())
                rows = rows[rows["layer"] == layer]
                size = int(rows["seq_len"].max())
                (value,) = _pack(rows, ["value"], size)
                reps = self._bootstrap(model, "intermediate", stage, None, size)
                source = "bootstrap over groups of sequences"
                if reps is None:
                    reps = np.full((value.size, self.n_bootstrap), np.nan)
                    source = "no groups table for this stage"
                field = _Field(_stack(value, reps), size, source)
            self._cache[key] = (field, layer)
        return self._cache[key]


# ---------------------------------------------------------------- rows


def _row(claim_id: str, setting: str, values, thresholds: dict, note: str = "", layer=None, label: str = "",
         **extra) -> dict:
    """A ledger row from [estimate, replicates...] (or (value, uncertainty) for precomputed ones)."""
    section, statement, metric, unit, direction, key = CLAIMS[claim_id]
    if isinstance(values, tuple):
        value, se = values
    elif values is None:
        value, se = math.nan, math.nan
    else:
        value, se = _estimate(values)
    threshold = float(thresholds[key])
    result = verdict(value, se, threshold, direction, thresholds["z"])
    if np.isfinite(value) and not np.isfinite(se):
        note = "; ".join(filter(None, [note, "no uncertainty available, so no verdict"]))
    return {"claim_id": claim_id, "section": section, "statement": statement, "setting": setting, "metric": metric,
            "value": value, "uncertainty": se, "threshold": threshold, "verdict": result,
            "claim": int(claim_id[:-1]), "title": TITLES[claim_id], "direction": direction, "unit": unit,
            "z": float(thresholds["z"]),
            "layer": np.nan if layer is None else int(layer), "label": label or setting, "note": note, **extra}


def _absent(claim_id: str, thresholds: dict, why: str) -> dict:
    return _row(claim_id, "(no such setting)", None, thresholds, note=why, label="none")


def _paper(layer: int) -> str:
    return f"layer {layer + 1} (paper)"


def _label(p) -> str:
    """Short description of a simulation variant from its parameters."""
    parts = ["LayerNorm" if p["norm"] == "layernorm" else "l2"]
    if p["scale"] != "none":
        parts.append({"sqrt_d": "√d scaling", "d": "d scaling"}.get(p["scale"], p["scale"]))
    if p["pe"] == "rope":
        parts.append("RoPE" if float(p["rope_theta"]) == 10000.0 else f"RoPE θ={float(p['rope_theta']):g}")
    if p["mask"] == "none":
        parts.append("no mask")
    if not bool(p["residual"]):
        parts.append("no residual")
    parts.append(f"α={float(p['alpha']):g}")
    parts.append(f"d={int(p['d'])}")
    return ", ".join(parts)


# ---------------------------------------------------------------- simulation settings


def _select(params: pd.DataFrame | None, **where) -> pd.DataFrame:
    if params is None:
        return pd.DataFrame(columns=SIM_PARAMS)
    keep = np.ones(len(params), dtype=bool)
    for column, value in where.items():
        if column == "alpha":
            keep &= np.isclose(params["alpha"].to_numpy(float), value)
        else:
            keep &= (params[column] == value).to_numpy()
    return params[keep]


def _reference_d(params: pd.DataFrame) -> pd.DataFrame:
    """One variant per combination of the parameters other than d and the depth: the paper's d = 64 if
    present, else the largest d (the closest to the closed form); then the deepest; ties by variant name."""
    if params.empty:
        return params
    others = [c for c in SIM_PARAMS if c not in ("d", "n_layers")]
    chosen = []
    for _, rows in params.groupby(others, sort=True):
        pick = rows[rows["d"] == PAPER_D] if (rows["d"] == PAPER_D).any() else rows[rows["d"] == rows["d"].max()]
        pick = pick[pick["n_layers"] == pick["n_layers"].max()]
        chosen.append(pick.index.min())
    return params.loc[sorted(chosen, key=lambda v: (params.loc[v, "alpha"], str(v)))]


def _partner(params: pd.DataFrame, variant: str, **change) -> str | None:
    """The variant with the same parameters as `variant` except those in `change` (any depth: the deepest,
    then the first by name)."""
    p = params.loc[variant]
    where = {c: p[c] for c in SIM_PARAMS if c != "n_layers"}
    where.update(change)
    hits = _select(params, **where)
    if hits.empty:
        return None
    return str(min(hits.index, key=lambda v: (-int(hits.loc[v, "n_layers"]), str(v))))


BASE = dict(norm="l2", scale="none", pe="none", mask="causal", residual=True)


# ---------------------------------------------------------------- the claims


def _claim1(data: _Inputs, th: dict) -> list[dict]:
    """Eq. 4 against Monte Carlo (settings: every l2 / no scaling / no PE / causal / residual variant with
    >= 2 layers whose alpha the theory table has; grouped by d).

    1a: R² = 1 - SS(MC - Eq. 4) / SS(MC - mean MC) over the off-diagonal pairs of layer 2 (paper): the share
    of the Monte Carlo score variance the closed form explains (the diagonal is 1 in both). Eq. 4 is exact
    only for the expected inner products (d -> infinity), so a finite-d Monte Carlo differs by O(1/d) and
    agreement is a tolerance (R² > 0.9), not equality within the standard errors. Bias-corrected.
    1b: the slope of log RMS(MC - Eq. 4) against log d over the d values of one alpha (least squares,
    noise-corrected mean squares): negative = the gap shrinks as d grows (about -1 if it goes as 1/d).
    """
    rows_a, rows_b = [], []
    candidates = _select(data.params, **BASE)
    candidates = candidates[candidates["n_layers"] >= 2] if len(candidates) else candidates
    if data.theory is None or candidates.empty:
        why = "no theory table" if data.theory is None else \
            "no variant with norm=l2, scale=none, pe=none, mask=causal, residual=True and >= 2 layers"
        return [_absent("1a", th, why), _absent("1b", th, why)]
    theory = data.theory.assign(alpha=data.theory["alpha"].astype(float).round(9),
                                residual=data.theory["residual"].astype(bool))
    order = candidates.sort_values(["alpha", "d"]).index
    series = {}
    for variant in order:
        p = candidates.loc[variant]
        field = data.sim_field(variant, 1)
        cf_rows = theory[np.isclose(theory["alpha"], p["alpha"]) & theory["residual"]]
        cf_rows = cf_rows.drop_duplicates(["query_pos", "key_pos"])
        setting = _label(p)
        if cf_rows.empty or field is None:
            rows_a.append(_row("1a", setting, None, th, note=f"variant {variant}: theory table has no "
                               f"alpha = {p['alpha']:g} with residual", label=f"α={p['alpha']:g}, d={int(p['d'])}"))
            continue
        (cf,) = _pack(cf_rows, ["score"], field.size)
        if np.isnan(cf).any():
            rows_a.append(_row("1a", setting, None, th, note=f"variant {variant}: theory table does not cover "
                               f"seq_len {field.size}", label=f"α={p['alpha']:g}, d={int(p['d'])}"))
            continue
        r2 = _debias(eq4_r2(field.x, cf, field.size))
        msg = mean_squared_gap(field.x, cf, field.size)
        rmsg = _amplitude(msg)
        note = f"variant {variant}; RMS gap {rmsg[0]:.2g}"
        rows_a.append(_row("1a", setting, r2, th, note=note, layer=1, label=f"α={p['alpha']:g}, d={int(p['d'])}"))
        series.setdefault((p["alpha"], p["seq_len"]), []).append((int(p["d"]), _debias(msg), variant))
    for (alpha, _), points in series.items():
        by_d = {}
        for d, msg, variant in points:  # one variant per d (the first by name where several share it)
            by_d.setdefault(d, (d, msg, variant))
        points = [by_d[d] for d in sorted(by_d)]
        if len(points) < 2:
            continue
        usable = [(d, m) for d, m, _ in points if m[0] > 0]
        dropped = [d for d, m, _ in points if not m[0] > 0]
        setting = f"l2, α={alpha:g}, d={'/'.join(str(d) for d, _, _ in points)}"
        note = f"variants {', '.join(v for _, _, v in points)}"
        if dropped:
            note += f"; gap below the noise at d = {dropped}, left out"
        if len(usable) < 2:
            rows_b.append(_row("1b", setting, None, th, note=note + "; fewer than 2 resolved gaps",
                               label=f"α={alpha:g}"))
            continue
        logd = np.log([d for d, _ in usable])
        logd = logd - logd.mean()
        loggap = 0.5 * np.log(np.clip(np.stack([m for _, m in usable]), 1e-300, None))  # [n_d, 1 + R]
        slope = (logd @ (loggap - loggap.mean(axis=0))) / (logd @ logd)
        rows_b.append(_row("1b", setting, slope, th, note=note, layer=1, label=f"α={alpha:g}"))
    if not rows_b:
        rows_b.append(_absent("1b", th, "no alpha with Monte Carlo variants at two or more d values"))
    return rows_a + rows_b


def _claim2(data: _Inputs, th: dict) -> list[dict]:
    """Nearer keys score higher at layer 2 (paper), more so in layers 3 and 4 (paper).

    2a (every l2 / no scaling / no PE / causal / residual variant at the reference d, each alpha): the
    key-order concordance of layer 2 (paper): over all pairs of off-diagonal keys j < j' < i of every row,
    the share where s(i, j') > s(i, j). Section 3.2 proves strict increase for every fixed i, i.e. 1; 0.5 is
    no order and a decreasing matrix gives 0. The diagonal (= 1 > every other entry, the j = i - 1 step of
    the proof) is left out because it holds trivially.
    2b (the same variants at alpha = 0, the case Section 4.1 describes): the nearer-key advantage A_l (mean
    over the same key pairs of s(i, j') - s(i, j), in score units = cosines) of layer l over that of layer 2
    (paper), for each later layer: > 1 = the increasing pattern is stronger there.
    """
    rows_a, rows_b = [], []
    variants = _reference_d(_select(data.params, **BASE))
    variants = variants[variants["n_layers"] >= 2] if len(variants) else variants
    for variant, p in variants.iterrows():
        field = data.sim_field(variant, 1)
        rows_a.append(_row("2a", _label(p), concordance(field.x, field.size), th, note=f"variant {variant}",
                           layer=1, label=f"α={p['alpha']:g}"))
    if not rows_a:
        rows_a.append(_absent("2a", th, "no l2 / no scaling / no PE / causal / residual variant with >= 2 layers"))
    zero = variants[np.isclose(variants["alpha"].astype(float), 0.0)] if len(variants) else variants
    for variant, p in zero.iterrows():
        base = data.sim_field(variant, 1)
        a2 = nearer_key_advantage(base.x, base.size)
        for layer in range(2, int(p["n_layers"])):
            field = data.sim_field(variant, layer)
            ratio = _ratio(nearer_key_advantage(field.x, field.size), a2)
            note = f"variant {variant}"
            if not a2[0] > 0:
                ratio, note = None, note + "; no increase at layer 2 (paper) to compare with"
            rows_b.append(_row("2b", f"{_label(p)}, {_paper(layer)}", ratio, th, note=note, layer=layer,
                               label=f"L{layer + 1}"))
    if not rows_b:
        rows_b.append(_absent("2b", th, "no alpha = 0 l2 variant with >= 3 layers"))
    return rows_a + rows_b


def _claim3(data: _Inputs, th: dict) -> list[dict]:
    """alpha > 0: the layer-2 (paper) pattern is already there and independent of the query.

    3a (each l2 / no scaling / no PE / causal / residual variant with alpha > 0, reference d): the share of
    the off-diagonal layer-2 score variance left once the key position is known, 1 - eta²(score | key)
    (pooled within-key variance over total). Eq. 4 gives s = [g(i)/h(i)] / h(j); with alpha > 0 g(i)/h(i)
    tends to a constant (Section 4.1), so s depends on the key alone and the share is ~0; at alpha = 0 it
    decays as 1/i and dominates (share near 1, reported in the note). Bias-corrected.
    3b (same variants; partner: the alpha = 0 variant with the other parameters equal): the layer-2 (paper)
    nearer-key advantage at alpha over that at alpha = 0: > 1 = "much clearer compared to the alpha = 0
    case" already at layer 2, both in cosine units.
    """
    rows_a, rows_b = [], []
    variants = _reference_d(_select(data.params, **BASE))
    variants = variants[(variants["n_layers"] >= 2) & (variants["alpha"].astype(float) > 0)] if len(variants) \
        else variants
    for variant, p in variants.iterrows():
        field = data.sim_field(variant, 1)
        zero = _partner(data.params, variant, alpha=0.0)
        note = f"variant {variant}"
        if zero is not None:
            z_field = data.sim_field(zero, 1)
            share0 = _debias(query_share(z_field.x, z_field.size))[0]
            note_a = note + f"; at α=0 ({zero}): {share0:.3g}"
        else:
            note_a = note
        rows_a.append(_row("3a", _label(p), _debias(query_share(field.x, field.size)), th, note=note_a, layer=1,
                           label=f"α={p['alpha']:g}"))
        if zero is None:
            rows_b.append(_row("3b", _label(p), None, th, note=note + "; no α=0 variant with the other "
                               "parameters equal", label=f"α={p['alpha']:g}"))
            continue
        z_field = data.sim_field(zero, 1)
        ratio = _ratio(nearer_key_advantage(field.x, field.size), nearer_key_advantage(z_field.x, z_field.size))
        rows_b.append(_row("3b", _label(p), ratio, th, note=f"{note} against {zero}", layer=1,
                           label=f"α={p['alpha']:g}"))
    if not rows_a:
        why = "no l2 / no scaling / no PE / causal / residual variant with alpha > 0"
        rows_a.append(_absent("3a", th, why))
        rows_b.append(_absent("3b", th, why))
    return rows_a + rows_b


def _layers_from_2(data: _Inputs, variant: str, n_layers: int) -> list[_Field]:
    return [data.sim_field(variant, layer) for layer in range(1, n_layers)]


def _claim4(data: _Inputs, th: dict) -> list[dict]:
    """Neither relative nor absolute (each l2 / no scaling / no PE / causal / residual variant, reference d;
    every layer from 2 (paper) on, the weakest counts).

    4a: non-relative amplitude = sqrt(Var(p) / Var(s)), p = s minus the mean of its band i - j, over the
    off-diagonal pairs (the square root of summary.nonrelativeness's index, bias-corrected for the noise
    floor): the RMS of what the distance does not explain, as a fraction of the RMS spread of the scores.
    A relative encoding gives uniform bands, 0; > 0.1 = a pattern the size the paper calls not negligible.
    4b: antisymmetric amplitude = sqrt(Var(a) / Var(s)), a = (s(i, j) - s(S-1-j, S-1-i)) / 2 the part that
    changes sign under reflection about the anti-diagonal. Absolute encodings give maps symmetric about that
    axis (Wang and Chen 2020), and so does any relative map, so both give 0.
    Layer 1 (paper) is left out: its off-diagonal scores are alpha plus noise, no pattern to classify.
    """
    rows_a, rows_b = [], []
    variants = _reference_d(_select(data.params, **BASE))
    variants = variants[variants["n_layers"] >= 2] if len(variants) else variants
    for variant, p in variants.iterrows():
        fields = _layers_from_2(data, variant, int(p["n_layers"]))
        nonrel = np.stack([_amplitude(nonrelative_share(f.x, f.size)) for f in fields])
        anti = np.stack([_amplitude(antisymmetric_share(f.x, f.size)) for f in fields])
        weakest = int(np.argmin(nonrel[:, 0])) + 1
        rows_a.append(_row("4a", f"{_label(p)}, layers 2-{int(p['n_layers'])} (paper)", nonrel.min(axis=0), th,
                           note=f"variant {variant}; weakest at {_paper(weakest)}; by layer: "
                           + ", ".join(f"{v:.3g}" for v in nonrel[:, 0]), label=f"α={p['alpha']:g}"))
        weakest = int(np.argmin(anti[:, 0])) + 1
        rows_b.append(_row("4b", f"{_label(p)}, layers 2-{int(p['n_layers'])} (paper)", anti.min(axis=0), th,
                           note=f"variant {variant}; weakest at {_paper(weakest)}; by layer: "
                           + ", ".join(f"{v:.3g}" for v in anti[:, 0]), label=f"α={p['alpha']:g}"))
    if not rows_a:
        why = "no l2 / no scaling / no PE / causal / residual variant with >= 2 layers"
        rows_a.append(_absent("4a", th, why))
        rows_b.append(_absent("4b", th, why))
    return rows_a + rows_b


def _claim5(data: _Inputs, th: dict) -> list[dict]:
    """LayerNorm against l2 (Appendix B): each LayerNorm / no PE / causal / residual variant with sqrt_d (5a)
    or d (5b) scaling, paired with the l2 / no scaling variant of the same alpha, d and length.

    Strength = the nearer-key advantage (mean over key pairs j < j' < i of s(i, j') - s(i, j)) in cosine
    units: each layer's scores divided by the mean of its diagonal (a token's score with itself: 1 for l2
    and for LayerNorm with d scaling, sqrt(d) for LayerNorm with sqrt(d) scaling, whose scores are
    sqrt(d) times the cosines). Ratio LayerNorm / l2 per layer from layer 2 (paper) on (layers where l2 has
    no increase are left out).
    5a: the largest ratio (< 1 = weaker than l2 in every layer). 5b: the smallest ratio (> 0.5 = the d
    scaling keeps at least half of l2's strength in every layer). The note gives every layer's ratio,
    since "l2-like" can also be missed from above (a much stronger pattern than l2's).
    """
    rows = {"5a": [], "5b": []}
    for claim_id, scale, pick in (("5a", "sqrt_d", np.max), ("5b", "d", np.min)):
        variants = _reference_d(_select(data.params, norm="layernorm", scale=scale, pe="none", mask="causal",
                                        residual=True))
        for variant, p in variants.iterrows():
            partner = _partner(data.params, variant, norm="l2", scale="none")
            setting = f"{_label(p)} vs l2"
            depth = min(int(p["n_layers"]), int(data.params.loc[partner, "n_layers"])) if partner else 0
            if partner is None or depth < 2:
                rows[claim_id].append(_row(claim_id, setting, None, th, note=f"variant {variant}: no l2 variant "
                                           "with the same alpha, d and seq_len" if partner is None
                                           else f"variant {variant}: fewer than 2 layers",
                                           label=f"α={p['alpha']:g}"))
                continue
            ratios, kept = [], []
            for layer in range(1, depth):
                ln, l2 = data.sim_field(variant, layer), data.sim_field(partner, layer)
                a_ln = nearer_key_advantage(ln.x / diagonal_mean(ln.x, ln.size)[None, :], ln.size)
                a_l2 = nearer_key_advantage(l2.x / diagonal_mean(l2.x, l2.size)[None, :], l2.size)
                if a_l2[0] > 0:
                    ratios.append(_ratio(a_ln, a_l2))
                    kept.append(layer)
            if not ratios:
                rows[claim_id].append(_row(claim_id, setting, None, th, note=f"{variant} vs {partner}: l2 shows no "
                                           "increase in any layer from 2 (paper) on", label=f"α={p['alpha']:g}"))
                continue
            ratios = np.stack(ratios)
            by_layer = ", ".join(f"{_paper(layer)} {r:.3g}" for layer, r in zip(kept, ratios[:, 0]))
            rows[claim_id].append(_row(claim_id, setting, pick(ratios, axis=0), th,
                                       note=f"{variant} vs {partner}; by layer: {by_layer}",
                                       label=f"α={p['alpha']:g}"))
        if not rows[claim_id]:
            rows[claim_id].append(_absent(claim_id, th, f"no LayerNorm variant with {scale} scaling, no PE, causal, "
                                          "residual"))
    return rows["5a"] + rows["5b"]


def _claim6(data: _Inputs, th: dict) -> list[dict]:
    """RoPE with and without the causal mask (pe = rope, l2, no scaling, residual; reference d).

    6a (mask causal): the non-relative amplitude of claim 4a (sqrt of the bias-corrected share of the score
    variance not explained by i - j), weakest layer from layer 2 (paper) on: RoPE alone is relative, so
    anything here comes from the mask. Layer 1 (paper) is left out: RoPE does not act on i.i.d. isotropic
    inputs (Barbero et al. 2025), the scores are noise.
    6b (mask causal, per layer from 2 (paper) on): the left-region deficit of summary.nonrelativeness (mean of
    the band-centred score over the keys j < max(2, ceil(S/4))), divided by the SD of the off-diagonal scores
    so that settings compare: < 0 = the left region is darker than its diagonals. A sign claim.
    6c (mask none; lower triangle, the pairs the causal variants have): the largest non-relative amplitude
    over layers 2+ (paper) must stay below the same threshold.
    """
    rows = {"6a": [], "6b": [], "6c": []}
    for mask, claim_ids in (("causal", ("6a", "6b")), ("none", ("6c",))):
        variants = _reference_d(_select(data.params, norm="l2", scale="none", pe="rope", mask=mask, residual=True))
        variants = variants[variants["n_layers"] >= 2] if len(variants) else variants
        for variant, p in variants.iterrows():
            fields = _layers_from_2(data, variant, int(p["n_layers"]))
            amp = np.stack([_amplitude(nonrelative_share(f.x, f.size)) for f in fields])
            by_layer = ", ".join(f"{v:.3g}" for v in amp[:, 0])
            setting = f"{_label(p)}, layers 2-{int(p['n_layers'])} (paper)"
            if mask == "causal":
                rows["6a"].append(_row("6a", setting, amp.min(axis=0), th, note=f"variant {variant}; by layer: "
                                       + by_layer, label=f"α={p['alpha']:g}"))
                for layer, f in enumerate(fields, start=1):
                    rows["6b"].append(_row("6b", f"{_label(p)}, {_paper(layer)}", left_deficit(f.x, f.size), th,
                                           note=f"variant {variant}", layer=layer,
                                           label=f"α={p['alpha']:g} L{layer + 1}"))
            else:
                causal = _partner(data.params, variant, mask="causal")
                rows["6c"].append(_row("6c", setting, amp.max(axis=0), th,
                                       note=f"variant {variant}" + (f" (causal twin {causal})" if causal else "")
                                       + "; by layer: " + by_layer, label=f"α={p['alpha']:g}"))
        for claim_id in claim_ids:
            if not rows[claim_id]:
                rows[claim_id].append(_absent(claim_id, th, f"no RoPE variant with mask = {mask} (l2, no scaling, "
                                              "residual, >= 2 layers)"))
    return rows["6a"] + rows["6b"] + rows["6c"]


def _claim7(data: _Inputs, th: dict) -> list[dict]:
    """The trained NoPE model (kind "trained", name containing "nope"), Figure 3's intermediates.

    Keys >= 1 throughout: column 0 is the attention sink (a "vivid line at the 0th column", Section 4.2),
    which the paper sets aside and which alone can decide an order statistic.
    7a, stages (f) LN(O) and (i) the next layer's QK^T/sqrt(d): the key-order concordance of claim 2a (share
    of key pairs j < j' < i where the nearer key's Gram entry / score is higher).
    7b: strength relative to the alpha = 0 simulation (l2 / no scaling / no PE / causal / residual, reference
    d, layer 2 (paper)). The model's scores have an arbitrary scale, so strength is standardised: the
    nearer-key advantage divided by the SD of the off-diagonal scores (the spread a per-panel colour scale
    shows). Ratio model (i) / simulation > 1 = stronger. Uncertainty: bootstrap of the model and Monte
    Carlo replicates of the simulation, independent.
    """
    models = [m for m in data.models("trained") if "nope" in m.lower()]
    if not models and data.intermediates is not None:
        models = sorted({str(m) for m in data.intermediates["model"].unique() if "nope" in str(m).lower()})
    rows_a, rows_b = [], []
    sims = _reference_d(_select(data.params, alpha=0.0, **BASE))
    sims = sims[sims["n_layers"] >= 2] if len(sims) else sims
    for model in models:
        for stage, what in (("f", "(f) LN(O)"), ("i", "(i) next layer's scores")):
            field, layer = data.intermediate_field(model, stage)
            if field is None:
                rows_a.append(_row("7a", f"{model} {what}", None, th, note=f"no stage {stage} intermediates for "
                                   f"model {model}", label=f"{model} ({stage})", model=model))
                continue
            rows_a.append(_row("7a", f"{model} {what}, layer {layer + 1} (paper)",
                               concordance(field.x, field.size, kmin=1), th,
                               note=f"{field.source}; with key 0: {concordance(field.x[:, :1], field.size)[0]:.3g}",
                               layer=layer, label=f"{model} ({stage})", model=model))
        field, layer = data.intermediate_field(model, "i")
        if field is None or sims.empty:
            rows_b.append(_row("7b", f"{model} (i)", None, th, note="no stage i intermediates" if field is None
                               else "no alpha = 0 l2 variant", label=model, model=model))
            continue
        variant = min(sims.index, key=lambda v: (abs(int(sims.loc[v, "seq_len"]) - field.size), str(v)))
        sim_layer = min(layer, int(sims.loc[variant, "n_layers"]) - 1)  # the same depth as (i): 1 by default
        sim = data.sim_field(variant, sim_layer)
        strength = _ratio(nearer_key_advantage(field.x, field.size, 1), off_diagonal_std(field.x, field.size, 1))
        reference = _ratio(nearer_key_advantage(sim.x, sim.size, 1), off_diagonal_std(sim.x, sim.size, 1))
        rows_b.append(_row("7b", f"{model} (i), layer {layer + 1} (paper) vs {_label(sims.loc[variant])}, "
                           f"{_paper(sim_layer)}",
                           _ratio(strength, reference), th,
                           note=f"{field.source}; model {strength[0]:.3g}, simulation ({variant}) {reference[0]:.3g} "
                           "nearer-key advantage per score SD", layer=layer, label=model, model=model))
    if not rows_a:
        why = "no trained NoPE model (kind trained, name containing 'nope') in the tables"
        rows_a.append(_absent("7a", th, why))
        rows_b.append(_absent("7b", th, why))
    return rows_a + rows_b


def _claim8(data: _Inputs, th: dict) -> list[dict]:
    """Pretrained RoPE LLMs (kind "pretrained"), every layer.

    8a (per layer): the non-relative amplitude of claim 4a over the keys >= 1, bands recentred without key 0
    (so the attention-sink column cannot by itself make the pattern): the RMS of the scores' departure from a
    function of i - j, as a fraction of the RMS spread of the raw scores. Section 5.2 argues the pattern is
    not negligible because it spans about [-1, 1] next to raw scores of about [-10, 10], a ratio of 0.1: the
    threshold. Bias-corrected for sampling noise (with 64 sequences the noise floor is large). Extra columns:
    the same with key 0 (``value_with_sink``) and the standardised left-region deficit over keys >= 1
    (``left_deficit``: < 0 the first keys are darker than their diagonals, > 0 brighter).
    8b (per model): the median of 8a over the layers from layer 2 (paper) on ("except for the first layer").
    """
    rows_a, rows_b = [], []
    models = data.models("pretrained")
    for model in models:
        layers = data.score_layers(model)
        prefix = f"{model} " if len(models) > 1 else ""
        if not layers:
            rows_a.append(_row("8a", model, None, th, note=f"no scores for model {model}", label=model, model=model))
            continue
        amps = {}
        for layer in layers:
            field = data.score_field(model, layer)
            stats = band_statistics(field.x, field.size)
            amp, sink, deficit = _amplitude(stats["share1"]), _amplitude(stats["share0"]), stats["deficit1"]
            amps[layer] = amp
            value_sink, se_sink = _estimate(sink)
            value_def, se_def = _estimate(deficit)
            rows_a.append(_row("8a", f"{model}, {_paper(layer)}", amp, th, note=field.source, layer=layer,
                               label=f"{prefix}L{layer + 1}", model=model, value_with_sink=value_sink,
                               uncertainty_with_sink=se_sink, left_deficit=value_def,
                               left_deficit_uncertainty=se_def))
        later = [amps[layer] for layer in layers if layer >= 1]
        if later:
            rows_b.append(_row("8b", f"{model}, layers 2-{max(layers) + 1} (paper)", np.median(np.stack(later), axis=0),
                               th, note=f"{len(later)} layers", label=model, model=model))
        else:
            rows_b.append(_row("8b", model, None, th, note="only one layer", label=model, model=model))
    if not rows_a:
        why = "no pretrained model (kind pretrained) in the scores table"
        rows_a.append(_absent("8a", th, why))
        rows_b.append(_absent("8b", th, why))
    return rows_a + rows_b


# ---------------------------------------------------------------- entry points


def _thresholds(overrides: dict | None) -> dict:
    merged = dict(THRESHOLDS)
    for key, value in (overrides or {}).items():
        if key not in THRESHOLDS:
            raise ValueError(f"unknown claims threshold {key!r}; known: {sorted(THRESHOLDS)}")
        merged[key] = float(value)
    if not merged["z"] >= 0:
        raise ValueError(f"claims threshold 'z' must be >= 0, got {merged['z']}")
    return merged


def build_ledger(simulations: pd.DataFrame | None, theory: pd.DataFrame | None, scores: pd.DataFrame | None,
                 intermediates: pd.DataFrame | None, groups: pd.DataFrame | None, thresholds: dict | None = None,
                 n_bootstrap: int = 200, seed: int = 0) -> pd.DataFrame:
    """The claims ledger: one row per claim and setting (see the module docstring), claims in order 1a .. 8b.

    Any table may be None or empty: the claims that need it get rows with value NaN, verdict
    "inconclusive" and a note. A table missing a needed column raises ValueError.
    """
    th = _thresholds(thresholds)
    if int(n_bootstrap) < 2:
        raise ValueError(f"n_bootstrap must be >= 2 to estimate an uncertainty, got {n_bootstrap}")
    data = _Inputs(simulations, theory, scores, intermediates, groups, int(n_bootstrap), int(seed))
    rows = []
    for build in (_claim1, _claim2, _claim3, _claim4, _claim5, _claim6, _claim7, _claim8):
        rows.extend(build(data, th))
    ledger = pd.DataFrame(rows)
    for column in EXTRA_COLUMNS:
        if column not in ledger.columns:
            ledger[column] = np.nan
    ledger["layer"] = ledger["layer"].astype("Int64")
    return ledger[LEDGER_COLUMNS + EXTRA_COLUMNS].reset_index(drop=True)


# ---------------------------------------------------------------- Markdown


def _format(value: float, se: float) -> str:
    """value ± se with the decimals of se's second significant digit (3 significant digits without se)."""
    if not np.isfinite(value):
        return "n/a"
    if not np.isfinite(se) or se <= 0:
        return f"{value:.3g}"
    decimals = max(0, 1 - int(math.floor(math.log10(se))))
    if decimals > 7 or abs(value) >= 1e5:
        return f"{value:.3g} ± {se:.2g}"
    return f"{value:.{decimals}f} ± {se:.{decimals}f}"


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ledger_z(ledger: pd.DataFrame) -> float:
    if "z" in ledger.columns and ledger["z"].notna().any():
        return float(ledger["z"].dropna().iloc[0])
    return THRESHOLDS["z"]


def ledger_markdown(ledger: pd.DataFrame) -> str:
    """The ledger as Markdown: one table of every claim (its statement on its first row; claim 8a summarised
    per model), then a table of claim 8a per model and layer."""
    z = _ledger_z(ledger)
    lines = [
        "Each row is one claim of the paper measured in one setting: value ± one standard error (Monte Carlo "
        "standard errors for the simulations, a bootstrap over sequences for the trained and pretrained "
        f"models). A claim is **supported** where the value clears its threshold by more than {z:g} standard "
        f"errors, **not supported** where it misses it by more than {z:g}, and inconclusive in between. "
        "Layers are numbered as in the paper (from 1). Metrics and thresholds: `src/causalpos/claims.py`.",
        "",
        "| claim | setting | metric | value | threshold | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    per_layer = ledger[(ledger["claim_id"] == "8a") & ledger["layer"].notna()]
    previous, summarised = None, set()
    for _, row in ledger.iterrows():
        first = row["claim_id"] != previous
        previous = row["claim_id"]
        claim = f"**{row['claim_id']}** {_cell(row['statement'])} ({row['section']})" if first else ""
        metric = _cell(row["metric"]) if first else "″"
        if row["claim_id"] == "8a" and pd.notna(row["layer"]):  # one line per model, the layers below
            if row["model"] in summarised:
                continue
            summarised.add(row["model"])
            rows = per_layer[per_layer["model"] == row["model"]]
            counts = rows["verdict"].value_counts()
            text = ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)
            lines.append(f"| {claim} | {_cell(row['model'])}, each of {len(rows)} layers | {metric} | see below | "
                         f"{row['direction']} {row['threshold']:g} | {text} |")
            continue
        verdict_text = f"**{row['verdict']}**" if row["verdict"] != "inconclusive" else row["verdict"]
        lines.append(f"| {claim} | {_cell(row['setting'])} | {metric} | {_format(row['value'], row['uncertainty'])} "
                     f"| {row['direction']} {row['threshold']:g} | {verdict_text} |")
    if len(per_layer):
        lines += ["", "Claim 8a per layer. Non-relative amplitude: the RMS of the scores' departure from a function "
                  "of i - j over the RMS spread of the scores, over keys >= 1 (the verdict's metric) and with the "
                  "attention-sink key 0. Left-region deficit: the mean band-centred score of keys 1 to S/4 in score "
                  "SDs (< 0: the first keys score lower than their diagonals, > 0: higher).", "",
                  "| model | layer | amplitude, keys >= 1 | with key 0 | left-region deficit | verdict |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for _, row in per_layer.iterrows():
            lines.append(f"| {_cell(row['model'])} | {int(row['layer']) + 1} | "
                         f"{_format(row['value'], row['uncertainty'])} | "
                         f"{_format(row['value_with_sink'], row['uncertainty_with_sink'])} | "
                         f"{_format(row['left_deficit'], row['left_deficit_uncertainty'])} | {row['verdict']} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- figure

VERDICT_STYLE = {"supported": ("tab:green", "o"), "not supported": ("tab:red", "X"), "inconclusive": ("tab:gray", "s")}


def plot_ledger(ledger: pd.DataFrame, options: dict | None = None):
    """One panel per claim: each setting's value with ±z standard errors (the verdict's margin) against the
    claim's threshold (dashed line), colour and marker by verdict. Returns a matplotlib Figure built like
    figures.py's (no pyplot); draw it through figures.save_figure, which applies the plot options
    (font_scale, dpi, formats), as render_figure does for the paper's figures."""
    from matplotlib.lines import Line2D

    from causalpos.figures import _new_figure

    z = _ledger_z(ledger)
    claim_ids = list(dict.fromkeys(ledger["claim_id"]))
    ncols = min(4, max(1, len(claim_ids)))
    nrows = max(1, math.ceil(len(claim_ids) / ncols))
    fig = _new_figure(4.0 * ncols, 3.3 * nrows + 0.8)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    for ax, claim_id in zip(axes, claim_ids):
        rows = ledger[ledger["claim_id"] == claim_id].reset_index(drop=True)
        x = np.arange(len(rows))
        for verdict_name, (colour, marker) in VERDICT_STYLE.items():
            pick = (rows["verdict"] == verdict_name).to_numpy()
            if pick.any():
                err = (z * rows.loc[pick, "uncertainty"].astype(float)).fillna(0.0).to_numpy()
                ax.errorbar(x[pick], rows.loc[pick, "value"].astype(float), yerr=err, fmt=marker, color=colour,
                            ms=5, capsize=2, lw=1)
        for threshold in rows["threshold"].unique():
            ax.axhline(threshold, ls="--", color="black", lw=1)
        if not rows["value"].notna().any():
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="tab:gray")
        labels = [textwrap.shorten(str(label), 22, placeholder="…") for label in rows["label"]]
        step = max(1, math.ceil(len(rows) / 10))
        turn = len(rows) > 3 or max(len(label) for label in labels) > 10
        ax.set_xticks(x[::step], labels[::step], rotation=50 if turn else 0, ha="right" if turn else "center",
                      fontsize="x-small")
        ax.set_xlim(-0.6, len(rows) - 0.4)
        first = rows.iloc[0]
        title = first["title"] if "title" in rows.columns and isinstance(first["title"], str) else first["statement"]
        ax.set_title(textwrap.shorten(f"{claim_id}: {title}", 48, placeholder="…"), fontsize="small", loc="left")
        ax.set_ylabel(textwrap.fill(f"{first['unit']} ({first['direction']} {first['threshold']:g})", 30),
                      fontsize="x-small")
        ax.tick_params(axis="y", labelsize="x-small")
    for ax in axes[len(claim_ids):]:
        ax.set_axis_off()
    handles = [Line2D([], [], color=c, marker=m, linestyle="none", label=v) for v, (c, m) in VERDICT_STYLE.items()]
    handles.append(Line2D([], [], color="black", ls="--", label="threshold"))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize="small",
               title=f"error bars: ±{z:g} standard errors", title_fontsize="small")
    fig.suptitle("Claims ledger: each claim's metric against its threshold", fontweight="bold")
    return fig
