"""The tables the stages write: their columns, Figure 3's stage labels, and the one column check.

Layers and positions are 0-based in every table; heatmap tables are long, one row per visible
(query_pos, key_pos). The lists here are what the writers produce and what the readers check.
"""

from __future__ import annotations

import pandas as pd

# results/simulation/{variant}.parquet: measured columns, then the Variant fields, then the sampler
SIMULATION_COLUMNS = ["variant", "layer", "query_pos", "key_pos", "score_mean", "score_sem", "score_diagnorm",
                      "prob_mean", "prob_sem"]
# results/simulation_groups/{variant}.parquet: per layer and group of sample blocks, the packed score sums
SIMULATION_GROUP_COLUMNS = ["variant", "layer", "group", "n_samples", "seq_len", "sums"]
# results/theory/layer2_scores.parquet
THEORY_COLUMNS = ["alpha", "residual", "seq_len", "query_pos", "key_pos", "score", "g", "h_query", "h_key"]
# results/theory/recursion.parquet: the large-d recursion of every simulation variant (simulation.recursion),
# then the Variant fields as in the simulation tables; the *_corrected columns add the O(1/d) correction (NaN
# where it is not computed: RoPE, LayerNorm with scale none / sqrt_d)
RECURSION_COLUMNS = ["variant", "layer", "query_pos", "key_pos", "score", "score_diagnorm", "prob", "concentrates",
                     "corrected", "score_corrected", "score_diagnorm_corrected", "prob_corrected"]
# results/activations/{model}/{table}.parquet (each also carries a `table` column with its own name)
SCORE_COLUMNS = ["model", "kind", "layer", "query_pos", "key_pos", "score_mean", "score_sem", "score_diagnorm",
                 "n_sequences", "seq_len"]
INTERMEDIATE_COLUMNS = ["model", "layer", "stage", "query_pos", "key_pos", "value", "n_sequences", "seq_len"]
PROBE_COLUMNS = ["model", "kind", "layer", "mae", "mae_baseline", "n_train", "n_test", "seq_len"]
GROUP_COLUMNS = ["model", "kind", "quantity", "stage", "layer", "group", "n_sequences", "seq_len", "sums"]
# each query head's mean score (extraction.per_head; no rows where it is off): score_mean averaged over
# sequences, not heads; the head average of these rows is scores.parquet's score_mean
HEAD_SCORE_COLUMNS = ["model", "kind", "layer", "head", "query_pos", "key_pos", "score_mean", "n_sequences",
                      "seq_len"]
# the extraction stage's tables per model
ACTIVATION_TABLES = ("scores", "intermediates", "probe", "groups", "head_scores")
# rule summary's per-layer tables, in results/summary/
SUMMARY_FILES = {
    "nonrelativeness": "nonrelativeness.parquet",
    "increasing_fraction": "increasing_fraction.parquet",
    "position_probe": "position_probe.parquet",
}

# Figure 3's intermediates of layer l and l + 1: letter -> (plain label, the figure's panel title)
FIGURE3_STAGES = {
    "a": ("LN(X)", "(a) LN(X)"),
    "b": ("QK^T/sqrt(d)", r"(b) $QK^\top/\sqrt{d}$"),
    "c": ("AV", "(c) AV"),
    "d": ("AVW_O", r"(d) $AVW_O$"),
    "e": ("O = AVW_O + X", r"(e) $O = AVW_O + X$"),
    "f": ("LN(O)", "(f) LN(O)"),
    "g": ("X' = FFN(LN(O)) + O", r"(g) $X' = \mathrm{FFN}(\mathrm{LN}(O)) + O$"),
    "h": ("LN(X') (next layer)", r"(h) $\mathrm{LN}(X')$, next layer"),
    "i": ("QK^T/sqrt(d) (next layer)", r"(i) $QK^\top/\sqrt{d}$, next layer"),
}


def require_columns(frame: pd.DataFrame | None, columns, name: str, *, optional: bool = False,
                    allow_empty: bool = False) -> pd.DataFrame | None:
    """`frame` if it has every column of `columns`, else ValueError naming the table and the columns.

    A missing (None) or empty table is an error, unless `optional` (then None is returned for it) or,
    for an empty table only, `allow_empty`.
    """
    if frame is None or (frame.empty and not allow_empty):  # a DataFrame or an io.PartTable
        if optional:
            return None
        raise ValueError(f"the {name} table is {'missing' if frame is None else 'empty'}")
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise ValueError(f"the {name} table lacks column(s) {absent}")
    return frame
