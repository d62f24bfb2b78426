"""Claims 1g, 1h: Appendix A's printed algebra against the quantities it stands for (issue 23).

The paper proves "h(j) is strictly decreasing on j" (A.1) and "h'(i) is strictly decreasing on i" (A.2) by
printing h(j+1)^2 - h(j)^2 and h'(i+1)^2 - h'(i)^2 as one fraction and reading off its sign. This module
transcribes both printed fractions as sympy expressions, exactly as printed, and derives the true
differences from the definitions alone (Section 3.2: layer-1 attention weight e on the query itself and e^alpha
on each earlier key, over c(i) = e + (i-1)e^alpha, plus x_i itself with the residual; unit-norm inputs with
<x_k, x_l> = alpha for k != l). The squared norm of sum_k w_k x_k under that Gram matrix, (1 - alpha) I +
alpha 11^T, is (1 - alpha) sum w_k^2 + alpha (sum w_k)^2: a route that shares no algebra with the paper's
Eq. 3 or A.2.

What sympy finds (tests/integration/test_appendix.py checks each):
- A.1: the printed numerator polynomial has the true j^2 coefficient but wrong j and constant coefficients (at
  alpha = 0, j = 1 the printed fraction is -1.803, the true difference -0.931). The true numerator is
  (alpha-1) [(e^{4alpha} + 2e^{1+3alpha}) j^2 + (6e^{2+2alpha} - e^{4alpha} - 2e^{1+3alpha}) j
  + 4e^{3+alpha} - 4e^{2+2alpha}]; every coefficient is negative for 0 <= alpha < 1, so the paper's argument
  and conclusion hold. The line before it also drops the factor (e + je^alpha)^2 from its second term.
- A.2: "-2e^{2+alpha}(i-1)" should be "+2e^{2+alpha}(i-1)"; with "+" the printed fraction is the true one.
  As printed it is positive at alpha = 0, i = 6..10 (h' would increase there); the true one is negative.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from causalpos.analysis.claims.rows import absent_row, row

# the points the issue names (1-based, as in the paper)
A1_POINT = (0.0, 1)
A2_POINTS = (0.0, tuple(range(6, 11)))


@functools.cache
def expressions() -> dict:
    """The sympy expressions (built once; sympy is imported here only: the ledger needs it for 1g, 1h)."""
    import sympy as sp

    a, n = sp.symbols("alpha n", real=True)  # n: the position, j in A.1, i in A.2
    e, ea = sp.E, sp.exp(a)

    def norm_sq(pos, residual: bool):
        """||x_pos^(1)||^2 from the attention weights and the inputs' Gram matrix, not from Eq. 3."""
        c = e + (pos - 1) * ea
        self_w = e / c + (1 if residual else 0)
        other_w = ea / c
        return (1 - a) * (self_w**2 + (pos - 1) * other_w**2) + a * (self_w + (pos - 1) * other_w) ** 2

    true = {
        residual: sp.factor(sp.cancel(norm_sq(n + 1, residual) - norm_sq(n, residual))) for residual in (True, False)
    }
    # A.1, last line: numerator as printed over (e + je^a)^2 (e + (j-1)e^a)^2
    denominator = (e + n * ea) ** 2 * (e + (n - 1) * ea) ** 2
    a1 = (
        ((a - 1) * sp.exp(4 * a) + 2 * (a - 1) * sp.exp(3 * a + 1)) * n**2
        + ((2 * a - 6) * sp.exp(a + 3) + 2 * (a - 1) * sp.exp(3 * a + 1) + (a - 1) * sp.exp(4 * a)) * n
        + (2 * a - 4) * sp.exp(a + 3)
        + (-2 * a + 4) * sp.exp(2 * a + 2)
    ) / denominator

    # A.1, the line before: each bracket is the numerator of h^2 (Eq. 3) at j+1 and at j, as printed
    def eq3_numerator(pos):
        w = 2 * e + (pos - 1) * ea
        return w**2 + 2 * w * ea * a * (pos - 1) + ea**2 * (pos - 1) * (1 + (pos - 2) * a)

    a1_step = (eq3_numerator(n + 1) * (e + (n - 1) * ea) ** 2 - eq3_numerator(n)) / denominator
    # A.2 as printed, and with the one sign corrected
    a2 = (a - 1) * ea * (2 * e**3 - 2 * sp.exp(2 + a) * (n - 1) + sp.exp(3 * a) * n * (n - 1)) / denominator
    a2_corrected = (a - 1) * ea * (2 * e**3 + 2 * sp.exp(2 + a) * (n - 1) + sp.exp(3 * a) * n * (n - 1)) / denominator
    return {
        "symbols": (a, n),
        "true_h": true[True],
        "true_h_prime": true[False],
        "a1": a1,
        "a1_step": a1_step,
        "a2": a2,
        "a2_corrected": a2_corrected,
    }


@functools.cache
def numeric(name: str):
    """expressions()[name] as a numpy function of (alpha, position)."""
    import sympy as sp

    return sp.lambdify(expressions()["symbols"], expressions()[name], "numpy")


@dataclass(frozen=True)
class Erratum:
    """A printed expression against the true quantity over a grid of alphas and positions 1..n-1."""

    claim_id: str
    printed: str  # key of expressions()
    true: str
    alphas: tuple
    n: int

    def grid(self):
        alpha, pos = np.meshgrid(np.asarray(self.alphas, float), np.arange(1, self.n, dtype=float), indexing="ij")
        return alpha, pos, numeric(self.printed)(alpha, pos), numeric(self.true)(alpha, pos)

    def summary(self) -> dict:
        alpha, pos, printed, true = self.grid()
        relative = np.abs(printed - true) / np.abs(true)
        worst = np.unravel_index(int(np.argmax(relative)), relative.shape)
        return {
            "largest_relative_error": float(relative.max()),
            "worst_alpha": float(alpha[worst]),
            "worst_position": int(pos[worst]),
            "largest_true": float(true.max()),
            "printed_positive": int((printed >= 0).sum()),
            "points": int(true.size),
            "conclusion_holds": bool((true < 0).all()),
        }


def at(name: str, alpha: float, positions) -> np.ndarray:
    return np.asarray(numeric(name)(float(alpha), np.asarray(positions, float)), float)


def errata_rows(theory, th: dict) -> list[dict]:
    """1g (A.1) and 1h (A.2), over the theory table's alphas and positions 1..seq_len-1 (1-based).

    Metric: the largest relative difference |printed - true| / |true| over the grid; the printed expression
    equals the true one when it is below th["printed_exact"] (float rounding). Exact arithmetic on both sides:
    uncertainty 0, so any algebraic slip gives "not supported": the printed step is wrong. The note says
    whether the conclusion holds, i.e. whether the true difference is < 0 at every grid point (h, h' strictly
    decreasing: claims 1c, 1d measure that on the theory table).
    """
    if theory is None or len(theory) == 0:
        return [
            absent_row(claim_id, th, "no theory table (its alphas and length are the grid)")
            for claim_id in ("1g", "1h")
        ]
    alphas = tuple(sorted(set(np.round(theory["alpha"].astype(float), 9))))
    n = int(theory["query_pos"].max()) + 1
    if n < 2:
        return [absent_row(claim_id, th, "the theory table has fewer than two positions") for claim_id in ("1g", "1h")]
    setting = f"printed vs sympy, α ∈ {{{', '.join(f'{x:g}' for x in alphas)}}}, positions 1-{n - 1}"
    out = []
    for erratum, name, proof in (
        (Erratum("1g", "a1", "true_h", alphas, n), "h", "1c"),
        (Erratum("1h", "a2", "true_h_prime", alphas, n), "h'", "1d"),
    ):
        s = erratum.summary()
        wrong = s["largest_relative_error"] >= th["printed_exact"]
        text = [
            (
                f"printed expression {'wrong' if wrong else 'right'} (largest relative error at "
                f"α={s['worst_alpha']:g}, position {s['worst_position']}; printed >= 0 at {s['printed_positive']} "
                f"of {s['points']} points)"
            )
        ]
        if s["conclusion_holds"]:
            text.append(
                f"conclusion holds: the true difference is < 0 at every point (largest "
                f"{s['largest_true']:.3g}), so {name} strictly decreases (claim {proof})"
            )
        else:
            text.append(f"conclusion fails: the true difference is >= 0 somewhere (largest {s['largest_true']:.3g})")
        if erratum.claim_id == "1g":
            alpha0, j0 = A1_POINT
            text.append(
                f"at α={alpha0:g}, j={j0}: printed {at('a1', alpha0, j0):.4g}, true "
                f"{at('true_h', alpha0, j0):.4g}; the line before it drops the factor (e + je^α)^2 from its "
                f"second term (it gives {at('a1_step', alpha0, j0):.4g} there)"
            )
        else:
            alpha0, points = A2_POINTS
            printed = at("a2", alpha0, points)
            fixed = Erratum("1h", "a2_corrected", "true_h_prime", alphas, n).summary()["largest_relative_error"]
            text.append(
                f"at α={alpha0:g}, i={points[0]}-{points[-1]}: printed {printed.min():.2g} to "
                f"{printed.max():.2g}, true < 0; with +2e^(2+α)(i-1) the relative error is {fixed:.1g}"
            )
        out.append(
            row(
                erratum.claim_id,
                setting,
                (s["largest_relative_error"], 0.0),
                th,
                note="; ".join(text),
                label="printed step",
            )
        )
    return out
