"""The ledger's p-values and the family-wise (Holm) verdicts (issue 23), against independent computations."""

import logging
import math

import numpy as np
import pytest
from scipy.stats import norm

from causalpos.catalogue.claims import THRESHOLDS, verdict
from causalpos.analysis.claims.family import adjust, band_pvalues, in_family, increase_pvalues, interval_z, one_sided
from causalpos.analysis.claims.ledger import build_ledger
from causalpos.analysis.claims.rows import row
from causalpos.analysis.multiplicity import bonferroni_min, holm, intersection_union
from helpers import R, S, packed, small_inputs

TH = dict(THRESHOLDS)


def holm_by_definition(p) -> np.ndarray:
    """Holm's step-down test run at every level where a decision can change; a hypothesis's adjusted p is the
    smallest level at which it is rejected (Holm 1979: test p_(1) <= ... <= p_(m) in order, reject H_(k) while
    p_(k) <= level / (m - k + 1), stop at the first that is not)."""
    p = np.asarray(p, dtype=float)
    kept = [i for i in range(len(p)) if not math.isnan(p[i])]
    m = len(kept)
    order = sorted(kept, key=lambda i: p[i])
    levels = sorted({min(1.0, (m - k) * p[i]) for k, i in enumerate(order)} | {1.0})
    out = np.full(len(p), np.nan)
    out[kept] = 1.0  # rejected at no level below 1
    for level in reversed(levels):  # every level from the top: the last one that rejects is the smallest
        for k, i in enumerate(order):
            if p[i] * (m - k) <= level:
                out[i] = level
            else:
                break
    return out


@pytest.mark.parametrize("seed", range(5))
def test_holm_against_its_definition(seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.2, 12) ** rng.uniform(1, 3)
    p[[2, 7]] = p[4]  # ties
    p[9] = np.nan  # not in the family: not counted in m
    adjusted = holm(p)
    assert np.isnan(adjusted[9])
    np.testing.assert_allclose(adjusted, holm_by_definition(p), rtol=1e-12)
    assert np.allclose(holm(p[~np.isnan(p)]), adjusted[~np.isnan(p)])  # NaN rows change nothing


def test_holm_is_monotone_and_grows_with_the_family():
    rng = np.random.default_rng(7)
    p = rng.uniform(0, 0.1, 20)
    adjusted = holm(p)
    assert (adjusted >= p).all() and (adjusted <= 1).all()
    order = np.argsort(p)
    assert (np.diff(adjusted[order]) >= 0).all()  # the adjustment keeps the order of the p's
    assert adjusted[order[0]] == pytest.approx(min(1.0, 20 * p[order[0]]))  # the first step is Bonferroni
    larger = holm(np.concatenate([p, rng.uniform(0, 1, 5)]))[:20]
    assert (larger >= adjusted - 1e-15).all()  # a larger family never makes a row easier to support
    assert holm([]).size == 0 and np.isnan(holm([np.nan])).all()


def test_one_sided_p_values_against_scipy():
    rng = np.random.default_rng(1)
    for value, se in zip(rng.normal(0, 3, 50), rng.uniform(0.01, 2, 50)):
        p_for, p_against = one_sided(value, se, 0.5, ">")
        assert p_for == pytest.approx(norm.sf((value - 0.5) / se), rel=1e-10, abs=1e-300)
        assert p_against == pytest.approx(norm.cdf((value - 0.5) / se), rel=1e-10, abs=1e-300)
        assert one_sided(value, se, 0.5, "<") == pytest.approx((p_against, p_for), rel=1e-12)
    assert one_sided(31.0, 1.0, 1.0, ">")[0] == pytest.approx(norm.sf(30.0), rel=1e-9)  # the far tail, not 0
    assert one_sided(np.inf, 1.0, 0.0, ">") == (0.0, 1.0)
    assert all(math.isnan(p) for p in one_sided(1.0, np.nan, 0.0, ">") + one_sided(np.nan, 1.0, 0.0, ">"))


def test_the_interval_drawn_matches_the_unadjusted_verdict():
    z = interval_z(THRESHOLDS["family_alpha"])
    assert z == pytest.approx(norm.isf(0.05))
    rng = np.random.default_rng(2)
    for value, se in zip(rng.normal(0, 1, 200), rng.uniform(0.1, 1, 200)):
        p_for, p_against = one_sided(value, se, 0.0, ">")
        assert (value - z * se > 0) == (p_for < 0.05) and (value + z * se < 0) == (p_against < 0.05)


def test_exact_rows_are_certain_and_outside_the_family():
    assert one_sided(-0.1, 0.0, 0.0, "<") == (0.0, 1.0) and one_sided(0.1, 0.0, 0.0, "<") == (1.0, 0.0)
    assert one_sided(0.0, 0.0, 0.0, "<") == (1.0, 1.0)  # on the threshold: neither side
    noisy = [row("2a", "noisy", (0.75 + 0.1 * norm.isf(p), 0.1), TH) for p in (0.01, 0.03)]
    exact = [row("1c", f"exact {i}", (-0.5, 0.0), TH) for i in range(5)]
    failed = row("1c", "exact, fails", (0.5, 0.0), TH)
    adjusted = adjust(exact + noisy + [failed], 0.05)
    assert list(in_family(adjusted)) == [False] * 5 + [True, True, False]
    assert [r["p_adjusted"] for r in adjusted[5:7]] == pytest.approx([0.02, 0.03])  # m = 2, not 8
    assert [r["verdict"] for r in adjusted] == ["supported"] * 7 + ["not supported"]
    assert [r["p_adjusted"] for r in adjusted[:5]] == [0.0] * 5 and adjusted[7]["p_against_adjusted"] == 0.0


def test_a_verdict_flips_to_inconclusive_when_the_family_grows():
    marginal = row("2a", "marginal", (0.75 + 0.1 * norm.isf(0.02), 0.1), TH)  # p = 0.02 for the claim
    assert marginal["verdict"] == "supported" and marginal["p_value"] == pytest.approx(0.02)
    assert adjust([marginal], 0.05)[0]["verdict"] == "supported"
    others = [row("2a", f"null {i}", (0.75, 0.1), TH) for i in range(9)]  # p = 0.5 each
    grown = adjust([marginal] + others, 0.05)
    assert grown[0]["p_adjusted"] == pytest.approx(0.2) and grown[0]["verdict"] == "inconclusive"
    assert marginal["verdict"] == "supported"  # adjust returns new rows
    strong = row("2a", "strong", (0.75 + 0.1 * norm.isf(1e-4), 0.1), TH)
    assert adjust([strong] + others, 0.05)[0]["verdict"] == "supported"  # 10 x 1e-4 stays below 0.05


def test_rows_that_are_not_tests_keep_their_verdict():
    built = row("1e", "closed form", (0.0, 0.0), TH, decided="by construction")
    agreed = row("9a", "2a: a setting", (1.0, 0.0), TH, decided="supported")
    out = adjust([built, agreed], 0.05)
    assert [r["verdict"] for r in out] == ["by construction", "supported"] and not in_family(out).any()
    assert all(math.isnan(r[c]) for r in out for c in ("p_value", "p_adjusted", "p_against", "p_against_adjusted"))
    with pytest.raises(ValueError, match="not both"):
        row("1e", "x", (0.0, 0.0), TH, decided="by construction", p_value=0.1, p_against=0.9)


def test_combined_tests():
    assert intersection_union([0.01, 0.2, 0.03]) == 0.2 and bonferroni_min([0.01, 0.2, 0.03]) == pytest.approx(0.03)
    assert bonferroni_min([0.5, 0.6]) == 1.0 and math.isnan(intersection_union([0.01, np.nan]))
    inside, outside = band_pvalues([1.0, 1.2], [0.05, 0.05], 0.5, 2.0)  # both far inside [1/2, 2]
    assert inside == pytest.approx(norm.sf(10.0), rel=1e-9) and outside == 1.0  # the nearest bound: 10 SE
    inside, outside = band_pvalues([1.0, -0.3], [0.05, 0.1], 0.5, 2.0)  # the second below 1/2 by 8 SE
    assert inside > 0.5 and outside == pytest.approx(4 * norm.cdf((-0.3 - 0.5) / 0.1), rel=1e-9)


def replicated(matrix: np.ndarray, sem: float, seed: int = 0) -> np.ndarray:
    """[packed pairs, 1 + R]: the matrix and R replicates with independent noise of SD sem (as the ledger's)."""
    rng = np.random.default_rng(seed)
    x = packed(matrix)
    return np.column_stack([x, x[:, None] + rng.normal(0, sem, (x.size, R))])


def increase_by_loops(x: np.ndarray, size: int) -> tuple[float, float]:
    """2c's p's with plain loops and scipy: the largest adjacent-step p for, Bonferroni over all pairs against."""

    def at(i, j):
        return x[i * (i + 1) // 2 + j]

    steps, pairs = [], []
    for i in range(2, size):
        for a in range(i):
            for b in range(a + 1, i):
                diff = at(i, b) - at(i, a)
                z = diff[0] / np.std(diff[1:], ddof=1)
                pairs.append(norm.cdf(z))
                if b == a + 1:
                    steps.append(norm.sf(z))
    return max(steps), min(1.0, len(pairs) * min(pairs))


def test_2c_intersection_union_and_bonferroni_on_a_constructed_matrix():
    rising = np.where(np.tri(S, dtype=bool), 0.1 + 0.02 * np.arange(S)[None, :], 0.0)
    np.fill_diagonal(rising, 1.0)
    x = replicated(rising, 1e-3)
    found = increase_pvalues(x, S)
    assert (found["p_value"], found["p_against"]) == pytest.approx(increase_by_loops(x, S), rel=1e-9)
    assert found["steps"] == sum(i - 1 for i in range(2, S)) and found["pairs"] == sum(
        i * (i - 1) // 2 for i in range(2, S)
    )
    assert found["p_value"] < 1e-10 and found["p_against"] == 1.0  # every step 20 SE up: supported
    dipped = rising.copy()
    dipped[8, 5] = dipped[8, 6] + 0.01  # one pair of one row falls by ~7 SE (of a difference)
    x = replicated(dipped, 1e-3)
    found = increase_pvalues(x, S)
    assert (found["p_value"], found["p_against"]) == pytest.approx(increase_by_loops(x, S), rel=1e-9)
    assert found["p_value"] > 0.99 and found["p_against"] < 1e-6  # Bonferroni over the pairs still rejects
    assert found["strongest"][:3] == (8, 5, 6)
    assert verdict(found["p_value"], found["p_against"]) == "not supported"


def test_the_ledgers_adjustment_is_holm_over_its_family():
    """Holm within each family: the paper's claims in the paper's scope, the rows on our readings (catalogue.readings),
    each of our own claims."""
    from causalpos.catalogue.readings import OWN_CLAIM

    ledger = build_ledger(*small_inputs(), n_bootstrap=R)
    family = in_family(ledger)
    tested = ledger[family]
    assert family.sum() >= 10 and not tested["exact"].any() and (tested["row_kind"] == "test").all()
    names = np.where(
        tested["ours"] == "",
        "paper",
        np.where(tested["ours"] == OWN_CLAIM, "claim " + tested["claim"].astype(str), "ours"),
    )
    assert {"paper", "ours"} <= set(names)
    for name in set(names):
        part = tested[names == name]
        np.testing.assert_allclose(part["p_adjusted"], holm_by_definition(part["p_value"]), rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(
            part["p_against_adjusted"], holm_by_definition(part["p_against"]), rtol=1e-12, err_msg=name
        )
    assert [verdict(a, b) for a, b in zip(tested["p_adjusted"], tested["p_against_adjusted"])] == list(
        tested["verdict"]
    )
    outside = ledger[~family]
    assert ((outside["p_adjusted"] == outside["p_value"]) | outside["p_value"].isna()).all()  # left as they are
    decided = outside["verdict"].eq("by construction") | outside["claim_id"].eq("9a")  # not tests: no p's
    assert (outside["p_value"].notna() == (outside["exact"] & ~decided)).all()  # the others outside: exact rows
    assert (
        outside.loc[outside["exact"] & ~decided, "p_value"].isin([0.0, 1.0]).all()
        and (outside["exact"] <= (outside["uncertainty"] == 0)).all()
    )
    assert outside.loc[outside["claim_id"] == "9a", "p_value"].isna().all()  # not a test
    # an estimate whose replicates do not vary (a concordance of 1 in every one) is no closed form: it counts, with
    # the p the bootstrap can give, 1 / (R + 1), not 0
    still = tested[tested["uncertainty"] == 0]
    assert still["claim_id"].isin(["2a", "7a"]).any() and (still["reference"] == "bootstrap bound").all()
    assert set(still["p_value"]) | set(still["p_against"]) <= {1.0 / (R + 1), 1.0}


def test_a_config_naming_the_removed_margin_is_refused_with_the_replacement():
    import yaml

    from causalpos.workflow.config import ConfigError, validate_config
    from helpers import ROOT

    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    for removed in ("z", "strict_level"):
        config.setdefault("claims", {})["thresholds"] = {removed: 2.0}
        with pytest.raises(ConfigError, match=rf"claims.thresholds: '{removed}'.*use claims.thresholds.family_alpha"):
            validate_config(config, devices=False)


def test_the_convergence_table_adjusts_within_each_rebuilt_ledger(caplog):
    from causalpos.analysis.claims.convergence import convergence_frame
    from helpers import llm_tables

    from causalpos.catalogue.readings import our_reading

    with caplog.at_level(logging.INFO, logger="causalpos"):
        frame = convergence_frame(*llm_tables(), n_bootstrap=20, seed=3)
    assert frame["n_sequences"].nunique() >= 2
    # a line as each model's number of sequences ends (issue 42), counted per model
    for model, levels in frame.groupby("model")["n_sequences"].nunique().items():
        steps = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"convergence {model}: step")]
        assert len(steps) == levels and steps[-1].startswith(f"convergence {model}: step {levels}/{levels}, N = ")
    # the rows on our readings (8d at layer 1) a family apart, as in the ledger
    frame["ours"] = [bool(our_reading(row)) for row in frame.to_dict("records")]
    assert frame["ours"].any()
    for _, rows in frame.groupby(["model", "n_sequences", "ours"]):
        family = in_family(rows.assign(exact=False))
        np.testing.assert_allclose(
            rows.loc[family, "p_adjusted"], holm_by_definition(rows.loc[family, "p_value"]), rtol=1e-12
        )
        assert [verdict(a, b) for a, b in zip(rows["p_adjusted"], rows["p_against_adjusted"])] == list(rows["verdict"])


# ---------------------------------------------------------------- row kinds and references (issue 41)


def test_a_t_reference_is_scipys_t_and_wider_than_the_normal():
    from scipy.stats import t

    value, se, threshold = 0.3, 0.08, 0.1  # z = 2.5
    p_normal, _ = one_sided(value, se, threshold, ">")
    p_t, p_t_against = one_sided(value, se, threshold, ">", df=15)
    assert p_t == pytest.approx(t.sf(2.5, 15), rel=1e-12) and p_t_against == pytest.approx(t.cdf(2.5, 15), rel=1e-12)
    assert p_t > p_normal == pytest.approx(norm.sf(2.5), rel=1e-12)
    assert one_sided(value, se, threshold, ">", df=10**6)[0] == pytest.approx(p_normal, rel=1e-4)


def test_every_row_says_its_kind_and_its_reference():
    """Model rows (a bootstrap over the groups of sequences) are referred to t with G - 1 degrees of freedom; the
    simulations' to the normal; closed forms are exact; 9a is an agreement with no p."""
    from causalpos.catalogue.readings import ROW_KINDS

    ledger = build_ledger(*small_inputs(), n_bootstrap=R)
    assert ledger["row_kind"].isin(ROW_KINDS).all() and ledger["reference"].notna().all()
    models = ledger[ledger["model"].notna() & (ledger["row_kind"] == "test") & ledger["p_value"].notna()]
    groups = small_inputs()[4]
    for model, rows in models.groupby("model"):
        n_groups = groups[(groups["model"] == model) & (groups["quantity"] == "scores")]["group"].nunique()
        moving = rows[rows["uncertainty"] > 0]
        assert len(moving) and (moving["reference"] == f"t({n_groups - 1})").all(), model
    simulated = ledger[ledger["claim_id"].isin(["1a", "3a"]) & (ledger["uncertainty"] > 0)]
    assert len(simulated) and (simulated["reference"] == "normal").all()
    assert (
        ledger.loc[ledger["exact"] & (ledger["claim_id"] != "9a"), "row_kind"].isin(["exact", "by construction"])
    ).all()
    agreement = ledger[ledger["claim_id"] == "9a"]
    assert (agreement["row_kind"] == "agreement").all() or agreement["setting"].eq("(no such setting)").all()


def test_rows_on_our_readings_take_no_power_from_the_papers():
    """The paper's adjusted p's are those of Holm over the paper's rows alone: dropping the rows on our readings
    from the family changes none of them."""
    ledger = build_ledger(*small_inputs(), n_bootstrap=R)
    ours = ledger[(ledger["ours"] != "") & in_family(ledger)]
    assert len(ours) and ours["claim_id"].isin(["1a", "3d", "6e", "8d", "2d", "5c", "7m", "7n"]).all()
    paper = ledger[(ledger["ours"] == "") & in_family(ledger)]
    np.testing.assert_allclose(paper["p_adjusted"], holm(paper["p_value"].to_numpy()), rtol=1e-12)
    d16 = ledger[(ledger["claim_id"] == "1a") & ledger["setting"].str.contains(r"\bd=16\b")]
    assert len(d16) and (d16["ours"] != "").all()
