"""The Snakemake workflow end to end on the tiny test config: what a finished run of `all` holds.

The tests read the session's one finished run (`finished_run`, tests/conftest.py) and never change it;
a test that runs Snakemake or the CLI again works on a copy of its own (`finished_copy`). What a rerun
recomputes after an edit is in tests/workflow/test_rerun.py, the other targets and the CLI in tests/workflow/test_targets.py.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from causalpos import results
from causalpos.analysis.heads import METRICS as HEAD_METRICS
from causalpos.catalogue import paths
from causalpos.catalogue.tables import METRIC_COLUMNS
from causalpos.catalogue.claims import VERDICTS, ledger_pages
from helpers import assert_convergence_is_the_ledger, copy_workflow, edit_config, planned_jobs, snakemake

pytestmark = pytest.mark.workflow


def test_all_figures_end_to_end(finished_run):
    config = yaml.safe_load((finished_run / "config.yaml").read_text())
    for figure in config["figures"]:
        for fmt in config["plot"]["formats"]:
            path = finished_run / "results" / "figures" / f"{figure}.{fmt}"
            assert path.stat().st_size > 1000, path
    # one tidy table for all variants, as docs/results.md shows
    table = pd.read_parquet(finished_run / "results" / "simulation")
    assert set(table["variant"]) == set(config["simulation"]["variants"])
    assert {
        "layer",
        "query_pos",
        "key_pos",
        "score_mean",
        "score_sem",
        "prob_mean",
        "score_diagnorm",
        "alpha",
        "norm",
        "d",
        "n_samples",
        "seed",
    } <= set(table.columns)
    theory = pd.read_parquet(finished_run / "results" / "theory" / "layer2_scores.parquet")
    assert set(theory["alpha"]) == set(config["theory"]["alphas"])
    recursion = pd.read_parquet(finished_run / "results" / "theory" / "recursion.parquet")
    assert list(recursion["variant"].unique()) == list(config["simulation"]["variants"])
    assert (
        recursion["score"].notna().all()
        and (finished_run / "results" / "benchmarks" / "recursion.tsv").stat().st_size > 0
    )
    # every rule logs, every simulation, extraction and training has its run time, nothing half-written is left
    assert (finished_run / "results" / "logs" / "theory.log").stat().st_size > 0
    assert (finished_run / "results" / "logs" / "recursion.log").stat().st_size > 0
    runtimes = pd.read_parquet(finished_run / "results" / "summary" / "runtimes.parquet")
    timed = set(zip(runtimes["rule"], runtimes["job"]))
    assert {("simulate", v) for v in config["simulation"]["variants"]} <= timed
    assert {("train", "nope"), ("train", "rope"), ("extract", "nope"), ("recursion", "recursion")} <= timed
    assert (runtimes["seconds"] > 0).all()
    # each job's peak memory, CPU time and device: from its benchmark or recorded by its stage
    assert runtimes["max_rss_mb"].gt(0).all() and runtimes["cpu_seconds"].ge(0).all()
    # Snakemake's benchmark samples a job's CPU time about once a second: a sub-second job can read 0
    assert runtimes.loc[runtimes["seconds"] > 3, "cpu_seconds"].gt(0).all()
    assert runtimes["device"].notna().all()
    assert not list((finished_run / "results").rglob("*.tmp*"))


def test_second_run_does_nothing(finished_copy):
    assert planned_jobs(finished_copy, "all") == set()  # all_figures is a part of all


def test_data_stages_write_documents_tokens_and_snippets(finished_run):
    documents = pd.read_parquet(finished_run / "results" / "data" / "documents.parquet")
    assert {"doc_id", "source", "split", "text"} <= set(documents.columns)
    assert set(documents["split"]) == {"train", "heldout"}
    config = yaml.safe_load((finished_run / "config.yaml").read_text())
    tokens = finished_run / "results" / "tokens"
    blocks = np.load(tokens / "train.npy", mmap_mode="r")
    assert blocks.shape[1] == config["tokenizer"]["block_len"]
    snippets = np.load(tokens / "snippets.npy")
    assert snippets.shape[1] == config["evaluation"]["snippet_len"]
    assert (finished_run / "results" / "tokenizer" / "tokenizer.json").exists()
    assert "documents per source and split" in (finished_run / "results" / "logs" / "sample.log").read_text()


def test_training_outputs(finished_run):
    from transformers import AutoModelForCausalLM

    for model in ("nope", "rope"):
        folder = finished_run / "results" / "models" / model
        metrics = pd.read_parquet(folder / "metrics.parquet")
        assert list(metrics.columns) == METRIC_COLUMNS  # no timing among the results
        speed = pd.read_csv(finished_run / "results" / "benchmarks" / "train" / f"{model}.throughput.tsv", sep="\t")
        assert speed["step"].tolist() == metrics["step"].tolist() and (speed["tokens_per_s"].iloc[1:] > 0).all()
        first, last = metrics["heldout_loss"].dropna().iloc[[0, -1]]
        assert last < first  # it learns, even in a few steps
        loaded = AutoModelForCausalLM.from_pretrained(folder)
        assert all(flag == (model == "rope") for flag in loaded.config.no_rope_layers)
        lengths = pd.read_parquet(folder / "length_eval.parquet")
        assert sorted(lengths["factor"]) == [1, 2, 4]


def test_emergence_table_and_figure_from_the_snapshots(finished_run):
    """Snapshots at the configured steps, the extraction at each, and the table whose last step of nope is the
    ledger's claim 7 for the final model (the last snapshot is the final model; the same bootstrap)."""
    from causalpos.models.settings import snapshot_schedule
    from causalpos.workflow.config import training_defaults

    config = yaml.safe_load((finished_run / "config.yaml").read_text())
    steps = snapshot_schedule(training_defaults(config["training"]))
    for model in ("nope", "rope"):
        folder = finished_run / "results" / "models" / model / "snapshots"
        shown = sorted(p.name for p in folder.iterdir() if p.name != ".snakemake_timestamp")  # directory() output's
        assert shown == [f"step_{s:07d}.safetensors" for s in steps]
        losses = pd.read_parquet(finished_run / "results" / "emergence" / model / "losses.parquet")
        assert losses["step"].tolist() == steps
    table = pd.read_parquet(finished_run / "results" / "summary" / "emergence.parquet")
    assert set(table["model"]) == {"nope", "rope"} and sorted(table["step"].unique()) == steps
    assert {"concordance", "strength_ratio", "nonrelative_amplitude", "heldout_loss"} <= set(table["metric"])
    assert (table.loc[table.metric != "heldout_loss", "uncertainty"] > 0).all()
    ledger = pd.read_parquet(finished_run / "results" / "summary" / "claims.parquet").set_index("label")
    last = table[(table["model"] == "nope") & (table["step"] == steps[-1])].set_index(["metric", "stage"])
    for metric, stage, claim, label in (
        ("concordance", "f", "7a", "nope (f)"),
        ("concordance", "i", "7a", "nope (i)"),
        ("strength_ratio", "i", "7b", "nope"),
    ):
        row = ledger[ledger["claim_id"] == claim].loc[label]
        assert last.loc[(metric, stage), "value"] == pytest.approx(row["value"], abs=1e-9), (metric, stage)
    assert (finished_run / "results" / "figures" / "figE1_emergence.png").stat().st_size > 1000


def test_extraction_outputs_read_as_one_table(finished_run):
    """The score files of every model open as one pandas table, as docs/results.md shows; lower triangles only."""
    scores = pd.read_parquet(sorted(map(str, (finished_run / "results" / "activations").glob("*/scores.parquet"))))
    assert {"score_mean", "score_sem", "score_diagnorm"} <= set(scores.columns)
    config = yaml.safe_load((finished_run / "config.yaml").read_text())
    pretrained = list(config["extraction"]["pretrained"]["models"])
    assert set(scores["model"]) == {"nope", "rope", *pretrained}
    assert (scores["key_pos"] <= scores["query_pos"]).all()
    assert set(scores.loc[scores.model == "nope", "seq_len"]) == {config["evaluation"]["snippet_len"]}
    assert set(scores.loc[scores.model.isin(pretrained), "seq_len"]) == {config["extraction"]["pretrained"]["seq_len"]}
    for model in ("nope", *pretrained):
        inter = pd.read_parquet(finished_run / "results" / "activations" / model / "intermediates.parquet")
        assert sorted(inter["stage"].unique()) == list("abcdefghi")
        pages = sorted((finished_run / "results" / "figures" / f"fig_all_layers_{model}").glob("*.png"))
        assert {p.name.split("_layers")[0] for p in pages} == {"raw", "diagnorm"}  # one figure per kind
        assert all(p.stat().st_size > 1000 for p in pages)
    summary = pd.read_parquet(finished_run / "results" / "summary" / "nonrelativeness.parquet")
    assert set(summary["model"]) == {"nope", "rope", *pretrained}
    assert (finished_run / "results" / "pretrained" / pretrained[0] / "model.safetensors").exists()


def test_convergence_at_the_full_n_is_the_ledger(finished_run):
    """results/summary/convergence.parquet: claim 8 of every pretrained model; its largest N gives the ledger's rows."""
    summary = finished_run / "results" / "summary"
    convergence = pd.read_parquet(summary / "convergence.parquet")
    config = yaml.safe_load((finished_run / "config.yaml").read_text())
    assert set(convergence["model"]) == set(config["extraction"]["pretrained"]["models"])
    assert convergence["n_sequences"].max() == config["extraction"]["pretrained"]["n_sequences"]
    assert_convergence_is_the_ledger(convergence, pd.read_parquet(summary / "claims.parquet"), same_family=False)
    assert (finished_run / "results" / "figures" / "figL2_convergence.png").stat().st_size > 1000


def test_report_holds_every_figure_the_runtimes_and_the_config(finished_copy):
    snakemake(finished_copy, "--report", "report.html")
    page = (finished_copy / "report.html").read_text()
    categories = json.loads(re.search(r"var categories = (\{.*?\});\n", page).group(1))
    shown = {path for sub in categories.values() for paths in sub.values() for path in paths}
    # every file, the pages inside the fig_all_layers_<model> folders included
    figures = {
        str(p.relative_to(finished_copy))
        for p in (finished_copy / "results" / "figures").rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }  # not Snakemake's .snakemake_timestamp
    assert figures and figures <= shown
    assert set(categories["Figures"]) >= {"Simulation", "Trained models", "Pretrained LLMs", "All layers"}
    assert categories["Runtimes"] and categories["Configuration"]
    assert "results/summary/runtimes.html" in shown and "results/summary/config.html" in shown


def test_claims_ledger_from_the_run(finished_run):
    """Rule claims writes one row per claim and setting with a verdict, its Markdown and a page per part."""
    summary = finished_run / "results" / "summary"
    ledger = pd.read_parquet(summary / "claims.parquet")
    assert list(ledger.columns[:9]) == [
        "claim_id",
        "section",
        "statement",
        "setting",
        "metric",
        "value",
        "uncertainty",
        "threshold",
        "verdict",
    ]
    assert set(ledger["verdict"]) <= set(VERDICTS)
    assert ledger["p_value"].notna().any() and "p_adjusted" in ledger.columns
    assert {claim[0] for claim in ledger["claim_id"]} == set("123456789")  # claims 1-8 and the input law (9)
    assert (summary / "claims.md").read_text().count("\n|") > len(set(ledger["claim_id"]))
    pages = sorted(
        p.name for p in (finished_run / "results" / "figures" / "figL1_claims").iterdir() if not p.name.startswith(".")
    )  # not Snakemake's .snakemake_timestamp of a directory()
    assert pages == sorted(f"claims{page}.{ext}" for page in ledger_pages() for ext in ("pdf", "png"))  # one per part
    assert all((finished_run / "results" / "figures" / "figL1_claims" / page).stat().st_size > 1000 for page in pages)


def test_one_result_by_hand_runs_its_job_and_what_it_needs(finished_copy):
    """`snakemake --cores 2 <file>` (docs/cli.md): the jobs that file needs and no other, recorded by Snakemake, so
    that the next run of the workflow knows it is current."""
    table = finished_copy / "results" / "simulation" / "l2_alpha0.2.parquet"
    before = pd.read_parquet(table)
    table.unlink()
    assert planned_jobs(finished_copy, "results/simulation/l2_alpha0.2.parquet") == {("simulate", "l2_alpha0.2")}
    snakemake(finished_copy, "results/simulation/l2_alpha0.2.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(table), before)  # seeded: the same table
    # its readers are older than it now: a run of the workflow redraws them, and reruns nothing above them
    assert {rule for rule, _ in planned_jobs(finished_copy, "all")} <= {"figure", "claims", "runtimes"}


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c["simulation"]["defaults"].update(alpha=1.0), "simulation.defaults.alpha"),
        (lambda c: c["simulation"]["variants"]["l2_alpha0.2"].update(alpha=-0.1), "l2_alpha0.2.alpha"),
        (lambda c: c["simulation"]["defaults"].update(seq_len=1), "simulation.defaults.seq_len"),
        (lambda c: c["simulation"]["defaults"].update(norm="rmsnorm"), "allowed values: ['l2', 'layernorm']"),
        (lambda c: c["simulation"].update(colour="blue"), "unknown key(s) ['colour']"),
        (lambda c: c["figures"]["fig02_l2norm"].update(variants=["missing"]), "figures.fig02_l2norm.variants"),
    ],
)
def test_bad_config_fails_before_any_job(tmp_path, change, message):
    workdir = copy_workflow(tmp_path)
    edit_config(workdir, change)
    proc = snakemake(workdir, "all_figures", check=False)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not (workdir / "results").exists()


def test_the_tiny_run_has_every_models_heads_the_figure_and_the_benchmark(finished_run):
    """The shared tiny run (per_head on by default): rule heads's table over every extracted model, the figure
    drawn from it, its benchmark; SmolLM2-135M's real weights (9 query heads on 3 key heads) average to its
    head-average scores."""
    res = str(finished_run / "results")
    frame = pd.read_parquet(finished_run / paths.summary_file("heads.parquet"))
    heads = frame.groupby("model")["head"].nunique().to_dict()
    layers = frame.groupby("model")["layer"].nunique().to_dict()
    assert heads == {"nope": 2, "rope": 2, "smollm2_135m": 9} and layers == {"nope": 2, "rope": 2, "smollm2_135m": 30}
    assert set(frame["metric"]) == set(HEAD_METRICS) and frame["value"].notna().all()
    for model in ("nope", "smollm2_135m"):
        maps = results.scores(model, res, per_head=True)
        average = results.scores(model, res)
        lower = np.tril(np.ones(average.shape[1:], dtype=bool))
        np.testing.assert_allclose(maps.mean(axis=1)[:, lower], average[:, lower], rtol=1e-5, atol=1e-5)
    assert (finished_run / "results/figures/figH1_heads.png").stat().st_size > 10_000
    assert (finished_run / paths.heads_benchmark()).exists()
