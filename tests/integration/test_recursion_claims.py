"""Claim 10 (ours): the large-d recursion against Monte Carlo in the ledger (analysis/claims/large_d.py).

The recursion tables are the real module's (simulation.recursion.recursion_table) or, for claim 10c, made by
hand with a known shape; the Monte Carlo tables are a known matrix plus recorded noise (helpers.sim_table).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from causalpos.analysis.claims.ledger import build_ledger
from causalpos.simulation.recursion import recursion_table
from causalpos.simulation.variant import Variant
from helpers import R, long, sim_table

N = 12  # positions
LAYERS = 4


def matrices(table: pd.DataFrame, column: str, n: int = N) -> list[np.ndarray]:
    """The recursion's [layer] S x S matrices of `column` (NaN where the table has no pair)."""
    out = []
    for layer in sorted(table["layer"].unique()):
        rows = table[table["layer"] == layer]
        m = np.full((n, n), np.nan)
        m[rows["query_pos"], rows["key_pos"]] = rows[column]
        out.append(m)
    return out


def ledger(simulations, recursion, **kw) -> pd.DataFrame:
    sims = pd.concat(simulations, ignore_index=True) if isinstance(simulations, list) else simulations
    return build_ledger(sims, None, None, None, None, n_bootstrap=R, recursion=recursion, **kw)


def rows_of(table: pd.DataFrame, claim_id: str) -> pd.DataFrame:
    return table[table["claim_id"] == claim_id]


@pytest.fixture(scope="module")
def l2_recursion() -> pd.DataFrame:
    return recursion_table({"l2_alpha0.0": Variant(seq_len=N, n_layers=LAYERS, d=64)})


def test_monte_carlo_equal_to_the_recursion_up_to_noise_is_supported(l2_recursion):
    truth = matrices(l2_recursion, "score_corrected")
    table = ledger(sim_table("l2_alpha0.0", truth, sem=1e-4), l2_recursion)
    for claim_id in ("10a", "10b"):
        (got,) = rows_of(table, claim_id).itertuples()
        assert got.verdict == "supported" and got.value > 0.99, got
        assert "finite-d corrected" in got.note and "layers 2-4 (paper)" in got.setting
    # the claim is a test of the ledger's family, after claim 9 in the ledger (and before claim 11's absent row)
    assert list(table["claim"]) == sorted(table["claim"]) and list(table["claim"].iloc[-2:]) == [10, 11]
    assert np.isfinite(rows_of(table, "10a")["p_adjusted"]).all()


def test_a_pattern_the_recursion_does_not_predict_is_not_supported(l2_recursion):
    truth = matrices(l2_recursion, "score_corrected")
    rng = np.random.default_rng(1)
    wrong = [truth[0]] + [np.where(np.isnan(m), np.nan, rng.uniform(-0.2, 0.2, m.shape)) + np.eye(N) for m in truth[1:]]
    table = ledger(sim_table("l2_alpha0.0", wrong, sem=1e-4), l2_recursion)
    assert rows_of(table, "10a")["verdict"].tolist() == ["not supported"]
    assert rows_of(table, "10b")["verdict"].tolist() == ["not supported"]
    # a scale and an offset change R² (10b) but not the shape (10a)
    scaled = [truth[0]] + [np.where(np.eye(N) == 1, 1.0, 0.5 * m + 0.1) for m in truth[1:]]
    table = ledger(sim_table("l2_alpha0.0", scaled, sem=1e-4), l2_recursion)
    assert rows_of(table, "10a")["verdict"].tolist() == ["supported"]
    assert rows_of(table, "10b")["verdict"].tolist() == ["not supported"]


def test_a_window_compares_the_visible_pairs_only():
    window = 4
    recursion = recursion_table({"l2_w4": Variant(seq_len=N, n_layers=LAYERS, d=64, window=window)})
    truth = matrices(recursion, "score_corrected")
    hidden = np.subtract.outer(np.arange(N), np.arange(N)) >= window
    garbage = [np.where(hidden, 5.0, m) for m in truth]  # what a hidden pair holds must not count
    table = ledger(sim_table("l2_w4", garbage, sem=1e-4, window=window), recursion)
    (got,) = rows_of(table, "10a").itertuples()
    assert got.verdict == "supported" and f"window {window}" in got.setting
    assert rows_of(table, "10b")["verdict"].tolist() == ["supported"]


def test_sqrt_d_layernorm_says_the_recursion_is_no_limit_there():
    recursion = recursion_table({"ln": Variant(norm="layernorm", scale="sqrt_d", seq_len=N, n_layers=3, d=64)})
    table = ledger(sim_table("ln", matrices(recursion, "score"), sem=1e-4, norm="layernorm", scale="sqrt_d"), recursion)
    (got,) = rows_of(table, "10a").itertuples()
    assert "leading order" in got.note and "do not concentrate" in got.note


def test_without_a_recursion_table_every_claim_10_row_says_so(l2_recursion):
    table = ledger(sim_table("l2_alpha0.0", matrices(l2_recursion, "score")), None)
    rows = table[table["claim_id"].isin(["10a", "10b", "10c"])]
    assert sorted(rows["claim_id"]) == ["10a", "10b", "10c"]
    assert set(rows["verdict"]) == {"inconclusive"} and rows["note"].str.contains("no recursion table").all()
    # 10d-10e read the window test's table, absent here: they say so too
    windows = table[table["claim_id"].isin(["10d", "10e"])]
    assert sorted(windows["claim_id"]) == ["10d", "10e"] and set(windows["verdict"]) == {"inconclusive"}
    assert windows["note"].str.contains("no windows-lifted extraction: target window_control").all()


# ---------------------------------------------------------------- 10c: which rows stop rising


S = 10


def rising(n: int = S) -> np.ndarray:
    """Rows strictly rising in the key (by 0.01 a step), 1 on the diagonal."""
    i, j = np.indices((n, n))
    return np.where(i == j, 1.0, 0.1 + 0.01 * j)


def breaking(rows, peak: int, n: int = S) -> np.ndarray:
    """rising(), but in `rows` the keys after `peak` fall back by 0.02 a step."""
    m = rising(n)
    for q in rows:
        for k in range(peak + 1, q):
            m[q, k] = m[q, peak] - 0.02 * (k - peak)
    return m


def flat_after(m: np.ndarray, row: int, peak: int) -> np.ndarray:
    """`m` with row `row` flat from key `peak` to the diagonal: neither rising nor resolvedly falling."""
    m = m.copy()
    m[row, peak + 1 : row] = m[row, peak]
    return m


def hand_recursion(name: str, layers: list[np.ndarray]) -> pd.DataFrame:
    frames = [long(m).assign(layer=layer) for layer, m in enumerate(layers)]
    out = pd.concat(frames, ignore_index=True).rename(columns={"value": "score"})
    return out.assign(variant=name, concentrates=True, corrected=False, score_corrected=np.nan)


@pytest.mark.parametrize(
    "predicted, simulated, verdict, words",
    [
        # the recursion predicts the break of rows 7-9 and Monte Carlo resolves it
        (breaking([7, 8, 9], 3), breaking([7, 8, 9], 3), "supported", "Monte Carlo resolves violated: 7-9"),
        # Monte Carlo resolves a break the recursion does not predict
        (rising(), breaking([8, 9], 4), "not supported", "missed: 8-9"),
        # a predicted break whose peak Monte Carlo resolves below the nearest key
        (breaking([9], 2), rising(), "not supported", "contradicted: 9"),
        # a predicted break Monte Carlo does not resolve (row 7 flat after its peak): no agreement either
        (breaking([7, 8, 9], 3), flat_after(breaking([8, 9], 3), 7, 3), "not supported", "predicted, not resolved: 7"),
        # neither names a row: nothing to agree on, no credit
        (rising(), rising(), "inconclusive", "neither names a row"),
    ],
)
def test_10c_names_the_rows_that_stop_rising(predicted, simulated, verdict, words):
    recursion = hand_recursion("l2_alpha0.0", [np.eye(S), predicted])
    table = ledger(sim_table("l2_alpha0.0", [np.eye(S), simulated], sem=1e-4), recursion)
    (got,) = rows_of(table, "10c").itertuples()
    assert got.verdict == verdict and words in got.note, got.note
    assert np.isnan(got.p_value) and got.row_kind == "decision"  # outside the family (resolutions made family-wise)


def test_10c_is_the_share_of_the_named_rows_both_name_against_a_baseline():
    """Predicted 6-9, resolved 8-9 (and so 6-7 predicted, not resolved): 2 of the 4 named rows agree; the baseline
    of a predictor naming every row breaking is 2 resolved of the S - 2 rows that can break."""
    recursion = hand_recursion("l2_alpha0.0", [np.eye(S), breaking([6, 7, 8, 9], 3)])
    table = ledger(sim_table("l2_alpha0.0", [np.eye(S), breaking([8, 9], 3)], sem=1e-4), recursion)
    (got,) = rows_of(table, "10c").itertuples()
    assert got.value == pytest.approx(2 / 4) and f"every row predicted to break): {2 / (S - 2):.3g}" in got.note


def test_claim_10_is_a_family_of_its_own(l2_recursion):
    """Our claim's tests take no power from the paper's: its rows leave every other row's adjusted p as it is,
    and its own adjusted p's are Holm over its rows alone."""
    from causalpos.analysis.claims.family import adjust

    sims = sim_table("l2_alpha0.0", matrices(l2_recursion, "score_corrected"), sem=1e-3)
    with_ten, without = ledger(sims, l2_recursion), ledger(sims, None)
    paper = with_ten[with_ten["claim"] != 10].reset_index(drop=True)
    pd.testing.assert_frame_equal(paper, without[without["claim"] != 10].reset_index(drop=True))
    ten = with_ten[with_ten["claim"] == 10]
    tests = ten[np.isfinite(ten["p_value"])]
    alone = pd.DataFrame(adjust(tests.drop(columns=["p_adjusted", "p_against_adjusted"]).to_dict("records"), 0.05))
    assert np.allclose(alone["p_adjusted"], tests["p_adjusted"]) and len(tests) == 2
