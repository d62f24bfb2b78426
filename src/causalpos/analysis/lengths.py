"""Length generalisation over training seeds (rule length_seeds): mean and spread of the held-out loss at each
length, and of the gap to the training length, over the default training and its reruns with other seeds,
and tests of the paired NoPE - RoPE gap difference.

One length evaluation (causalpos.models.length_eval.evaluate_lengths) measures one trained model: its standard
error covers the held-out sequences, not the training run. Here each model is trained with several seeds
(initial weights and data order), so the spread over seeds includes the run. The gap of a seed at factor k is
its loss at k x the training length minus its loss at 1x (the same tokens, more context before them: > 0
means the longer context hurts). Rows "nope - rope" pair the two models seed by seed (the same seed gives
both the same initial weights and data order): their gap difference d < 0 means NoPE loses less.

Columns (LENGTH_SEED_COLUMNS), every row: `model` ("nope", "rope" or "nope - rope"), `factor`, `seq_len`,
`n_seeds` (a pair row: the seeds both models have), `seeds` (comma-separated), `heldout_loss_mean` and
`heldout_loss_sd` (a pair row: of the paired loss difference), `gap_mean`, `gap_sd`, `gap_sem` (a pair row:
of d, so `gap_mean` is the paired mean difference).

Columns of the pair rows only (NaN for single models, and for the pair at factor 1, where every gap is 0 by
definition), each about the n = `n_seeds` paired differences d:
- `diff_ci_low`, `diff_ci_high`: the 95% confidence interval of the mean of d, `gap_mean` ± t(0.975, n - 1)
  `gap_sem` (Student t with n - 1 degrees of freedom; it assumes d roughly normal over seeds).
- `t_stat`, `t_p`: the paired t statistic `gap_mean` / `gap_sem` and its two-sided p (n - 1 df).
- `exact_p`, `exact_p_one_sided`: the paired sign-flip (permutation) test of the sum of d, over all 2^n
  assignments of signs to the seeds' differences: exact, no normality assumed, under the null hypothesis
  that each d is as likely to be -d (the two models exchangeable within a seed). `exact_p` is two-sided
  (the share of assignments with |sum| >= the observed |sum|), `exact_p_one_sided` is for the direction
  "NoPE loses less" (the share with sum <= the observed sum). Being exact, it is discrete: its smallest
  possible value is 2/2^n two-sided and 1/2^n one-sided (n = 3: 0.25 and 0.125; n = 5: 0.0625 and 1/32 =
  0.031), reached only when every d has the same sign (negative, for the one-sided p). A d of exactly 0
  is kept: it changes no sum, and doubles the smallest p.
- `n_negative`, `n_ties`, `sign_p`, `sign_p_one_sided`: the exact sign test. `n_negative` counts the seeds
  where NoPE loses less (d < 0); `n_ties` those with d exactly 0, which the sign test leaves out; under the
  null, `n_negative` is binomial(n - `n_ties`, 1/2). `sign_p_one_sided` is P(X >= `n_negative`),
  `sign_p` two-sided (every count as far from half as the observed one, or further).
- `exact_p_adjusted`: `exact_p_one_sided` Holm-adjusted over the lengths beyond 1x (2x and 4x by default): a
  statement about every length at once ("NoPE loses less at 2x and at 4x") holds at a family-wise level.
  With n = 5 seeds and two lengths its smallest value is 2/32 = 0.0625: five seeds cannot reach 5% at both.
- `reading`: what the tests support, in words (function `reading`): "evidence at the 5% level (one-sided
  exact test, Holm over the lengths)" where `exact_p_adjusted` <= 0.05; else "a consistent direction, not
  evidence at 5%" where every signed seed has d < 0, "the opposite direction in every seed (RoPE loses
  less)" where every one has d > 0, and "no consistent direction" otherwise. The 5% level (LEVEL) is ours,
  as is the whole comparison: the paper measures no length generalisation (its conclusion: "it remains
  unclear whether the interaction between RoPE and the causal mask directly affects performance and length
  generalization"). With n = 5 and two lengths nothing reaches it; with n = 10, ten negative d of ten do.

The t quantile and p come from the closed form of Student's t distribution for an integer number of degrees
of freedom (Abramowitz & Stegun 26.7.3-4), so the stage needs no scipy; tests/unit/test_lengths.py checks them
against scipy.stats.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from causalpos.analysis.multiplicity import holm
from causalpos.catalogue.models import TRAINED
from causalpos.catalogue.tables import LENGTH_SEED_COLUMNS, PAIR_TEST_COLUMNS, require_columns

PAIR = TRAINED  # the rows "nope - rope" pair them
CONFIDENCE = 0.95  # of diff_ci_low/high
LEVEL = 0.05  # ours: the level at which `reading` calls a one-sided exact p evidence
MAX_EXACT_SEEDS = 20  # 2^20 sign assignments; more seeds would need sampling, which we have no use for


def with_gaps(per_seed: pd.DataFrame) -> pd.DataFrame:
    """The length evaluations of every model and seed (model, seed, factor, seq_len, heldout_loss) with their
    gap to factor 1 of the same model and seed."""
    frame = require_columns(per_seed, ["model", "seed", "factor", "seq_len", "heldout_loss"], "length_eval")
    base = frame[frame["factor"] == 1].set_index(["model", "seed"])["heldout_loss"]
    if base.index.duplicated().any():
        raise ValueError("length_eval: a model and seed evaluated twice at factor 1")
    keys = pd.MultiIndex.from_frame(frame[["model", "seed"]])
    return frame.assign(gap=frame["heldout_loss"].to_numpy() - base.reindex(keys).to_numpy())


def paired_differences(gaps: pd.DataFrame) -> pd.DataFrame:
    """Per seed both models have and factor (seed, factor, seq_len): `loss`, NoPE's held-out loss minus RoPE's,
    and `diff`, NoPE's gap minus RoPE's (< 0: NoPE loses less). `gaps` is with_gaps' table; empty if it lacks
    one of the pair."""
    if not set(PAIR) <= set(gaps["model"]):
        return pd.DataFrame(columns=["seed", "factor", "seq_len", "loss", "diff"])
    left, right = (gaps[gaps["model"] == m].set_index(["seed", "factor"]) for m in PAIR)
    both = left.merge(right, how="inner", left_index=True, right_index=True, suffixes=("_a", "_b")).reset_index()
    return pd.DataFrame(
        {
            "seed": both["seed"],
            "factor": both["factor"],
            "seq_len": both["seq_len_a"],
            "loss": both["heldout_loss_a"] - both["heldout_loss_b"],
            "diff": both["gap_a"] - both["gap_b"],
        }
    ).sort_values(["factor", "seed"], ignore_index=True)


# ---------------------------------------------------------------- Student t, integer degrees of freedom


def t_central(t: float, df: int) -> float:
    """P(|T| <= t) for T ~ Student t with `df` (a positive integer) degrees of freedom: Abramowitz & Stegun
    26.7.3 (df odd) and 26.7.4 (df even), with theta = atan(t / sqrt(df))."""
    if df < 1 or int(df) != df:
        raise ValueError(f"degrees of freedom must be a positive integer, not {df}")
    theta = math.atan(abs(t) / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2:
        term = total = math.cos(theta)
        for k in range(1, (df - 1) // 2):  # cos + 2/3 cos^3 + (2.4)/(3.5) cos^5 + ... up to cos^(df-2)
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 2 / math.pi * (theta + (math.sin(theta) * total if df > 1 else 0.0))
    term = total = 1.0
    for k in range(1, df // 2):  # 1 + 1/2 cos^2 + (1.3)/(2.4) cos^4 + ... up to cos^(df-2)
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total


def t_two_sided_p(t: float, df: int) -> float:
    """Two-sided p of a t statistic with `df` degrees of freedom."""
    return 1.0 if t == 0 else max(0.0, 1.0 - t_central(t, df))


def t_quantile(q: float, df: int) -> float:
    """The q quantile (0.5 < q < 1) of Student t with `df` degrees of freedom, by bisection of t_central."""
    if not 0.5 < q < 1:
        raise ValueError(f"quantile level must lie in (0.5, 1), not {q}")
    target, low, high = 2 * q - 1, 0.0, 1.0
    while t_central(high, df) < target:
        high *= 2
    for _ in range(200):  # to the last bit of a double
        middle = (low + high) / 2
        if middle in (low, high):
            break
        low, high = (middle, high) if t_central(middle, df) < target else (low, middle)
    return (low + high) / 2


# ---------------------------------------------------------------- the paired tests


def sign_flip_p(differences) -> tuple[float, float]:
    """(two-sided, one-sided towards negative) p of the exact paired sign-flip test of sum(differences): the
    share of all 2^n sign assignments whose sum is as extreme as the observed one or more."""
    d = np.asarray(differences, dtype=float)
    n = len(d)
    if n > MAX_EXACT_SEEDS:
        raise ValueError(f"{n} paired differences: the exact test enumerates 2^n, at most 2^{MAX_EXACT_SEEDS}")
    signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
    sums, observed = signs @ d, float(d.sum())
    tolerance = 1e-9 * float(np.abs(d).sum())  # sums equal but for rounding count as equal
    return (float(np.mean(np.abs(sums) >= abs(observed) - tolerance)), float(np.mean(sums <= observed + tolerance)))


def sign_test_p(n_negative: int, n_signed: int) -> tuple[float, float]:
    """(two-sided, one-sided) p of the exact sign test: X ~ binomial(n_signed, 1/2); one-sided P(X >= n_negative),
    two-sided the probability of every count at least as far from n_signed / 2."""
    weights = [math.comb(n_signed, j) / 2**n_signed for j in range(n_signed + 1)]
    distance = abs(n_negative - n_signed / 2)
    two = sum(w for j, w in enumerate(weights) if abs(j - n_signed / 2) >= distance - 1e-9)
    return min(1.0, two), min(1.0, sum(weights[n_negative:]))


def reading(exact_p_adjusted: float, n_negative: int, n_signed: int, level: float = LEVEL) -> str:
    """What the paired tests support, in words, for the direction "NoPE loses less" (`level` is ours)."""
    if exact_p_adjusted <= level:
        return f"evidence at the {level:.0%} level (one-sided exact test, Holm over the lengths)"
    if n_signed and n_negative == n_signed:
        return f"a consistent direction, not evidence at {level:.0%}"
    if n_signed and n_negative == 0:
        return "the opposite direction in every seed (RoPE loses less)"
    return "no consistent direction"


def paired_tests(differences) -> dict:
    """PAIR_TEST_COLUMNS for the paired differences d of one factor (module docstring)."""
    d = np.asarray(differences, dtype=float)
    n = len(d)
    mean = float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else math.nan
    if n < 2:
        low = high = t = t_p = math.nan
    elif sd == 0:  # every seed the same difference: no spread to scale by
        low = high = mean
        t, t_p = (math.copysign(math.inf, mean), 0.0) if mean else (math.nan, math.nan)
    else:
        sem = sd / math.sqrt(n)
        half = t_quantile(0.5 + CONFIDENCE / 2, n - 1) * sem
        low, high, t = mean - half, mean + half, mean / sem
        t_p = t_two_sided_p(t, n - 1)
    exact, exact_one = sign_flip_p(d)
    n_negative, n_ties = int((d < 0).sum()), int((d == 0).sum())
    sign, sign_one = sign_test_p(n_negative, n - n_ties)
    return {
        "diff_ci_low": low,
        "diff_ci_high": high,
        "t_stat": t,
        "t_p": t_p,
        "exact_p": exact,
        "exact_p_one_sided": exact_one,
        "n_negative": n_negative,
        "n_ties": n_ties,
        "sign_p": sign,
        "sign_p_one_sided": sign_one,
    }


# ---------------------------------------------------------------- the table


def _summary(model: str, factor: int, seq_len: int, rows: pd.DataFrame, loss: str, gap: str) -> dict:
    n = len(rows)
    sd = lambda column: float(rows[column].std(ddof=1)) if n > 1 else math.nan  # noqa: E731
    return {
        "model": model,
        "factor": int(factor),
        "seq_len": int(seq_len),
        "n_seeds": n,
        "seeds": ",".join(str(int(s)) for s in sorted(rows["seed"])),
        "heldout_loss_mean": float(rows[loss].mean()),
        "heldout_loss_sd": sd(loss),
        "gap_mean": float(rows[gap].mean()),
        "gap_sd": sd(gap),
        "gap_sem": sd(gap) / math.sqrt(n) if n else math.nan,
    }


def length_seed_frame(per_seed: pd.DataFrame) -> pd.DataFrame:
    """LENGTH_SEED_COLUMNS: per model and factor over its seeds, then "nope - rope" over the seeds both have,
    with the paired tests beyond factor 1."""
    frame = with_gaps(per_seed)
    rows = [
        _summary(model, factor, rows["seq_len"].iloc[0], rows, "heldout_loss", "gap")
        for (model, factor), rows in frame.groupby(["model", "factor"], sort=True)
    ]
    tested = []
    for factor, pairs in paired_differences(frame).groupby("factor", sort=True):
        row = _summary(f"{PAIR[0]} - {PAIR[1]}", factor, pairs["seq_len"].iloc[0], pairs, "loss", "diff")
        rows.append(row | (paired_tests(pairs["diff"]) if factor != 1 else {}))
        if factor != 1:
            tested.append(rows[-1])
    for row, adjusted in zip(tested, holm([row["exact_p_one_sided"] for row in tested])):
        row["exact_p_adjusted"] = float(adjusted)
        row["reading"] = reading(adjusted, row["n_negative"], row["n_seeds"] - row["n_ties"])
    table = pd.DataFrame(rows, columns=LENGTH_SEED_COLUMNS)
    return table.astype({c: float for c in PAIR_TEST_COLUMNS if c != "reading"})
