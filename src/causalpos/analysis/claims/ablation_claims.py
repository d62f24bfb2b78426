"""Claim 11 (ours, issue 27): Section 5.2's conjecture, "Since this pattern non-uniformly emphasizes the first few
keys, it may potentially negatively affect length generalization", tested by ablation on our trained models.

The pattern ablation (causalpos.models.pattern_ablation) subtracts each layer's non-relative pattern from its logits at
inference (condition "pattern") and, as the control, the same values shuffled within each band ("shuffled": the
same amount of change without the pattern's structure). Its `effect` is the loss gap to the training length under
"pattern" minus that under the control, per training seed: < 0 means that taking the pattern out helps the model
at k x the training length more than taking out the same values without their order, i.e. the pattern hurts
length generalisation, as the paper conjectures.

The unit of replication is the training run: each seed trains a model anew, so the spread over seeds covers the
run, which a standard error over held-out sequences (`effect_sem`, within one model) does not. Hence value = mean
of the seeds' effects, uncertainty = their SD / sqrt(n), and one-sided p's from Student's t with n - 1 degrees of
freedom (analysis.lengths' closed form: no scipy), which the ledger Holm-adjusts over claim 11's rows, a family of
its own. One seed (the default run) has no spread over runs: its row reports the value without a verdict, and the
target that trains every seed gives the interval.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from causalpos.analysis.claims.replicates import LedgerInputs
from causalpos.analysis.claims.rows import absent_row, row
from causalpos.analysis.lengths import CONFIDENCE, t_central, t_quantile
from causalpos.catalogue.models import TRAINED_KIND  # pretrained models have one factor and no seeds
from causalpos.models.pattern_ablation import TESTED

BASELINE = "none"  # the condition without intervention: the note's "against no intervention"
SEEDS_LEDGER = "target length_seeds (results/seeds/summary/claims.md)"  # where claim 11 gets every seed


def lower_tail(t: float, df: int) -> float:
    """P(T <= t) for T ~ Student t with `df` degrees of freedom (t may be infinite)."""
    if math.isinf(t):
        return 0.0 if t < 0 else 1.0
    central = t_central(abs(t), df)
    return 0.5 * (1.0 + central) if t >= 0 else 0.5 * (1.0 - central)


def t_test(values: np.ndarray, threshold: float) -> dict:
    """Mean, SE (SD / sqrt(n)), one-sided p's of "mean < threshold" (p_value = P(T <= t), p_against = 1 - it) and the
    two-sided t interval at CONFIDENCE, over n >= 2 values. Values all equal: no spread, so the p's are 0 or 1 by the
    sign of mean - threshold (both 1 at equality), as family.one_sided treats an uncertainty of 0."""
    n, mean = len(values), float(np.mean(values))
    se = float(np.std(values, ddof=1)) / math.sqrt(n)
    if se == 0:
        p_value, p_against = (0.0 if mean < threshold else 1.0), (0.0 if mean > threshold else 1.0)
        return {"mean": mean, "se": se, "p_value": p_value, "p_against": p_against, "low": mean, "high": mean}
    p_value = lower_tail((mean - threshold) / se, n - 1)
    half = t_quantile(0.5 + CONFIDENCE / 2, n - 1) * se
    return {
        "mean": mean,
        "se": se,
        "p_value": p_value,
        "p_against": 1.0 - p_value,
        "low": mean - half,
        "high": mean + half,
    }


def per_seed(rows: pd.DataFrame, column: str) -> pd.Series:
    """A column of one model's rows at one factor and condition, indexed by seed (one row per seed)."""
    if rows["seed"].duplicated().any():
        raise ValueError(
            f"pattern_ablation: a seed appears twice for model {rows['model'].iloc[0]!r}, factor "
            f"{int(rows['factor'].iloc[0])}, condition {rows['condition'].iloc[0]!r}"
        )
    return rows.set_index("seed")[column].astype(float).sort_index()


def against_none(tested: pd.DataFrame, baseline: pd.DataFrame) -> str:
    """The note's comparison with no intervention: the gap under "pattern" minus the gap under "none", per seed."""
    diff = (per_seed(tested, "gap") - per_seed(baseline, "gap")).dropna() if len(baseline) else pd.Series(dtype=float)
    if diff.empty:
        return "against no intervention: n/a"
    spread = f" ± {diff.std(ddof=1) / math.sqrt(len(diff)):.2g}" if len(diff) > 1 else ""
    return f"against no intervention (gap under pattern - under none): {diff.mean():+.4g}{spread}"


def setting_row(model: str, factor: int, tested: pd.DataFrame, baseline: pd.DataFrame, th: dict) -> dict:
    """Claim 11a's row for one trained model at one factor > 1 (module docstring)."""
    effects = per_seed(tested, "effect").dropna()
    seq_len = int(tested["seq_len"].iloc[0])
    setting, label = f"{model}, {factor}x the training length ({seq_len} tokens)", f"{model} {factor}x"
    common = dict(label=label, model=model, exact=False)  # a mean over training runs is never exact
    if effects.empty:
        return row("11a", setting, None, th, note="no finite effect (no control condition at this factor?)", **common)
    seeds = ", ".join(str(int(s)) for s in effects.index)
    versus = against_none(tested, baseline)
    if len(effects) == 1:
        seed = effects.index[0]
        sem = float(per_seed(tested, "effect_sem").loc[seed])
        note = (
            f"1 training seed ({seeds}): no spread over seeds; the interval over seeds comes from "
            f"{SEEDS_LEDGER}; within this seed, SE over sequences {sem:.2g}; {versus}"
        )
        return row("11a", setting, (float(effects.iloc[0]), math.nan), th, note=note, **common)
    test = t_test(effects.to_numpy(), float(th["ablation_effect"]))
    note = (
        f"{len(effects)} training seeds ({seeds}); {CONFIDENCE:.0%} t interval over seeds "
        f"[{test['low']:+.4g}, {test['high']:+.4g}]; {int((effects < 0).sum())} of {len(effects)} seeds with "
        f"effect < 0; {versus}"
    )
    return row(
        "11a",
        setting,
        (test["mean"], test["se"]),
        th,
        note=note,
        p_value=test["p_value"],
        p_against=test["p_against"],
        kind="test",
        reference=f"t({len(effects) - 1})",
        **common,
    )


def claim11(data: LedgerInputs, th: dict) -> list[dict]:
    """11a, one row per trained model and factor > 1 of the pattern_ablation table: the mean over training seeds of
    the effect of condition "pattern" (its gap minus the shuffled control's gap), SE = SD over seeds / sqrt(n),
    p's from Student's t with n - 1 df (one-sided, "< ablation_effect"); one seed: no verdict (module docstring)."""
    table = data.pattern_ablation
    if table is None:
        return [absent_row("11a", th, "no pattern_ablation table")]
    trained = table[(table["kind"] == TRAINED_KIND) & (table["factor"] > 1)]
    tested = trained[trained["condition"] == TESTED]
    if tested.empty:
        return [absent_row("11a", th, "the pattern_ablation table has no trained model at a factor > 1")]
    rows = []
    for (model, factor), part in tested.groupby(["model", "factor"], sort=True):
        baseline = trained[
            (trained["model"] == model) & (trained["factor"] == factor) & (trained["condition"] == BASELINE)
        ]
        rows.append(setting_row(str(model), int(factor), part, baseline, th))
    return rows
