"""`causalpos <stage>` (docs/cli.md) gives what its rule gave: each test runs stages by hand in a copy of the
session's finished run (`finished_copy`, tests/conftest.py) and compares with the rule's outputs there.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

from causalpos.catalogue.tables import ACTIVATION_TABLES

pytestmark = pytest.mark.workflow


def test_cli_data_and_training_stages_give_the_rule_outputs(finished_copy):
    """`causalpos sample`, `tokenizer`, `train rope` and `evaluate rope` from nothing, under by_cli/: the same
    documents, token blocks and (same seed, one thread as the rule's job) weights as the rules made."""
    from safetensors.torch import load_file

    env = {**os.environ, "PYTHONPATH": str(finished_copy / "src"), "OMP_NUM_THREADS": "1"}
    for stage in (["sample"], ["tokenizer"], ["train", "rope"], ["evaluate", "rope"]):
        subprocess.run([sys.executable, "-m", "causalpos.workflow.cli", "--results", "by_cli", *stage],
                       cwd=finished_copy, env=env, check=True, capture_output=True, text=True)
    by_rule, by_cli = finished_copy / "results", finished_copy / "by_cli"
    documents = pd.read_parquet(by_cli / "data" / "documents.parquet")
    assert len(documents) > 100
    pd.testing.assert_frame_equal(documents, pd.read_parquet(by_rule / "data" / "documents.parquet"))
    assert (by_cli / "tokens" / "blocks.json").exists() and (by_cli / "tokenizer" / "tokenizer.json").exists()
    np.testing.assert_array_equal(np.load(by_cli / "tokens" / "train.npy"), np.load(by_rule / "tokens" / "train.npy"))
    metrics = pd.read_parquet(by_cli / "models" / "rope" / "metrics.parquet")
    assert metrics["step"].iloc[-1] == yaml.safe_load((finished_copy / "config.yaml").read_text())["training"]["steps"]
    weights_rule = load_file(by_rule / "models" / "rope" / "model.safetensors")
    weights_cli = load_file(by_cli / "models" / "rope" / "model.safetensors")
    assert weights_rule.keys() == weights_cli.keys()
    for name, tensor in weights_rule.items():
        np.testing.assert_allclose(weights_cli[name].numpy(), tensor.numpy(), atol=1e-5, err_msg=name)
    lengths = pd.read_parquet(by_cli / "models" / "rope" / "length_eval.parquet")
    assert sorted(lengths["factor"]) == [1, 2, 4] and set(lengths["model"]) == {"rope"}
    np.testing.assert_allclose(lengths["heldout_loss"],
                               pd.read_parquet(by_rule / "models" / "rope" / "length_eval.parquet")["heldout_loss"],
                               rtol=1e-5)


def test_cli_theory_simulate_and_plot_give_the_rule_outputs(finished_copy):
    """`causalpos theory`, `recursion`, `simulate` (two variants) and `plot` from nothing, under by_cli/: the closed
    forms, the recursion and the Monte Carlo tables the rules wrote (seeded), and Figure S1 in every format."""
    env = {**os.environ, "PYTHONPATH": str(finished_copy / "src")}
    for stage in (["theory"], ["recursion"], ["simulate", "l2_alpha0.0_d16", "--threads", "1"],
                  ["simulate", "l2_alpha0.0", "--threads", "1"], ["plot", "figS1_mc_vs_closed_form"]):
        subprocess.run([sys.executable, "-m", "causalpos.workflow.cli", "--results", "by_cli", *stage],
                       cwd=finished_copy, env=env, check=True, capture_output=True, text=True)
    by_rule, by_cli = finished_copy / "results", finished_copy / "by_cli"
    table = pd.read_parquet(by_cli / "simulation")
    assert set(table["variant"]) == {"l2_alpha0.0", "l2_alpha0.0_d16"}
    for variant in ("l2_alpha0.0", "l2_alpha0.0_d16"):
        pd.testing.assert_frame_equal(pd.read_parquet(by_cli / "simulation" / f"{variant}.parquet"),
                                      pd.read_parquet(by_rule / "simulation" / f"{variant}.parquet"))
    for theory in ("theory/layer2_scores.parquet", "theory/recursion.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(by_cli / theory), pd.read_parquet(by_rule / theory))
    for fmt in ("pdf", "png"):
        assert (by_cli / "figures" / f"figS1_mc_vs_closed_form.{fmt}").stat().st_size > 1000


def test_cli_extract_gives_the_rule_tables(finished_copy):
    """`causalpos extract nope` writes what rule extract wrote."""
    tables = finished_copy / "results" / "activations" / "nope"
    by_rule = {name: pd.read_parquet(tables / f"{name}.parquet") for name in ACTIVATION_TABLES}
    env = {**os.environ, "PYTHONPATH": str(finished_copy / "src")}
    subprocess.run([sys.executable, "-m", "causalpos.workflow.cli", "extract", "nope"], cwd=finished_copy, env=env, check=True,
                   capture_output=True)
    for name, frame in by_rule.items():
        pd.testing.assert_frame_equal(pd.read_parquet(tables / f"{name}.parquet"), frame, rtol=1e-6)


def test_cli_ablation_gives_the_rule_outputs(finished_copy):
    """`causalpos ablate rope` and `ablation-summary` again in the finished run: the same table as rules
    pattern_ablation and pattern_ablation_summary wrote (the same sequences, maps and shuffle), and its figure."""
    env = {**os.environ, "PYTHONPATH": str(finished_copy / "src"), "OMP_NUM_THREADS": "1"}
    results = finished_copy / "results"
    by_rule = {name: pd.read_parquet(path) for name, path in (
        ("rope", results / "models" / "rope" / "pattern_ablation.parquet"),
        ("summary", results / "summary" / "pattern_ablation.parquet"))}
    (results / "models" / "rope" / "pattern_ablation.parquet").unlink()
    (results / "figures" / "figT4_pattern_ablation.png").unlink()
    for stage in (["ablate", "rope"], ["ablation-summary"]):
        subprocess.run([sys.executable, "-m", "causalpos.workflow.cli", *stage], cwd=finished_copy, env=env,
                       check=True, capture_output=True, text=True)
    for name, path in (("rope", results / "models" / "rope" / "pattern_ablation.parquet"),
                       ("summary", results / "summary" / "pattern_ablation.parquet")):
        pd.testing.assert_frame_equal(pd.read_parquet(path), by_rule[name], rtol=1e-5)
    assert (results / "figures" / "figT4_pattern_ablation.png").stat().st_size > 1000
