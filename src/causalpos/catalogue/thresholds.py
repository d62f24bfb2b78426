"""The thresholds of the claims ledger: one record each, with its default, its bounds and why it is what it is.

A threshold is the value a claim's metric must pass (catalogue.claims.Claim.threshold names it; the direction is
the claim's). The config's `claims.thresholds` overrides the defaults key by key, within the bounds: the config
schema's `$defs.thresholds` is written from these records by scripts/generate-docs.py (`--check` fails when it
differs), and docs/configuration.md shows them. A bound keeps the claim's meaning: a share in (0, 1], a ratio that
must show a growth >= 1, a sign claim's threshold on the claim's side of 0, a value no metric can pass (R² or r
> 1) left out.
"""

from __future__ import annotations

import math

from causalpos.catalogue.preregistered import LANDED, REGISTRATIONS
from causalpos.catalogue.records import Threshold


THRESHOLD_RECORDS = {
    threshold.key: threshold
    for threshold in (
        Threshold(
            "family_alpha",
            0.05,
            "(0, 1)",
            meaning="a probability, the family-wise error rate of the verdicts",
            why="Family-wise error rate of the verdicts (ours): Holm over every row that tests something, once for "
            '"supported" and once for "not supported" (family.py); replaces the former margin `z` in '
            "standard errors.",
        ),
        Threshold(
            "eq4_r2",
            0.9,
            "[0, 1)",
            meaning="an R² the fit must exceed: 0 is no better than the mean, and none exceeds 1",
            why="the closed form must explain at least 90% of the variance of the Monte Carlo layer-2 scores "
            "(R² = 1 - SS(MC - Eq.4) / SS(MC - mean)). Eq. 4 replaces inner products by their expectations, "
            "exact only as d grows, so agreement at finite d is a tolerance, not an equality within noise.",
        ),
        Threshold(
            "gap_slope",
            0.0,
            "(-inf, 0]",
            meaning="a log-log slope the gap's must stay below: <= 0, a gap that shrinks",
            why='"the gap shrinks as d grows" = the log-log slope of the RMS gap against d is negative.',
        ),
        Threshold(
            "strict_step",
            0.0,
            "(-inf, 0]",
            meaning="a relative step every step must stay below: <= 0, strictly decreasing",
            why='"strictly decreasing" = even the largest step h(i+1) - h(i) (relative to h(i)) of the '
            "closed form is below 0. The closed form is exact, so no tolerance: any step >= 0 is a "
            "counterexample.",
        ),
        Threshold(
            "key_share",
            0.1,
            "(0, 1]",
            meaning="a share of variance the metric must stay below",
            why='"nearly independent of j": less than 10% of the off-diagonal variance changes with the '
            "key once the query is fixed (the mirror of query_share).",
        ),
        Threshold(
            "concordance",
            0.75,
            "[0.5, 1)",
            meaning="a share of key pairs in order the metric must exceed: 0.5 is no order, 1 every pair",
            why='"the score increases with the key position": in at least 3 of 4 '
            "key pairs of a row the nearer key scores higher (Kendall's tau >= 0.5, a strong rank "
            "association). Strict increase (1.0) cannot be reached where adjacent steps are smaller than the "
            "sampling noise; 0.5 = no order. 7f: the same for the diagonal falling with the position.",
        ),
        Threshold(
            "printed_exact",
            1e-9,
            "(0, inf)",
            meaning="a relative difference the metric must stay below",
            why='1g, 1h (ours): a printed step of Appendix A "equals" the quantity it stands for when their '
            "relative difference is below 1e-9 at every point of the grid: float64 rounding of two exact "
            "expressions, far below any slip of algebra.",
        ),
        Threshold(
            "inverted_concordance",
            0.25,
            "(0, 0.5]",
            meaning="a share of key pairs in order the metric must stay below: 0.5 is no order",
            why='"laterally inverts the pattern": the mirror image of concordance, at most 1 of 4 key pairs '
            "of a row with the nearer key higher (Kendall's tau <= -0.5).",
        ),
        Threshold(
            "layer_growth",
            1.0,
            "[1, inf)",
            meaning="a ratio to layer 2 the metric must exceed: >= 1, a growth",
            why='"grows stronger in layers 3 and 4": the nearer-key advantage exceeds layer 2\'s (ratio > 1).',
        ),
        Threshold(
            "strict_rows",
            1.0,
            "(0, 1]",
            meaning="a share of rows the metric must reach",
            why='"strictly increasing for j <= i with fixed i": every row must be resolved increasing with '
            "no resolved decrease (share of such rows = 1; descriptive, at family_alpha over the matrix's "
            "pairs). The verdict comes from the row's p's: every adjacent step > 0 for it, any pair decreasing "
            "against.",
        ),
        Threshold(
            "query_share",
            0.1,
            "(0, 1]",
            meaning="a share of variance the metric must stay below",
            why='"nearly independent of the query position": less than 10% of the off-diagonal score '
            "variance changes with the query once the key is fixed.",
        ),
        Threshold(
            "alpha_gain",
            1.0,
            "[1, inf)",
            meaning="a ratio to alpha = 0 the metric must exceed: >= 1, a gain",
            why='"appears faster": the layer-2 nearer-key advantage is larger than at alpha = 0 (ratio > 1).',
        ),
        Threshold(
            "saturation_ratio",
            1.0,
            "(0, 1]",
            meaning="a ratio the metric must stay below: <= 1, a faster saturation",
            why='"with higher alpha the pattern saturates faster": the unsaturated share (how far a row is '
            "from its end value, on average, as a share of its range) at the higher alpha is below that at the "
            "lower one.",
        ),
        Threshold(
            "figure_digits",
            0.0005,
            "(0, inf)",
            meaning="a difference of scores the metric must stay below",
            why="2d (ours): a number printed to three decimals is the closed form rounded when it lies within half "
            "a unit of its last digit of it.",
        ),
        Threshold(
            "layer_saturation",
            1.0,
            "(0, 1]",
            meaning="a ratio to layer 2 the metric must stay below: <= 1, a faster saturation",
            why='3d (ours): "more evident in the later layers": the saturation metric at every later layer is '
            "below layer 2's (ratio < 1); any decrease counts, as for 3c, since the paper names no size.",
        ),
        Threshold(
            "nonrelative",
            0.1,
            "(0, inf)",
            meaning="a fraction of the scores' RMS, the size of a pattern that is not negligible",
            why='a non-relative pattern is "not negligible" when its RMS is at least a tenth '
            "of the RMS spread of the scores it sits in: our yardstick, read from Section 5.2 (a pattern in "
            '[-1, 1] next to scores in [-10, 10] "could not be dismissed as negligible"; the paper states no '
            "threshold). 6c must stay below it.",
        ),
        Threshold(
            "range_ratio",
            0.1,
            "(0, inf)",
            meaning="a ratio of ranges the metric must exceed",
            why="the same yardstick in the paper's terms, our reading of them: the 1%-99% range of the "
            "diagonal-normalised pattern over the 1%-99% range of the raw scores ([-1, 1] next to [-10, 10] "
            "is 2 / 20 = 0.1).",
        ),
        Threshold(
            "asymmetry",
            0.1,
            "(0, inf)",
            meaning="a fraction of the scores' RMS the metric must exceed",
            why="the same yardstick for the part of the map that is antisymmetric about the anti-diagonal.",
        ),
        Threshold(
            "sqrt_d_ratio",
            1.0,
            "(0, 1]",
            meaning="a ratio to l2 the metric must stay below: <= 1, a weakening",
            why='"weakens": LayerNorm + sqrt(d) has a smaller nearer-key advantage (cosine units) than l2 in '
            "every layer from 2 on (the largest ratio < 1).",
        ),
        Threshold(
            "size_log_ratio",
            math.log(2.0),
            "(0, inf)",
            meaning="a |log ratio| the metric must stay below",
            why='"similar to l2" in size: the nearer-key advantage of LayerNorm + d within a factor of 2 of '
            "l2's, either way, in every layer from 2 on (the largest |log ratio| < log 2).",
        ),
        Threshold(
            "left_deficit",
            0.0,
            "(-inf, 0]",
            meaning="a mean score in SDs the metric must stay below: <= 0, darker",
            why='"the left region is darker": its mean band-centred score is below 0 (a sign claim), in '
            "every one of the named regions (the verdict is the regions' common one; see claim6's docstring).",
        ),
        Threshold(
            "noise_level",
            1.0,
            "(0, 1]",
            meaning="a ratio to the Monte Carlo noise the metric must stay below: <= 1, within the noise",
            why='"RoPE alone does not affect the inner products" at layer 1: the non-relative pattern is '
            "smaller than the Monte Carlo noise (RMS pattern / RMS noise < 1): nothing resolvable beyond noise.",
        ),
        Threshold(
            "clarity_gain",
            1.0,
            "[1, inf)",
            meaning="a ratio to layer 2 the metric must exceed: >= 1, clearer",
            why='"by the third layer the relative pattern becomes even clearer": the share of the score '
            "variance explained by i - j is larger at layer 3 than at layer 2 (ratio > 1).",
        ),
        Threshold(
            "trained_gain",
            1.0,
            "[1, inf)",
            meaning="a ratio to the alpha = 0 simulation the metric must exceed: >= 1, stronger",
            why='"stronger than the alpha = 0 simulation": ratio of standardised nearer-key advantages > 1.',
        ),
        Threshold(
            "orthogonal",
            0.1,
            "(0, 1]",
            meaning="a ratio of off-diagonal to diagonal RMS the metric must stay below",
            why='"inner products close to zero except along the main diagonal ... the case alpha = 0": the '
            "RMS off-diagonal entry below a tenth of the RMS diagonal one, i.e. an effective alpha nearer 0 "
            "than the paper's smallest alpha > 0 (0.2).",
        ),
        Threshold(
            "stage_gain",
            2.0,
            "[1, inf)",
            meaning="a ratio of stages the metric must exceed: >= 1, an increase",
            why='"the ratio of off-diagonal to diagonal values increases substantially": at least doubles.',
        ),
        Threshold(
            "pattern_r",
            0.9,
            "[0, 1)",
            meaning="a Pearson r the metric must exceed: 0 is unrelated, and none exceeds 1",
            why='"almost identical to (d)", "the diagonal corresponds to h(i)^2 with the residual term '
            'removed": ours, a Pearson r above 0.9 (81% of the variance shared, up to a scale and an offset). '
            "For 7l this separates h'^2's shape (steep, then flat) from a straight fall, which has r = 0.69 "
            "with it at S = 50.",
        ),
        Threshold(
            "query_spread",
            0.5,
            "(0, 1]",
            meaning="a ratio of SDs the metric must stay below: <= 1, weaker than the diagonal",
            why="\"g'(i) is ... only weakly dependent on i\": ours, (c)'s off-diagonal rows change with i less "
            "than half as much as its diagonal (SD of the row means / SD of the diagonal). The closed forms g' "
            "and h'^2 give 0.385 at alpha = 0 (0.46 at 0.2), S = 50: the paper's own formulas pass.",
        ),
        Threshold(
            "first_keys",
            0.0,
            "[0, inf)",
            meaning="a mean score in SDs the metric must exceed: >= 0, emphasised",
            why='"emphasizes the first few keys": their mean diagonal-normalised score is above 0 (a sign claim).',
        ),
        Threshold(
            "break_agreement",
            1.0,
            "(0, 1]",
            meaning="a share of rows the metric must reach",
            why="10c (ours): the recursion predicts the rows that break strict increase when it and Monte Carlo name "
            "the same rows (no resolved break it misses, no predicted break Monte Carlo leaves unresolved or "
            "resolves the other way).",
        ),
        Threshold(
            "ablation_effect",
            0.0,
            "(-inf, 0]",
            meaning="a change of the loss gap the metric must stay below: <= 0, the pattern hurts",
            why="11a (ours, a sign claim): removing the non-relative pattern shrinks the loss gap to the training "
            "length more than removing the same values shuffled within each band (effect < 0: the pattern "
            "hurts longer contexts).",
        ),
        Threshold(
            "law_agreement",
            0.5,
            "[0, 1)",
            meaning="an agreement of verdicts (0, 0.5 or 1) the metric must exceed",
            why="the verdict under our exact-moment law agrees with the one under the paper's construction: 1 "
            "= the same verdict, 0.5 = one of them inconclusive, 0 = opposite verdicts; > 0.5 = the same "
            "verdict.",
        ),
    )
}
# the landed registrations' thresholds (catalogue.preregistered), unless a claim already in use has it (8d's
# first_keys, which 12b shares: the registration holds it equal, tests/unit/test_preregistration.py)
THRESHOLD_RECORDS |= {
    registration.threshold.key: registration.threshold
    for registration in (REGISTRATIONS[claim_id] for claim_id in LANDED)
    if registration.threshold.key not in THRESHOLD_RECORDS
}
THRESHOLDS = {key: threshold.default for key, threshold in THRESHOLD_RECORDS.items()}

# settings that were removed, and what replaces them (a config that still names one gets this in its error)
REMOVED_THRESHOLDS = {
    "z": "claims.thresholds.family_alpha (the family-wise error rate of the Holm-adjusted verdicts, default 0.05)",
    "strict_level": "claims.thresholds.family_alpha (2c's pairwise tests are part of the ledger's Holm family)",
    "window_change": "claims.thresholds.window_effect_r (10d is the window's own effect, issue 43)",
    "global_excess": "claims.thresholds.window_sign_excess (10e is the window's own effect against a constant, "
    "issue 43)",
}


def merge_thresholds(overrides: dict | None) -> dict:
    """THRESHOLDS with `overrides` {key: value}; ValueError for a removed or unknown key, and for a family_alpha
    outside (0, 1). Other bounds are the config's (schema); a caller in Python may test outside them."""
    merged = dict(THRESHOLDS)
    for key, value in (overrides or {}).items():
        if key in REMOVED_THRESHOLDS:
            raise ValueError(f"claims.thresholds.{key} was removed; use {REMOVED_THRESHOLDS[key]}")
        if key not in THRESHOLDS:
            raise ValueError(f"unknown claims threshold {key!r}; known: {sorted(THRESHOLDS)}")
        merged[key] = float(value)
    alpha = THRESHOLD_RECORDS["family_alpha"]
    if not alpha.allows(merged["family_alpha"]):
        raise ValueError(f"claims threshold 'family_alpha' must be in {alpha.bounds}, got {merged['family_alpha']}")
    return merged
