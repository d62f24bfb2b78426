"""Multiple testing, kept free of the package's other modules: Holm's adjustment of a family of p-values and
the two ways of combining sub-tests into one p (the claims ledger's family, the length comparison's lengths).

`holm` (Holm 1979): sort the family's p-values p_(1) <= ... <= p_(m); the adjusted p_(i) is the maximum over
k <= i of min(1, (m - k + 1) p_(k)). Rejecting every hypothesis whose adjusted p is at most alpha controls the
family-wise error rate at alpha in the strong sense, under any dependence between the tests.
"""

from __future__ import annotations

import math

import numpy as np


def normal_sf(x):
    """P(Z > x) for a standard normal Z, elementwise (x may be ±inf); exact in the far tails (erfc)."""
    values = np.asarray(x, dtype=float)
    out = np.vectorize(lambda v: math.nan if math.isnan(v) else 0.5 * math.erfc(v / math.sqrt(2.0)), otypes=[float])(
        values
    )
    return float(out) if out.ndim == 0 else out


def t_sf(x: float, df: int) -> float:
    """P(T > x) for Student's t with `df` degrees of freedom (scipy's, exact in the far tails too)."""
    from scipy.stats import t

    return float(t.sf(float(x), df))


def intersection_union(p_values) -> float:
    """p of "every sub-test holds": the largest sub-test p (NaN if any is NaN, or there are none)."""
    p = np.asarray(list(p_values), dtype=float)
    return float(np.max(p)) if p.size and not np.isnan(p).any() else math.nan


def bonferroni_min(p_values) -> float:
    """p of "some sub-test holds" over k sub-tests: min(1, k * the smallest p) (NaN if any is NaN)."""
    p = np.asarray(list(p_values), dtype=float)
    return float(min(1.0, p.size * np.min(p))) if p.size and not np.isnan(p).any() else math.nan


def holm(p_values) -> np.ndarray:
    """Holm-adjusted p-values, in the input's order; NaN entries are not in the family and stay NaN."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    kept = np.flatnonzero(~np.isnan(p))
    m = kept.size
    if m == 0:
        return out
    order = kept[np.argsort(p[kept], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out
