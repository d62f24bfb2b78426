"""The ledger's p-values and their family-wise (Holm) adjustment.

A row tests "the metric is beyond its threshold on the claim's side" (``p_value``) and, separately, "it is
beyond it on the other side" (``p_against``: evidence that the claim fails). Both are one-sided, from the normal
approximation of the estimate: z = (value - threshold) / uncertainty, the uncertainty being the SD of the
bootstrap or Monte Carlo replicates; p_value = P(Z >= z) for a claim "metric > threshold" (mirrored for "<"),
p_against = P(Z <= z). Claims made of several sub-tests combine them into one p each way (2c, 6b, the size
bands of 5c): a claim that needs every sub-test to hold is an intersection-union test, its p the largest of
the sub-tests' (no multiplicity penalty: it is rejected only if each of them is); a claim that fails when any
sub-test fails is a union, its p the Bonferroni min(1, k * smallest p) over the k sub-tests.

`holm` adjusts a family of p-values (Holm 1979): sort them, p_(1) <= ... <= p_(m); the adjusted p_(i) is max
over k <= i of min(1, (m - k + 1) p_(k)). Rejecting every row with adjusted p <= alpha controls the
family-wise error rate at alpha in the strong sense, under any dependence between the rows: the chance that
any row whose claim is false reads "supported" is at most alpha (as far as the p's are valid: here they rest
on the normal approximation of each estimate). `adjust` applies it to the rows of a ledger twice, once to the
p_values and once to the p_againsts, so the chance of any false "not supported" is at most alpha too (each
guarantee holds on its own). The family: every row with finite p's that is not exact. Exact rows (``exact``:
closed forms, symbolic checks, uncertainty 0 by construction) have p 0 where the claim's side holds and 1
where it does not; they are certain, so they are not counted in m and their p's stay as they are. An estimate
whose replicates happen not to vary (uncertainty 0) gets p 0 or 1 the same way but is a test like the others,
counted in m. Rows without a value or an uncertainty have NaN p's and stay inconclusive; rows whose verdict is
not a test (9a's agreement of two verdicts, a property that holds by construction) have NaN p's and keep their
verdict.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from causalpos.catalogue.claims import verdict
from causalpos.catalogue.readings import our_reading
from causalpos.analysis.multiplicity import bonferroni_min, holm, intersection_union, normal_sf, t_sf
from causalpos.analysis.triangles import packed_size


def interval_z(alpha: float) -> float:
    """The z whose one-sided tail is alpha: value - z SE clears a threshold exactly when the unadjusted
    p_value is below alpha (1.645 at 0.05)."""
    return NormalDist().inv_cdf(1.0 - float(alpha))


def one_sided(
    value: float, uncertainty: float, threshold: float, direction: str, df: int | None = None
) -> tuple[float, float]:
    """(p_value, p_against) of "value `direction` threshold" from an estimate and its standard error: from the
    normal, or from Student's t with `df` degrees of freedom where given.

    Uncertainty 0 is an exact value: p_value 0 if the claim's side holds strictly, else 1, and p_against 0
    if the other side holds strictly, else 1 (value == threshold: neither). NaN value, uncertainty or
    threshold, or a non-finite uncertainty: NaN, NaN."""
    if direction not in (">", "<"):
        raise ValueError(f"direction must be '>' or '<', got {direction!r}")
    value, uncertainty, threshold = float(value), float(uncertainty), float(threshold)
    if not (not math.isnan(value) and np.isfinite(uncertainty) and uncertainty >= 0 and np.isfinite(threshold)):
        return math.nan, math.nan
    gap = (value - threshold) if direction == ">" else (threshold - value)  # > 0: on the claim's side
    if uncertainty == 0:
        return (0.0 if gap > 0 else 1.0), (0.0 if gap < 0 else 1.0)
    z = gap / uncertainty
    if df is not None:
        return t_sf(z, df), t_sf(-z, df)
    return normal_sf(z), normal_sf(-z)


def band_pvalues(values, uncertainties, low: float, high: float) -> tuple[float, float]:
    """(p_value, p_against) of "low < value < high for every entry": the intersection-union p of the 2k
    one-sided tests inside the band, and the Bonferroni p of any of them outside it."""
    inside, outside = [], []
    for value, se in zip(np.ravel(values), np.ravel(uncertainties)):
        for bound, direction in ((low, ">"), (high, "<")):
            p_in, p_out = one_sided(value, se, bound, direction)
            inside.append(p_in)
            outside.append(p_out)
    return intersection_union(inside), bonferroni_min(outside)


def increase_pvalues(x: np.ndarray, size: int, kmin: int = 0) -> dict:
    """Claim 2c's sub-tests on a packed lower triangle with replicates (column 0 the estimate, 1.. replicates):
    is every row i strictly increasing over keys kmin .. i-1 (the diagonal left out)?

    For: every adjacent step s(i, j+1) - s(i, j) > 0 (strict increase needs each of them, and nothing else):
    p_value = the largest step's one-sided p (intersection-union). Against: some pair j < j' < i with
    s(i, j') < s(i, j) (comparing every pair finds a slow decline whose steps are each within the noise):
    p_against = Bonferroni over all pairs of the matrix. Standard errors: the SD of each difference over the
    replicates. Returns p_value, p_against, the numbers of steps and pairs, the weakest step (query, key,
    z) and the strongest decrease (query, earlier key, later key, z)."""
    est, reps = x[:, 0], x[:, 1:]
    step_z, pair_z, weakest, strongest = [], [], None, None
    for q in range(kmin + 2, size):
        start = packed_size(q) + kmin
        keys = np.arange(kmin, q)
        j, jj = np.triu_indices(len(keys), 1)
        d = est[start + jj] - est[start + j]
        se = (reps[start + jj] - reps[start + j]).std(axis=1, ddof=1) if reps.shape[1] > 1 else np.full(d.shape, np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(se > 0, d / np.where(se > 0, se, 1.0), np.where(se == 0, np.sign(d) * np.inf, np.nan))
        z = np.where((se == 0) & (d == 0), 0.0, z)
        adjacent = jj == j + 1
        step_z.append(z[adjacent])
        pair_z.append(z)
        if np.isnan(z).any():
            continue
        low = int(np.argmin(np.where(adjacent, z, np.inf)))
        if weakest is None or z[low] < weakest[2]:
            weakest = (q, int(keys[j[low]]), float(z[low]))
        worst = int(np.argmin(z))
        if strongest is None or z[worst] < strongest[3]:
            strongest = (q, int(keys[j[worst]]), int(keys[jj[worst]]), float(z[worst]))
    steps = np.concatenate(step_z) if step_z else np.array([])
    pairs = np.concatenate(pair_z) if pair_z else np.array([])
    return {
        "p_value": intersection_union(normal_sf(steps)) if steps.size else math.nan,
        "p_against": bonferroni_min(normal_sf(-pairs)) if pairs.size else math.nan,
        "steps": int(steps.size),
        "pairs": int(pairs.size),
        "weakest": weakest,
        "strongest": strongest,
    }


def in_family(rows) -> np.ndarray:
    """Which rows (dicts or a DataFrame) the Holm adjustment counts: finite p_value and p_against, and not
    `exact`."""
    records = rows.to_dict("records") if hasattr(rows, "to_dict") else list(rows)
    return np.array(
        [
            np.isfinite(float(r.get("p_value", math.nan)))
            and np.isfinite(float(r.get("p_against", math.nan)))
            and not is_exact(r.get("exact"))
            for r in records
        ],
        dtype=bool,
    )


def is_exact(flag) -> bool:
    """An `exact` cell: True only for a true boolean (a missing or NaN cell is not exact)."""
    return isinstance(flag, (bool, np.bool_)) and bool(flag)


def ours_marked(rows: list[dict]) -> list[dict]:
    """The rows with `ours` filled from the registry of our readings (catalogue.readings.OUR_READINGS)."""
    return [{**r, "ours": our_reading(r)} for r in rows]


def ours_apart(row: dict) -> bool:
    """The family key of the paper's Holm adjustment: the rows on our readings apart from the paper's."""
    return bool(row["ours"])


def adjust_apart(rows: list[dict], alpha: float, family_of) -> list[dict]:
    """`adjust` within each family, family_of(row) naming it; the rows in their order."""
    names = [family_of(r) for r in rows]
    out = [None] * len(rows)
    for name in dict.fromkeys(names):
        where = [i for i, n in enumerate(names) if n == name]
        for i, r in zip(where, adjust([rows[i] for i in where], alpha)):
            out[i] = r
    return out


def adjust(rows: list[dict], alpha: float) -> list[dict]:
    """The rows (new dicts) with p_adjusted and p_against_adjusted Holm-adjusted over the rows in_family, and
    every row's verdict from its adjusted p's (catalogue.verdict at `alpha`); rows outside the family keep
    their p's unadjusted (exact: 0 or 1; NaN) and a verdict that is not a test keeps its verdict."""
    family = in_family(rows)
    p_for = holm([r["p_value"] if keep else math.nan for r, keep in zip(rows, family)])
    p_against = holm([r["p_against"] if keep else math.nan for r, keep in zip(rows, family)])
    out = []
    for r, keep, a, b in zip(rows, family, p_for, p_against):
        r = dict(r)
        if keep:
            r["p_adjusted"], r["p_against_adjusted"] = float(a), float(b)
        if keep or np.isfinite(float(r["p_value"])):
            r["verdict"] = verdict(r["p_adjusted"], r["p_against_adjusted"], alpha)
        out.append(r)
    return out
