"""The claims ledger on synthetic tables whose verdicts are known in advance."""

import math

import numpy as np
import pandas as pd
import pytest

from causalpos.analysis import triangles
from causalpos.catalogue.claims import (
    CLAIMS,
    EXTRA_COLUMNS,
    LEDGER_CLAIMS,
    LEDGER_COLUMNS,
    THRESHOLDS,
    VERDICTS,
    verdict,
)
from causalpos.analysis.claims.family import one_sided
from causalpos.analysis.claims.ledger import build_ledger, headline, ledger_markdown
from causalpos.analysis.claims.replicates import LedgerInputs, estimate, stack
from causalpos.analysis.triangles import advantage_weights, band_statistics, concordance, nearer_key_advantage
from causalpos.simulation.theory import layer2_scores, theory_frame
from helpers import (
    I,
    J,
    LOWER,
    R,
    R_LEDGER,
    S,
    identity,
    keys_up,
    llm_tables,
    model_tables,
    nope_tables,
    packed,
    sim_table,
    small_inputs,
    toeplitz,
    with_diagonal,
)


# ---------------------------------------------------------------- reading the ledger (synthetic tables: helpers.py)


def rows_of(ledger: pd.DataFrame, claim_id: str) -> pd.DataFrame:
    rows = ledger[ledger["claim_id"] == claim_id]
    assert len(rows), claim_id
    return rows


def one(ledger: pd.DataFrame, claim_id: str) -> pd.Series:
    rows = rows_of(ledger, claim_id)
    assert len(rows) == 1, rows[["setting", "value", "verdict"]]
    return rows.iloc[0]


def ledger_of(simulations=None, theory=None, scores=None, intermediates=None, groups=None, **kw):
    sims = pd.concat(simulations, ignore_index=True) if isinstance(simulations, list) else simulations
    return build_ledger(sims, theory, scores, intermediates, groups, n_bootstrap=kw.pop("n_bootstrap", R_LEDGER), **kw)


# ---------------------------------------------------------------- the verdict rule and the metrics


def test_verdict_rule():
    """The verdict of one row (a family of one): its one-sided p's against alpha."""
    assert verdict(*one_sided(1.0, 0.1, 0.5, ">")) == "supported"  # 5 SE above
    assert verdict(*one_sided(0.65, 0.1, 0.5, ">")) == "inconclusive"  # 1.5 SE: p = 0.067
    assert verdict(*one_sided(0.7, 0.1, 0.5, ">")) == "supported"  # 2 SE: p = 0.023
    assert verdict(*one_sided(0.7, 0.1, 0.5, ">"), alpha=0.01) == "inconclusive"
    assert verdict(*one_sided(0.2, 0.1, 0.5, ">")) == "not supported"
    assert verdict(*one_sided(0.2, 0.1, 0.5, "<")) == "supported"
    assert verdict(*one_sided(1.0, 0.1, 0.5, "<")) == "not supported"
    assert verdict(*one_sided(np.nan, 0.1, 0.5, ">")) == "inconclusive"
    assert verdict(*one_sided(1.0, np.nan, 0.5, ">")) == "inconclusive"  # no uncertainty, no verdict
    with pytest.raises(ValueError, match="direction"):
        one_sided(1.0, 0.1, 0.5, ">=")


def test_band_statistics_by_loops():
    """The variance share and left-region deficit against a direct computation with plain loops."""
    rng = np.random.default_rng(3)
    matrix = toeplitz() + rng.normal(0, 0.2, (S, S)) + 1.0 / (1.0 + J)
    stats = band_statistics(packed(matrix)[:, None], S)
    left_keys = max(2, int(np.ceil(0.25 * S)))
    for kmin in (0, 1):
        pairs = [(i, j) for i in range(S) for j in range(kmin, i)]
        bands = {}
        for i, j in pairs:
            bands.setdefault(i - j, []).append(matrix[i, j])
        pattern = {(i, j): matrix[i, j] - np.mean(bands[i - j]) for i, j in pairs}
        scores = np.array([matrix[p] for p in pairs])
        share = np.var(list(pattern.values())) / np.var(scores)
        left = np.mean([pattern[(i, j)] for i, j in pairs if j < left_keys])
        assert stats[f"share{kmin}"][0] == pytest.approx(share, rel=1e-10)
        assert stats[f"left{kmin}"][0] == pytest.approx(left, rel=1e-10)
        assert stats[f"deficit{kmin}"][0] == pytest.approx(left / scores.std(), rel=1e-10)


def test_concordance_and_advantage_by_loops():
    matrix = np.random.default_rng(1).normal(size=(S, S))
    x = packed(matrix)[:, None]
    for kmin in (0, 1):
        steps = [matrix[i, b] - matrix[i, a] for i in range(S) for a in range(kmin, i) for b in range(a + 1, i)]
        assert nearer_key_advantage(x, S, kmin)[0] == pytest.approx(np.mean(steps))
        assert concordance(x, S, kmin)[0] == pytest.approx(np.mean(np.array(steps) > 0))
    assert concordance(packed(keys_up(1.0))[:, None], S)[0] == 1.0
    assert concordance(packed(keys_up(-1.0))[:, None], S)[0] == 0.0
    assert concordance(packed(keys_up(0.0))[:, None], S)[0] == 0.5  # ties count one half


def test_antisymmetric_share():
    u = np.random.default_rng(2).normal(size=S)
    symmetric = u[I] + u[S - 1 - J]  # s(i, j) = s(S-1-j, S-1-i): symmetric about the anti-diagonal
    assert triangles.antisymmetric_share(packed(symmetric)[:, None], S)[0] == pytest.approx(0.0, abs=1e-12)
    assert triangles.antisymmetric_share(packed(toeplitz())[:, None], S)[0] == pytest.approx(0.0, abs=1e-12)
    assert triangles.antisymmetric_share(packed(u[I] - u[S - 1 - J])[:, None], S)[0] == pytest.approx(1.0)


# ---------------------------------------------------------------- claim 1: Eq. 4


def eq4_variants(gap_of_d, ds=(16, 32, 64), alpha=0.0, sem=1e-4):
    return [
        sim_table(
            f"v{d}",
            [identity(alpha), layer2_scores(S, alpha) + gap_of_d(d) * LOWER, keys_up(0.2)],
            sem=sem,
            seed=d,
            d=d,
            alpha=alpha,
        )
        for d in ds
    ]


def test_claim1_closed_form_plus_noise_is_supported():
    ledger = ledger_of(eq4_variants(lambda d: -0.03 / d), theory_frame(S, [0.0]))
    a = rows_of(ledger, "1a")
    assert list(a["verdict"]) == ["supported"] * 3
    assert (a["value"] > 0.95).all() and (a["uncertainty"] < 0.01).all()
    b = one(ledger, "1b")
    assert b["value"] == pytest.approx(-1.0, abs=0.1) and b["verdict"] == "supported"


def test_claim1_gap_within_noise_gives_no_trend():
    ledger = ledger_of(eq4_variants(lambda d: 0.0), theory_frame(S, [0.0]))
    assert (rows_of(ledger, "1a")["verdict"] == "supported").all()
    b = one(ledger, "1b")  # the gap is noise at every d: no slope to measure
    assert b["verdict"] == "inconclusive" and "below the noise" in b["note"]


def test_claim1_wrong_pattern_and_growing_gap_are_not_supported():
    flat = [sim_table("flat", [identity(), keys_up(0.0)])]
    ledger = ledger_of(flat, theory_frame(S, [0.0]))
    assert one(ledger, "1a")["verdict"] == "not supported"
    growing = ledger_of(eq4_variants(lambda d: 1e-4 * d), theory_frame(S, [0.0]))
    assert one(growing, "1b")["verdict"] == "not supported"


def test_claim1_needs_the_theory_at_that_alpha():
    ledger = ledger_of(eq4_variants(lambda d: 0.0, alpha=0.3), theory_frame(S, [0.0]))
    a = rows_of(ledger, "1a")
    assert (a["verdict"] == "inconclusive").all() and a["value"].isna().all()
    assert a["note"].str.contains("theory table has no alpha = 0.3").all()


# ---------------------------------------------------------------- claim 2: nearer keys score higher


def test_claim2_increasing_matrix_is_supported_and_grows():
    sims = [sim_table("a", [identity(), keys_up(0.1), keys_up(0.2), keys_up(0.3)])]
    ledger = ledger_of(sims)
    assert one(ledger, "2a")["verdict"] == "supported"
    b = rows_of(ledger, "2b")
    assert list(b["layer"]) == [2, 3] and list(b["verdict"]) == ["supported", "supported"]
    assert b["value"].tolist() == pytest.approx([2.0, 3.0], rel=0.01)
    assert "layer 3 (paper)" in b.iloc[0]["setting"]


@pytest.mark.parametrize("slope", [0.0, -0.1])
def test_claim2_flat_or_decreasing_matrix_is_not_supported(slope):
    sims = [sim_table("a", [identity(), keys_up(slope), keys_up(0.2), keys_up(0.3)])]
    ledger = ledger_of(sims)
    row = one(ledger, "2a")
    assert row["verdict"] == "not supported"
    assert row["value"] == pytest.approx(0.5 if slope == 0 else 0.0, abs=0.1)
    assert rows_of(ledger, "2b")["verdict"].eq("inconclusive").all()  # nothing at layer 2 to grow from


def test_claim2_weaker_later_layers_are_not_supported():
    ledger = ledger_of([sim_table("a", [identity(), keys_up(0.3), keys_up(0.1), keys_up(0.3)])])
    assert list(rows_of(ledger, "2b")["verdict"]) == ["not supported", "inconclusive"]


# ---------------------------------------------------------------- claim 3: alpha > 0


def test_claim3_query_independent_pattern_is_supported():
    query_free = keys_up(0.2)
    query_bound = with_diagonal(0.5 / (1.0 + I) + 0.01 * J / S)  # decays with the query
    sims = [
        sim_table("zero", [identity(), query_bound]),
        sim_table("pos", [identity(0.2), query_free], alpha=0.2),
        sim_table("bound", [identity(0.4), query_bound], alpha=0.4),
    ]
    ledger = ledger_of(sims)
    a = rows_of(ledger, "3a").set_index("label")
    assert a.loc["α=0.2", "verdict"] == "supported" and a.loc["α=0.2", "value"] < 0.01
    assert a.loc["α=0.4", "verdict"] == "not supported"
    b = rows_of(ledger, "3b").set_index("label")
    assert b.loc["α=0.2", "verdict"] == "supported"  # advantage 0.2/S per key vs 0.01/S
    assert b.loc["α=0.2", "value"] == pytest.approx(20.0, rel=0.05)
    assert b.loc["α=0.4", "verdict"] == "inconclusive"  # the same advantage as alpha = 0: ratio 1


def test_claim3_without_alpha_zero_partner_is_inconclusive():
    ledger = ledger_of([sim_table("pos", [identity(0.2), keys_up(0.2)], alpha=0.2)])
    assert one(ledger, "3a")["verdict"] == "supported"
    b = one(ledger, "3b")
    assert b["verdict"] == "inconclusive" and "no α=0 variant" in b["note"]


# ---------------------------------------------------------------- claim 4: neither relative nor absolute


def test_claim4_exactly_relative_matrix_is_not_supported():
    relative = with_diagonal(toeplitz())
    ledger = ledger_of([sim_table("rel", [identity(), relative, relative, relative])])
    for claim_id in ("4a", "4b"):
        row = one(ledger, claim_id)
        assert row["verdict"] == "not supported", claim_id
        assert row["value"] < 0.05


def test_claim4_eq4_pattern_is_neither_relative_nor_symmetric():
    eq4 = layer2_scores(S, 0.0)
    ledger = ledger_of([sim_table("eq4", [identity(), eq4, eq4])])
    assert one(ledger, "4a")["verdict"] == "supported"
    assert one(ledger, "4b")["verdict"] == "supported"


def test_claim4_absolute_like_symmetric_map_is_not_relative_but_symmetric():
    u = np.random.default_rng(4).normal(0, 0.3, S)
    absolute = with_diagonal(u[I] + u[S - 1 - J])  # symmetric about the anti-diagonal (Wang and Chen)
    ledger = ledger_of([sim_table("abs", [identity(), absolute])])
    assert one(ledger, "4a")["verdict"] == "supported"
    assert one(ledger, "4b")["verdict"] == "not supported"


# ---------------------------------------------------------------- claim 5: LayerNorm


def layernorm_sims(sqrt_d_slope: float, d_slope: float):
    d = 64
    return [
        sim_table("l2", [identity(), keys_up(0.2), keys_up(0.3)]),
        sim_table(
            "ln_sqrt",
            [np.sqrt(d) * identity(), np.sqrt(d) * keys_up(sqrt_d_slope), np.sqrt(d) * keys_up(1.5 * sqrt_d_slope)],
            norm="layernorm",
            scale="sqrt_d",
        ),
        sim_table("ln_d", [identity(), keys_up(d_slope), keys_up(1.5 * d_slope)], norm="layernorm", scale="d"),
    ]


def test_claim5_weaker_sqrt_d_and_recovered_d_are_supported():
    ledger = ledger_of(layernorm_sims(sqrt_d_slope=0.02, d_slope=0.2))
    a, b = one(ledger, "5a"), one(ledger, "5b")
    assert a["verdict"] == "supported" and a["value"] == pytest.approx(0.1, rel=0.05)  # cosine units
    assert b["verdict"] == "supported" and b["value"] == pytest.approx(1.0, rel=0.05)


def test_claim5_stronger_sqrt_d_and_lost_d_are_not_supported():
    ledger = ledger_of(layernorm_sims(sqrt_d_slope=0.4, d_slope=0.0))
    assert one(ledger, "5a")["verdict"] == "not supported"
    assert one(ledger, "5b")["verdict"] == "not supported"


def test_claim5_without_l2_partner_is_inconclusive():
    sims = layernorm_sims(0.02, 0.2)[1:]
    ledger = ledger_of(sims)
    assert (rows_of(ledger, "5a")["verdict"] == "inconclusive").all()
    assert rows_of(ledger, "5a")["note"].str.contains("no l2 variant").all()


# ---------------------------------------------------------------- claim 6: RoPE with and without the mask


def test_claim6_causal_non_relative_left_lower_and_encoder_relative():
    relative = with_diagonal(toeplitz(5))
    left_lower = with_diagonal(toeplitz(5) + 0.4 * np.minimum(J, 3))  # the first keys score lower
    sims = [
        sim_table("causal", [identity(), left_lower, left_lower], pe="rope"),
        sim_table("encoder", [identity(), relative, relative], pe="rope", mask="none"),
    ]
    ledger = ledger_of(sims)
    assert one(ledger, "6a")["verdict"] == "supported"
    six_b = rows_of(ledger, "6b")
    assert list(six_b["layer"]) == [1, 2] and (six_b["verdict"] == "supported").all()
    assert (six_b["value"] < 0).all()
    c = one(ledger, "6c")
    assert c["verdict"] == "supported" and c["value"] < 0.05 and "causal twin causal" in c["note"]


def test_claim6_relative_causal_and_non_relative_encoder_are_not_supported():
    relative = with_diagonal(toeplitz(6))
    left_higher = with_diagonal(toeplitz(6) - 0.4 * np.minimum(J, 3))
    full_square = toeplitz(6) + 0.3 * np.random.default_rng(7).normal(size=(S, S))
    sims = [
        sim_table("causal", [identity(), relative], pe="rope"),
        sim_table("higher", [identity(0.5), left_higher], pe="rope", alpha=0.5),
        sim_table("encoder", [identity(), full_square], pe="rope", mask="none"),
    ]
    ledger = ledger_of(sims)
    a = rows_of(ledger, "6a").set_index("label")
    assert a.loc["α=0", "verdict"] == "not supported"
    b = rows_of(ledger, "6b").set_index("label")
    assert b.loc["α=0.5 L2", "verdict"] == "not supported"  # the left region is brighter
    assert one(ledger, "6c")["verdict"] == "not supported"


# ---------------------------------------------------------------- claim 7: the trained NoPE model


def test_claim7_increasing_model_is_supported_and_stronger_than_alpha0():
    scores, inter, groups = nope_tables(slope=1.0)
    faint = with_diagonal(0.1 + 0.02 * J / S + 0.05 * np.random.default_rng(8).normal(size=(S, S)))
    sim = sim_table("l2", [identity(), faint])
    ledger = ledger_of(sim, None, scores, inter, groups)
    a = rows_of(ledger, "7a")
    assert list(a["verdict"]) == ["supported", "supported"]
    assert a["note"].str.contains("bootstrap over groups").all()
    assert (a["uncertainty"] >= 0).all()  # 0 where every replicate is in perfect order
    b = one(ledger, "7b")
    assert b["verdict"] == "supported" and b["value"] > 2


def test_claim7_decreasing_model_is_not_supported():
    scores, inter, groups = nope_tables(slope=-1.0)
    ledger = ledger_of(sim_table("l2", [identity(), keys_up(0.2)]), None, scores, inter, groups)
    assert list(rows_of(ledger, "7a")["verdict"]) == ["not supported", "not supported"]
    assert one(ledger, "7b")["verdict"] == "not supported"  # negative strength


def test_claim7_without_groups_has_no_uncertainty():
    scores, inter, _ = nope_tables(slope=1.0)
    ledger = ledger_of(None, None, scores, inter, None)
    a = rows_of(ledger, "7a")
    assert a["uncertainty"].isna().all() and (a["verdict"] == "inconclusive").all()
    assert a["note"].str.contains("no uncertainty").all()


# ---------------------------------------------------------------- claim 8: pretrained LLMs


def test_claim8_sink_alone_is_not_a_pattern_and_a_real_one_is():
    scores, groups = llm_tables()
    ledger = ledger_of(None, None, scores, None, groups)
    a = rows_of(ledger, "8a")
    assert list(a["layer"]) == [0, 1, 2]
    first = a.iloc[0]
    assert first["verdict"] == "not supported" and first["value"] < 0.05  # keys >= 1: relative
    assert first["value_with_sink"] > 0.3  # with key 0 the sink column looks non-relative
    assert list(a["verdict"].iloc[1:]) == ["supported", "supported"]
    assert a["note"].str.contains("bootstrap over groups").all()
    b = one(ledger, "8b")
    assert b["verdict"] == "supported" and b["value"] == pytest.approx(a["value"].iloc[1:].median())


def test_claim8_of_a_sliding_window_layer_uses_the_bands_it_sees():
    """Gemma-3's sliding-window layers record no score for keys the window hides (NaN, whole bands); claim 8
    measures such a layer over the bands it sees: a relative layer stays relative, a non-relative one not."""
    rng = np.random.default_rng(0)
    hidden = I - J >= 5  # a window of 5: keys 5 or more positions back have no score
    relative = toeplitz(9, scale=1.0)
    pattern = relative + 0.8 * np.sqrt(J + 1.0) * rng.normal(0, 1.0, (S, S))
    layers = [np.where(hidden, np.nan, matrix) for matrix in (relative, pattern)]
    scores, _, groups = model_tables("llm", "pretrained", layers, noise=0.05)
    ledger = ledger_of(None, None, scores, None, groups)
    a = rows_of(ledger, "8a")
    assert a["value"].notna().all() and a["uncertainty"].notna().all()
    assert list(a["verdict"]) == ["not supported", "supported"]
    assert rows_of(ledger, "8d")["value"].notna().all()
    assert np.isfinite(one(ledger, "8b")["value"]) and np.isfinite(one(ledger, "8c")["value"])


def test_claim8_arrow_list_groups_and_parametric_fallback():
    scores, groups = llm_tables()
    plain = ledger_of(None, None, scores, None, groups)
    _, arrow_groups = llm_tables(groups_as_arrow=True)
    arrow = ledger_of(None, None, scores, None, arrow_groups)
    columns = ["value", "uncertainty", "verdict"]
    pd.testing.assert_frame_equal(rows_of(plain, "8a")[columns], rows_of(arrow, "8a")[columns])
    fallback = rows_of(ledger_of(None, None, scores, None, None), "8a")
    assert fallback["note"].str.contains("parametric").all()
    assert fallback["uncertainty"].notna().all()


def test_bootstrap_uncertainty_matches_the_sequence_standard_error():
    """A linear metric's bootstrap SE over groups is close to its standard error over sequences."""
    rng = np.random.default_rng(11)
    n, groups, size = 240, 12, 8
    per_sequence = rng.normal(0, 1.0, (n, size * (size + 1) // 2))
    sums = per_sequence.reshape(groups, n // groups, -1).sum(axis=1)
    table = pd.DataFrame(
        {
            "model": "m",
            "kind": "pretrained",
            "quantity": "scores",
            "stage": "",
            "layer": 0,
            "group": np.arange(groups),
            "n_sequences": n // groups,
            "seq_len": size,
            "sums": list(sums.astype(np.float32)),
        }
    )
    data = LedgerInputs(None, None, None, None, table, 400, 0)
    reps = data.bootstrap("m", "scores", "", 0, size)
    x = stack(per_sequence.mean(0), reps)
    sel, weights, pairs = advantage_weights(size, 0)
    value, se = estimate(nearer_key_advantage(x, size))
    exact = (per_sequence[:, sel] @ weights / pairs).std(ddof=1) / np.sqrt(n)
    assert value == pytest.approx((per_sequence[:, sel] @ weights / pairs).mean())
    assert se == pytest.approx(exact, rel=0.3)


# ---------------------------------------------------------------- the ledger as a whole


def test_every_claim_has_rows_and_the_columns_are_as_promised():
    ledger = build_ledger(*small_inputs(), n_bootstrap=R)
    assert list(ledger.columns) == LEDGER_COLUMNS + EXTRA_COLUMNS
    assert list(dict.fromkeys(ledger["claim_id"])) == list(LEDGER_CLAIMS)
    assert set(ledger["verdict"]) <= set(VERDICTS)
    assert (ledger["alpha"] == THRESHOLDS["family_alpha"]).all()


def test_every_claim_record_names_a_threshold_and_a_direction():
    for claim_id, claim in CLAIMS.items():
        assert claim.id == claim_id and claim.threshold in THRESHOLDS and claim.direction in (">", "<", ">=")
        assert claim.title and claim.statement and claim.metric and claim.unit and claim.section


def test_missing_inputs_give_inconclusive_rows_with_notes():
    ledger = build_ledger(None, None, None, None, None)
    assert list(ledger["claim_id"]) == list(LEDGER_CLAIMS)
    assert (ledger["verdict"] == "inconclusive").all() and ledger["value"].isna().all()
    assert ledger["note"].str.len().gt(0).all()
    empty = build_ledger(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    assert (empty["verdict"] == "inconclusive").all()


def test_table_without_a_needed_column_is_an_error():
    sims = sim_table("a", [identity(), keys_up(0.1)]).drop(columns="score_sem")
    with pytest.raises(ValueError, match="simulations table lacks column"):
        build_ledger(sims, None, None, None, None)


def test_thresholds_override_key_by_key():
    sims = [sim_table("a", [identity(), keys_up(0.1), keys_up(0.2)])]
    assert one(ledger_of(sims), "2a")["verdict"] == "supported"
    strict = ledger_of(sims, thresholds={"concordance": 1.5})
    row = one(strict, "2a")
    assert row["verdict"] == "not supported" and row["threshold"] == 1.5
    assert one(strict, "2b")["threshold"] == THRESHOLDS["layer_growth"]  # the others keep their defaults
    assert (ledger_of(sims, thresholds={"family_alpha": 0.01})["alpha"] == 0.01).all()
    for removed in ("z", "strict_level"):  # settings before issue 23: the error names the replacement
        with pytest.raises(ValueError, match=rf"claims.thresholds.{removed} was removed.*family_alpha"):
            ledger_of(sims, thresholds={removed: 2.0})
    with pytest.raises(ValueError, match="family_alpha"):
        ledger_of(sims, thresholds={"family_alpha": 1.5})
    with pytest.raises(ValueError, match="'concordence'"):
        ledger_of(sims, thresholds={"concordence": 0.9})
    with pytest.raises(ValueError, match="n_bootstrap"):
        ledger_of(sims, n_bootstrap=1)


def test_same_seed_same_ledger_and_names_do_not_matter():
    inputs = small_inputs()
    first = build_ledger(*inputs, n_bootstrap=R, seed=3)
    again = build_ledger(*inputs, n_bootstrap=R, seed=3)
    pd.testing.assert_frame_equal(first, again)
    other = build_ledger(*inputs, n_bootstrap=R, seed=4)
    assert not np.allclose(first["uncertainty"].fillna(0), other["uncertainty"].fillna(0))
    renamed = inputs[0].assign(variant=inputs[0]["variant"].map({"zero": "x1", "zero16": "x2", "pos": "x3"}))
    moved = build_ledger(renamed, *inputs[1:], n_bootstrap=R, seed=3)
    pd.testing.assert_frame_equal(
        first[["claim_id", "setting", "value", "verdict"]], moved[["claim_id", "setting", "value", "verdict"]]
    )


def test_reference_d_is_the_papers_for_claims_2_to_4():
    ledger = build_ledger(*small_inputs(), n_bootstrap=R)
    assert rows_of(ledger, "1a")["label"].tolist() == ["α=0, d=16", "α=0, d=64", "α=0.2, d=64"]
    assert rows_of(ledger, "2a")["setting"].str.endswith("d=64").all()
    assert one(ledger, "1b")["setting"] == "l2, α=0, d=16/64"


def test_markdown():
    ledger = build_ledger(*small_inputs(), n_bootstrap=R)
    text = ledger_markdown(ledger)
    assert "| claim | setting | metric | value | threshold | p (adjusted), for / against | verdict |" in text
    paper = ledger[(ledger["ours"] == "") & ~ledger["claim"].isin([10, 11])]
    tested = int((paper["p_value"].notna() & paper["p_against"].notna() & ~paper["exact"]).sum())
    assert f"Holm-adjusted over the {tested} rows of the paper's claims" in text and "at most 0.05" in text
    assert text.startswith(headline(ledger)) and "(*ours*)" in text
    for claim_id in LEDGER_CLAIMS:
        assert f"**{claim_id}**" in text
    assert "Claims 8a and 8d per layer" in text and "| llm | 3 |" in text and "8d keys 1-4" in text
    assert text.count("| llm, each of 3 layers |") == 2  # 8a and 8d, one line each
    assert " ± " in text


# ---------------------------------------------------------------- issue 12: claims 1c-1f, 2c-9a


def test_claim1_appendix_closed_forms_and_counterexamples():
    ledger = ledger_of(None, theory_frame(S, [0.0, 0.5]))
    for claim_id in ("1c", "1d"):  # exact closed forms: uncertainty 0, the verdict is the sign
        rows = rows_of(ledger, claim_id)
        assert list(rows["verdict"]) == ["supported"] * 2 and (rows["uncertainty"] == 0).all(), claim_id
    assert list(rows_of(ledger, "1e")["verdict"]) == ["by construction"] * 2  # g' has no j: not a finding
    assert (rows_of(ledger, "1c")["value"] < 0).all() and (rows_of(ledger, "1e")["value"] < 1e-20).all()
    assert "without residual" in one(ledger, "1f")["note"] and "closed form only" in one(ledger, "1f")["note"]
    theory = theory_frame(S, [0.0])
    theory.loc[theory["residual"] & (theory["query_pos"] == 5) & (theory["key_pos"] == 5), "h_query"] += 0.1
    theory.loc[~theory["residual"], "g"] += 0.05 * theory.loc[~theory["residual"], "key_pos"]  # g' moves with j
    bad = ledger_of(None, theory)
    assert one(bad, "1c")["verdict"] == "not supported" and "from position 5 to 6" in one(bad, "1c")["note"]
    assert one(bad, "1d")["verdict"] == "supported" and one(bad, "1e")["verdict"] == "not supported"
    sims = [
        sim_table("nores", [identity(), layer2_scores(S, 0.0, residual=False)], residual=False),
        sim_table("nores_flat", [identity(0.2), keys_up(0.0)], residual=False, alpha=0.2),
    ]
    assert list(rows_of(ledger_of(sims), "1f")["verdict"]) == ["supported", "not supported"]  # alpha 0, 0.2


def test_claim2c_strict_rows_early_peak_and_flat_rows():
    n, j = 30, np.indices((30, 30))[1]
    early = with_diagonal(0.1 + 0.05 * np.minimum(j, 5) - 1e-4 * np.maximum(j - 5, 0))  # steps within the noise
    layers = [identity(n=n), with_diagonal(0.1 + 0.02 * j), early, with_diagonal(np.full((n, n), 0.1))]
    c = rows_of(ledger_of([sim_table("zero", layers, sem=1e-4)]), "2c")
    assert list(c["layer"]) == [1, 2, 3] and list(c["verdict"]) == ["supported", "not supported", "inconclusive"]
    assert c["value"].iloc[0] == 1.0 and 0 < c["value"].iloc[1] < 1 and c["value"].iloc[2] == 0.0
    assert "violated queries" in c["note"].iloc[1] and "query 29 peaks at key" in c["note"].iloc[1]
    assert c["uncertainty"].isna().all() and c["direction"].iloc[0] == ">=" and (c["threshold"] == 1.0).all()


def test_claim3c_faster_saturation_with_alpha():
    def saturating(rate):  # rows rising as 1 - exp(-rate j): the larger the rate, the sooner constant in j
        return with_diagonal(0.1 + 0.3 * (1 - np.exp(-rate * J)))

    sims = [sim_table(f"a{a}", [identity(a), saturating(r)], alpha=a) for a, r in ((0.0, 0.2), (0.2, 0.8), (0.4, 0.5))]
    c = rows_of(ledger_of(sims), "3c").set_index("label")
    assert list(c.index) == ["α=0→0.2", "α=0.2→0.4"] and c.loc["α=0→0.2", "value"] < 1
    assert list(c["verdict"]) == ["supported", "not supported"]  # slower again at the higher alpha
    assert "by layer" in c.loc["α=0→0.2", "note"]


@pytest.mark.parametrize(
    "d_slope, b, c",
    [
        (0.2, "supported", "supported"),
        (4.0, "supported", "not supported"),
        (0.05, "supported", "not supported"),
        (0, "not supported", "not supported"),
    ],
)
def test_claim5_shape_and_size_of_the_d_scaling(d_slope, b, c):
    """l2's advantage: 0.2/S a key. x1 is its size; x20 and x0.25 miss x2 either way; flat: no order, no size."""
    ledger = ledger_of(layernorm_sims(sqrt_d_slope=0.02, d_slope=d_slope))
    row_c = one(ledger, "5c")
    assert one(ledger, "5b")["verdict"] == b and row_c["verdict"] == c
    # |log ratio|; for the flat map a ratio near 0 (or <= 0: infinite)
    assert row_c["value"] == pytest.approx(abs(np.log(d_slope / 0.2)), abs=0.05) if d_slope else row_c["value"] > 5


def test_claim6b_regions_must_agree():
    darker, brighter = (with_diagonal(toeplitz(5) + sign * 0.4 * np.minimum(J, 3)) for sign in (1, -1))
    split = with_diagonal(toeplitz(5) + 0.6 * (J <= 1) - 0.8 * ((J >= 1) & (J < 3)) * (I >= 3) - 0.3 * (J == 0))
    regions = [v[0] for v in triangles.region_deficits(packed(split)[:, None], S).values()]
    assert min(regions) < 0 < max(regions)  # the regions disagree ...
    b = rows_of(ledger_of([sim_table("causal", [identity(), darker, brighter, split], pe="rope")]), "6b")
    assert list(b["verdict"]) == ["supported", "not supported", "inconclusive"]  # ... so no verdict there
    assert "the regions disagree" in b["note"].iloc[2] and "Figure 4" in b["note"].iloc[0]  # the paper's figure


def test_claim6d_layer1_noise_and_6e_clearer_layer3():
    noise = np.random.default_rng(8).normal(size=(S, S))
    mixed, clear = (with_diagonal(toeplitz(7, scale=0.3) + scale * noise) for scale in (0.3, 0.05))
    good = sim_table("good", [identity(), mixed, clear], pe="rope", sem=1e-3)  # layer 1: alpha plus MC noise
    bad = sim_table("bad", [with_diagonal(0.02 * J / S), clear, mixed], pe="rope", alpha=0.5, sem=1e-3)
    ledger = ledger_of([good, bad])
    d, e = rows_of(ledger, "6d"), rows_of(ledger, "6e")
    assert list(d["verdict"]) == ["supported", "not supported"] and (d["layer"] == 0).all()  # a ramp of 20 noise SDs
    assert list(e["verdict"]) == ["supported", "not supported"] and e["value"].iloc[0] > 1


@pytest.mark.parametrize("good", [True, False])
def test_claim7_stages(good):
    """Figure 3's stages as the paper describes them (good) or against it; key 0 a sink column throughout."""
    eye = np.eye(S, dtype=bool)
    c = np.where(eye, 1 / (1.0 + I) if good else 0.1 * (1.0 + I), 0.2 + 0.5 / (1.0 + I) if good else 0.2 + 0.1 * J)
    stages = {
        "a": np.where(eye, 10.0, 0.1 if good else 5.0),
        "b": np.where(eye, 1.0, 0.5 if good else 0.05),
        "c": c,
        "d": np.where(eye, c, 3.0 * c) if good else c,
        "g": keys_up(-1.0 if good else 1.0),
        "h": keys_up(1.0 if good else -1.0),
        "i": with_diagonal(0.1 + 0.3 * J / S + (0 if good else 1 / (1 + I))),
    }
    for matrix in stages.values():
        matrix[:, 0] = 5.0
    stages = {stage: (1 if stage in "hi" else 0, matrix) for stage, matrix in stages.items()}
    ledger = ledger_of(
        None, None, *model_tables("nope", "trained", [identity(), stages["i"][1]], stages=stages, noise=0.01)
    )
    for claim_id in ("7c", "7d", "7e", "7f", "7g", "7h", "7i", "7j"):
        row = one(ledger, claim_id)
        assert row["verdict"] == ("supported" if good else "not supported"), (claim_id, row["value"])
        assert "bootstrap over groups" in row["note"], claim_id
    assert one(ledger, "7h")["layer"] == 0 and one(ledger, "7j")["layer"] == 1
    missing = ledger_of(None, None, *nope_tables(slope=1.0))  # stages f and i only
    assert all(
        one(missing, c)["verdict"] == "inconclusive" and "no stage" in one(missing, c)["note"]
        for c in ("7d", "7e", "7f", "7g", "7h", "7i", "7j")
    )


def test_claim8c_range_ratio_and_8d_first_keys():
    rng = np.random.default_rng(12)
    relative, first = toeplitz(9, scale=1.0), 1.5 * ((J >= 1) & (J <= 4))  # keys 1-4 above or below their bands
    up, down = relative + first + 0.1 * rng.normal(size=(S, S)), relative - first + 0.1 * rng.normal(size=(S, S))
    up[:, 0] -= 3.0  # a sink key 0 below its bands: reported apart, not in the verdict
    up_scores, _, up_groups = model_tables("up", "pretrained", [up, up], seed=1)
    down_scores, _, down_groups = model_tables("down", "pretrained", [relative, down], seed=2)
    ledger = ledger_of(None, None, pd.concat([up_scores, down_scores]), None, pd.concat([up_groups, down_groups]))
    d = rows_of(ledger, "8d").set_index(["model", "layer"])
    assert [d.loc[k, "verdict"] for k in (("up", 0), ("up", 1), ("down", 1))] == ["supported"] * 2 + ["not supported"]
    assert d.loc[("up", 0), "sink_emphasis"] < 0  # key 0 lower, apart
    c, a = rows_of(ledger, "8c").set_index("model"), rows_of(ledger, "8a").set_index(["model", "layer"])
    assert c.loc["up", "verdict"] == "supported" and a.loc[("down", 0), "range_ratio"] < 0.05  # exactly relative
    assert c.loc["up", "value"] == pytest.approx(a.loc[("up", 1), "range_ratio"])  # the median of one layer


def law_sims(exact_slope: float, sampler: str = "exact_reduced"):
    return [
        sim_table("l2_alpha0.0", [identity(), keys_up(0.02), keys_up(0.05)]),
        sim_table("l2_alpha0.2", [identity(0.2), keys_up(0.2), keys_up(0.3)], alpha=0.2),
        sim_table("l2_alpha0.2_exact", [identity(0.2), keys_up(exact_slope), keys_up(0.3)], alpha=0.2, seed=5).assign(
            sampler=sampler
        ),
    ]


def test_claim9_same_and_changed_verdicts_under_the_two_laws():
    ledger = ledger_of(law_sims(0.21))
    rows = rows_of(ledger, "9a")
    assert (rows["value"] == 1.0).all() and (rows["verdict"] == "supported").all()
    assert (
        set(rows["compared_claim"]) >= {"2a", "2c", "3a", "3b", "3c", "4a"}
        and rows["note"].str.contains("l2_alpha0.2_exact").all()
    )
    # the twin is no setting of its own: the claims are measured on the paper's construction
    assert not ledger[ledger["claim_id"] != "9a"]["setting"].str.contains("exact").any()
    assert list(rows_of(ledger, "2a")["note"]) == ["variant l2_alpha0.0", "variant l2_alpha0.2"]
    flipped = ledger_of(law_sims(-0.2))  # the exact-law twin decreases with the key: 2a flips
    rows = rows_of(flipped, "9a").set_index("compared_claim")
    assert rows.loc["2a", "value"] == 0.0 and rows.loc["2a", "verdict"] == "not supported"
    assert (rows.loc["2a", "official_verdict"], rows.loc["2a", "exact_verdict"]) == ("supported", "not supported")
    assert "the verdict changes" in rows.loc["2a", "note"] and "**opposite**" in ledger_markdown(flipped)
    # the size of the change, not only the verdicts: exact minus official, the two runs' errors added in quadrature
    official = rows_of(flipped, "2a").set_index("setting").iloc[-1]
    assert rows.loc["2a", "law_change"] == pytest.approx(rows.loc["2a", "exact_value"] - official["value"])
    assert rows.loc["2a", "law_change"] < 0 and rows.loc["2a", "law_change_uncertainty"] == pytest.approx(
        math.hypot(rows.loc["2a", "exact_uncertainty"], official["uncertainty"])
    )


def test_claim9_without_twins_and_laws_that_are_the_same():
    for sampler in ("official", "OFFICIAL"):  # the main law twice: no twin
        row = one(ledger_of(law_sims(0.21, sampler=sampler)), "9a")
        assert row["verdict"] == "inconclusive" and "no official-law variant has an exact-law twin" in row["note"]
    for sampler in ("exact_full", "exact_reduced", "full", "reduced"):  # names of the exact law (old ones too)
        assert (rows_of(ledger_of(law_sims(0.21, sampler=sampler)), "9a")["value"] == 1.0).all()
    alone = sim_table("only_exact", [identity(0.2), keys_up(0.2)], alpha=0.2).assign(sampler="exact_full")
    ledger = ledger_of([sim_table("zero", [identity(), keys_up(0.02)]), alone])
    assert "exact law" in one(ledger, "3a")["setting"]  # an exact-law variant without a twin is a setting
    zero = sim_table("zero", [identity(), keys_up(0.02)])
    pd.testing.assert_frame_equal(ledger_of([zero.drop(columns="sampler")]), ledger_of([zero]))  # no column: paper


def test_column_chunks_give_the_same_numbers():
    """The LLM claims work a chunk of replicates at a time (memory): band_statistics over column chunks, and the
    bootstrap's replicates formed chunk by chunk, equal the whole-array computations exactly."""
    from causalpos.analysis.claims.replicates import stack
    from causalpos.analysis.triangles import COLUMN_CHUNK, band_statistics, by_columns
    from causalpos.tril import packed_size

    rng = np.random.default_rng(4)
    size, replicates = 24, 2 * COLUMN_CHUNK + 5  # a last chunk shorter than the others
    x = rng.normal(size=(packed_size(size), replicates))
    whole = band_statistics(x, size, extras=True)
    chunked = by_columns(lambda part: band_statistics(part, size, extras=True), x)
    assert whole.keys() == chunked.keys()
    for key in whole:
        np.testing.assert_array_equal(chunked[key], whole[key], err_msg=key)
    group_sums = rng.normal(size=(packed_size(size), 16)).astype(np.float32)
    draws = rng.integers(0, 3, size=(16, replicates)).astype(np.float32)
    divisors = draws.sum(axis=0) * 4.0
    point = rng.normal(size=packed_size(size))
    # float32 products summed in another order: equal to float32's precision of the sums (~1e-7 of values ~1), which
    # a relative tolerance alone cannot say for entries near 0 (seen: 2e-8 apart at 1e-4, under a loaded BLAS)
    np.testing.assert_allclose(
        stack(point, (group_sums, draws, divisors)), stack(point, (group_sums @ draws, divisors)), rtol=1e-6, atol=1e-7
    )
