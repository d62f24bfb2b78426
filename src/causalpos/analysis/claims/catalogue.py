"""The claims ledger's catalogue: every claim of the paper as a measured number, its uncertainty and a verdict.

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

import numpy as np

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


def merge_thresholds(overrides: dict | None) -> dict:
    merged = dict(THRESHOLDS)
    for key, value in (overrides or {}).items():
        if key not in THRESHOLDS:
            raise ValueError(f"unknown claims threshold {key!r}; known: {sorted(THRESHOLDS)}")
        merged[key] = float(value)
    if not merged["z"] >= 0:
        raise ValueError(f"claims threshold 'z' must be >= 0, got {merged['z']}")
    return merged
