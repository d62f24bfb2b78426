"""Where every result lives: the one place the rules, the CLI and the config helpers take paths from.

Every function takes the results folder (default "results"; the config's `results` key changes it for
the workflow and the CLI, the CLI's --results for one command) and returns a path as a string; pass
"{variant}" or "{model}" to get a rule's pattern. Logs and benchmarks go under logs/ and benchmarks/ for
the default folder and inside the results folder for any other, so that two configs never share a file.
Layers and positions inside the files are 0-based; see docs/results.md for the columns.
"""

from __future__ import annotations

import re

from causalpos.analysis.summary import SUMMARY_FILES
from causalpos.figures.registry import (ALL_LAYERS_FIGURE, CLAIMS_FIGURE, CONVERGENCE_FIGURE,
                                        LENGTH_SEEDS_FIGURE, claims_page)
from causalpos.models.snapshots import FOLDER as SNAPSHOT_FOLDER
from causalpos.models.snapshots import snapshot_name
from causalpos.tables import ACTIVATION_TABLES

RESULTS = "results"
EMERGENCE_TABLES = ("scores", "intermediates", "groups", "losses")  # rule emergence's tables per model


def logs_dir(results: str = RESULTS) -> str:
    return "logs" if results == RESULTS else f"{results}/logs"


def log_file(name: str, results: str = RESULTS) -> str:
    """A rule's log, e.g. log_file("train/{model}.log")."""
    return f"{logs_dir(results)}/{name}"


def benchmarks_dir(results: str = RESULTS) -> str:
    return "benchmarks" if results == RESULTS else f"{results}/benchmarks"


def documents(results: str = RESULTS) -> str:
    return f"{results}/data/documents.parquet"


def tokenizer_dir(results: str = RESULTS) -> str:
    return f"{results}/tokenizer"


def tokens_dir(results: str = RESULTS) -> str:
    return f"{results}/tokens"


def tokens_file(name: str, results: str = RESULTS) -> str:
    """blocks.json, train.npy, heldout.npy, snippets.npy or snippets.parquet"""
    return f"{tokens_dir(results)}/{name}"


def theory_table(results: str = RESULTS) -> str:
    return f"{results}/theory/layer2_scores.parquet"


def simulation_table(variant: str, results: str = RESULTS) -> str:
    return f"{results}/simulation/{variant}.parquet"


def model_dir(model: str, results: str = RESULTS) -> str:
    """A trained model's folder: model.safetensors, config.json, metrics.parquet, length_eval.parquet."""
    return f"{results}/models/{model}"


def model_file(model: str, name: str, results: str = RESULTS) -> str:
    return f"{model_dir(model, results)}/{name}"


def checkpoints_dir(results: str = RESULTS) -> str:
    return f"{results}/checkpoints"


def snapshot_dir(model: str, results: str = RESULTS) -> str:
    """The snapshots of a trained model: one directory() output of rule train, whatever steps it holds.

    Files named by step would change with training.steps, and Snakemake checks params and code only for
    a job whose every output has its metadata: a target needing only the model was then called current."""
    return f"{model_dir(model, results)}/{SNAPSHOT_FOLDER}"


def snapshot_file(model: str, step: int, results: str = RESULTS) -> str:
    """The weights of a trained model after `step` optimizer steps (training.snapshot_steps)."""
    return f"{snapshot_dir(model, results)}/{snapshot_name(step)}"


def train_benchmark(model: str, results: str = RESULTS) -> str:
    return f"{benchmarks_dir(results)}/train/{model}.tsv"


def emergence_table(model: str, table: str, results: str = RESULTS) -> str:
    """results/emergence/{model}/{table}.parquet, table one of EMERGENCE_TABLES (the extraction at each snapshot)."""
    if table not in EMERGENCE_TABLES:
        raise ValueError(f"unknown emergence table {table!r}; known: {EMERGENCE_TABLES}")
    return f"{results}/emergence/{model}/{table}.parquet"


def emergence_tables(model: str, results: str = RESULTS) -> dict[str, str]:
    return {table: emergence_table(model, table, results) for table in EMERGENCE_TABLES}


def emergence_benchmark(model: str, results: str = RESULTS) -> str:
    return f"{benchmarks_dir(results)}/emergence/{model}.tsv"


def seed_model_dir(model: str, seed, results: str = RESULTS) -> str:
    """A model trained again with another seed (evaluation.seeds), for the length comparison."""
    return f"{results}/seeds/{model}/seed{seed}"


def seed_model_file(model: str, seed, name: str, results: str = RESULTS) -> str:
    return f"{seed_model_dir(model, seed, results)}/{name}"


def seed_train_benchmark(model: str, seed, results: str = RESULTS) -> str:
    return f"{benchmarks_dir(results)}/train_seed/{model}_seed{seed}.tsv"


def pretrained_dir(model: str, results: str = RESULTS) -> str:
    """A GGUF model dequantised into a safetensors folder."""
    return f"{results}/pretrained/{model}"


def activation_table(model: str, table: str, results: str = RESULTS) -> str:
    """results/activations/{model}/{table}.parquet, table one of tables.ACTIVATION_TABLES"""
    if table not in ACTIVATION_TABLES:
        raise ValueError(f"unknown activation table {table!r}; known: {ACTIVATION_TABLES}")
    return f"{results}/activations/{model}/{table}.parquet"


def activation_tables(model: str, results: str = RESULTS) -> dict[str, str]:
    return {table: activation_table(model, table, results) for table in ACTIVATION_TABLES}


def extraction_state_dir(model: str, results: str = RESULTS) -> str:
    """Where a running extraction keeps its restart state (removed once its tables are written)."""
    return f"{checkpoints_dir(results)}/extract/{model}"


def paper_llms_dir(results: str = RESULTS) -> str:
    """Target paper_llms's own results folder: the functions here, given it as `results`, name its files
    (activations, figures, summary), so nothing it writes clashes with the default run's."""
    return f"{results}/paper_llms"


def summary_dir(results: str = RESULTS) -> str:
    return f"{results}/summary"


def summary_tables(results: str = RESULTS) -> list[str]:
    """The per-layer summary tables (analysis.summary.SUMMARY_FILES)."""
    return [f"{summary_dir(results)}/{name}" for name in SUMMARY_FILES.values()]


def summary_file(name: str, results: str = RESULTS) -> str:
    """claims.parquet, claims.md, convergence.parquet, runtimes.parquet, runtimes.html, config.html"""
    return f"{summary_dir(results)}/{name}"


def figure_files(stem: str, formats, results: str = RESULTS) -> list[str]:
    """One figure in every format, e.g. figure_files("fig02_l2norm", ["pdf", "png"])."""
    return [f"{results}/figures/{stem}.{fmt}" for fmt in formats]


ALL_LAYERS_PAGE = "{kind}_layers{layers}.{ext}"  # a page of fig_all_layers in its model's folder


def all_layers_dir(model: str, results: str = RESULTS) -> str:
    """The folder of one model's fig_all_layers pages (rule model_figure's directory() output)."""
    return f"{results}/figures/{ALL_LAYERS_FIGURE}_{model}"


def all_layers_page(folder, kind: str, first: int, last: int, ext: str) -> str:
    """One page of fig_all_layers, e.g. <folder>/raw_layers01-08.png (layers 1-based, as in its titles)."""
    return f"{folder}/" + ALL_LAYERS_PAGE.format(kind=kind, layers=f"{first:02d}-{last:02d}", ext=ext)


def claims_dir(results: str = RESULTS) -> str:
    """The folder of figL1_claims's pages (rule claims's outputs, one file per page and format: see
    figures.registry.claims_pages)."""
    return f"{results}/figures/{CLAIMS_FIGURE}"


# ---------------------------------------------------------------- which rule writes a path


def writers(results: str = "{results}") -> list[tuple[str, str]]:
    """(rule, path pattern) of every result, from the functions above with their wildcards left in.

    The first pattern a path matches names its rule, so a file with a rule of its own comes before the
    folder it lies in (length_eval.parquet before the rest of a model's folder), and paper_llms's folder
    before the default run's patterns (whose {results} would match it too)."""
    paper = paper_llms_dir(results)
    return [
        *(("paper_llms_extract", path) for path in activation_tables("{model}", paper).values()),
        ("paper_llms_convergence", summary_file("convergence.parquet", paper)),
        ("paper_llms_convergence", figure_files(CONVERGENCE_FIGURE, ["{ext}"], paper)[0]),
        ("paper_llms_claims", summary_file("claims.{ext}", paper)),
        ("paper_llms_claims", claims_page(claims_dir(paper), "{page}", "{ext}")),
        ("paper_llms_model_figure", all_layers_dir("{model}", paper)),  # a directory() output, and its files
        ("paper_llms_model_figure", f"{all_layers_dir('{model}', paper)}/{{name}}"),
        ("paper_llms_figure", figure_files("{figure}", ["{ext}"], paper)[0]),
        ("sample", documents(results)),
        ("tokenizer", f"{tokenizer_dir(results)}/{{name}}"),
        ("tokenizer", tokens_file("{name}", results)),
        ("theory", theory_table(results)),
        ("simulate", simulation_table("{variant}", results)),
        ("length_eval", model_file("{model}", "length_eval.parquet", results)),
        ("train", snapshot_dir("{model}", results)),  # a directory() output, and the files in it
        ("train", snapshot_file("{model}", 0, results).replace(snapshot_name(0), "{name}")),
        ("train", model_file("{model}", "{name}", results)),
        ("train", train_benchmark("{model}")),  # benchmarks: matched below any folder (see _regex)
        ("length_eval_seed", seed_model_file("{model}", "{seed}", "length_eval.parquet", results)),
        ("train_seed", seed_model_file("{model}", "{seed}", "{name}", results)),
        ("train_seed", seed_train_benchmark("{model}", "{seed}")),
        *(("emergence", path) for path in emergence_tables("{model}", results).values()),
        ("emergence", emergence_benchmark("{model}")),
        ("emergence_summary", summary_file("emergence.parquet", results)),
        ("length_seeds", summary_file("length_seeds.parquet", results)),
        ("length_seeds", figure_files(LENGTH_SEEDS_FIGURE, ["{ext}"], results)[0]),
        ("pretrained", pretrained_dir("{model}", results)),  # a directory() output, and the files in it
        ("pretrained", f"{pretrained_dir('{model}', results)}/{{name}}"),
        *(("extract", path) for path in activation_tables("{model}", results).values()),
        *(("summary", path) for path in summary_tables(results)),
        ("claims", summary_file("claims.{ext}", results)),
        ("convergence", summary_file("convergence.parquet", results)),
        ("convergence", figure_files(CONVERGENCE_FIGURE, ["{ext}"], results)[0]),
        ("runtimes", summary_file("runtimes.{ext}", results)),
        ("config_record", summary_file("config.html", results)),
        ("claims", claims_page(claims_dir(results), "{page}", "{ext}")),
        ("model_figure", all_layers_dir("{model}", results)),  # a directory() output, and the files in it
        ("model_figure", f"{all_layers_dir('{model}', results)}/{{name}}"),
        ("figure", figure_files("{figure}", ["{ext}"], results)[0]),
    ]


def _regex(pattern: str) -> re.Pattern:
    # {results} may be any folder (absolute, nested); other wildcards one path component; a path
    # outside the results folder (the benchmarks) may sit below the working directory
    parts = re.split(r"\{(\w+)\}", pattern)
    body = "".join(re.escape(text) if i % 2 == 0 else
                   (f"(?P<{text}>.+)" if text == "results" else f"(?P<{text}>[^/]+)")
                   for i, text in enumerate(parts))
    return re.compile(body if pattern.startswith("{results}") else f"(?:.+/)?{body}")


def writer_of(path) -> tuple[str, dict] | None:
    """(rule, wildcards) of the job whose output `path` is, e.g. ("simulate", {"variant": "l2_alpha0.0",
    "results": "results"}) for results/simulation/l2_alpha0.0.parquet; None if no rule writes it."""
    text = str(path).replace("\\", "/")
    for rule, pattern in writers():
        match = _regex(pattern).fullmatch(text)
        if match:
            return rule, match.groupdict()
    return None


def rule_writing(path) -> str | None:
    """The rule whose output `path` is (None if no rule writes it), e.g. "simulate" for
    results/simulation/l2_alpha0.0.parquet."""
    found = writer_of(path)
    return found[0] if found else None
