"""Do the LLM verdicts hold as N grows? Claim 8 (8a-8d) measured on the first k groups of sequences.

The extraction keeps its sums per contiguous group of sequences (groups.parquet), in a shuffled order of
the sequences (models.sequences.llm_sequences), so the first k groups are a random subset of k / G of them:
every claim of 8 is measured again on them, with no new extraction, at k = G, ceil(G / 2), ceil(G / 4), ...
down to `min_groups` (a bootstrap over fewer groups says little). At k = G the measure is the ledger's own
(the same LedgerInputs, seed and thresholds), so the last point of each curve has the ledger row's value
and uncertainty; below it, the estimate is the first groups' sums over their sequences and the bootstrap
draws k groups (replicates.LedgerInputs.first_groups_view).

Verdicts: the ledger's rule (catalogue.verdict after family.adjust), Holm within each rebuilt set of rows:
the claim 8 rows of one model at one N, those on our readings (8d at layer 1) apart as in the ledger. That family is smaller than the ledger's (every claim, every
model), so at k = G the verdict equals the ledger's only where the ledger's family is the same (a ledger
of that model's claim 8 alone); elsewhere it can be less strict.

`convergence_frame` gives CONVERGENCE_COLUMNS; `note_flips` adds to each ledger row of claim 8 whose verdict
is not the same at every N a note saying so, with the verdict at each N.
"""

from __future__ import annotations

import math

import pandas as pd

from causalpos.catalogue.claims import merge_thresholds
from causalpos.analysis.claims.family import adjust_apart, ours_apart, ours_marked
from causalpos.analysis.claims.model_claims import claim8
from causalpos.analysis.claims.replicates import (
    GROUP_NEEDS,
    SCORE_NEEDS,
    LedgerInputs,
    group_sizes,
    longest_seq_len,
    model_kinds,
)
from causalpos.io import PartTable
from causalpos.models.progress import Steps
from causalpos.catalogue.models import PRETRAINED_KIND
from causalpos.catalogue.tables import CONVERGENCE_COLUMNS, require_columns

FLIP_NOTE = "verdict changes with N"  # the start of the ledger's note for a claim whose verdict flips


def group_levels(n_groups: int, min_groups: int) -> list[int]:
    """The numbers of first groups measured, ascending: n_groups halved (rounded up) while >= min_groups."""
    levels, k = [n_groups], n_groups
    while math.ceil(k / 2) >= min_groups and math.ceil(k / 2) < k:
        k = math.ceil(k / 2)
        levels.append(k)
    return sorted(levels)


def convergence_frame(
    scores, groups, thresholds: dict | None = None, n_bootstrap: int = 200, seed: int = 0, min_groups: int = 4
) -> pd.DataFrame:
    """Claim 8's rows for every pretrained model (kind "pretrained") at each level of group_levels, one row
    per model, number of sequences, claim and layer (NaN for 8b, 8c: over the layers). The tables are
    DataFrames or io.PartTables (read a layer at a time)."""
    th = merge_thresholds(thresholds)
    scores = require_columns(scores, SCORE_NEEDS, "scores")
    groups = require_columns(groups, GROUP_NEEDS, "groups")
    rows = []
    for model in sorted(m for m, kind in model_kinds(scores).items() if kind == PRETRAINED_KIND):
        model_scores, model_groups = _of_model(scores, model), _of_model(groups, model)
        counts = group_sizes(model_groups)
        if counts.empty:
            raise ValueError(f"the groups table has no scores of model {model!r}: no bootstrap to measure with")
        data = LedgerInputs(None, None, model_scores, None, model_groups, n_bootstrap, seed)
        size = longest_seq_len(model_scores)
        levels = group_levels(len(counts), min_groups)
        steps = Steps(f"convergence {model}", len(levels))  # ~10-40 s a level in the default run (issue 42)
        for k in levels:
            view = data if k == len(counts) else data.first_groups_view(k)
            # Holm within this model's claim 8 at k, the rows on our readings apart as in the ledger
            for found in adjust_apart(ours_marked(claim8(view, th)), th["family_alpha"], ours_apart):
                rows.append(
                    {
                        "model": model,
                        "n_sequences": int(counts.iloc[:k].sum()),
                        "n_groups": k,
                        "seq_len": size,
                        **{c: found[c] for c in CONVERGENCE_COLUMNS if c in found},
                    }
                )
            steps.done(f"N = {int(counts.iloc[:k].sum())}")
    frame = pd.DataFrame(rows, columns=CONVERGENCE_COLUMNS)
    frame["layer"] = frame["layer"].astype("Int64")
    return frame.sort_values(["model", "claim_id", "layer", "n_sequences"], ignore_index=True, na_position="first")


def _of_model(table, model: str):
    return table.select(model=model) if isinstance(table, PartTable) else table[table["model"] == model]


def _key(claim_id, model, layer) -> tuple:
    return str(claim_id), str(model), -1 if pd.isna(layer) else int(layer)


def verdict_changes(convergence: pd.DataFrame) -> dict[tuple, str]:
    """{(claim_id, model, layer or -1): "N = 16 inconclusive, 32 supported, ..."} for each claim, model and layer
    whose verdict is not the same at every number of sequences."""
    changes = {}
    for (claim_id, model, layer), rows in convergence.groupby(["claim_id", "model", "layer"], dropna=False, sort=True):
        rows = rows.sort_values("n_sequences")
        if rows["verdict"].nunique() > 1:
            changes[_key(claim_id, model, layer)] = "N = " + ", ".join(
                f"{n} {v}" for n, v in zip(rows["n_sequences"], rows["verdict"])
            )
    return changes


def note_flips(ledger: pd.DataFrame, convergence: pd.DataFrame | None) -> pd.DataFrame:
    """The ledger with "verdict changes with N: N = ..." added to the note of each row that verdict_changes names."""
    if convergence is None or convergence.empty:
        return ledger
    changes = verdict_changes(convergence)
    ledger = ledger.copy()
    for index, row in ledger.iterrows():
        change = changes.get(_key(row["claim_id"], row.get("model"), row["layer"]))
        if change:
            ledger.at[index, "note"] = "; ".join(filter(None, [row["note"], f"{FLIP_NOTE}: {change}"]))
    return ledger


def flip_count(convergence: pd.DataFrame) -> int:
    """How many claim, model and layer rows change verdict with N (for the log)."""
    return len(verdict_changes(convergence)) if len(convergence) else 0
