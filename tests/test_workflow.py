"""The Snakemake workflow end to end on the tiny test config, and what a rerun recomputes.

Each test works on its own copy of the workflow (Snakefile, rules, scripts and
the causalpos sources, imported from the copy through PYTHONPATH), so editing
code or config there leaves the repository alone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from causalpos.analysis.claims.catalogue import PAGES
from causalpos.tables import ACTIVATION_TABLES
from conftest import copy_workflow, edit_config, snakemake

pytestmark = pytest.mark.workflow


def planned_jobs(workdir: Path, target: str = "all_figures") -> set[tuple[str, str]]:
    """(rule, wildcard value or '') of every job `snakemake -n` would run."""
    out = snakemake(workdir, "-n", target).stdout
    jobs, rule = set(), None
    for line in out.splitlines():
        if m := re.match(r"^(?:local)?rule (\w+):", line):
            rule = m.group(1)
            jobs.add((rule, ""))
        elif rule and (m := re.match(r"^\s+wildcards: \w+=(\S+)", line)):
            jobs.discard((rule, ""))
            jobs.add((rule, m.group(1)))
            rule = None
    return {job for job in jobs if job[0] not in ("all", "all_figures")}


def touch_source(workdir: Path, module: str) -> None:
    """Append a comment to src/causalpos/<module>.py of the copy (module as a path, e.g. "models/data")."""
    path = workdir / "src" / "causalpos" / f"{module}.py"
    path.write_text(path.read_text() + "\n# an edit\n")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A copy of the workflow after one complete run of `all` (every figure and table)."""
    workdir = copy_workflow(tmp_path_factory.mktemp("workflow"))
    snakemake(workdir, "all")
    return workdir


@pytest.fixture
def rerun_copy(finished, tmp_path) -> Path:
    """A fresh copy of the finished run (mtimes and Snakemake metadata kept)."""
    dest = tmp_path / "copy"
    shutil.copytree(finished, dest, symlinks=True)
    return dest


def figures_using(config: dict, variant: str) -> set[tuple[str, str]]:
    return {("figure", name) for name, spec in config["figures"].items() if variant in spec.get("variants", [])}


def test_all_figures_end_to_end(finished):
    config = yaml.safe_load((finished / "config.yaml").read_text())
    for figure in config["figures"]:
        for fmt in config["plot"]["formats"]:
            path = finished / "results" / "figures" / f"{figure}.{fmt}"
            assert path.stat().st_size > 1000, path
    # one tidy table for all variants, as docs/results.md shows
    table = pd.read_parquet(finished / "results" / "simulation")
    assert set(table["variant"]) == set(config["simulation"]["variants"])
    assert {"layer", "query_pos", "key_pos", "score_mean", "score_sem", "prob_mean",
            "score_diagnorm", "alpha", "norm", "d", "n_samples", "seed"} <= set(table.columns)
    theory = pd.read_parquet(finished / "results" / "theory" / "layer2_scores.parquet")
    assert set(theory["alpha"]) == set(config["theory"]["alphas"])
    # every rule logs, every simulation, extraction and training has its run time, nothing half-written is left
    assert (finished / "logs" / "theory.log").stat().st_size > 0
    runtimes = pd.read_parquet(finished / "results" / "summary" / "runtimes.parquet")
    timed = set(zip(runtimes["rule"], runtimes["job"]))
    assert {("simulate", v) for v in config["simulation"]["variants"]} <= timed
    assert {("train", "nope"), ("train", "rope"), ("extract", "nope")} <= timed
    assert (runtimes["seconds"] > 0).all()
    # each job's peak memory, CPU time and device: from its benchmark or recorded by its stage
    assert runtimes[["max_rss_mb", "cpu_seconds"]].gt(0).all().all()
    assert runtimes["device"].notna().all()
    assert not list((finished / "results").rglob("*.tmp*"))


def test_second_run_does_nothing(rerun_copy):
    assert planned_jobs(rerun_copy) == set()
    assert planned_jobs(rerun_copy, "all") == set()


def test_data_stages_write_documents_tokens_and_snippets(finished):
    documents = pd.read_parquet(finished / "results" / "data" / "documents.parquet")
    assert {"doc_id", "source", "split", "text"} <= set(documents.columns)
    assert set(documents["split"]) == {"train", "heldout"}
    config = yaml.safe_load((finished / "config.yaml").read_text())
    tokens = finished / "results" / "tokens"
    blocks = np.load(tokens / "train.npy", mmap_mode="r")
    assert blocks.shape[1] == config["tokenizer"]["block_len"]
    snippets = np.load(tokens / "snippets.npy")
    assert snippets.shape[1] == config["evaluation"]["snippet_len"]
    assert (finished / "results" / "tokenizer" / "tokenizer.json").exists()
    assert "documents per source and split" in (finished / "logs" / "sample.log").read_text()


TRAINING_JOBS = {("train", "nope"), ("train", "rope"), ("length_eval", "nope"), ("length_eval", "rope"),
                 ("figure", "figT1_training_loss"), ("figure", "figT2_length_generalization")}
# what reads the trained models' activations (the summary and the figures drawn from them)
TRAINED_ANALYSIS = {("extract", "nope"), ("extract", "rope"), ("model_figure", "nope"), ("model_figure", "rope"),
                    ("summary", ""), ("figure", "fig03_intermediates"), ("figure", "fig08_model_layers"),
                    ("figure", "figC1_nope_vs_rope"), ("figure", "figM1_nonrelativeness"),
                    ("figure", "figM2_increasing_fraction"), ("figure", "figM3_position_probe")}
LLM_ANALYSIS = {("extract", "smollm2_135m"), ("model_figure", "smollm2_135m"), ("figure", "fig05_llms")}
# the extraction at every training snapshot, its table and figure
EMERGENCE = {("emergence", "nope"), ("emergence", "rope"), ("emergence_summary", ""), ("figure", "figE1_emergence")}


CONFIG_PAGE = {("config_record", "")}  # the report's copy of the configuration: any config edit


def with_ledger(jobs: set) -> set:
    """The jobs plus what gathers their results: the run-time table and the claims ledger."""
    rules = {rule for rule, _ in jobs}
    extra = {("runtimes", "")} if rules & {"simulate", "train", "extract", "emergence"} else set()
    if rules & {"simulate", "extract", "theory"}:
        extra.add(("claims", ""))
    trained = {"nope", "rope"}
    if any(rule == "extract" and model not in trained for rule, model in jobs):  # the LLMs' claims on growing N
        extra.add(("convergence", ""))
    return jobs | extra


def test_editing_data_code_reruns_the_data_branch_only(rerun_copy):
    touch_source(rerun_copy, "models/data")
    expected = {("sample", ""), ("tokenizer", "")} | TRAINING_JOBS | TRAINED_ANALYSIS | LLM_ANALYSIS | EMERGENCE
    assert planned_jobs(rerun_copy, "all") == with_ledger(expected)  # the documents feed the LLM's sequences too


def test_changing_the_vocabulary_reruns_tokenizer_training_and_their_analysis(rerun_copy):
    edit_config(rerun_copy, lambda c: c["tokenizer"].update(vocab_size=450))
    expected = {("tokenizer", "")} | TRAINING_JOBS | TRAINED_ANALYSIS | EMERGENCE
    assert planned_jobs(rerun_copy, "all") == with_ledger(expected) | CONFIG_PAGE


def test_changing_a_training_setting_reruns_training_and_its_analysis_only(rerun_copy):
    edit_config(rerun_copy, lambda c: c["training"].update(steps=25))
    assert planned_jobs(rerun_copy, "all") == with_ledger(TRAINING_JOBS | TRAINED_ANALYSIS | EMERGENCE) | CONFIG_PAGE


def test_training_outputs(finished):
    from transformers import AutoModelForCausalLM

    for model in ("nope", "rope"):
        folder = finished / "results" / "models" / model
        metrics = pd.read_parquet(folder / "metrics.parquet")
        assert {"step", "tokens_seen", "train_loss", "heldout_loss", "lr", "tokens_per_s"} <= set(metrics.columns)
        first, last = metrics["heldout_loss"].dropna().iloc[[0, -1]]
        assert last < first  # it learns, even in a few steps
        loaded = AutoModelForCausalLM.from_pretrained(folder)
        assert all(flag == (model == "rope") for flag in loaded.config.no_rope_layers)
        lengths = pd.read_parquet(folder / "length_eval.parquet")
        assert sorted(lengths["factor"]) == [1, 2, 4]


def test_emergence_table_and_figure_from_the_snapshots(finished):
    """Snapshots at the configured steps, the extraction at each, and the table whose last step of nope is the
    ledger's claim 7 for the final model (the last snapshot is the final model; the same bootstrap)."""
    from causalpos.models.settings import snapshot_schedule, training_settings

    config = yaml.safe_load((finished / "config.yaml").read_text())
    steps = snapshot_schedule(training_settings(config["training"]))
    for model in ("nope", "rope"):
        folder = finished / "results" / "models" / model / "snapshots"
        assert sorted(p.name for p in folder.iterdir()) == [f"step_{s:07d}.safetensors" for s in steps]
        losses = pd.read_parquet(finished / "results" / "emergence" / model / "losses.parquet")
        assert losses["step"].tolist() == steps
    table = pd.read_parquet(finished / "results" / "summary" / "emergence.parquet")
    assert set(table["model"]) == {"nope", "rope"} and sorted(table["step"].unique()) == steps
    assert {"concordance", "strength_ratio", "nonrelative_amplitude", "heldout_loss"} <= set(table["metric"])
    assert (table.loc[table.metric != "heldout_loss", "uncertainty"] > 0).all()
    ledger = pd.read_parquet(finished / "results" / "summary" / "claims.parquet").set_index("label")
    last = table[(table["model"] == "nope") & (table["step"] == steps[-1])].set_index(["metric", "stage"])
    for metric, stage, claim, label in (("concordance", "f", "7a", "nope (f)"), ("concordance", "i", "7a", "nope (i)"),
                                        ("strength_ratio", "i", "7b", "nope")):
        row = ledger[ledger["claim_id"] == claim].loc[label]
        assert last.loc[(metric, stage), "value"] == pytest.approx(row["value"], abs=1e-9), (metric, stage)
    assert (finished / "results" / "figures" / "figE1_emergence.png").stat().st_size > 1000


def test_length_seeds_target_trains_the_other_seeds_and_summarises(rerun_copy):
    """`snakemake length_seeds`: both models again with each of evaluation.seeds, their length evaluation and
    the table and figure over seeds; the default run's own trainings are reused, not retrained."""
    jobs = planned_jobs(rerun_copy, "length_seeds")
    config = yaml.safe_load((rerun_copy / "config.yaml").read_text())
    seeds = config["evaluation"]["seeds"]
    assert {rule for rule, _ in jobs} == {"train_seed", "length_eval_seed", "length_seeds"}
    snakemake(rerun_copy, "length_seeds")
    table = pd.read_parquet(rerun_copy / "results" / "summary" / "length_seeds.parquet")
    assert set(table["model"]) == {"nope", "rope", "nope - rope"}
    assert (table["n_seeds"] == 1 + len(seeds)).all()
    assert sorted(table["factor"].unique()) == sorted(config["evaluation"]["length_factors"])
    for seed in seeds:
        trained = rerun_copy / "results" / "seeds" / "nope" / f"seed{seed}" / "model.safetensors"
        assert trained.stat().st_size > 1000
    assert (rerun_copy / "results" / "figures" / "figT3_length_seeds.png").stat().st_size > 1000
    assert planned_jobs(rerun_copy, "length_seeds") == set()
    assert planned_jobs(rerun_copy, "all") == set()  # nothing of the default run was touched


def test_a_config_with_its_own_results_folder_writes_only_there(rerun_copy):
    """config/nope-large.yaml's `results: results/nope-large`: every output, log and benchmark of its DAG lies
    under that folder, so it runs beside the default run without touching it."""
    import shutil as sh

    sh.copytree(Path(__file__).resolve().parents[1] / "config", rerun_copy / "config")
    out = snakemake(rerun_copy, "-n", "all", "length_seeds", "--configfile", "config/nope-large.yaml").stdout
    outputs = [p.strip() for line in out.splitlines() if line.strip().startswith(("output:", "log:", "benchmark:"))
               for p in line.split(":", 1)[1].split(",")]
    assert outputs and all(p.startswith("results/nope-large/") for p in outputs), outputs[:5]
    assert "rule train:" in out and "rule emergence:" in out and "rule pretrained:" not in out


def test_changing_one_variant_reruns_it_and_its_figures(rerun_copy):
    edit_config(rerun_copy, lambda c: c["simulation"]["variants"]["l2_alpha0.2"].update(alpha=0.3))
    config = yaml.safe_load((rerun_copy / "config.yaml").read_text())
    expected = {("simulate", "l2_alpha0.2")} | figures_using(config, "l2_alpha0.2")
    assert planned_jobs(rerun_copy) == with_ledger(expected) | CONFIG_PAGE


def test_changing_a_default_reruns_every_variant_that_inherits_it(rerun_copy):
    edit_config(rerun_copy, lambda c: c["simulation"]["defaults"].update(seed=1))
    config = yaml.safe_load((rerun_copy / "config.yaml").read_text())
    jobs = planned_jobs(rerun_copy)
    assert {j for j in jobs if j[0] == "simulate"} == {("simulate", v) for v in config["simulation"]["variants"]}
    assert ("theory", "") not in jobs


def all_figure_jobs(config: dict) -> set[tuple[str, str]]:
    models = ["nope", "rope", *config["extraction"]["pretrained"]["models"]]
    return {("figure", f) for f in config["figures"]} | {("model_figure", m) for m in models}


def test_changing_a_plot_option_reruns_only_figures(rerun_copy):
    edit_config(rerun_copy, lambda c: c["plot"].update(dpi=72))
    config = yaml.safe_load((rerun_copy / "config.yaml").read_text())
    assert planned_jobs(rerun_copy) == all_figure_jobs(config) | {("claims", ""), ("convergence", "")} | CONFIG_PAGE


def test_editing_simulation_code_reruns_simulations_and_figures(rerun_copy):
    touch_source(rerun_copy, "simulation/engine")
    config = yaml.safe_load((rerun_copy / "config.yaml").read_text())
    expected = {("simulate", v) for v in config["simulation"]["variants"]}
    expected |= {("figure", f) for f, spec in config["figures"].items() if spec.get("variants")}
    expected |= {("emergence_summary", ""), ("figure", "figE1_emergence")}  # against the alpha = 0 simulation
    assert planned_jobs(rerun_copy) == with_ledger(expected)


def test_editing_figure_code_reruns_only_figures(rerun_copy):
    touch_source(rerun_copy, "figures/style")
    config = yaml.safe_load((rerun_copy / "config.yaml").read_text())
    # the ledger and the convergence table draw their figures
    assert planned_jobs(rerun_copy) == all_figure_jobs(config) | {("claims", ""), ("convergence", "")}


def test_editing_extraction_code_reruns_extraction_summary_and_their_figures(rerun_copy):
    touch_source(rerun_copy, "models/extract")
    assert planned_jobs(rerun_copy, "all") == with_ledger(TRAINED_ANALYSIS | LLM_ANALYSIS | EMERGENCE)


def test_editing_theory_code_reruns_theory_and_figures_not_simulations(rerun_copy):
    touch_source(rerun_copy, "simulation/theory")
    jobs = planned_jobs(rerun_copy)
    assert ("theory", "") in jobs
    assert not any(rule == "simulate" for rule, _ in jobs)


@pytest.mark.parametrize("change, message", [
    (lambda c: c["simulation"]["defaults"].update(alpha=1.0), "simulation.defaults.alpha"),
    (lambda c: c["simulation"]["variants"]["l2_alpha0.2"].update(alpha=-0.1), "l2_alpha0.2.alpha"),
    (lambda c: c["simulation"]["defaults"].update(seq_len=1), "simulation.defaults.seq_len"),
    (lambda c: c["simulation"]["defaults"].update(norm="rmsnorm"), "allowed values: ['l2', 'layernorm']"),
    (lambda c: c["simulation"].update(colour="blue"), "unknown key(s) ['colour']"),
    (lambda c: c["figures"]["fig02_l2norm"].update(variants=["missing"]), "figures.fig02_l2norm.variants"),
])
def test_bad_config_fails_before_any_job(tmp_path, change, message):
    workdir = copy_workflow(tmp_path)
    edit_config(workdir, change)
    proc = snakemake(workdir, "all_figures", check=False)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not (workdir / "results").exists()


def test_cli_stage_gives_the_rule_output(rerun_copy):
    """`causalpos simulate NAME` does what rule simulate did for that variant."""
    env = {**os.environ, "PYTHONPATH": str(rerun_copy / "src")}
    subprocess.run([sys.executable, "-m", "causalpos.workflow.cli", "simulate", "l2_alpha0.2", "--threads", "1",
                    "-o", "by_cli.parquet"], cwd=rerun_copy, env=env, check=True, capture_output=True)
    by_rule = pd.read_parquet(rerun_copy / "results" / "simulation" / "l2_alpha0.2.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(rerun_copy / "by_cli.parquet"), by_rule)


def test_cli_train_gives_the_rule_model(rerun_copy):
    """`causalpos train nope` trains the same weights as rule train did (same data, seed, threads)."""
    from safetensors.torch import load_file

    for folder in ("tokens", "tokenizer"):  # the CLI trains under by_cli/, on the rule's data
        shutil.copytree(rerun_copy / "results" / folder, rerun_copy / "by_cli" / folder)
    env = {**os.environ, "PYTHONPATH": str(rerun_copy / "src")}
    subprocess.run([sys.executable, "-m", "causalpos.workflow.cli", "--results", "by_cli", "train", "nope"], cwd=rerun_copy,
                   env=env, check=True, capture_output=True)
    by_rule = load_file(rerun_copy / "results" / "models" / "nope" / "model.safetensors")
    by_cli = load_file(rerun_copy / "by_cli" / "models" / "nope" / "model.safetensors")
    assert by_rule.keys() == by_cli.keys()
    for name, tensor in by_rule.items():
        np.testing.assert_allclose(by_cli[name].numpy(), tensor.numpy(), atol=1e-5, err_msg=name)


def test_extraction_outputs_read_as_one_table(finished):
    """The score files of every model open as one pandas table, as docs/results.md shows; lower triangles only."""
    scores = pd.read_parquet(sorted(map(str, (finished / "results" / "activations").glob("*/scores.parquet"))))
    assert {"score_mean", "score_sem", "score_diagnorm"} <= set(scores.columns)
    config = yaml.safe_load((finished / "config.yaml").read_text())
    pretrained = list(config["extraction"]["pretrained"]["models"])
    assert set(scores["model"]) == {"nope", "rope", *pretrained}
    assert (scores["key_pos"] <= scores["query_pos"]).all()
    assert set(scores.loc[scores.model == "nope", "seq_len"]) == {config["evaluation"]["snippet_len"]}
    assert set(scores.loc[scores.model.isin(pretrained), "seq_len"]) == {config["extraction"]["pretrained"]["seq_len"]}
    for model in ("nope", *pretrained):
        inter = pd.read_parquet(finished / "results" / "activations" / model / "intermediates.parquet")
        assert sorted(inter["stage"].unique()) == list("abcdefghi")
        pages = sorted((finished / "results" / "figures" / f"fig_all_layers_{model}").glob("*.png"))
        assert {p.name.split("_layers")[0] for p in pages} == {"raw", "diagnorm"}  # one figure per kind
        assert all(p.stat().st_size > 1000 for p in pages)
    summary = pd.read_parquet(finished / "results" / "summary" / "nonrelativeness.parquet")
    assert set(summary["model"]) == {"nope", "rope", *pretrained}
    assert (finished / "results" / "pretrained" / pretrained[0] / "model.safetensors").exists()


def test_changing_the_llm_length_reruns_only_its_extraction(rerun_copy):
    edit_config(rerun_copy, lambda c: c["extraction"]["pretrained"].update(seq_len=24))
    jobs = planned_jobs(rerun_copy, "all")
    assert ("extract", "smollm2_135m") in jobs and ("model_figure", "smollm2_135m") in jobs
    assert not {("extract", "nope"), ("extract", "rope"), ("pretrained", "smollm2_135m")} & jobs
    assert not any(rule in ("train", "tokenizer", "simulate") for rule, _ in jobs)


def test_cli_extract_gives_the_rule_tables(rerun_copy):
    """`causalpos extract nope` writes what rule extract wrote."""
    tables = rerun_copy / "results" / "activations" / "nope"
    by_rule = {name: pd.read_parquet(tables / f"{name}.parquet") for name in ACTIVATION_TABLES}
    env = {**os.environ, "PYTHONPATH": str(rerun_copy / "src")}
    subprocess.run([sys.executable, "-m", "causalpos.workflow.cli", "extract", "nope"], cwd=rerun_copy, env=env, check=True,
                   capture_output=True)
    for name, frame in by_rule.items():
        pd.testing.assert_frame_equal(pd.read_parquet(tables / f"{name}.parquet"), frame, rtol=1e-6)


def test_two_checkouts_share_simulations_through_the_output_cache(tmp_path, monkeypatch):
    """cache: True on simulate: a second checkout with the same SNAKEMAKE_OUTPUT_CACHE takes the table
    from the cache instead of simulating; a changed variant is simulated anew."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(cache))
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first, second = copy_workflow(tmp_path / "first"), copy_workflow(tmp_path / "second")
    target = "results/simulation/l2_alpha0.2.parquet"
    snakemake(first, target, "--cache")
    assert len(list(cache.iterdir())) == 1
    out = snakemake(second, target, "--cache")
    assert f"Symlinking output file {target} from cache" in out.stdout + out.stderr
    log = second / "logs" / "simulate" / "l2_alpha0.2.log"
    assert not log.exists() or log.stat().st_size == 0  # the job never ran (Snakemake may create its log)
    linked = second / target
    assert linked.is_symlink() and Path(os.readlink(linked)).parent == cache
    pd.testing.assert_frame_equal(pd.read_parquet(linked), pd.read_parquet(first / target))
    # another seed is another result: simulated, and stored beside the first
    edit_config(second, lambda c: c["simulation"]["variants"]["l2_alpha0.2"].update(seed=1))
    snakemake(second, target, "--cache")
    assert log.stat().st_size > 0
    assert len(list(cache.iterdir())) == 2


def test_report_holds_every_figure_the_runtimes_and_the_config(rerun_copy):
    import json

    snakemake(rerun_copy, "--report", "report.html")
    page = (rerun_copy / "report.html").read_text()
    categories = json.loads(re.search(r"var categories = (\{.*?\});\n", page).group(1))
    shown = {path for sub in categories.values() for paths in sub.values() for path in paths}
    # every file, the pages inside the fig_all_layers_<model> folders included
    figures = {str(p.relative_to(rerun_copy)) for p in (rerun_copy / "results" / "figures").rglob("*")
               if p.is_file() and not p.name.startswith(".")}  # not Snakemake's .snakemake_timestamp
    assert figures and figures <= shown
    assert set(categories["Figures"]) >= {"Simulation", "Trained models", "Pretrained LLMs", "All layers"}
    assert categories["Runtimes"] and categories["Configuration"]
    assert "results/summary/runtimes.html" in shown and "results/summary/config.html" in shown


def test_claims_ledger_from_the_run_and_by_the_cli(rerun_copy):
    """Rule claims writes one row per claim and setting with a verdict; `causalpos claims` writes the same."""
    summary = rerun_copy / "results" / "summary"
    ledger = pd.read_parquet(summary / "claims.parquet")
    assert list(ledger.columns[:9]) == ["claim_id", "section", "statement", "setting", "metric", "value",
                                        "uncertainty", "threshold", "verdict"]
    assert set(ledger["verdict"]) <= {"supported", "not supported", "inconclusive"}
    assert {claim[0] for claim in ledger["claim_id"]} == set("123456789")  # claims 1-8 and the input law (9)
    assert (summary / "claims.md").read_text().count("\n|") > len(set(ledger["claim_id"]))
    pages = sorted(p.name for p in (rerun_copy / "results" / "figures" / "figL1_claims").iterdir())
    assert pages == sorted(f"claims{page}.{ext}" for page in PAGES for ext in ("pdf", "png"))  # one per part
    assert all((rerun_copy / "results" / "figures" / "figL1_claims" / page).stat().st_size > 1000 for page in pages)
    env = {**os.environ, "PYTHONPATH": str(rerun_copy / "src")}
    shutil.copytree(rerun_copy / "results", rerun_copy / "by_cli", dirs_exist_ok=True, symlinks=True)
    (rerun_copy / "by_cli" / "summary" / "claims.parquet").unlink()
    subprocess.run([sys.executable, "-m", "causalpos.workflow.cli", "--results", "by_cli", "claims"], cwd=rerun_copy,
                   env=env, check=True, capture_output=True)
    pd.testing.assert_frame_equal(pd.read_parquet(rerun_copy / "by_cli" / "summary" / "claims.parquet"), ledger)


def test_convergence_at_the_full_n_is_the_ledger(finished):
    """results/summary/convergence.parquet: claim 8 of every pretrained model; its largest N gives the ledger's rows."""
    summary = finished / "results" / "summary"
    convergence = pd.read_parquet(summary / "convergence.parquet")
    config = yaml.safe_load((finished / "config.yaml").read_text())
    assert set(convergence["model"]) == set(config["extraction"]["pretrained"]["models"])
    assert convergence["n_sequences"].max() == config["extraction"]["pretrained"]["n_sequences"]
    assert_convergence_is_the_ledger(convergence, pd.read_parquet(summary / "claims.parquet"))
    assert (finished / "results" / "figures" / "figL2_convergence.png").stat().st_size > 1000


def assert_convergence_is_the_ledger(convergence: pd.DataFrame, ledger: pd.DataFrame) -> None:
    full = convergence[convergence["n_sequences"] == convergence.groupby("model")["n_sequences"].transform("max")]
    keys = ["claim_id", "model", "layer"]
    rows = ledger[ledger["claim"] == 8][keys + ["value", "uncertainty", "verdict"]]
    both = full.merge(rows, on=keys, suffixes=("", "_ledger"), validate="one_to_one")
    assert len(both) == len(full) == len(rows) > 0
    np.testing.assert_array_equal(both["value"], both["value_ledger"])
    np.testing.assert_array_equal(both["uncertainty"], both["uncertainty_ledger"])
    assert (both["verdict"] == both["verdict_ledger"]).all()


def test_paper_llms_writes_its_own_folder_only(rerun_copy):
    """Target paper_llms on the test config's small extraction.paper_llms: its tables, figures, claim 8's rows and the
    convergence table under results/paper_llms, logs under logs/paper_llms, and nothing of the default run changed."""
    from causalpos.io import read_metadata

    def files():
        return {p: p.stat().st_mtime_ns for p in rerun_copy.rglob("*") if p.is_file() and ".snakemake" not in p.parts}

    before = files()
    snakemake(rerun_copy, "paper_llms")
    after = files()
    paper, logs = rerun_copy / "results" / "paper_llms", rerun_copy / "logs" / "paper_llms"
    changed = [p for p in after if before.get(p) != after[p]]
    assert changed and [p for p in changed if paper not in p.parents and logs not in p.parents] == []
    config = yaml.safe_load((rerun_copy / "config.yaml").read_text())
    settings, models = config["extraction"]["paper_llms"], list(config["extraction"]["pretrained"]["models"])
    for model in models:
        scores = paper / "activations" / model / "scores.parquet"
        sizes = pd.read_parquet(scores, columns=["seq_len", "n_sequences"])
        assert set(sizes["seq_len"]) == {settings["seq_len"]} and set(sizes["n_sequences"]) == {settings["n_sequences"]}
        sequences = read_metadata(scores)["sequences"]
        assert sum(c["n"] for c in sequences["counts"]) == len(set(sequences["doc_ids"])) == settings["n_sequences"]
        assert {c["split"] for c in sequences["counts"]} <= set(settings["splits"])
        pages = list((paper / "figures" / f"fig_all_layers_{model}").glob("*.png"))
        assert pages and all(page.stat().st_size > 1000 for page in pages)
    ledger = pd.read_parquet(paper / "summary" / "claims.parquet")
    assert set(ledger["claim"]) == {8} and set(ledger["model"]) == set(models)
    convergence = pd.read_parquet(paper / "summary" / "convergence.parquet")
    per_group = settings["n_sequences"] // settings["bootstrap_groups"]
    assert sorted(convergence["n_sequences"].unique()) == [4 * per_group, 8 * per_group]  # 4 and 8 of 8 groups
    assert_convergence_is_the_ledger(convergence, ledger)
    for figure in ("fig05_llms", "figM1_nonrelativeness", "figL1_claims/claims7-9", "figL2_convergence"):
        assert (paper / "figures" / f"{figure}.png").stat().st_size > 1000
    assert sorted(p.name for p in (paper / "figures" / "figL1_claims").iterdir()) == ["claims7-9.pdf", "claims7-9.png"]
