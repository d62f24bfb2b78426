"""The other targets (length_seeds, a config with its own results folder) and the between-workflow output
cache, each on a copy of the session's finished run (`finished_copy`, tests/conftest.py). Target paper_llms
is in tests/workflow/test_paper_llms.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from helpers import copy_run, edit_config, planned_jobs, snakemake

pytestmark = pytest.mark.workflow


# over 20 s (~35 s): target length_seeds in full on a copy (two more trainings and their ablations)
def test_length_seeds_target_trains_the_other_seeds_and_summarises(finished_copy):
    """`snakemake length_seeds`: both models again with each of evaluation.seeds, their length evaluation and
    pattern ablation, the tables and figures over seeds and claim 11's ledger; the default run's own trainings
    and ablations are reused, not redone."""
    jobs = planned_jobs(finished_copy, "length_seeds")
    config = yaml.safe_load((finished_copy / "config.yaml").read_text())
    seeds = config["evaluation"]["seeds"]
    runs = {f"{model}_seed{seed}" for model in ("nope", "rope") for seed in seeds}  # catalogue.models.seed_run
    assert {job for job in jobs if job[0] in ("train", "length_eval", "pattern_ablation")} == {
        (rule, run) for rule in ("train", "length_eval", "pattern_ablation") for run in runs
    }
    assert {rule for rule, _ in jobs} == {
        "train",
        "length_eval",
        "pattern_ablation",
        "length_seeds_table",
        "pattern_ablation_summary",
        "claims",
    }
    assert {("pattern_ablation_summary", "@results/seeds"), ("claims", "@results/seeds")} <= jobs
    snakemake(finished_copy, "length_seeds")
    everyone = [config["training"].get("seed", 0), *seeds]
    ablation = pd.read_parquet(finished_copy / "results" / "seeds" / "summary" / "pattern_ablation.parquet")
    assert set(ablation["kind"]) == {"trained"}  # the pretrained models have no training seed
    assert sorted(ablation.groupby("model")["seed"].unique().map(sorted).tolist()) == [sorted(everyone)] * 2
    ledger = pd.read_parquet(finished_copy / "results" / "seeds" / "summary" / "claims.parquet")
    assert set(ledger["claim_id"]) == {"11a"}
    factors = [f for f in config["evaluation"]["length_factors"] if f > 1]
    assert len(ledger) == 2 * len(factors) and ledger["uncertainty"].notna().all()  # an SE over the seeds
    assert ledger["note"].str.contains(f"{len(everyone)} training seeds").all()
    assert (finished_copy / "results" / "seeds" / "figures" / "figT4_pattern_ablation.png").stat().st_size > 1000
    table = pd.read_parquet(finished_copy / "results" / "summary" / "length_seeds.parquet")
    assert set(table["model"]) == {"nope", "rope", "nope - rope"}
    assert (table["n_seeds"] == 1 + len(seeds)).all()
    assert sorted(table["factor"].unique()) == sorted(config["evaluation"]["length_factors"])
    for seed in seeds:
        trained = finished_copy / "results" / "models" / f"nope_seed{seed}" / "model.safetensors"
        assert trained.stat().st_size > 1000
    assert (finished_copy / "results" / "figures" / "figT3_length_seeds.png").stat().st_size > 1000
    assert planned_jobs(finished_copy, "length_seeds") == set()
    assert planned_jobs(finished_copy, "all") == set()  # nothing of the default run was touched


@pytest.mark.parametrize(
    "configfiles, folder",
    [
        (["config/nope-large.yaml"], "results/nope-large"),
        (["config.yaml", "config/length-seeds.yaml"], "results/length-seeds"),
    ],
)
def test_a_config_with_its_own_results_folder_writes_only_there(finished_copy, configfiles, folder):
    """config/nope-large.yaml's `results: results/nope-large`, and config/length-seeds.yaml's merged over
    config.yaml: every output, log and benchmark of the DAG lies under that folder, so it runs beside the default
    run without touching it."""
    import shutil as sh

    sh.copytree(Path(__file__).resolve().parents[2] / "config", finished_copy / "config")
    out = snakemake(finished_copy, "-n", "all", "length_seeds", "--configfile", *configfiles).stdout
    outputs = [
        p.strip()
        for line in out.splitlines()
        if line.strip().startswith(("output:", "log:", "benchmark:"))
        for p in line.split(":", 1)[1].split(",")
    ]
    assert outputs and all(p.startswith(f"{folder}/") for p in outputs), outputs[:5]
    assert "rule train:" in out and "rule emergence:" in out
    if folder == "results/nope-large":  # the larger pair alone: no pretrained LLM
        assert "rule pretrained:" not in out


def test_two_checkouts_share_simulations_through_the_output_cache(finished_run, tmp_path, monkeypatch):
    """cache: True on simulate: a second checkout with the same SNAKEMAKE_OUTPUT_CACHE takes the table
    from the cache instead of simulating; a changed variant is simulated anew."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(cache))
    target, log = "results/simulation/l2_alpha0.2.parquet", "results/logs/simulate/l2_alpha0.2.log"
    first, second = (copy_run(finished_run, tmp_path / name) for name in ("first", "second"))
    for checkout in (first, second):  # two checkouts of the finished run without this table and its log
        (checkout / target).unlink()
        (checkout / log).unlink()
    snakemake(first, target, "--cache")
    assert (first / log).stat().st_size > 0  # simulated there
    assert len(list(cache.iterdir())) == 2  # the variant's table and its group sums
    out = snakemake(second, target, "--cache")
    assert f"Symlinking output file {target} from cache" in out.stdout + out.stderr
    assert (
        not (second / log).exists() or (second / log).stat().st_size == 0
    )  # the job never ran (Snakemake may create its log)
    linked = second / target
    assert linked.is_symlink() and Path(os.readlink(linked)).parent == cache
    pd.testing.assert_frame_equal(pd.read_parquet(linked), pd.read_parquet(first / target))
    # another seed is another result: simulated, and stored beside the first
    edit_config(second, lambda c: c["simulation"]["variants"]["l2_alpha0.2"].update(seed=1))
    snakemake(second, target, "--cache")
    assert (second / log).stat().st_size > 0
    assert len(list(cache.iterdir())) == 4  # two outputs of each of the two results
