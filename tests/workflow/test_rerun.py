"""What a rerun recomputes: after each kind of edit (config, code), `snakemake -n` on a copy of the session's
finished run plans exactly the jobs that depend on it.

Each test edits its own copy (`finished_copy`, tests/conftest.py) of the workflow: its Snakefile, rules,
scripts and the causalpos sources, imported from the copy through PYTHONPATH.
"""

from __future__ import annotations

import pytest
import yaml

from helpers import edit_config, planned_jobs, touch_source

pytestmark = pytest.mark.workflow


def figures_using(config: dict, variant: str) -> set[tuple[str, str]]:
    return {("figure", name) for name, spec in config["figures"].items() if variant in spec.get("variants", [])}


ABLATION = {("pattern_ablation_summary", "")}  # every model's pattern ablation in one table, and its figure
TRAINING_JOBS = {
    ("train", "nope"),
    ("train", "rope"),
    ("length_eval", "nope"),
    ("length_eval", "rope"),
    ("figure", "figT1_training_loss"),
    ("figure", "figT2_length_generalization"),
    ("pattern_ablation", "nope"),
    ("pattern_ablation", "rope"),
} | ABLATION

TRAINED_ANALYSIS = {
    ("extract", "nope"),
    ("extract", "rope"),
    ("model_figure", "nope"),
    ("model_figure", "rope"),
    ("summary", ""),
    ("figure", "fig03_intermediates"),
    ("figure", "fig08_model_layers"),
    ("figure", "figC1_nope_vs_rope"),
    ("figure", "figM1_nonrelativeness"),
    ("figure", "figM2_increasing_fraction"),
    ("figure", "figM3_position_probe"),
}

LLM_ANALYSIS = {("extract", "smollm2_135m"), ("model_figure", "smollm2_135m"), ("figure", "fig05_llms")}
LLM_ABLATION = {("pattern_ablation_pretrained", "smollm2_135m")} | ABLATION  # on the documents, not the extraction

EMERGENCE = {("emergence", "nope"), ("emergence", "rope"), ("emergence_summary", ""), ("figure", "figE1_emergence")}

CONFIG_PAGE = {("config_record", "")}  # the report's copy of the configuration: any config edit


def with_ledger(jobs: set) -> set:
    """The jobs plus what gathers their results: the run-time table, the claims ledger and the heads' table."""
    rules = {rule for rule, _ in jobs}
    extra = {("runtimes", "")} if rules & {"simulate", "train", "emergence", "recursion", "extract"} else set()
    if rules & {"simulate", "theory", "recursion", "pattern_ablation_summary", "extract"}:
        extra.add(("claims", ""))
    if ("extract", "smollm2_135m") in jobs:  # the LLMs' claims on growing N, and the sliding-window test
        extra |= {("convergence", ""), ("window_test", "")}
    if "extract" in rules:  # every model's heads (extraction.per_head) and their figure
        extra |= {("heads", ""), ("figure", "figH1_heads")}
    return jobs | extra


def test_editing_data_code_reruns_the_data_branch_only(finished_copy):
    touch_source(finished_copy, "corpus/documents")
    expected = (
        {("sample", ""), ("tokenizer", "")} | TRAINING_JOBS | TRAINED_ANALYSIS | LLM_ANALYSIS | EMERGENCE | LLM_ABLATION
    )
    assert planned_jobs(finished_copy, "all") == with_ledger(expected)  # the documents feed the LLM's sequences too


def test_changing_the_vocabulary_reruns_tokenizer_training_and_their_analysis(finished_copy):
    edit_config(finished_copy, lambda c: c["tokenizer"].update(vocab_size=450))
    expected = {("tokenizer", "")} | TRAINING_JOBS | TRAINED_ANALYSIS | EMERGENCE
    assert planned_jobs(finished_copy, "all") == with_ledger(expected) | CONFIG_PAGE


def test_changing_a_training_setting_reruns_training_and_its_analysis_only(finished_copy):
    edit_config(finished_copy, lambda c: c["training"].update(steps=25))
    assert planned_jobs(finished_copy, "all") == with_ledger(TRAINING_JOBS | TRAINED_ANALYSIS | EMERGENCE) | CONFIG_PAGE


@pytest.mark.parametrize(
    "target",
    ["results/models/nope/model.safetensors", "results/models/nope/length_eval.parquet"],
    ids=["model", "length_eval"],
)
def test_changing_the_steps_retrains_for_a_target_that_needs_only_the_model(finished_copy, target):
    """The steps decide which snapshots training writes; with snapshots named by step as outputs of their own,
    Snakemake found outputs without metadata, skipped the params check and called the old model current."""
    edit_config(finished_copy, lambda c: c["training"].update(steps=25))
    planned = planned_jobs(finished_copy, target)
    assert ("train", "nope") in planned and ("train", "rope") not in planned


def test_changing_one_variant_reruns_it_and_its_figures(finished_copy):
    """Its simulation, the recursion (one job for every variant) and the figures that show the variant."""
    edit_config(finished_copy, lambda c: c["simulation"]["variants"]["l2_alpha0.2"].update(alpha=0.3))
    config = yaml.safe_load((finished_copy / "config.yaml").read_text())
    assert "l2_alpha0.2" in config["figures"]["figR1_recursion"]["variants"]
    expected = {("simulate", "l2_alpha0.2"), ("recursion", "")} | figures_using(config, "l2_alpha0.2")
    assert planned_jobs(finished_copy) == with_ledger(expected) | CONFIG_PAGE


def test_changing_a_default_reruns_every_variant_that_inherits_it(finished_copy):
    edit_config(finished_copy, lambda c: c["simulation"]["defaults"].update(seed=1))
    config = yaml.safe_load((finished_copy / "config.yaml").read_text())
    jobs = planned_jobs(finished_copy)
    assert {j for j in jobs if j[0] == "simulate"} == {("simulate", v) for v in config["simulation"]["variants"]}
    assert ("theory", "") not in jobs


def all_figure_jobs(config: dict) -> set[tuple[str, str]]:
    return {("figure", f) for f in config["figures"]} | {
        ("model_figure", m) for m in ("nope", "rope", *config["extraction"]["pretrained"]["models"])
    }


def test_changing_a_plot_option_reruns_only_figures(finished_copy):
    edit_config(finished_copy, lambda c: c["plot"].update(dpi=72))
    config = yaml.safe_load((finished_copy / "config.yaml").read_text())
    assert (
        planned_jobs(finished_copy)
        == all_figure_jobs(config) | {("claims", ""), ("convergence", "")} | ABLATION | CONFIG_PAGE
    )


def test_editing_simulation_code_reruns_simulations_and_figures(finished_copy):
    touch_source(finished_copy, "simulation/engine")
    config = yaml.safe_load((finished_copy / "config.yaml").read_text())
    expected = {("simulate", v) for v in config["simulation"]["variants"]}
    expected |= {("figure", f) for f, spec in config["figures"].items() if spec.get("variants")}
    expected |= {("emergence_summary", ""), ("figure", "figE1_emergence")}  # against the alpha = 0 simulation
    assert planned_jobs(finished_copy) == with_ledger(expected)


def test_editing_figure_code_reruns_only_figures(finished_copy):
    touch_source(finished_copy, "figures/style")
    config = yaml.safe_load((finished_copy / "config.yaml").read_text())
    # the ledger, the convergence table and the pattern ablation draw their figures
    assert planned_jobs(finished_copy) == all_figure_jobs(config) | {("claims", ""), ("convergence", "")} | ABLATION


def test_editing_extraction_code_reruns_extraction_summary_and_their_figures(finished_copy):
    touch_source(finished_copy, "models/extract")
    assert planned_jobs(finished_copy, "all") == with_ledger(TRAINED_ANALYSIS | LLM_ANALYSIS | EMERGENCE)


def test_editing_recursion_code_reruns_the_recursion_its_figure_and_the_ledger_only(finished_copy):
    touch_source(finished_copy, "simulation/recursion")  # the ledger's claim 10 reads the recursion's table
    # the window test runs the recursion on the pretrained models' stacks (claims 10d-10e)
    expected = {("recursion", ""), ("figure", "figR1_recursion"), ("window_test", "")}
    assert planned_jobs(finished_copy) == with_ledger(expected)


def test_a_window_change_reruns_the_variant_the_recursion_and_what_reads_them(finished_copy):
    """A variant no figure shows: its simulation and what reads every simulation, the recursion (its table holds
    every variant) and the figure drawn from that table."""
    edit_config(finished_copy, lambda c: c["simulation"]["variants"]["l2_alpha0.0_window4"].update(window=5))
    expected = {("simulate", "l2_alpha0.0_window4"), ("recursion", ""), ("figure", "figR1_recursion")}
    assert planned_jobs(finished_copy) == with_ledger(expected) | CONFIG_PAGE


def test_editing_theory_code_reruns_theory_and_figures_not_simulations(finished_copy):
    touch_source(finished_copy, "simulation/theory")
    jobs = planned_jobs(finished_copy)
    assert ("theory", "") in jobs
    assert not any(rule == "simulate" for rule, _ in jobs)


def test_changing_the_llm_length_reruns_only_its_extraction(finished_copy):
    edit_config(finished_copy, lambda c: c["extraction"]["pretrained"].update(seq_len=24))
    jobs = planned_jobs(finished_copy, "all")
    assert ("extract", "smollm2_135m") in jobs and ("model_figure", "smollm2_135m") in jobs
    assert not {("extract", "nope"), ("extract", "rope"), ("pretrained", "smollm2_135m")} & jobs
    assert not any(rule in ("train", "tokenizer", "simulate") for rule, _ in jobs)
