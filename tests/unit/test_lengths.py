"""The paired tests of the length comparison over seeds (causalpos.analysis.lengths) against scipy.stats and
an enumeration written here, and the invariances the table must have."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from causalpos.analysis.lengths import (
    LENGTH_SEED_COLUMNS,
    PAIR_TEST_COLUMNS,
    length_seed_frame,
    paired_differences,
    paired_tests,
    reading,
    sign_flip_p,
    sign_test_p,
    t_quantile,
    t_two_sided_p,
    with_gaps,
)

PAIR_ROW = "nope - rope"
SAMPLES = [
    np.array([-0.026, -0.010, -0.013]),  # the three-seed result at 2x (docs/models.md)
    np.array([-0.03, 0.004, -0.011, -0.02, -0.007]),
    np.array([0.5, -1.25, 2.0, -0.75, 0.1, 0.3]),
    np.array([-0.2, -0.1, 0.0, -0.4, -0.3, 0.05, -0.15]),
]


def per_seed_table(seeds=(0, 1, 2, 3, 4), factors=(1, 2, 4), seed=0) -> pd.DataFrame:
    """A simulated length_eval over seeds: RoPE's loss rises faster with length, plus seed noise."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "model": m,
            "seed": s,
            "factor": f,
            "seq_len": 64 * f,
            "heldout_loss": 5.5
            + (0.2 if m == "nope" else 0.0)
            + (0.005 if m == "nope" else 0.02) * math.log2(f)
            + rng.normal(scale=0.01),
        }
        for m in ("nope", "rope")
        for s in seeds
        for f in factors
    ]
    return pd.DataFrame(rows)


def brute_force_sign_flip(d) -> tuple[float, float]:
    """Two-sided and lower one-sided p by listing every sign assignment with itertools (no numpy bit tricks)."""
    observed = sum(d)
    sums = [sum(s * x for s, x in zip(signs, d)) for signs in itertools.product((1, -1), repeat=len(d))]
    eps = 1e-12
    return (
        sum(abs(v) >= abs(observed) - eps for v in sums) / len(sums),
        sum(v <= observed + eps for v in sums) / len(sums),
    )


# ---------------------------------------------------------------- against scipy and an enumeration


@pytest.mark.parametrize("d", SAMPLES)
def test_confidence_interval_and_t_p_agree_with_scipy(d):
    row = paired_tests(d)
    result = stats.ttest_rel(d, np.zeros_like(d))
    assert row["t_stat"] == pytest.approx(result.statistic, rel=1e-12)
    assert row["t_p"] == pytest.approx(result.pvalue, rel=1e-9)
    low, high = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert (row["diff_ci_low"], row["diff_ci_high"]) == pytest.approx((low, high), rel=1e-9)
    ci = result.confidence_interval(0.95)
    assert (row["diff_ci_low"], row["diff_ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-9)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 8, 13, 40])
def test_student_t_closed_form_matches_scipy(df):
    for t in (0.0, 0.3, 1.0, 2.2, 5.0, 12.0):
        assert t_two_sided_p(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-9, abs=1e-13)
        assert t_two_sided_p(-t, df) == t_two_sided_p(t, df)
    for q in (0.6, 0.9, 0.975, 0.995):
        assert t_quantile(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-10)


@pytest.mark.parametrize("d", SAMPLES)
def test_exact_p_is_the_enumeration_of_every_sign_assignment(d):
    row = paired_tests(d)
    two, one = brute_force_sign_flip(list(d))
    assert (row["exact_p"], row["exact_p_one_sided"]) == pytest.approx((two, one), abs=1e-15)
    for alternative, mine in (("two-sided", two), ("less", one)):
        result = stats.permutation_test(
            (d, np.zeros_like(d)),
            lambda x, y, axis: np.sum(x - y, axis=axis),
            permutation_type="samples",
            n_resamples=np.inf,
            alternative=alternative,
        )
        assert mine == pytest.approx(result.pvalue, abs=1e-12)


@pytest.mark.parametrize("d", SAMPLES)
def test_sign_test_agrees_with_scipy_binomtest_and_drops_ties(d):
    row = paired_tests(d)
    signed = d[d != 0]
    assert row["n_ties"] == len(d) - len(signed)
    assert row["n_negative"] == (signed < 0).sum()
    k = int(row["n_negative"])
    assert row["sign_p"] == pytest.approx(stats.binomtest(k, len(signed), 0.5).pvalue, rel=1e-12)
    assert row["sign_p_one_sided"] == pytest.approx(
        stats.binomtest(k, len(signed), 0.5, alternative="greater").pvalue, rel=1e-12
    )


def test_sign_test_over_every_count():
    for n in range(1, 9):
        for k in range(n + 1):
            two, one = sign_test_p(k, n)
            assert two == pytest.approx(stats.binomtest(k, n, 0.5).pvalue, rel=1e-12)
            assert one == pytest.approx(stats.binomtest(k, n, 0.5, alternative="greater").pvalue, rel=1e-12)


# ---------------------------------------------------------------- the exact test's floor


def test_five_negative_seeds_give_the_smallest_exact_p():
    d = [-0.03, -0.01, -0.012, -0.02, -0.001]
    row = paired_tests(d)
    assert row["exact_p_one_sided"] == 1 / 32 and row["exact_p"] == 2 / 32
    assert row["sign_p_one_sided"] == 1 / 32 and row["sign_p"] == 2 / 32
    assert read(d) == "evidence at the 5% level (one-sided exact test, Holm over the lengths)"  # one length


def test_three_negative_seeds_are_a_direction_not_evidence():
    row = paired_tests(SAMPLES[0])
    assert row["exact_p_one_sided"] == 1 / 8 and row["sign_p"] == 1 / 4
    assert read(SAMPLES[0]) == "a consistent direction, not evidence at 5%"


def test_with_five_seeds_one_positive_is_never_evidence():
    rng = np.random.default_rng(1)
    for _ in range(50):
        d = -np.abs(rng.normal(size=5))
        d[rng.integers(5)] *= -1
        row = paired_tests(d)
        assert row["exact_p_one_sided"] >= 2 / 32
        assert read(d) == "no consistent direction"


def test_reading_of_mixed_and_opposite_signs():
    assert read([-0.5, 0.2, -0.3, 0.1]) == "no consistent direction"
    assert read([0.5, 0.2, 0.3]) == "the opposite direction in every seed (RoPE loses less)"
    tied = paired_tests([-0.5, 0.0, -0.3, -0.2])  # the tie leaves the sign test, not the exact test
    assert tied["n_ties"] == 1 and tied["sign_p_one_sided"] == 1 / 8 and tied["exact_p_one_sided"] == 2 / 16
    assert read([-0.5, 0.0, -0.3, -0.2]) == "a consistent direction, not evidence at 5%"


def read(differences) -> str:
    """The reading of one length on its own (a family of one: Holm leaves its p as it is)."""
    row = paired_tests(differences)
    return reading(row["exact_p_one_sided"], row["n_negative"], len(differences) - row["n_ties"])


def test_five_seeds_at_two_lengths_are_not_evidence_after_holm_but_ten_are():
    """Holm over the lengths beyond 1x: every seed negative at 2x and 4x gives 1/32 each, 2/32 adjusted (above
    our 5%); with ten seeds 1/1024 each, 2/1024 adjusted."""
    for n, adjusted, evidence in ((5, 2 / 32, False), (10, 2 / 1024, True)):
        rows = []
        for seed in range(n):
            for model, step in (("nope", 0.001 * (seed + 1)), ("rope", 0.01 * (seed + 1))):
                rows += [
                    {
                        "model": model,
                        "seed": seed,
                        "factor": f,
                        "seq_len": 256 * f,
                        "heldout_loss": 5.0 + step * (f - 1),
                    }
                    for f in (1, 2, 4)
                ]
        table = length_seed_frame(pd.DataFrame(rows))
        pair = table[(table["model"] == PAIR_ROW) & (table["factor"] > 1)]
        assert (pair["exact_p_one_sided"] == 1 / 2**n).all() and (pair["exact_p_adjusted"] == adjusted).all()
        assert pair["reading"].str.startswith("evidence").all() == evidence


def test_sign_flip_refuses_more_seeds_than_it_can_enumerate():
    with pytest.raises(ValueError, match="exact test"):
        sign_flip_p(np.ones(21))


# ---------------------------------------------------------------- the table


def test_pair_rows_carry_the_tests_and_single_models_nan():
    per_seed = per_seed_table()
    table = length_seed_frame(per_seed)
    assert list(table.columns) == LENGTH_SEED_COLUMNS
    numeric = [c for c in PAIR_TEST_COLUMNS if c not in ("reading", "exact_p_adjusted")]
    assert table.loc[table["model"] != PAIR_ROW, PAIR_TEST_COLUMNS].isna().all().all()
    at_one = table[(table["model"] == PAIR_ROW) & (table["factor"] == 1)]
    assert len(at_one) == 1 and at_one[PAIR_TEST_COLUMNS].isna().all().all()  # every gap is 0 there
    loss = per_seed.pivot_table(index=["model", "seed"], columns="factor", values="heldout_loss")
    nope, rope = loss.loc["nope"], loss.loc["rope"]
    for factor in (2, 4):
        d = ((nope[factor] - nope[1]) - (rope[factor] - rope[1])).to_numpy()
        row = table[(table["model"] == PAIR_ROW) & (table["factor"] == factor)].iloc[0]
        expected = paired_tests(d)
        assert row[numeric].astype(float).to_numpy() == pytest.approx([expected[c] for c in numeric])
        assert row["gap_mean"] == pytest.approx(d.mean())
        assert row["diff_ci_low"] < row["gap_mean"] < row["diff_ci_high"]
        assert row["n_seeds"] == 5 and isinstance(row["reading"], str)


def test_swapping_the_pair_flips_signs_and_keeps_two_sided_p():
    per_seed = per_seed_table(seed=3)
    table = length_seed_frame(per_seed).set_index(["model", "factor"])
    swapped = length_seed_frame(per_seed.assign(model=per_seed["model"].map({"nope": "rope", "rope": "nope"})))
    swapped = swapped.set_index(["model", "factor"])
    for factor in (2, 4):
        a, b = table.loc[(PAIR_ROW, factor)], swapped.loc[(PAIR_ROW, factor)]
        assert b["gap_mean"] == pytest.approx(-a["gap_mean"])
        assert (b["diff_ci_low"], b["diff_ci_high"]) == pytest.approx((-a["diff_ci_high"], -a["diff_ci_low"]))
        assert b["t_stat"] == pytest.approx(-a["t_stat"])
        for column in ("t_p", "exact_p", "sign_p"):
            assert b[column] == pytest.approx(a[column])
        assert b["n_negative"] == a["n_seeds"] - a["n_ties"] - a["n_negative"]
        # a lower tail and the swapped one cover every assignment, those with the observed sum twice
        if a["exact_p_one_sided"] < 0.5:
            assert a["exact_p_one_sided"] + b["exact_p_one_sided"] > 1


def test_a_shift_common_to_both_models_changes_no_test():
    per_seed = per_seed_table(seed=5)
    table = length_seed_frame(per_seed)
    by_factor = {1: 0.3, 2: -1.1, 4: 2.5}  # a harder or easier text at each length, for both models
    by_seed = {0: 0.01, 1: -0.02, 2: 0.0, 3: 0.05, 4: -0.04}  # a seed's data order helping both models
    shifted = per_seed.assign(
        heldout_loss=per_seed["heldout_loss"] + per_seed["factor"].map(by_factor) + per_seed["seed"].map(by_seed)
    )
    other = length_seed_frame(shifted)
    pairs = table["model"] == PAIR_ROW
    columns = ["gap_mean", "gap_sd", "heldout_loss_mean", *[c for c in PAIR_TEST_COLUMNS if c != "reading"]]
    pd.testing.assert_frame_equal(table.loc[pairs, columns], other.loc[pairs, columns], rtol=1e-9)
    assert (table.loc[pairs, "reading"].fillna("") == other.loc[pairs, "reading"].fillna("")).all()


def test_only_the_seeds_both_models_have_are_paired():
    per_seed = per_seed_table()
    per_seed = per_seed[~((per_seed["model"] == "rope") & (per_seed["seed"] == 4))]
    table = length_seed_frame(per_seed)
    row = table[(table["model"] == PAIR_ROW) & (table["factor"] == 2)].iloc[0]
    assert row["n_seeds"] == 4 and row["seeds"] == "0,1,2,3"
    assert row["exact_p"] >= 2 / 16  # the floor of four seeds


def test_the_figure_shows_each_seeds_difference_and_the_tables_interval():
    from causalpos.figures.training import fig_length_seeds

    per_seed = per_seed_table(seed=2)
    table = length_seed_frame(per_seed)
    gaps = with_gaps(per_seed)
    right = fig_length_seeds(
        {"length_seeds": table, "length_eval": gaps, "length_pairs": paired_differences(gaps)}, {}
    ).axes[1]
    assert right.get_title().endswith("(5 seeds)")
    dots = next(line for line in right.lines if line.get_label() == "one seed")
    seeds = paired_differences(with_gaps(per_seed)).query("factor != 1")  # the figure pairs them on its own
    assert sorted(dots.get_ydata()) == pytest.approx(sorted(seeds["diff"]))
    bars = next(c for c in right.containers if c.get_label() == "mean, 95% CI (t)")
    drawn = sorted((seg[:, 1].min(), seg[:, 1].max()) for seg in bars.lines[2][0].get_segments())
    pair = table[(table["model"] == PAIR_ROW) & (table["factor"] != 1)]
    np.testing.assert_allclose(
        np.array(drawn), np.array(sorted(zip(pair["diff_ci_low"], pair["diff_ci_high"]))), rtol=1e-9
    )
    labels = [t.get_text() for t in right.get_xticklabels()]
    assert all(f"p = {p:.3g}" in label for p, label in zip(pair.sort_values("seq_len")["exact_p_one_sided"], labels))
