"""Appendix A's printed algebra (claims 1g, 1h), 1e by construction, and 1f from a no-residual simulation."""

from pathlib import Path

import numpy as np
import pytest
import sympy as sp
import yaml

from causalpos.analysis.claims.appendix_errata import Erratum, at, expressions
from causalpos.analysis.claims.ledger import build_ledger
from causalpos.simulation import theory
from causalpos.simulation.engine import result_frame, simulate
from causalpos.simulation.theory import theory_frame
from causalpos.simulation.variant import Variant
from helpers import R

ALPHAS = (0.0, 0.2, 0.5, 0.8)


def gram_norms_sq(n: int, alpha: float, residual: bool) -> np.ndarray:
    """||x_i^(1)||^2, i = 1..n, as a matrix product: Eq. 2's softmax weights (e on the diagonal, e^alpha below),
    plus the identity with the residual, against the inputs' Gram matrix (1 on the diagonal, alpha off it)."""
    weights = np.tril(np.full((n, n), np.exp(alpha)), k=-1) + np.e * np.eye(n)
    mix = weights / weights.sum(axis=1, keepdims=True) + (np.eye(n) if residual else 0)
    gram = (1 - alpha) * np.eye(n) + alpha
    return np.diag(mix @ gram @ mix.T)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_true_differences_match_theory_and_a_matrix_product(alpha):
    j = np.arange(1, 30)
    for name, h, residual in (("true_h", theory.h, True), ("true_h_prime", theory.h_no_residual, False)):
        derived = at(name, alpha, j)
        np.testing.assert_allclose(derived, h(j + 1, alpha) ** 2 - h(j, alpha) ** 2, rtol=1e-9)
        np.testing.assert_allclose(derived, np.diff(gram_norms_sq(30, alpha, residual)), rtol=1e-9)


def test_printed_a1_is_not_the_difference_of_squares():
    assert round(float(at("a1", 0.0, 1)), 3) == -1.803 and round(float(at("true_h", 0.0, 1)), 3) == -0.931
    ex = expressions()
    a, n = ex["symbols"]
    assert sp.simplify(ex["a1"] - ex["true_h"]) != 0
    # the printed numerator polynomial has the true j^2 coefficient, but not the true j and constant ones
    denominator = (sp.E + n * sp.exp(a)) ** 2 * (sp.E + (n - 1) * sp.exp(a)) ** 2
    printed = sp.Poly(sp.expand(ex["a1"] * denominator), n).all_coeffs()
    true = sp.Poly(sp.expand(sp.cancel(ex["true_h"] * denominator)), n).all_coeffs()
    assert len(printed) == len(true) == 3
    assert [sp.simplify(p - t) == 0 for p, t in zip(printed, true)] == [True, False, False]
    # the line before it: restoring the factor (e + je^alpha)^2 on its second term gives the true difference
    assert sp.simplify(ex["a1_step"] - ex["true_h"]) != 0 and float(ex["a1_step"].subs({a: 0, n: 1})) > 0

    def eq3_numerator(pos):  # Eq. 3's numerator of h(pos)^2, as printed
        w = 2 * sp.E + (pos - 1) * sp.exp(a)
        return w**2 + 2 * w * sp.exp(a) * a * (pos - 1) + sp.exp(2 * a) * (pos - 1) * (1 + (pos - 2) * a)

    restored = (
        eq3_numerator(n + 1) * (sp.E + (n - 1) * sp.exp(a)) ** 2 - eq3_numerator(n) * (sp.E + n * sp.exp(a)) ** 2
    ) / denominator
    assert sp.simplify(restored - ex["true_h"]) == 0


def test_a1_conclusion_holds_for_the_true_polynomial():
    """The paper's argument (every coefficient of the numerator negative for 0 <= alpha < 1) on the true one."""
    ex = expressions()
    a, n = ex["symbols"]
    denominator = (sp.E + n * sp.exp(a)) ** 2 * (sp.E + (n - 1) * sp.exp(a)) ** 2
    coefficients = sp.Poly(sp.expand(sp.cancel(ex["true_h"] * denominator)), n).all_coeffs()
    grid = np.linspace(0.0, 0.999, 200)
    for c in coefficients:
        assert (sp.lambdify(a, c, "numpy")(grid) < 0).all()


def test_printed_a2_has_a_sign_error():
    i = np.arange(1, 13)
    printed, true = at("a2", 0.0, i), at("true_h_prime", 0.0, i)
    assert list(i[printed > 0]) == [6, 7, 8, 9, 10] and (true < 0).all()
    ex = expressions()
    assert sp.simplify(ex["a2"] - ex["true_h_prime"]) != 0
    assert sp.simplify(ex["a2_corrected"] - ex["true_h_prime"]) == 0  # "+2e^{2+alpha}(i-1)" is the fix


def test_errata_metric_tells_a_right_expression_from_a_wrong_one():
    assert Erratum("1h", "a2_corrected", "true_h_prime", ALPHAS, 50).summary()["largest_relative_error"] < 1e-12
    wrong = Erratum("1h", "a2", "true_h_prime", ALPHAS, 50).summary()
    assert wrong["largest_relative_error"] > 1 and wrong["conclusion_holds"] and wrong["printed_positive"] == 5


def test_errata_rows_in_the_ledger():
    ledger = build_ledger(None, theory_frame(20, [0.0, 0.2]), None, None, None).set_index("claim_id")
    for claim_id, proof in (("1g", "claim 1c"), ("1h", "claim 1d")):
        r = ledger.loc[claim_id]
        assert r["verdict"] == "not supported" and r["uncertainty"] == 0 and r["value"] > r["threshold"]
        assert "printed expression wrong" in r["note"] and "conclusion holds" in r["note"] and proof in r["note"]
        assert "positions 1-19" in r["setting"]
    assert "printed -1.803, true -0.9311" in ledger.loc["1g", "note"]
    # the verdict follows the value: a tolerance wider than the error would accept the printed algebra
    lax = build_ledger(None, theory_frame(20, [0.0]), None, None, None, thresholds={"printed_exact": 100.0})
    assert (lax[lax["claim_id"].isin(["1g", "1h"])]["verdict"] == "supported").all()
    none = build_ledger(None, None, None, None, None).set_index("claim_id")
    assert (none.loc[["1g", "1h"], "verdict"] == "inconclusive").all()


def test_1e_is_by_construction_unless_g_prime_moves_with_j():
    ledger = build_ledger(None, theory_frame(20, [0.0, 0.5]), None, None, None)
    rows = ledger[ledger["claim_id"] == "1e"]
    assert list(rows["verdict"]) == ["by construction"] * 2 and rows["note"].str.contains("not a finding").all()
    assert "by construction" in rows["statement"].iloc[0]
    tampered = theory_frame(20, [0.0])
    tampered.loc[~tampered["residual"], "g"] += 0.05 * tampered.loc[~tampered["residual"], "key_pos"]
    row = build_ledger(None, tampered, None, None, None).set_index("claim_id").loc["1e"]
    assert row["verdict"] == "not supported" and "changes with j" in row["note"]


def test_1f_from_a_small_simulation_without_residual():
    v = Variant(residual=False, seq_len=12, n_layers=2, d=64, n_samples=4000, seed=3)
    nores = result_frame(simulate(v, device="cpu", backend="torch"), "l2_alpha0.0_noresidual")
    ledger = build_ledger(nores, None, None, None, None, n_bootstrap=R)
    f = ledger[ledger["claim_id"] == "1f"]
    assert len(f) == 1 and f["note"].iloc[0] == "variant l2_alpha0.0_noresidual"
    assert "no residual" in f["setting"].iloc[0]
    assert f["verdict"].iloc[0] == "supported" and f["value"].iloc[0] > 0.9
    # no other claim reads the variant without residual (those of the residual decoder have no setting)
    assert not ledger[ledger["claim_id"] != "1f"]["note"].astype(str).str.contains("noresidual").any()


def test_default_config_has_the_variant_and_no_figure_draws_it():
    config = yaml.safe_load((Path(__file__).parents[2] / "config.yaml").read_text())
    assert config["simulation"]["variants"]["l2_alpha0.0_noresidual"] == {"residual": False}
    drawn = {v for figure in config["figures"].values() for v in (figure or {}).get("variants", [])}
    assert "l2_alpha0.0_noresidual" not in drawn
