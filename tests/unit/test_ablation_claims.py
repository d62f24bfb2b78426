"""Claim 11 (ours, issue 27): the pattern ablation's effect on the loss gap, over training seeds, in the ledger
(analysis/claims/ablation_claims.py).

The ablation tables are made by hand with known per-seed effects, so the value, its standard error and its p's can
be checked against a direct computation with scipy.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from causalpos.analysis.claims.ledger import build_ledger, ledger_markdown
from causalpos.models.pattern_ablation import ABLATION_COLUMNS
from helpers import R, sim_table

SEEDS = (0, 1, 2, 3, 4)
FACTORS = (1, 2, 4)
MODELS = ("nope", "rope")
NEGATIVE = (-0.031, -0.024, -0.036, -0.027, -0.030)  # every seed: removing the pattern shrinks the gap more
CONTROL_GAP = 0.01  # the shuffled control's gap above no intervention's, at every factor > 1


def ablation_table(effects, seeds=SEEDS, with_pretrained: bool = True) -> pd.DataFrame:
    """ABLATION_COLUMNS rows of both trained models at 1x, 2x, 4x: `effects(model, factor)` the per-seed effects
    (a sequence over `seeds`); gaps: none 0.05 k, shuffled that + CONTROL_GAP, pattern the shuffled gap + effect."""
    rows = []
    for model in MODELS:
        for factor in FACTORS:
            per_seed = effects(model, factor) if factor > 1 else [math.nan] * len(seeds)
            for seed, effect in zip(seeds, per_seed):
                none = 0.05 * factor if factor > 1 else 0.0
                shuffled = none + CONTROL_GAP if factor > 1 else 0.0
                gaps = {"none": none, "shuffled": shuffled, "pattern": shuffled + (effect if factor > 1 else 0.0)}
                for condition, gap in gaps.items():
                    rows.append(
                        {
                            "model": model,
                            "kind": "trained",
                            "seed": seed,
                            "factor": factor,
                            "seq_len": 256 * factor,
                            "condition": condition,
                            "n_sequences": 16,
                            "n_estimate": 8,
                            "loss": 3.0 + gap,
                            "loss_sem": 0.01,
                            "delta": gap - none,
                            "delta_sem": 0.001,
                            "gap": gap,
                            "gap_sem": 0.002,
                            "effect": effect if condition == "pattern" else (0.0 if factor > 1 else math.nan),
                            "effect_sem": 0.004 if factor > 1 else math.nan,
                            "bias_rms": 0.1,
                        }
                    )
    if with_pretrained:  # a pretrained model: one length, no training seed, no gap: not a setting of claim 11
        for condition in ("none", "pattern", "shuffled"):
            rows.append(
                {
                    "model": "llm",
                    "kind": "pretrained",
                    "seed": -1,
                    "factor": 1,
                    "seq_len": 1024,
                    "condition": condition,
                    "n_sequences": 16,
                    "n_estimate": 8,
                    "loss": 2.5,
                    "loss_sem": 0.01,
                    "delta": 0.0,
                    "delta_sem": 0.0,
                    "gap": math.nan,
                    "gap_sem": math.nan,
                    "effect": math.nan,
                    "effect_sem": math.nan,
                    "bias_rms": 0.1,
                }
            )
    return pd.DataFrame(rows, columns=ABLATION_COLUMNS)


def claim11_rows(table, **kw) -> pd.DataFrame:
    ledger = build_ledger(None, None, None, None, None, n_bootstrap=R, pattern_ablation=table, **kw)
    return ledger[ledger["claim"] == 11].reset_index(drop=True)


def holm(p) -> np.ndarray:
    """Holm's adjusted p's, from the formula: sorted p_(k) times (m - k + 1), running maximum, capped at 1."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p)
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (len(p) - np.arange(len(p)))))
    out = np.empty_like(p)
    out[order] = adjusted
    return out


def shifted(base, model, factor):
    """Per-seed effects: `base` shifted a little per model and factor, so that the four rows differ."""
    return [e * (1.0 + 0.1 * (factor == 4)) + 0.002 * (model == "rope") for e in base]


def test_consistently_negative_effects_are_supported_with_t_over_seeds():
    rows = claim11_rows(ablation_table(lambda m, f: shifted(NEGATIVE, m, f)))
    assert len(rows) == 4 and list(zip(rows["model"], rows["label"])) == [
        ("nope", "nope 2x"),
        ("nope", "nope 4x"),
        ("rope", "rope 2x"),
        ("rope", "rope 4x"),
    ]
    assert rows["setting"][1] == "nope, 4x the training length (1024 tokens)"
    p_for, p_against = [], []
    for (_, got), (model, factor) in zip(rows.iterrows(), [(m, f) for m in MODELS for f in (2, 4)]):
        x = np.array(shifted(NEGATIVE, model, factor))
        se = x.std(ddof=1) / np.sqrt(len(x))
        assert got["value"] == pytest.approx(x.mean(), rel=1e-12)
        assert got["uncertainty"] == pytest.approx(se, rel=1e-12)
        t = x.mean() / se  # threshold 0
        assert got["p_value"] == pytest.approx(stats.t.cdf(t, len(x) - 1), rel=1e-9)
        assert got["p_against"] == pytest.approx(stats.t.sf(t, len(x) - 1), rel=1e-9)
        half = stats.t.ppf(0.975, len(x) - 1) * se
        assert f"[{x.mean() - half:+.4g}, {x.mean() + half:+.4g}]" in got["note"]
        assert "5 training seeds (0, 1, 2, 3, 4)" in got["note"] and "5 of 5 seeds with effect < 0" in got["note"]
        assert f"under none): {(x + CONTROL_GAP).mean():+.4g}" in got["note"]  # pattern's gap - none's, per seed
        assert not got["exact"]
        p_for.append(got["p_value"])
        p_against.append(got["p_against"])
    # Holm over claim 11's four rows, and nothing else
    np.testing.assert_allclose(rows["p_adjusted"], holm(p_for), rtol=1e-12)
    np.testing.assert_allclose(rows["p_against_adjusted"], holm(p_against), rtol=1e-12)
    assert (rows["p_adjusted"] <= 0.05).all() and list(rows["verdict"]) == ["supported"] * 4
    assert (rows["p_adjusted"] > rows["p_value"]).any()  # the adjustment did something


def test_consistently_positive_effects_are_not_supported():
    rows = claim11_rows(ablation_table(lambda m, f: [-e for e in shifted(NEGATIVE, m, f)]))
    assert list(rows["verdict"]) == ["not supported"] * 4 and (rows["value"] > 0).all()
    assert (rows["p_against_adjusted"] <= 0.05).all() and (rows["p_adjusted"] > 0.5).all()
    assert rows["note"].str.contains("0 of 5 seeds with effect < 0").all()


def test_effects_scattered_around_zero_are_inconclusive():
    mixed = (-0.02, 0.015, -0.01, 0.02, 0.001)
    rows = claim11_rows(ablation_table(lambda m, f: mixed))
    assert list(rows["verdict"]) == ["inconclusive"] * 4
    assert rows["note"].str.contains("2 of 5 seeds with effect < 0").all()
    assert np.isfinite(rows["p_value"]).all() and (rows["p_adjusted"] > 0.05).all()


def test_a_threshold_of_the_config_moves_the_test():
    """The t statistic is (mean - threshold) / SE: effects of about -0.03 are not below -0.1."""
    rows = claim11_rows(ablation_table(lambda m, f: shifted(NEGATIVE, m, f)), thresholds={"ablation_effect": -0.1})
    assert list(rows["verdict"]) == ["not supported"] * 4 and (rows["threshold"] == -0.1).all()


def test_one_seed_gives_the_value_without_a_verdict():
    rows = claim11_rows(ablation_table(lambda m, f: [-0.03], seeds=(0,)))
    assert len(rows) == 4 and (rows["value"] == -0.03).all()
    assert rows["uncertainty"].isna().all() and rows["p_value"].isna().all() and rows["p_adjusted"].isna().all()
    assert list(rows["verdict"]) == ["inconclusive"] * 4
    for note in rows["note"]:
        assert "1 training seed (0)" in note and "length_seeds" in note and "results/seeds/summary/claims.md" in note
        assert "SE over sequences 0.004" in note  # the seed's own effect_sem, for information


def test_identical_effects_over_seeds_count_as_a_test_not_as_exact():
    rows = claim11_rows(ablation_table(lambda m, f: [-0.02] * 5))
    assert (rows["uncertainty"] == 0).all() and not rows["exact"].any()
    assert (rows["p_value"] == 0).all() and list(rows["verdict"]) == ["supported"] * 4


def test_no_table_or_no_trained_rows_give_one_absent_row():
    for table, words in (
        (None, "no pattern_ablation table"),
        (pd.DataFrame(columns=ABLATION_COLUMNS), "no pattern_ablation table"),
    ):
        (got,) = claim11_rows(table).itertuples()
        assert got.claim_id == "11a" and got.verdict == "inconclusive" and np.isnan(got.value) and words in got.note
    pretrained_only = ablation_table(lambda m, f: NEGATIVE)
    pretrained_only = pretrained_only[pretrained_only["kind"] == "pretrained"]
    (got,) = claim11_rows(pretrained_only).itertuples()
    assert "no trained model at a factor > 1" in got.note


def test_a_table_without_the_needed_columns_is_refused():
    with pytest.raises(ValueError, match="pattern_ablation table lacks column"):
        claim11_rows(ablation_table(lambda m, f: NEGATIVE).drop(columns=["effect"]))


def test_a_seed_twice_is_refused():
    table = ablation_table(lambda m, f: NEGATIVE)
    with pytest.raises(ValueError, match="seed appears twice"):
        claim11_rows(pd.concat([table, table[table["seed"] == 0]], ignore_index=True))


def test_claim_11_is_a_family_of_its_own():
    """Adding claim 11's rows leaves every other row, claim 10's adjusted p's included, as it is."""
    from causalpos.simulation.recursion import recursion_table
    from causalpos.simulation.variant import Variant

    n = 12
    recursion = recursion_table({"l2_alpha0.0": Variant(seq_len=n, n_layers=3, d=64)})
    truth = []
    for layer in sorted(recursion["layer"].unique()):
        part = recursion[recursion["layer"] == layer]
        m = np.full((n, n), np.nan)
        m[part["query_pos"], part["key_pos"]] = part["score_corrected"]
        truth.append(m)
    sims = sim_table("l2_alpha0.0", truth, sem=1e-3)
    common = dict(n_bootstrap=R, recursion=recursion)
    with_11 = build_ledger(
        sims, None, None, None, None, pattern_ablation=ablation_table(lambda m, f: shifted(NEGATIVE, m, f)), **common
    )
    without = build_ledger(sims, None, None, None, None, **common)
    ten = with_11[with_11["claim"] == 10]
    assert np.isfinite(ten["p_adjusted"]).sum() >= 2  # claim 10 has tests to disturb
    pd.testing.assert_frame_equal(
        with_11[with_11["claim"] != 11].reset_index(drop=True),
        without[without["claim"] != 11].reset_index(drop=True),
        check_dtype=False,
    )  # `model`: strings beside claim 11's, else all NaN
    eleven = with_11[with_11["claim"] == 11]
    np.testing.assert_allclose(eleven["p_adjusted"], holm(eleven["p_value"]), rtol=1e-12)


def test_the_ledger_without_other_tables_has_claim_11s_rows_and_says_how_they_are_tested():
    ledger = build_ledger(None, None, None, None, None, pattern_ablation=ablation_table(lambda m, f: NEGATIVE))
    eleven = ledger[ledger.claim == 11]
    assert len(eleven) == len(MODELS) * 2 and set(eleven["model"]) == set(MODELS)
    assert list(ledger["claim"]) == sorted(ledger["claim"]) and ledger["claim"].iloc[-1] == 11
    text = ledger_markdown(ledger)
    assert "**11a**" in text and "claim 11: 4" in text and "Student's t with n - 1 degrees of freedom" in text
    assert "Holm-adjusted over the 0 rows" in text  # the paper's family: claim 11's tests are not counted there
