"""The stages of the workflow: one entry per Snakemake rule that writes results, read by everything else.

An entry says what its rule reads (`inputs`: files by name, for a job's wildcards), what decides its output
besides those files (`params`), which function of workflow.runners it runs (`runner`: the code digest), which
paths it writes (`writes`: patterns with wildcards, for `writer_of`) and the `causalpos` command that runs one
job by hand. The rules in rules/*.smk take their inputs and params from here (rules/common.smk:
`stage_inputs`, `stage_params`); the upstream digests (workflow.provenance), the CLI's commands and its
"which command makes this file" hints are derived from it; tests/test_dag.py checks it against Snakemake's
own DAG of the default and tiny configs.

Every function takes the run's results folder; target paper_llms's stages write inside it
(paths.paper_llms_dir). Wildcards are keyword arguments (model, seed, variant, figure), strings as Snakemake
gives them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable

from causalpos.catalogue.figures import (ABLATION_FIGURE, ALL_LAYERS_FIGURE, CONVERGENCE_FIGURE, LENGTH_SEEDS_FIGURE,
                                       claims_page)
from causalpos.models.snapshots import snapshot_name
from causalpos.simulation.variant import Variant
from causalpos.catalogue import paths
from causalpos.workflow.digest import code_digest
from causalpos.workflow.config import (MODELS, claims_inputs, emergence_settings, emergence_variants, extra_seeds,
                                       extracted_models, extraction_settings, figure_inputs, figure_options,
                                       llm_claims_inputs, model_location, paper_llms_settings, plot_options,
                                       pretrained_models, pretrained_spec,
                                       snapshot_steps, variant_params)

Files = dict[str, "str | list[str]"]
PAPER_CLAIM = 8  # paper_llms's ledger has the rows of claim 8 (the pretrained LLMs) alone
ABLATION_CLAIM = 11  # target length_seeds's ledger has the rows of claim 11 (the pattern ablation over seeds) alone
TARGETS = ("all", "all_figures", "length_seeds", "paper_llms")  # rules that only name other rules' outputs


@dataclass(frozen=True)
class Stage:
    name: str  # the Snakemake rule
    runner: str  # its function in workflow.runners: the code whose digest reruns it (workflow.digest)
    writes: Callable[[str], list[str]]  # results -> path patterns of its outputs, wildcards left in
    inputs: Callable[..., Files] = lambda config, results, **wildcards: {}  # files it reads, by name
    params: Callable[..., dict] = lambda config, results, **wildcards: {}  # what else decides its outputs
    command: str | None = None  # `causalpos <command>` for one job, wildcards in braces
    description: str = ""  # what it makes, in a line (the command's help)
    models: str | None = None  # the models its {model} takes: "trained" (MODELS) or "pretrained" (any other)


# ---------------------------------------------------------------- what the stages read and are given


def _heldout_inputs(results: str) -> Files:
    """The token blocks' description and the held-out blocks: what a loss on held-out text reads."""
    return {"blocks": paths.tokens_file("blocks.json", results), "heldout": paths.tokens_file("heldout.npy", results)}


def _token_inputs(results: str) -> Files:
    return {**_heldout_inputs(results), "train": paths.tokens_file("train.npy", results),
            "tokenizer": f"{paths.tokenizer_dir(results)}/tokenizer.json"}


def _length_eval_params(config, results, **wildcards) -> dict:
    evaluation = config["evaluation"]
    return {"factors": evaluation["length_factors"], "max_sequences": evaluation["length_sequences"],
            "device": config["training"]["device"]}


def _seed_training(config: dict, seed) -> dict:
    """The training section with another seed and no snapshots (only the length is measured)."""
    return {**config["training"], "seed": int(seed), "snapshot_steps": 0}


def seed_runs(config: dict, results: str, name: str) -> list[tuple[str, int, str]]:
    """(model, seed, file `name` of that training) of every training in the comparison over seeds: the default
    run's (training.seed), then evaluation.seeds's."""
    seed = int(config["training"]["seed"])
    runs = [(m, seed, paths.model_file(m, name, results)) for m in MODELS]
    return runs + [(m, s, paths.seed_model_file(m, s, name, results)) for m in MODELS for s in extra_seeds(config)]


def length_runs(config: dict, results: str) -> list[tuple[str, int, str]]:
    """(model, seed, length_eval.parquet) of every training in the length comparison over seeds."""
    return seed_runs(config, results, "length_eval.parquet")


def _ablation_params(config, results, model, seed=None) -> dict:
    """A trained model's pattern ablation: the length evaluation's lengths and sequences, and the maps' own."""
    evaluation = config["evaluation"]
    return {"name": model, "factors": evaluation["length_factors"], "max_sequences": evaluation["length_sequences"],
            "n_estimate": evaluation["ablation_sequences"], "device": config["training"]["device"],
            "seed": config["data"]["seed"],
            "training_seed": int(config["training"]["seed"] if seed is None else seed)}


def _pretrained_ablation_params(config, results, model) -> dict:
    """A pretrained model's pattern ablation at its extraction's length, on sequences of its extraction's splits."""
    settings = extraction_settings(config, model)
    return {"name": model, "settings": {key: settings[key] for key in ("seq_len", "batch_size", "splits", "setting")},
            "n_estimate": config["evaluation"]["ablation_sequences"],
            "n_evaluate": config["evaluation"]["length_sequences"], "location": model_location(config, model, results),
            "device": config["extraction"]["device"], "seed": config["data"]["seed"]}


def ablation_tables(config: dict, results: str) -> list[str]:
    """The default run's ablation tables: both trained models (training.seed) and every pretrained model."""
    return [paths.model_file(m, paths.ABLATION_FILE, results) for m in MODELS] + [
        paths.pretrained_ablation(m, results) for m in pretrained_models(config)]


def _converted_copy(config, results, model) -> list[str]:
    """A pretrained model's safetensors copy (rule pretrained) if it is a GGUF file, else nothing to read."""
    return [paths.pretrained_dir(model, results)] if "gguf" in config["extraction"]["pretrained"]["models"][model] \
        else []


def _pretrained_inputs(config, results, model) -> Files:
    """A pretrained model reads the held-out documents, and its safetensors copy if it is a GGUF file."""
    return {"documents": paths.documents(results), **{"model": copy for copy in _converted_copy(config, results, model)}}


def _extraction_params(settings: dict, config, results, model) -> dict:
    return {"settings": settings, "location": model_location(config, model, results),
            "device": config["extraction"]["device"], "seed": config["data"]["seed"]}


def _convergence_inputs(config, results) -> Files:
    return {name: files for name, files in llm_claims_inputs(config, results).items() if name in ("scores", "groups")}


def _recursion_variants(config: dict) -> dict:
    """Every simulation variant's parameters (Variant.params(), window included): a changed variant reruns the
    recursion, as it reruns its simulation."""
    return {name: Variant(**variant_params(config, name)).params() for name in config["simulation"]["variants"]}


WINDOW_TEST_TABLES = ("scores", "groups")  # the extraction's tables the window test reads


def window_test_sources(config: dict, results: str) -> dict[str, str]:
    """{pretrained model: the results folder its window test reads}: paper_llms's where its extraction has
    written both tables the test reads, scores and groups (1,000 x 1,024 tokens: queries past Gemma's window),
    else the default run's. A paper_llms run that finishes later changes the input files, and Snakemake reruns
    the test."""
    paper = paths.paper_llms_dir(results)
    return {model: paper if all(os.path.exists(paths.activation_table(model, t, paper)) for t in WINDOW_TEST_TABLES)
            else results for model in pretrained_models(config)}


def _window_test_inputs(config, results) -> Files:
    sources = window_test_sources(config, results)
    return {table: [paths.activation_table(m, table, folder) for m, folder in sources.items()]
            for table in WINDOW_TEST_TABLES} | {
        "models": [copy for m in sources for copy in _converted_copy(config, results, m)]}


def _window_test_params(config, results) -> dict:
    paper = paths.paper_llms_dir(results)
    return {"models": {m: {"location": model_location(config, m, results),
                           "source": "paper_llms" if folder == paper else "default run"}
                       for m, folder in window_test_sources(config, results).items()},
            "settings": {key: config["claims"][key] for key in ("n_bootstrap", "seed")}}


def _claims_params(config, results, **wildcards) -> dict:
    return {"settings": config["claims"], "options": plot_options(config)}


def _runtimes_inputs(config, results) -> Files:
    snapshots = bool(snapshot_steps(config))
    return {"train": [paths.train_benchmark(m, results) for m in MODELS],
            "train_metrics": [paths.model_file(m, "metrics.parquet", results) for m in MODELS],
            "emergence": [paths.emergence_benchmark(m, results) for m in MODELS if snapshots],
            "emergence_scores": [paths.emergence_table(m, "scores", results) for m in MODELS if snapshots],
            "recursion": [paths.recursion_benchmark(results)],
            "recursion_table": [paths.recursion_table(results)],
            "simulate": [paths.simulation_table(v, results) for v in config["simulation"]["variants"]],
            "extract": [paths.activation_table(m, "scores", results) for m in extracted_models(config)]}


def _paper_claims_inputs(config: dict, results: str) -> Files:
    paper = paths.paper_llms_dir(results)
    return {**llm_claims_inputs(config, paper), "convergence": [paths.summary_file("convergence.parquet", paper)]}


def _paper_figure_inputs(config: dict, results: str, figure: str) -> Files:
    return figure_inputs(config, figure, paths.paper_llms_dir(results), paper_llms=True)


# ---------------------------------------------------------------- the stages


def _paper(results: str) -> str:
    return paths.paper_llms_dir(results)


# two stages each with a variant (a `use rule ... with:` of its rule): the variant is the entry with what differs
EXTRACT_TRAINED = Stage(
    "extract_trained", "run_extract", command="extract {model}", models="trained",
    description="attention scores, Figure 3 intermediates and position probe of one model",
    writes=lambda r: list(paths.activation_tables("{model}", r).values()),
    inputs=lambda config, results, model: {"model": paths.model_file(model, "model.safetensors", results),
                                           "tokens": paths.tokens_file("snippets.npy", results)},
    params=lambda config, results, model: _extraction_params(extraction_settings(config, model), config, results,
                                                             model))

MODEL_FIGURE = Stage(
    "model_figure_trained", "run_all_layers", models="trained", command=f"plot {ALL_LAYERS_FIGURE} --model {{model}}",
    description="Figures 11-16 of a trained model: every layer's scores",
    writes=lambda r: [paths.all_layers_dir("{model}", r), f"{paths.all_layers_dir('{model}', r)}/{{name}}"],
    inputs=lambda config, results, model: {"scores": paths.activation_table(model, "scores", results)},
    params=lambda config, results, model: {"options": plot_options(config, model=model)})


STAGE_LIST = [
    Stage("sample", "run_sample", command="sample",
          description="sample documents from the configured corpora to Parquet",
          writes=lambda r: [paths.documents(r)],
          params=lambda config, results: {key: config["data"][key] for key in
                                          ("sources", "heldout_fraction", "seed", "max_documents")}),
    Stage("tokenizer", "run_tokenizer", command="tokenizer",
          description="train or load the tokenizer; write token blocks and snippets",
          writes=lambda r: [f"{paths.tokenizer_dir(r)}/{{name}}", paths.tokens_file("{name}", r)],
          inputs=lambda config, results: {"documents": paths.documents(results)},
          params=lambda config, results: {**{key: config["tokenizer"][key] for key in
                                             ("name", "vocab_size", "block_len")},
                                          **{key: config["evaluation"][key] for key in ("snippet_len", "n_snippets")},
                                          "seed": config["data"]["seed"]}),
    Stage("theory", "run_theory", command="theory",
          description="closed-form layer-2 scores to Parquet",
          writes=lambda r: [paths.theory_table(r)],
          params=lambda config, results: {key: config["theory"][key] for key in ("seq_len", "alphas")}),
    Stage("recursion", "run_recursion", command="recursion",
          description="the large-d recursion of every simulation variant to Parquet",
          writes=lambda r: [paths.recursion_table(r), paths.recursion_benchmark()],  # benchmarks: as train's
          params=lambda config, results: {"variants": _recursion_variants(config)}),
    Stage("simulate", "run_simulation", command="simulate {variant}",
          description="Monte Carlo of one simulation variant to Parquet",
          writes=lambda r: [paths.simulation_table("{variant}", r), paths.simulation_groups("{variant}", r)],
          params=lambda config, results, variant: {"params": Variant(**variant_params(config, variant)).params(),
                                                   "device": config["device"],
                                                   "chunk_size": config["simulation"]["chunk_size"]}),
    Stage("train", "run_train", command="train {model}", models="trained",
          description="train the NoPE decoder or its RoPE twin (resumes from its checkpoint)",
          # the snapshots are a directory() output (the files in it too); benchmarks match below any folder
          writes=lambda r: [paths.snapshot_dir("{model}", r),
                            paths.snapshot_file("{model}", 0, r).replace(snapshot_name(0), "{name}"),
                            paths.model_file("{model}", "{name}", r), paths.train_benchmark("{model}")],
          inputs=lambda config, results, model: _token_inputs(results),
          params=lambda config, results, model: {"settings": config["training"],
                                                 "processes": config["train_processes"]}),
    Stage("length_eval", "run_length_eval", command="evaluate {model}", models="trained",
          description="held-out loss of a trained model at 1x, 2x, 4x the training length",
          writes=lambda r: [paths.model_file("{model}", "length_eval.parquet", r)],
          inputs=lambda config, results, model: {"model": paths.model_file(model, "model.safetensors", results),
                                                 **_heldout_inputs(results)},
          params=_length_eval_params),
    Stage("emergence", "run_emergence", command="emergence {model}", models="trained",
          description="the extraction and the held-out loss at every training snapshot of a model",
          writes=lambda r: [*paths.emergence_tables("{model}", r).values(), paths.emergence_benchmark("{model}")],
          inputs=lambda config, results, model: {
              "model": paths.model_file(model, "model.safetensors", results),
              "info": paths.model_file(model, "training.json", results),
              "snapshots": paths.snapshot_dir(model, results),
              "metrics": paths.model_file(model, "metrics.parquet", results),
              "tokens": paths.tokens_file("snippets.npy", results), **_heldout_inputs(results)},
          params=lambda config, results, model: {"settings": emergence_settings(config),
                                                 "steps": snapshot_steps(config),
                                                 "device": config["extraction"]["device"],
                                                 "seed": config["data"]["seed"]}),
    Stage("emergence_summary", "run_emergence_summary", command="emergence-summary",
          description="claim 7's metrics over training, both models, to results/summary",
          writes=lambda r: [paths.summary_file("emergence.parquet", r)],
          inputs=lambda config, results: {
              **{table: [paths.emergence_table(m, table, results) for m in MODELS]
                 for table in paths.EMERGENCE_TABLES},
              "simulations": [paths.simulation_table(v, results) for v in emergence_variants(config)],
              "simulation_groups": [paths.simulation_groups(v, results) for v in emergence_variants(config)]},
          params=lambda config, results: {"settings": config["claims"]}),
    Stage("train_seed", "run_train", command="train-seed {model} {seed}", models="trained",
          description="train a model again with another seed (the length comparison over seeds)",
          writes=lambda r: [paths.seed_model_file("{model}", "{seed}", "{name}", r),
                            paths.seed_train_benchmark("{model}", "{seed}")],
          inputs=lambda config, results, model, seed: _token_inputs(results),
          params=lambda config, results, model, seed: {"settings": _seed_training(config, seed),
                                                       "processes": config["train_processes"]}),
    Stage("length_eval_seed", "run_length_eval", command="evaluate-seed {model} {seed}", models="trained",
          description="length evaluation of a model trained with another seed",
          writes=lambda r: [paths.seed_model_file("{model}", "{seed}", "length_eval.parquet", r)],
          inputs=lambda config, results, model, seed: {
              "model": paths.seed_model_file(model, seed, "model.safetensors", results), **_heldout_inputs(results)},
          params=_length_eval_params),
    Stage("length_seeds_table", "run_length_seeds", command="length-seeds",
          description="length generalisation over seeds: table and figure",
          writes=lambda r: [paths.summary_file("length_seeds.parquet", r),
                            paths.figure_files(LENGTH_SEEDS_FIGURE, ["{ext}"], r)[0]],
          inputs=lambda config, results: {"runs": [path for _, _, path in length_runs(config, results)]},
          params=lambda config, results: {"runs": [[m, s] for m, s, _ in length_runs(config, results)],
                                          "options": config["plot"]}),
    Stage("pattern_ablation", "run_pattern_ablation", command="ablate {model}", models="trained",
          description="held-out loss of a trained model at every length with its non-relative pattern taken out "
                      "(and the controls)",
          writes=lambda r: [paths.model_file("{model}", paths.ABLATION_FILE, r), paths.ablation_benchmark("{model}")],
          inputs=lambda config, results, model: {"model": paths.model_file(model, "model.safetensors", results),
                                                 **_heldout_inputs(results)},
          params=_ablation_params),
    Stage("pattern_ablation_seed", "run_pattern_ablation", command="ablate-seed {model} {seed}", models="trained",
          description="the pattern ablation of a model trained with another seed",
          writes=lambda r: [paths.seed_model_file("{model}", "{seed}", paths.ABLATION_FILE, r),
                            paths.ablation_benchmark("{model}_seed{seed}")],
          inputs=lambda config, results, model, seed: {
              "model": paths.seed_model_file(model, seed, "model.safetensors", results), **_heldout_inputs(results)},
          params=_ablation_params),
    Stage("pattern_ablation_pretrained", "run_pattern_ablation_pretrained", command="ablate {model}",
          models="pretrained",
          description="a pretrained LLM's loss with its non-relative pattern taken out (and the controls)",
          writes=lambda r: [paths.pretrained_ablation("{model}", r), paths.ablation_benchmark("{model}")],
          inputs=_pretrained_inputs, params=_pretrained_ablation_params),
    Stage("pattern_ablation_summary", "run_pattern_ablation_summary", command="ablation-summary",
          description="the pattern ablation of every model to results/summary, and its figure",
          writes=lambda r: [paths.summary_file(paths.ABLATION_FILE, r),
                            paths.figure_files(ABLATION_FIGURE, ["{ext}"], r)[0]],
          inputs=lambda config, results: {"tables": ablation_tables(config, results)},
          params=lambda config, results: {"options": plot_options(config)}),
    Stage("pattern_ablation_seeds", "run_pattern_ablation_summary", command="ablation-seeds",
          description="the pattern ablation of every training seed to results/seeds/summary, and its figure",
          writes=lambda r: [paths.summary_file(paths.ABLATION_FILE, paths.seeds_dir(r)),
                            paths.figure_files(ABLATION_FIGURE, ["{ext}"], paths.seeds_dir(r))[0]],
          inputs=lambda config, results: {"tables": [path for _, _, path in
                                                     seed_runs(config, results, paths.ABLATION_FILE)]},
          params=lambda config, results: {"options": plot_options(config)}),
    Stage("length_seeds_claims", "run_claims", command="ablation-claims",
          description="claim 11's ledger rows over every training seed to results/seeds/summary",
          writes=lambda r: [paths.summary_file("claims.{ext}", paths.seeds_dir(r)),
                            claims_page(paths.claims_dir(paths.seeds_dir(r)), "{page}", "{ext}")],
          inputs=lambda config, results: {"pattern_ablation": [paths.summary_file(paths.ABLATION_FILE,
                                                                                  paths.seeds_dir(results))]},
          params=lambda config, results: {**_claims_params(config, results), "claim": ABLATION_CLAIM}),
    Stage("pretrained", "run_pretrained", command="pretrained {model}", models="pretrained",
          description="convert a GGUF model of extraction.pretrained.models to safetensors",
          writes=lambda r: [paths.pretrained_dir("{model}", r), f"{paths.pretrained_dir('{model}', r)}/{{name}}"],
          params=lambda config, results, model: {"spec": pretrained_spec(config, model)}),
    EXTRACT_TRAINED,
    replace(EXTRACT_TRAINED, name="extract_pretrained", models="pretrained", inputs=_pretrained_inputs,
            description="the same for a pretrained LLM, on held-out documents"),
    Stage("summary", "run_summary", command="summary",
          description="per-layer measured claims of every extracted model to results/summary",
          writes=lambda r: paths.summary_tables(r),
          inputs=lambda config, results: {table: [paths.activation_table(m, table, results)
                                                  for m in extracted_models(config)] for table in ("scores", "probe")}),
    Stage("heads", "run_heads", command="heads",
          description="each attention head's non-relative amplitude and first-key emphasis to results/summary",
          writes=lambda r: [paths.summary_file("heads.parquet", r), paths.heads_benchmark()],  # as recursion's
          inputs=lambda config, results: {"head_scores": [paths.activation_table(m, "head_scores", results)
                                                          for m in extracted_models(config)]}),
    Stage("claims", "run_claims", command="claims",
          description="the claims ledger (every claim of the paper as a verdict) to results/summary",
          writes=lambda r: [paths.summary_file("claims.{ext}", r), claims_page(paths.claims_dir(r), "{page}", "{ext}")],
          inputs=lambda config, results: claims_inputs(config, results), params=_claims_params),
    Stage("window_test", "run_window_test", command="window-test",
          description="sliding-window layers of the pretrained LLMs before and after their window, against the "
                      "recursion of their stack, to results/summary",
          writes=lambda r: [paths.summary_file("window_test.parquet", r)],
          inputs=_window_test_inputs, params=_window_test_params),
    Stage("convergence", "run_convergence", command="convergence",
          description="the LLM claims on the first groups of sequences to results/summary",
          writes=lambda r: [paths.summary_file("convergence.parquet", r),
                            paths.figure_files(CONVERGENCE_FIGURE, ["{ext}"], r)[0]],
          inputs=_convergence_inputs, params=_claims_params),
    Stage("runtimes", "run_runtimes",
          description="run times of the expensive jobs: a table and an HTML page for the report",
          writes=lambda r: [paths.summary_file("runtimes.{ext}", r)], inputs=_runtimes_inputs),
    Stage("config_record", "run_config_record",
          description="the configuration the run used, as an HTML page for the report",
          writes=lambda r: [paths.summary_file("config.html", r)],
          params=lambda config, results: {"config": config}),
    Stage("figure", "run_figure", command="plot {figure}",
          description="draw one figure from the Parquet results",
          writes=lambda r: [paths.figure_files("{figure}", ["{ext}"], r)[0]],
          inputs=lambda config, results, figure: figure_inputs(config, figure, results),
          params=lambda config, results, figure: {"options": figure_options(config, figure)}),
    MODEL_FIGURE,
    replace(MODEL_FIGURE, name="model_figure_pretrained", models="pretrained",
            description="Figures 11-16 of a pretrained LLM"),
    # target paper_llms (rules/paper_llms.smk): the pretrained models at the paper's size, in their own folder
    Stage("paper_llms_extract", "run_extract", models="pretrained",
          description="a pretrained LLM's extraction at the paper's size",
          writes=lambda r: list(paths.activation_tables("{model}", _paper(r)).values()),
          inputs=_pretrained_inputs,
          params=lambda config, results, model: _extraction_params(paper_llms_settings(config, model), config,
                                                                   results, model)),
    Stage("paper_llms_convergence", "run_convergence",
          description="the convergence table of paper_llms",
          writes=lambda r: [paths.summary_file("convergence.parquet", _paper(r)),
                            paths.figure_files(CONVERGENCE_FIGURE, ["{ext}"], _paper(r))[0]],
          inputs=lambda config, results: _convergence_inputs(config, _paper(results)), params=_claims_params),
    Stage("paper_llms_claims", "run_claims",
          description="claim 8's ledger rows of paper_llms",
          writes=lambda r: [paths.summary_file("claims.{ext}", _paper(r)),
                            claims_page(paths.claims_dir(_paper(r)), "{page}", "{ext}")],
          inputs=_paper_claims_inputs,
          params=lambda config, results: {**_claims_params(config, results), "claim": PAPER_CLAIM}),
    Stage("paper_llms_model_figure", "run_all_layers", models="pretrained",
          description="Figures 11-16 of a pretrained LLM at the paper's size",
          writes=lambda r: [paths.all_layers_dir("{model}", _paper(r)),
                            f"{paths.all_layers_dir('{model}', _paper(r))}/{{name}}"],
          inputs=lambda config, results, model: {"scores": paths.activation_table(model, "scores", _paper(results))},
          params=lambda config, results, model: {"options": plot_options(config, model=model)}),
    Stage("paper_llms_figure", "run_figure",
          description="an LLM figure at the paper's size",
          writes=lambda r: [paths.figure_files("{figure}", ["{ext}"], _paper(r))[0]],
          inputs=_paper_figure_inputs,
          params=lambda config, results, figure: {"options": figure_options(config, figure)}),
]
STAGES = {stage.name: stage for stage in STAGE_LIST}


def stage(name: str) -> Stage:
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}; known: {sorted(STAGES)}")
    return STAGES[name]


def code(name: str) -> str:
    """The digest of the code stage `name` runs (its runner's, workflow.digest), read once per runner and
    process: the rules and the upstream digests ask for it, and several stages share a runner."""
    return _runner_code(stage(name).runner)


_runner_code = lru_cache(maxsize=None)(code_digest)


def inputs(config: dict, results: str, name: str, **wildcards) -> Files:
    """The files one job of stage `name` reads, by input name (what its rule's input: gets)."""
    return stage(name).inputs(config, results, **wildcards)


OUTPUT_ONLY_WILDCARDS = ("results", "name", "ext", "page")  # in the patterns of `writes`, not of a job


def wildcards_of(name: str) -> list[str]:
    """The wildcards of a job of stage `name` (those of its `writes` patterns but the output-only ones)."""
    found = [w for pattern in stage(name).writes("{results}") for w in re.findall(r"\{(\w+)\}", pattern)]
    return [w for w in dict.fromkeys(found) if w not in OUTPUT_ONLY_WILDCARDS]


def input_patterns(config: dict, results: str, name: str) -> Files:
    """inputs() with every wildcard left in braces ({model}), for a stage whose inputs are paths formatted from
    its wildcards; ValueError for one whose inputs depend on a wildcard's value (a figure, a pretrained model)."""
    try:
        return inputs(config, results, name, **{w: f"{{{w}}}" for w in wildcards_of(name)})
    except KeyError as err:
        raise ValueError(f"stage {name}: its inputs depend on the value of a wildcard ({err}); "
                         "give the rule a function of the wildcards") from None


def flatten(files: Files) -> list[str]:
    """Named inputs (a path or a list of paths each) as one list of paths."""
    return [path for value in files.values() for path in ([value] if isinstance(value, str) else value)]


def input_files(config: dict, results: str, name: str, **wildcards) -> list[str]:
    """inputs() as one list of paths."""
    return flatten(inputs(config, results, name, **wildcards))


def params(config: dict, results: str, name: str, **wildcards) -> dict:
    """What decides one job's outputs besides its inputs and code (its rule's `settings` param)."""
    return stage(name).params(config, results, **wildcards)


def takes_model(entry: Stage, model: str | None) -> bool:
    """Whether a job of `entry` may have this {model}: the trained twins are MODELS, any other name a pretrained
    model (no config needed: extract_trained and extract_pretrained write the same patterns)."""
    if model is None or entry.models is None:
        return True
    return (model in MODELS) == (entry.models == "trained")


# ---------------------------------------------------------------- which stage writes a path


def writers(results: str = "{results}") -> list[tuple[str, str]]:
    """(stage, path pattern) of every result (wildcards left in)."""
    return [(entry.name, pattern) for entry in STAGE_LIST for pattern in entry.writes(results)]


@lru_cache(maxsize=None)
def _regex(pattern: str) -> re.Pattern:
    # {results} may be any folder (absolute, nested); other wildcards one path component; a path
    # outside the results folder (the benchmarks of the default folder) may sit below the working directory
    parts = re.split(r"\{(\w+)\}", pattern)
    body = "".join(re.escape(text) if i % 2 == 0 else
                   (f"(?P<{text}>.+)" if text == "results" else f"(?P<{text}>[^/]+)")
                   for i, text in enumerate(parts))
    return re.compile(body if pattern.startswith("{results}") else f"(?:.+/)?{body}")


def _literal_length(pattern: str) -> int:
    return len(re.sub(r"\{\w+\}", "", pattern))


@lru_cache(maxsize=None)
def _writers_by_specificity() -> list[tuple[str, str]]:
    # the most literal pattern a path matches names its writer: length_eval.parquet before the rest of a
    # model's folder, paper_llms's folder before the default run's patterns (whose {results} matches it too)
    return sorted(writers(), key=lambda item: -_literal_length(item[1]))


def writer_of(path) -> tuple[str, dict] | None:
    """(stage, wildcards) of the job whose output `path` is, e.g. ("simulate", {"variant": "l2_alpha0.0",
    "results": "results"}) for results/simulation/l2_alpha0.0.parquet; None if no stage writes it."""
    text = str(path).replace("\\", "/")
    for name, pattern in _writers_by_specificity():
        match = _regex(pattern).fullmatch(text)
        if match and takes_model(STAGES[name], match.groupdict().get("model")):
            return name, match.groupdict()
    return None


def stage_writing(path) -> str | None:
    """The stage (rule) whose output `path` is, or None, e.g. "simulate" for results/simulation/x.parquet."""
    found = writer_of(path)
    return found[0] if found else None


def command_for(path) -> str | None:
    """The `causalpos` command that writes `path` (its wildcards filled in), or None if none does."""
    found = writer_of(path)
    if found is None or STAGES[found[0]].command is None:
        return None
    return STAGES[found[0]].command.format(**found[1])


def input_jobs(config: dict, results: str, name: str, **wildcards) -> list[tuple[str, dict]]:
    """The jobs (stage, wildcards without results) whose outputs one job of `name` reads, each once, in order."""
    jobs = []
    for path in input_files(config, results, name, **wildcards):
        found = writer_of(path)
        if found is None:
            raise ValueError(f"stage {name}: no stage writes its input {path}")
        writer, found_wildcards = found
        job = (writer, {k: v for k, v in found_wildcards.items() if k not in OUTPUT_ONLY_WILDCARDS})
        if job not in jobs:
            jobs.append(job)
    return jobs
