"""What the pipeline wrote, loaded as arrays and tables: the results API.

    from causalpos import results
    sim = results.simulation("l2_alpha0.2")                 # [layer, query, key]
    smol = results.scores("smollm2_135m")                   # [layer, query, key]
    heads = results.scores("smollm2_135m", per_head=True)   # [layer, head, query, key]
    rec = results.recursion("l2_alpha0.2")                  # [layer, query, key]
    claims = results.ledger()                               # a DataFrame

Axis order: a map is [layer, query, key], per head [layer, head, query, key]: entry [l, q, k] is the value at
layer l of query position q against key position k (rows queries, columns keys, as in the figures). Layers,
heads and positions are 0-based, as in the tables, and an index is the number itself: a layer the table lacks
is NaN throughout. NaN marks a pair the table has no row for, a key the query does not see: above the
diagonal (k > q) under the causal mask and outside a sliding window (k <= q - window); with no mask every
entry is a number. Arrays are float64.

Files are read with causalpos.io.read_table, the reader of every stage and of the figures (a damaged file
raises DamagedFileError; so does one that is not what its job wrote, by the record beside it:
causalpos.checksums; either is moved aside, naming the rule that makes it again), and turned into arrays by causalpos.matrices.maps, the figures' own; a missing one raises
MissingResultError, naming what the folder holds and the command that makes the file (Snakemake finds the rule). `results` is the results folder (the config's `results` key); `paper_llms=True`
reads target paper_llms's files inside it.
"""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pandas as pd

from causalpos.catalogue.claims import LEDGER_COLUMNS
from causalpos.errors import UserError
from causalpos import checksums
from causalpos.io import DamagedFileError, move_aside, read_table
from causalpos.matrices import maps
from causalpos.catalogue.tables import (
    HEAD_SCORE_COLUMNS,
    RECURSION_COLUMNS,
    SCORE_COLUMNS,
    SIMULATION_COLUMNS,
    require_columns,
)
from causalpos.catalogue import paths

SIMULATION_VALUES = ("score_mean", "score_sem", "score_diagnorm", "prob_mean", "prob_sem")
SCORE_VALUES = ("score_mean", "score_sem", "score_diagnorm")
RECURSION_VALUES = ("score", "score_diagnorm", "prob")


class MissingResultError(UserError, FileNotFoundError):
    """A result file does not exist; the message names what its folder holds and the rule that writes it."""


def simulation(variant: str, results: str = paths.RESULTS, value: str = "score_mean") -> np.ndarray:
    """One simulation variant (results/simulation/{variant}.parquet) as [layer, query, key]."""
    _check_value(value, SIMULATION_VALUES)
    path, pattern = paths.simulation_table(variant, results), paths.simulation_table("*", results)
    table = _read(
        path, f"simulation variant {variant!r}", Path(pattern).parent, [Path(p).stem for p in glob.glob(pattern)]
    )
    require_columns(table, SIMULATION_COLUMNS[:4] + [value], path)
    return maps(table, value, ["layer"], f"variant {variant!r}")


def scores(
    model: str,
    results: str = paths.RESULTS,
    value: str = "score_mean",
    paper_llms: bool = False,
    per_head: bool = False,
) -> np.ndarray:
    """A model's mean scores (results/activations/{model}/scores.parquet, averaged over sequences and heads) as
    [layer, query, key], or each query head's (per_head: head_scores.parquet, averaged over sequences; only
    score_mean) as [layer, head, query, key], where the extraction kept them (extraction.per_head)."""
    _check_value(value, ("score_mean",) if per_head else SCORE_VALUES)
    folder = paths.paper_llms_dir(results) if paper_llms else results
    table_name = "head_scores" if per_head else "scores"
    path = paths.activation_table(model, table_name, folder)
    pattern = paths.activation_table("*", table_name, folder)
    table = _read(
        path, f"model {model!r}", Path(pattern).parent.parent, [Path(p).parent.name for p in glob.glob(pattern)]
    )
    if not per_head:
        require_columns(table, SCORE_COLUMNS[2:5] + [value], path)
        return maps(table, value, ["layer"], f"model {model!r}")
    require_columns(table, HEAD_SCORE_COLUMNS[2:7], path, allow_empty=True)
    if table.empty:
        setting = "extraction.paper_llms.per_head" if paper_llms else "extraction.per_head"
        raise ValueError(
            f"{path} has no per-head maps: the extraction ran with {setting}: false; set it to true "
            f"in the config and run `snakemake --cores 2 {path}` again (the extraction reruns)"
        )
    return maps(table, value, ["layer", "head"], f"model {model!r}")


def recursion(variant: str, results: str = paths.RESULTS, corrected: bool = False, value: str = "score") -> np.ndarray:
    """The large-d recursion of one variant (results/theory/recursion.parquet) as [layer, query, key]; with
    `corrected`, the limit plus its O(1/d) correction at the variant's d (value + "_corrected")."""
    _check_value(value, RECURSION_VALUES)
    path = paths.recursion_table(results)
    table = _read(path)
    column = value + "_corrected" if corrected else value
    require_columns(table, RECURSION_COLUMNS[:4] + ["corrected", column], path)
    rows = table[table["variant"] == variant]
    if rows.empty:
        held = ", ".join(sorted(table["variant"].unique()))
        raise ValueError(
            f"no variant {variant!r} in {path} (it holds {held}); it has every variant under "
            f"simulation.variants: add it there and run `snakemake --cores 2 {path}`"
        )
    if corrected and not rows["corrected"].all():
        raise ValueError(
            f"the recursion of {variant!r} has no O(1/d) correction (not computed under RoPE, nor for "
            "LayerNorm with scale none or sqrt_d): use corrected=False"
        )
    return maps(rows, column, ["layer"], f"variant {variant!r}")


def ledger(results: str = paths.RESULTS, paper_llms: bool = False) -> pd.DataFrame:
    """The claims ledger (results/summary/claims.parquet): one row per claim and setting, LEDGER_COLUMNS first."""
    folder = paths.paper_llms_dir(results) if paper_llms else results
    path = paths.table_file("claims", folder)
    return require_columns(_read(path), LEDGER_COLUMNS, path, allow_empty=True)


def _check_value(value: str, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"value must be one of {', '.join(allowed)}; got {value!r}")


def _read(path: str, what: str = "", folder=None, present=()) -> pd.DataFrame:
    """The table at `path`; MissingResultError if there is none, naming the `present` ones of `folder`."""
    if Path(path).exists():
        record = checksums.read_record(path)
        found = checksums.damage(path, record, full=True)
        if not found:
            try:
                return read_table(path)
            except DamagedFileError as err:  # no record (made by hand, or before records), yet not a table
                found = err.reason
        rule = f"rule {record['rule']}" if record else "the rule that writes it"
        raise DamagedFileError(
            path,
            found,
            f"moved to {move_aside(path)}; {rule} makes it again: `snakemake --cores 2 {path}`, or "
            "snakemake --cores 8 all_figures",
        )
    held = f"no {what}: {folder} holds {', '.join(sorted(present)) or 'none'}; " if what else ""
    raise MissingResultError(
        f"{held}{path} does not exist; `snakemake --cores 2 {path}` makes it (and what it needs), "
        "or run the whole workflow: snakemake --cores 8 all_figures"
    )
