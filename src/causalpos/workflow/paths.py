"""Where every result lives: the one place the rules, the CLI and the config helpers take paths from.

Every function takes the results folder (default "results", the workflow's; the CLI's --results
changes it) and returns a path as a string; pass "{variant}" or "{model}" to get a rule's pattern.
Layers and positions inside the files are 0-based; see docs/results.md for the columns.
"""

from __future__ import annotations

import re

from causalpos.analysis.summary import SUMMARY_FILES
from causalpos.figures.registry import ALL_LAYERS_FIGURE, CLAIMS_FIGURE
from causalpos.tables import ACTIVATION_TABLES

RESULTS = "results"


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


def train_benchmark(model: str) -> str:
    return f"benchmarks/train/{model}.tsv"


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


def summary_dir(results: str = RESULTS) -> str:
    return f"{results}/summary"


def summary_tables(results: str = RESULTS) -> list[str]:
    """The per-layer summary tables (analysis.summary.SUMMARY_FILES)."""
    return [f"{summary_dir(results)}/{name}" for name in SUMMARY_FILES.values()]


def summary_file(name: str, results: str = RESULTS) -> str:
    """claims.parquet, claims.md, runtimes.parquet, runtimes.html, config.html"""
    return f"{summary_dir(results)}/{name}"


def figure_files(stem: str, formats, results: str = RESULTS) -> list[str]:
    """One figure in every format, e.g. figure_files("fig02_l2norm", ["pdf", "png"])."""
    return [f"{results}/figures/{stem}.{fmt}" for fmt in formats]


# ---------------------------------------------------------------- which rule writes a path


def writers(results: str = "{results}") -> list[tuple[str, str]]:
    """(rule, path pattern) of every result, from the functions above with their wildcards left in.

    The first pattern a path matches names its rule, so a file with a rule of its own comes before the
    folder it lies in (length_eval.parquet before the rest of a model's folder)."""
    return [
        ("sample", documents(results)),
        ("tokenizer", f"{tokenizer_dir(results)}/{{name}}"),
        ("tokenizer", tokens_file("{name}", results)),
        ("theory", theory_table(results)),
        ("simulate", simulation_table("{variant}", results)),
        ("length_eval", model_file("{model}", "length_eval.parquet", results)),
        ("train", model_file("{model}", "{name}", results)),
        ("train", train_benchmark("{model}")),
        ("pretrained", pretrained_dir("{model}", results)),  # a directory() output, and the files in it
        ("pretrained", f"{pretrained_dir('{model}', results)}/{{name}}"),
        *(("extract", path) for path in activation_tables("{model}", results).values()),
        *(("summary", path) for path in summary_tables(results)),
        ("claims", summary_file("claims.{ext}", results)),
        ("runtimes", summary_file("runtimes.{ext}", results)),
        ("config_record", summary_file("config.html", results)),
        ("claims", figure_files(CLAIMS_FIGURE, ["{ext}"], results)[0]),
        ("model_figure", figure_files(f"{ALL_LAYERS_FIGURE}_{{model}}", ["{ext}"], results)[0]),
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
