"""Claims 2d-2e and 3d (analysis/claims/later_layers.py) on synthetic simulation tables whose verdicts are known in
advance, and their metrics against independent computations."""

import numpy as np
import pandas as pd
import pytest

from causalpos.catalogue.claims import CLAIMS, merge_thresholds
from causalpos.analysis.claims.later_layers import (
    FIGURE1_SCORES,
    claim2_figure1_cosine,
    claim3_by_layer,
    column_concordance,
)
from causalpos.analysis.claims.ledger import build_ledger
from causalpos.analysis.claims.replicates import LedgerInputs
from causalpos.simulation.theory import layer2_scores, theory_frame
from helpers import I, J, R, S, identity, packed, sim_table, with_diagonal

TH = merge_thresholds(None)


def inputs(sims=None, theory=None) -> LedgerInputs:
    sims = pd.concat(sims, ignore_index=True) if isinstance(sims, list) else sims
    return LedgerInputs(sims, theory, None, None, None, R, 0)


def by_setting(rows: list[dict], claim_id: str) -> dict:
    assert rows and all(r["claim_id"] == claim_id for r in rows)
    return {r["setting"]: r for r in rows}


# ---------------------------------------------------------------- 2d: Figure 1's numbers against Eq. 4


def eq4_by_linear_algebra(n: int) -> np.ndarray:
    """Eq. 4 at alpha = 0 without g and h: x^(1) = C x^(0) with orthonormal inputs (expected Gram = identity), so
    the expected Gram of layer 1's outputs is C C^T and the score its cosine. Row i (0-based) of C: the attention
    weight e on x_i plus the residual 1, weight 1 on every earlier x_k, over the softmax sum e + i."""
    e, n_earlier = np.e, np.arange(n)
    attention = (np.tril(np.ones((n, n)), -1) + np.diag(np.full(n, e))) / (e + n_earlier)[:, None]  # Eq. 2's softmax
    c = attention + np.eye(n)  # and the residual
    gram = c @ c.T
    return gram / np.sqrt(np.outer(np.diag(gram), np.diag(gram)))


def test_eq4_by_linear_algebra_is_the_closed_form():
    np.testing.assert_allclose(np.tril(eq4_by_linear_algebra(S)), np.nan_to_num(layer2_scores(S, 0.0)), atol=1e-12)


def test_figure1_prints_eq4_but_one_last_digit():
    """The printed numbers against an independent Eq. 4: two agree to the printed digits, (2, 1) does not."""
    exact = eq4_by_linear_algebra(3)
    gaps = {k: abs(v - exact[k]) for k, v in FIGURE1_SCORES.items()}
    assert gaps[(1, 0)] < 0.0005 and gaps[(2, 0)] < 0.0005 and 0.0005 < gaps[(2, 1)] < 0.001
    (d,) = [r for r in claim2_figure1_cosine(inputs(theory=theory_frame(S, [0.0])), TH) if r["claim_id"] == "2d"]
    assert d["value"] == pytest.approx(max(gaps.values()), abs=1e-12) and d["uncertainty"] == 0.0
    assert d["verdict"] == "not supported" and "(2, 1): printed 0.150, Eq. 4 0.1508" in d["note"]
    # nearer keys score higher in the printed row 2 as in Eq. 4's: the figure's conclusion holds
    assert FIGURE1_SCORES[(2, 1)] > FIGURE1_SCORES[(2, 0)] and exact[2, 1] > exact[2, 0]


@pytest.mark.parametrize("shift, verdict", [(0.0, "supported"), (0.0004, "supported"), (0.001, "not supported")])
def test_figure1_against_a_theory_table_that_prints_it(shift, verdict):
    theory = theory_frame(S, [0.0])
    for (q, k), value in FIGURE1_SCORES.items():
        theory.loc[(theory["query_pos"] == q) & (theory["key_pos"] == k), "score"] = value + shift
    (d,) = [r for r in claim2_figure1_cosine(inputs(theory=theory), TH) if r["claim_id"] == "2d"]
    assert d["value"] == pytest.approx(shift, abs=1e-12) and d["verdict"] == verdict


def test_figure1_without_theory_and_with_monte_carlo():
    d, e = claim2_figure1_cosine(inputs(), TH)
    assert d["claim_id"] == "2d" and d["verdict"] == "inconclusive" and "no theory table" in d["note"]
    assert e["claim_id"] == "2e" and e["verdict"] == "inconclusive"
    sims = [sim_table("zero", [identity(), layer2_scores(S, 0.0) - 0.002], sem=1e-4)]
    (d,) = [r for r in claim2_figure1_cosine(inputs(sims, theory_frame(S, [0.0])), TH) if r["claim_id"] == "2d"]
    assert "Monte Carlo (zero, d=64) at layer 2 (paper): (1, 0) 0.151" in d["note"]  # 0.1535 - 0.002
    assert "panel (a), layer 1 (paper): diagonal within" in d["note"]


# ---------------------------------------------------------------- 2e: closer pairs have the higher cosine


def test_column_concordance_by_loops():
    matrix = np.random.default_rng(5).normal(size=(S, S))
    steps = [matrix[a, k] - matrix[b, k] for k in range(S) for a in range(k + 1, S) for b in range(a + 1, S)]
    assert column_concordance(packed(matrix)[:, None], S)[0] == pytest.approx(np.mean(np.array(steps) > 0))
    # the mirror of the rows: s(i, j) = f(i) is ordered along columns only
    assert column_concordance(packed(with_diagonal(-1.0 * I))[:, None], S)[0] == 1.0
    assert column_concordance(packed(with_diagonal(1.0 * J))[:, None], S)[0] == 0.5  # ties count one half


def test_claim2e_closer_pairs_higher_both_ways_is_supported():
    near = with_diagonal(0.6 * np.exp(-(I - J) / 3.0))  # a function of the distance, falling with it
    rows = claim2_figure1_cosine(inputs([sim_table("zero", [identity(), near, near**2])]), TH)[1:]
    e = by_setting(rows, "2e")
    assert [r["layer"] for r in e.values()] == [1, 2]
    assert all(r["verdict"] == "supported" and r["value"] == 1.0 for r in e.values())
    assert "hidden states after layer 1 (paper)" in e["l2, α=0, d=64, layer 2 (paper)"]["note"]


def test_claim2e_rows_alone_are_not_enough():
    """Rising with the key but also with the query: a nearer key scores higher, a nearer query lower."""
    both_up = with_diagonal(0.1 + 0.2 * J / S + 0.3 * I / S)
    (e,) = claim2_figure1_cosine(inputs([sim_table("zero", [identity(), both_up])]), TH)[1:]
    assert e["value"] == 0.0 and e["verdict"] == "not supported"
    assert "keys at a fixed query 1.0000" in e["note"] and "queries at a fixed key 0.0000" in e["note"]


def test_claim2e_needs_alpha_zero():
    rows = claim2_figure1_cosine(inputs([sim_table("pos", [identity(0.2), identity(0.3)], alpha=0.2)]), TH)
    (e,) = [r for r in rows if r["claim_id"] == "2e"]
    assert e["verdict"] == "inconclusive" and "at α=0" in e["note"]


# ---------------------------------------------------------------- 3d: saturation layer by layer


def linear_rows() -> np.ndarray:
    return with_diagonal(0.1 + 0.3 * J / S)  # unsaturated share 1/2 in every row


def jump_rows() -> np.ndarray:
    return with_diagonal(0.1 + 0.3 * (J >= 1))  # at its end value after the first key


def query_share_by_loops(matrix: np.ndarray) -> float:
    """1 - eta² of the off-diagonal scores on the key: pooled within-key variance over the total."""
    values = [(j, matrix[i, j]) for i in range(S) for j in range(i)]
    s = np.array([v for _, v in values])
    within = sum((v - np.mean([w for k, w in values if k == j])) ** 2 for j, v in values)
    return within / len(s) / s.var()


def test_claim3d_more_saturated_later_is_supported_both_ways():
    query_part = 0.05 * (I / S) ** 2
    layers = [identity(0.2), linear_rows() + query_part, jump_rows() + 0.3 * query_part]
    d = by_setting(claim3_by_layer(inputs([sim_table("pos", layers, alpha=0.2)]), TH), "3d")
    j_row = d["l2, α=0.2, d=64, in j (3c's unsaturated share), layers 3-3 vs 2 (paper)"]
    i_row = d["l2, α=0.2, d=64, in i (3a's query share), layers 3-3 vs 2 (paper)"]
    # jump rows: each row has one unsaturated key of its n, pooled over rows n = 2 .. S-1; linear rows: 1/2
    expected_j = ((S - 2) / sum(range(2, S))) / 0.5
    assert j_row["value"] == pytest.approx(expected_j, rel=0.02) and j_row["verdict"] == "supported"
    expected_i = query_share_by_loops(layers[2]) / query_share_by_loops(layers[1])
    assert i_row["value"] == pytest.approx(expected_i, rel=0.02) and i_row["verdict"] == "supported"
    assert "query share by layer" in i_row["note"] and "3a's threshold 0.1" in i_row["note"]


def test_claim3d_less_saturated_later_is_not_supported():
    query_part = 0.05 * (I / S) ** 2
    layers = [identity(0.4), jump_rows() + 0.3 * query_part, linear_rows() + query_part, linear_rows() + query_part]
    rows = claim3_by_layer(inputs([sim_table("pos", layers, alpha=0.4)]), TH)
    assert [r["verdict"] for r in rows] == ["not supported", "not supported"]
    assert all("layers 3-4 vs 2 (paper)" in r["setting"] and "layer 4 (paper)" in r["note"] for r in rows)


def test_claim3d_every_later_layer_counts():
    """More saturated in j at layer 3, less at layer 4 (rows that rise late): the largest ratio decides."""
    late_rows = with_diagonal(0.1 + 0.3 * (J / S) ** 4)
    layers = [identity(0.2), linear_rows(), jump_rows(), late_rows]
    j_row = claim3_by_layer(inputs([sim_table("pos", layers, alpha=0.2)]), TH)[0]
    assert "in j" in j_row["setting"] and j_row["value"] > 1 and j_row["verdict"] == "not supported"
    ratios = j_row["note"].split("ratio to layer 2 (paper): ")[1]
    assert float(ratios.split("layer 3 (paper) ")[1].split(",")[0]) < 1  # layer 3 alone would pass


def test_claim3d_needs_alpha_above_zero_and_a_later_layer():
    for sims in (
        [sim_table("zero", [identity(), linear_rows(), jump_rows()])],
        [sim_table("pos", [identity(0.2), linear_rows()], alpha=0.2)],
    ):
        (d,) = claim3_by_layer(inputs(sims), TH)
        assert d["verdict"] == "inconclusive" and "α > 0 and >= 3 layers" in d["note"]


@pytest.mark.parametrize("sem", [0.0, 1e-4])
def test_query_free_layer2_leaves_nothing_to_compare(sem):
    """Layer 2 independent of the query: its share is 0 (float rounding) or noise, never a denominator."""
    layers = [identity(0.2), linear_rows(), linear_rows() + 0.05 * (I / S) ** 2]
    rows = by_setting(claim3_by_layer(inputs([sim_table("pos", layers, alpha=0.2, sem=sem)]), TH), "3d")
    i_row = rows["l2, α=0.2, d=64, in i (3a's query share), layers 3-3 vs 2 (paper)"]
    assert np.isnan(i_row["value"]) and i_row["verdict"] == "inconclusive"
    assert "is not resolved above 0: no ratio" in i_row["note"]


# ---------------------------------------------------------------- the ledger: the new claims in their places


def test_new_claims_sit_after_their_neighbours_in_the_ledger():
    sims = [
        sim_table("zero", [identity(), layer2_scores(S, 0.0), linear_rows()]),
        sim_table("pos", [identity(0.2), linear_rows() + 0.05 * (I / S) ** 2, jump_rows()], alpha=0.2),
    ]
    ledger = build_ledger(
        pd.concat(sims, ignore_index=True), theory_frame(S, [0.0, 0.2]), None, None, None, n_bootstrap=R
    )
    order = list(dict.fromkeys(ledger["claim_id"]))
    assert order == [c for c in CLAIMS if c in order]  # the catalogue's order
    for before, new, after in (("2c", "2d", "2e"), ("2d", "2e", "3a"), ("3c", "3d", "4a")):
        assert order.index(before) < order.index(new) < order.index(after)
    assert ledger.loc[ledger["claim_id"].isin(["2d", "2e", "3d"]), "p_value"].notna().all()
