"""Rule recursion's table (results/theory/recursion.parquet) from its job module and the params the rule gives
(workflow.settings.recursion_variants): every variant of the config with its own settings and window, one row per layer
and visible pair, the simulation tables' parameter columns, the values of independent calls of
simulation.recursion.recursion (with and without the finite-d correction); and its params, which rerun it when a
variant changes. No workflow runs here (tests/workflow/test_rerun.py has what a rerun plans, tests/workflow/test_workflow.py the run).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from causalpos.io import read_metadata, read_table
from causalpos.matrices import diagonal_normalise, visible_pairs
from causalpos.simulation import recursion as rec
from causalpos.simulation.engine import result_frame, simulate
from causalpos.simulation.variant import Variant
from causalpos.catalogue.tables import RECURSION_COLUMNS, SIMULATION_COLUMNS
from causalpos.workflow.config import load_config
from causalpos.workflow.job import Job, run_job
from causalpos.workflow.settings import recursion_variants, variant_params
from helpers import ROOT

TINY = ROOT / ".test" / "config.yaml"
UNCORRECTED = {"layernorm_sqrtd_alpha0.0", "rope_causal_alpha0.0", "rope_nomask_alpha0.0"}  # the tiny config's


@pytest.fixture(scope="module")
def config():
    return load_config(TINY, devices=False)


@pytest.fixture(scope="module")
def table(config, tmp_path_factory):
    """The stage's table for the tiny config, written and read back as the rule does."""
    output = tmp_path_factory.mktemp("recursion") / "recursion.parquet"
    run_job(Job("recursion", output={"table": str(output)}, params={"variants": recursion_variants(config)}))
    return read_table(output), read_metadata(output)


def variant(config, name: str) -> Variant:
    return Variant(**variant_params(config, name))


def test_one_row_per_variant_layer_and_visible_pair(config, table):
    frame, metadata = table
    names = list(config["simulation"]["variants"])
    assert metadata["stage"] == "recursion" and set(metadata["variants"]) == set(names)
    assert list(frame.columns) == RECURSION_COLUMNS + list(Variant().params())
    assert str(frame["window"].dtype) == "Int64"
    assert list(frame["variant"].unique()) == names
    for name in names:
        v = variant(config, name)
        rows = frame[frame["variant"] == name]
        assert rows["layer"].nunique() == v.n_layers
        for layer, at in rows.groupby("layer"):
            shown = np.zeros((v.seq_len, v.seq_len), dtype=bool)
            shown[at["query_pos"], at["key_pos"]] = True
            assert len(at) == shown.sum()  # no pair twice
            assert np.array_equal(shown, visible_pairs(v.seq_len, v.mask, v.window)), (name, layer)
    windowed = frame[frame["variant"] == "l2_alpha0.0_window4"]
    assert (windowed["window"] == 4).all() and (windowed["query_pos"] - windowed["key_pos"] < 4).all()
    assert len(windowed) == 4 * sum(min(i + 1, 4) for i in range(12))  # the hidden pairs are left out
    assert frame.loc[frame["variant"] != "l2_alpha0.0_window4", "window"].isna().all()


@pytest.mark.parametrize("name", ["l2_alpha0.2_exact", "l2_alpha0.0_window4"])
def test_parameter_columns_are_the_simulation_tables(config, table, name):
    """The variant's columns as rule simulate writes them (the resolved sampler, the window), the same dtypes."""
    frame, _ = table
    v = variant(config, name)
    sim = result_frame(simulate(v, device="cpu"), name)
    params = list(v.params())
    ours = frame.loc[frame["variant"] == name, params].drop_duplicates().reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, sim[params].drop_duplicates().reset_index(drop=True))
    assert list(sim.columns) == SIMULATION_COLUMNS + params


@pytest.mark.parametrize(
    "name", ["l2_alpha0.2", "l2_alpha0.0_window4", "rope_causal_alpha0.0", "layernorm_sqrtd_alpha0.0"]
)
def test_values_are_the_recursions(config, table, name):
    """score, prob, score_diagnorm are recursion.recursion's at the table's pairs; the corrected columns its
    result with correction=True where the correction is cheap, and NaN (corrected False) under RoPE and for
    LayerNorm with sqrt(d) scaling."""
    frame, _ = table
    v = variant(config, name)
    rows = frame[frame["variant"] == name]
    layer, query, key = (rows[c].to_numpy() for c in ("layer", "query_pos", "key_pos"))
    limit = rec.recursion(v)
    np.testing.assert_array_equal(rows["score"], limit.scores[layer, query, key])
    np.testing.assert_array_equal(rows["prob"], limit.probs[layer, query, key])
    diagnorm = np.stack([diagonal_normalise(s, shown) for s, shown in zip(limit.scores, limit.visible)])
    np.testing.assert_allclose(rows["score_diagnorm"], diagnorm[layer, query, key], rtol=0, atol=1e-15)
    assert (rows["concentrates"] == rec.concentrates(v)).all()
    if name in UNCORRECTED:
        assert not rows["corrected"].any()
        assert rows[["score_corrected", "score_diagnorm_corrected", "prob_corrected"]].isna().all().all()
        return
    assert rows["corrected"].all()
    full = rec.recursion(v, correction=True)
    np.testing.assert_allclose(rows["score_corrected"], full.scores[layer, query, key], rtol=0, atol=1e-14)
    np.testing.assert_allclose(rows["prob_corrected"], full.probs[layer, query, key], rtol=0, atol=1e-14)
    corrected = np.stack([diagonal_normalise(s, shown) for s, shown in zip(full.scores, full.visible)])
    np.testing.assert_allclose(rows["score_diagnorm_corrected"], corrected[layer, query, key], rtol=0, atol=1e-14)
    assert np.abs(rows["score_corrected"] - rows["score"]).max() > 1e-4  # a correction, not a copy
    # each row of probabilities sums to 1, corrected or not (the correction of a row sums to 0)
    sums = rows.groupby(["layer", "query_pos"])[["prob", "prob_corrected"]].sum()
    np.testing.assert_allclose(sums.to_numpy(), 1.0, atol=1e-10)


def test_which_variants_are_corrected():
    assert rec.cheap_correction(Variant()) and rec.cheap_correction(Variant(norm="layernorm", scale="d"))
    assert rec.cheap_correction(Variant(window=8, alpha=0.2, sampler="exact"))
    assert not rec.cheap_correction(Variant(pe="rope"))
    assert not rec.cheap_correction(Variant(norm="layernorm", scale="sqrt_d"))
    assert not rec.cheap_correction(Variant(norm="layernorm", scale="none"))


def test_params_follow_every_variant_and_nothing_else(config):
    """The job's params are every variant's settings (window included): one changed variant, or a new one, changes
    them and so reruns the job; a plot option does not."""
    params = recursion_variants(config)
    assert params == {name: variant(config, name).params() for name in config["simulation"]["variants"]}
    assert params["l2_alpha0.0_window4"]["window"] == 4
    changed = {
        **config,
        "simulation": {
            **config["simulation"],
            "variants": {**config["simulation"]["variants"], "l2_alpha0.0_window4": {"window": 5}},
        },
    }
    assert recursion_variants(changed) != params
    plot = {**config, "plot": {**config["plot"], "dpi": 72}}
    assert recursion_variants(plot) == params
