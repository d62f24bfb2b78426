"""Claims 7k-7n and the first-keys sweep of claim 7 on synthetic model tables whose verdicts are known in advance."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from causalpos.catalogue.claims import EXTRA_COLUMNS
from causalpos.analysis.claims.ledger import build_ledger, ledger_markdown
from causalpos.analysis.claims.model_claims import FAR_KEYS, KEY_SWEEP, KEYS_FROM, SWEEP_COLUMNS, sweep_columns
from causalpos.analysis.triangles import FIRST_KEYS, diagonal_and_off_correlation, query_share, query_spread_ratio
from causalpos.simulation.theory import g_no_residual, h_no_residual, theory_frame
from helpers import R, R_LEDGER, model_tables, packed

N = 20  # positions: k = 16 of the sweep still leaves rows with two keys
I, J = np.indices((N, N))
EYE = np.eye(N, dtype=bool)
P = np.arange(N)  # 0-based positions; the paper's i = p + 1


def ledger_of(scores, inter, groups, theory=None):
    return build_ledger(None, theory, scores, inter, groups, n_bootstrap=R_LEDGER)


def one(ledger: pd.DataFrame, claim_id: str) -> pd.Series:
    rows = ledger[ledger["claim_id"] == claim_id]
    assert len(rows) == 1, rows[["setting", "value", "verdict"]]
    return rows.iloc[0]


def nope(stages: dict, layers: list | None = None, noise: float = 0.01, seed: int = 0):
    """The tables of a trained model "nope": scores `layers` (two identities by default), stages at layer 0, (h)
    and (i) at layer 1 (the next layer's, as the extraction records them)."""
    layers = layers or [np.eye(N), np.eye(N)]
    return model_tables(
        "nope",
        "trained",
        layers,
        stages={s: (1 if s in "hi" else 0, m) for s, m in stages.items()},
        noise=noise,
        seed=seed,
    )


def brute_concordance(matrix: np.ndarray, k: int) -> float:
    """Share of key pairs j < j' < q, j >= k, with the nearer key higher (ties one half), by loops."""
    up = pairs = 0.0
    for q in range(k + 2, matrix.shape[0]):
        for j in range(k, q):
            for jj in range(j + 1, q):
                pairs += 1
                up += 1.0 if matrix[q, jj] > matrix[q, j] else 0.5 if matrix[q, jj] == matrix[q, j] else 0.0
    return up / pairs


def mean_matrix(inter: pd.DataFrame, stage: str) -> np.ndarray:
    rows = inter[inter["stage"] == stage]
    out = np.full((N, N), np.nan)
    out[rows["query_pos"], rows["key_pos"]] = rows["value"]
    return out


# ---------------------------------------------------------------- one treatment of the first keys


def test_the_sweep_is_built_from_the_sink_and_8ds_first_keys():
    assert KEYS_FROM == 1 and KEY_SWEEP == (0, KEYS_FROM, KEYS_FROM + FIRST_KEYS, FAR_KEYS)
    assert set(SWEEP_COLUMNS) <= set(EXTRA_COLUMNS)  # else the ledger would drop them silently
    assert sweep_columns(KEYS_FROM)[0] not in SWEEP_COLUMNS  # k = 1 is the row's own value


def test_a_bright_band_over_the_first_keys_lowers_the_order_only_while_it_is_in():
    """Keys rising with the position, plus a query-independent bright band over keys 1..FIRST_KEYS and a sink at
    key 0: the key order fails at k = 0 and 1 and holds once the band is left out (k = 1 + FIRST_KEYS)."""
    pattern = np.where(EYE, 1.0, 0.1 + J / N)
    pattern[:, 1 : 1 + FIRST_KEYS] += 2.0  # above every later key
    pattern[:, 0] = 5.0
    np.fill_diagonal(pattern, 1.0 + 2.0)
    scores, inter, groups = nope({"f": pattern, "i": pattern})
    ledger = ledger_of(scores, inter, groups)
    rows = ledger[ledger["claim_id"] == "7a"]
    assert len(rows) == 2
    mean = mean_matrix(inter, "i")
    for _, r in rows.iterrows():
        by_k = {k: r["value"] if k == KEYS_FROM else r[sweep_columns(k)[0]] for k in KEY_SWEEP}
        for k, value in by_k.items():  # each cut is the concordance of the same matrix over keys >= k
            assert value == pytest.approx(brute_concordance(mean, k), abs=1e-12), k
        assert by_k[0] < 0.75 and by_k[1] < 0.75 and by_k[KEYS_FROM + FIRST_KEYS] == 1.0 and by_k[FAR_KEYS] == 1.0
        assert r["verdict"] == "not supported"  # the verdict stays on keys >= 1
    markdown = ledger_markdown(ledger)
    assert "| k = 0 | k = 1 | k = 5 | k = 16 |" in markdown
    # 8d's "first few keys" are the keys this cut leaves out besides the sink
    assert f"k = {KEYS_FROM + FIRST_KEYS} leaves out the sink and the first few keys of 8d" in markdown


def test_a_matrix_too_small_for_a_cut_gives_nan_not_an_error():
    small = np.where(np.eye(8, dtype=bool), 1.0, 0.1 + np.indices((8, 8))[1] / 8)
    scores, inter, groups = model_tables("nope", "trained", [np.eye(8), small], stages={"i": (1, small)}, noise=0.01)
    ledger = build_ledger(None, None, scores, inter, groups, n_bootstrap=R_LEDGER)
    row = one(ledger[ledger["label"] == "nope (i)"], "7a")
    assert np.isnan(row[sweep_columns(FAR_KEYS)[0]]) and row[sweep_columns(KEYS_FROM + FIRST_KEYS)[0]] == 1.0


# ---------------------------------------------------------------- 7k: (e) almost identical to (d)


def gram(seed: int) -> np.ndarray:
    """A Gram-like matrix: a falling diagonal and an off-diagonal pattern in i and j."""
    rng = np.random.default_rng(seed)
    off = 0.2 + 0.1 * np.sin(I / 3.0) + 0.05 * rng.normal(size=(N, N))
    return np.where(EYE, 1.0 / (1.0 + P), off)


def test_the_correlations_of_7k_are_pearsons():
    d, e = gram(1), gram(2)
    r_diag, r_off = diagonal_and_off_correlation(packed(d)[:, None], packed(e)[:, None], N, KEYS_FROM)
    keys = (J < I) & (J >= KEYS_FROM)
    assert r_off[0] == pytest.approx(stats.pearsonr(d[keys], e[keys])[0], rel=1e-10)
    assert r_diag[0] == pytest.approx(stats.pearsonr(np.diag(d)[1:], np.diag(e)[1:])[0], rel=1e-10)


@pytest.mark.parametrize("same", [True, False])
def test_7k_residual_that_keeps_or_replaces_the_trend(same):
    d = gram(1)
    e = 2.0 * d + 0.5 if same else gram(2)[::-1, ::-1].copy()  # a shift and a scale, or another matrix
    e = np.where(J <= I, e, 0.0)
    ledger = ledger_of(*nope({"d": d, "e": e}))
    row = one(ledger, "7k")
    assert row["verdict"] == ("supported" if same else "not supported"), row[["value", "uncertainty", "note"]]
    if same:
        assert row["value"] > 0.99
    assert "r diagonal" in row["note"] and "(e)" in row["setting"]


def test_7k_needs_both_stages():
    row = one(ledger_of(*nope({"d": gram(1)})), "7k")
    assert row["verdict"] == "inconclusive" and "no stage e" in row["note"]


# ---------------------------------------------------------------- 7l: (c)'s diagonal and h'(i)^2


def stage_c(diagonal: np.ndarray, off: np.ndarray | float = 0.05) -> np.ndarray:
    return np.where(EYE, diagonal[:, None], off)


H2 = h_no_residual(P + 1.0, 0.0) ** 2  # A.2's squared norm at alpha = 0, positions 0..N-1


@pytest.mark.parametrize(
    "diagonal, verdict_7l, verdict_7f",
    [
        (3.0 * H2 + 0.2, "supported", "supported"),  # the closed form, scaled and shifted
        (3.0 * H2[::-1] + 0.2, "not supported", "not supported"),  # reversed: it rises
        (1.0 - P / N, "not supported", "supported"),  # a straight fall: 7f holds, the shape does not
    ],
)
def test_7l_the_diagonal_of_c_against_h_prime_squared(diagonal, verdict_7l, verdict_7f):
    ledger = ledger_of(*nope({"c": stage_c(diagonal)}), theory=theory_frame(N, [0.0, 0.2]))
    row = one(ledger, "7l")
    expected = stats.pearsonr(diagonal[KEYS_FROM:], H2[KEYS_FROM:])[0]
    assert row["value"] == pytest.approx(expected, abs=1e-3)  # the noise of the table's means only (h' itself: -0.014)
    assert row["verdict"] == verdict_7l and one(ledger, "7f")["verdict"] == verdict_7f
    assert row[sweep_columns(0)[0]] == pytest.approx(stats.pearsonr(diagonal, H2)[0], abs=1e-3)


def test_7l_on_a_shorter_theory_table_uses_the_common_positions():
    diagonal = 3.0 * H2 + 0.2
    ledger = ledger_of(*nope({"c": stage_c(diagonal)}), theory=theory_frame(N - 6, [0.0]))
    row = one(ledger, "7l")
    assert f"positions 1-{N - 7} only" in row["note"]
    assert row["value"] == pytest.approx(stats.pearsonr(diagonal[1 : N - 6], H2[1 : N - 6])[0], abs=1e-3)
    no_theory = one(ledger_of(*nope({"c": stage_c(diagonal)})), "7l")
    assert no_theory["verdict"] == "inconclusive" and "no theory table" in no_theory["note"]


# ---------------------------------------------------------------- 7m: g'(i) only weakly dependent on i


def test_7m_the_closed_forms_pass_and_rows_that_move_more_than_the_diagonal_fail():
    rows_g = g_no_residual(P + 1.0, 0.0)
    closed = stage_c(H2, rows_g[:, None])  # g'(i) off the diagonal, h'(i)^2 on it
    loud = stage_c(H2, 3.0 * H2[:, None])  # off-diagonal rows falling three times as much as the diagonal
    # why not 7c's query share: g' is a function of i alone, so nearly all its variance is the query's
    assert query_share(packed(closed)[:, None], N, KEYS_FROM)[0] > 0.7
    ledger = ledger_of(*nope({"c": closed}), theory=theory_frame(N, [0.0]))
    row = one(ledger, "7m")
    means = np.array([rows_g[q] for q in range(KEYS_FROM + 1, N)])  # every row's mean is g'(i)
    expected = means.std() / H2[KEYS_FROM:].std()
    assert row["value"] == pytest.approx(expected, abs=2e-3) and row["verdict"] == "supported"
    assert f"S = {N}: {expected:.3g}" in row["note"]  # the closed forms' own ratio, from the theory table
    assert one(ledger_of(*nope({"c": loud})), "7m")["verdict"] == "not supported"


def test_query_spread_ratio_by_hand():
    m = stage_c(H2, (0.3 + 0.01 * I + 0.02 * J))
    row_means = [m[q, KEYS_FROM:q].mean() for q in range(KEYS_FROM + 1, N)]
    expected = np.std(row_means) / np.diag(m)[KEYS_FROM:].std()
    assert query_spread_ratio(packed(m)[:, None], N, KEYS_FROM)[0] == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------- 7n: Figure 8, the later layers


def test_7n_one_row_per_layer_after_i():
    """7n reads each later layer diagonal-normalised (as the authors draw Figure 8): a key-driven rise survives
    band-centring, a fall too (not supported), and a purely relative map, which rises in every raw row, has
    nothing left once its diagonals' means are out (not supported either, at about one half)."""
    rising, falling = np.where(EYE, 1.0, J / N), np.where(EYE, 1.0, 1.0 - J / N)
    relative = np.where(J <= I, np.exp(-(I - J) / 3.0), 0.0)  # nearer keys higher in every row, by offset alone
    assert brute_concordance(relative, KEYS_FROM) == 1.0
    layers = [np.eye(N), rising, rising, falling, relative]  # (i) is layer 1 (0-based): 7n reads layers 2-4
    tables = nope({"i": rising}, layers=layers)
    ledger = ledger_of(*tables)
    rows = ledger[ledger["claim_id"] == "7n"]
    assert list(rows["layer"]) == [2, 3, 4] and list(rows["label"]) == ["nope L3", "nope L4", "nope L5"]
    assert list(rows["verdict"]) == ["supported", "not supported", "not supported"]
    assert rows["value"].iloc[1] == pytest.approx(0.0)
    assert abs(rows["value"].iloc[2] - 0.5) < 0.1
    # the value is the brute-force concordance of the measured mean map, diagonal-normalised by hand: each
    # off-diagonal band of keys >= 1 minus its mean
    scores = tables[0]
    for layer, value in zip(rows["layer"], rows["value"]):
        mean = np.full((N, N), np.nan)
        own = scores[scores["layer"] == layer]
        mean[own["query_pos"], own["key_pos"]] = own["score_mean"]
        centred = mean.copy()
        for offset in range(1, N - KEYS_FROM):
            band = [(q, q - offset) for q in range(KEYS_FROM + offset, N)]
            band_mean = np.mean([mean[q, k] for q, k in band])
            for q, k in band:
                centred[q, k] = mean[q, k] - band_mean
        assert value == pytest.approx(brute_concordance(centred, KEYS_FROM), abs=1e-12)
    shallow = ledger_of(*nope({"i": rising}, layers=[np.eye(N), rising]))
    assert one(shallow, "7n")["verdict"] == "inconclusive" and "after layer 2 (paper)" in one(shallow, "7n")["note"]
