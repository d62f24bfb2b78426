"""The pretrained LLMs' pattern under the content controls (issue 43; claim 12's verdicts: analysis.claims.
mask_controls): claim 8's metrics measured again on each condition's extraction, the table of rule controls_table.

One condition's tables (scores, groups, head_scores of every pretrained model, extracted on that condition's
sequences: corpus.conditions) go through claim 8's own builder (analysis.claims.model_claims.claim8), so a value
here is the ledger's 8a-8d for those sequences, with the same bootstrap over groups of sequences; each head
through analysis.heads (point estimates: head maps have no groups, so no uncertainty). Rows (MASK_CONTROLS_COLUMNS):

- layer >= 0, head -1 (the head average): ``nonrelative_amplitude`` (8a, keys >= 1, bias-corrected),
  ``range_ratio`` (8c's per layer), ``first_keys_emphasis`` (8d), ``sink_emphasis`` (8d's key 0);
- layer -1, head -1: ``nonrelative_amplitude`` (8b: the median over layers 2+ (paper)) and ``range_ratio`` (8c);
- layer >= 0, head >= 0: ``nonrelative_amplitude`` and ``first_keys_emphasis`` of each query head.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from causalpos.analysis.claims.model_claims import claim8
from causalpos.analysis.claims.replicates import LedgerInputs, group_sizes, longest_seq_len
from causalpos.analysis.heads import heads_frame
from causalpos.catalogue.tables import MASK_CONTROLS_COLUMNS
from causalpos.catalogue.thresholds import THRESHOLDS

LAYERS_2_ON = -1  # `layer` of the rows over layers 2+ (paper): 8b's and 8c's medians
HEAD_AVERAGE = -1  # `head` of the rows of a layer's (or the model's) mean map over heads

# claim 8's rows -> (metric, the row's column holding the value, the one holding its standard error)
PER_LAYER = {
    "8a": [
        ("nonrelative_amplitude", "value", "uncertainty"),
        ("range_ratio", "range_ratio", "range_ratio_uncertainty"),
    ],
    "8d": [
        ("first_keys_emphasis", "value", "uncertainty"),
        ("sink_emphasis", "sink_emphasis", "sink_emphasis_uncertainty"),
    ],
}
OVER_LAYERS = {"8b": "nonrelative_amplitude", "8c": "range_ratio"}
MEASURED = MASK_CONTROLS_COLUMNS[:-2]  # a condition's rows before its sizes (n_sequences, seq_len) are added


def condition_frame(condition: str, scores, groups, head_scores, n_bootstrap: int, seed: int) -> pd.DataFrame:
    """MASK_CONTROLS_COLUMNS rows of one model's extraction on one condition's sequences: its scores, its groups
    of quantity "scores" (both may be io.PartTables: a layer is read when measured) and its head_scores (None or
    no rows: no per-head rows)."""
    data = LedgerInputs.of_condition(condition, scores, groups, n_bootstrap, seed)  # the draws claim 12 uses
    size = longest_seq_len(scores)
    counts = group_sizes(groups) if groups is not None else None
    n_sequences = int(counts.sum()) if counts is not None and len(counts) else -1
    rows = []
    for r in claim8(data, dict(THRESHOLDS)):
        if r.get("model") is None or not np.isfinite(r.get("value", np.nan)):
            continue
        common = {"model": r["model"], "condition": condition, "head": HEAD_AVERAGE}
        if r["claim_id"] in PER_LAYER:
            for metric, value, se in PER_LAYER[r["claim_id"]]:
                rows.append(
                    {**common, "layer": int(r["layer"]), "metric": metric, "value": r[value], "uncertainty": r[se]}
                )
        elif r["claim_id"] in OVER_LAYERS:
            rows.append(
                {
                    **common,
                    "layer": LAYERS_2_ON,
                    "metric": OVER_LAYERS[r["claim_id"]],
                    "value": r["value"],
                    "uncertainty": r["uncertainty"],
                }
            )
    frame = pd.DataFrame(rows, columns=MEASURED)
    heads = heads_frame(head_scores) if head_scores is not None else None  # a frame, or frames of whole layers
    if heads is not None and len(heads):
        frame = pd.concat(
            [
                frame,
                heads.assign(condition=condition, uncertainty=np.nan)[MEASURED],
            ],
            ignore_index=True,
        )
    return frame.assign(n_sequences=n_sequences, seq_len=size)


def mask_controls_frame(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The conditions' rows in one table, in MASK_CONTROLS_COLUMNS order and types, sorted."""
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=MASK_CONTROLS_COLUMNS)
    types = {"layer": "int64", "head": "int64", "value": "float64", "uncertainty": "float64"}
    types |= {"n_sequences": "int64", "seq_len": "int64"}
    frame = frame[MASK_CONTROLS_COLUMNS].astype(types)
    return frame.sort_values(["model", "condition", "metric", "layer", "head"], kind="stable", ignore_index=True)
