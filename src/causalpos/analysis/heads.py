"""Each attention head measured as the per-layer statistics measure the head average (extraction.per_head).

From the extraction's head_scores tables (each query head's mean scores over sequences, causalpos.catalogue.tables
HEAD_SCORE_COLUMNS), one row per (model, kind, layer, head) and metric:

- ``nonrelative_amplitude``: the non-relative amplitude of claims 4a / 8a, sqrt(Var(p) / Var(s)) over the
  off-diagonal pairs with keys >= 1, p = s minus the mean of its band i - j recentred without key 0 (the RMS
  of the head's departure from a function of i - j, as a fraction of the RMS spread of its scores: 0 for a
  relative head); the square root of the summary's ``index_no_sink``. A point estimate: the head maps have no
  groups of sequences, so no bootstrap, no uncertainty and no bias correction (the ledger's 8a subtracts the
  bootstrap's bias; with 64 sequences a head's amplitude here carries its sampling noise).
- ``first_keys_emphasis``: claim 8d's emphasis on the first few keys (Section 5.2, Figures 1 and 5), the mean
  band-centred score of keys 1-FIRST_KEYS (bands recentred without key 0) in units of the SD of the head's
  scores over keys >= 1 (triangles.first_keys_emphasis): > 0 = the first keys score above their diagonals.

Both come from one pass of triangles.band_statistics over the layer's heads as columns (every statistic there
works column by column), over the pairs a sliding-window layer sees (triangles.visible_window), as claim 8 and
the summary do: a one-head model's numbers are its layer's.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from causalpos.analysis.triangles import band_statistics, visible_window
from causalpos.catalogue.tables import HEAD_SCORE_COLUMNS, HEADS_COLUMNS, require_columns
from causalpos.tril import packed_index, packed_size

KEYS = ["model", "kind", "layer"]
# metric -> band_statistics' result it is read from (extras=True), and what it is
METRICS = {
    "nonrelative_amplitude": "share1",  # square-rooted: claim 8a's amplitude (keys >= 1)
    "first_keys_emphasis": "first1",  # claim 8d (keys 1-FIRST_KEYS, in score SDs)
}
NEEDS = HEAD_SCORE_COLUMNS[:7] + ["seq_len"]


def head_matrix(rows: pd.DataFrame) -> tuple[np.ndarray, int]:
    """One (model, kind, layer)'s rows as packed columns [pairs, heads] (NaN where no row), and seq_len."""
    sizes = rows["seq_len"].unique()
    if len(sizes) != 1:
        raise ValueError(
            f"head_scores: model {rows['model'].iloc[0]!r}, layer {int(rows['layer'].iloc[0])} has "
            f"several seq_len values: {sorted(sizes)}"
        )
    size = int(sizes[0])
    query, key = rows["query_pos"].to_numpy(np.int64), rows["key_pos"].to_numpy(np.int64)
    if ((key > query) | (query >= size) | (key < 0)).any():
        raise ValueError("head_scores: rows outside the lower triangle")
    head = rows["head"].to_numpy(np.int64)
    x = np.full((packed_size(size), int(head.max()) + 1), np.nan)
    x[packed_index(query, key), head] = rows["score_mean"].to_numpy(float)
    return x, size


def layer_heads(rows: pd.DataFrame) -> pd.DataFrame:
    """The HEADS_COLUMNS rows of one (model, kind, layer) of a head_scores table."""
    model, kind, layer = (rows[c].iloc[0] for c in KEYS)
    x, size = head_matrix(rows)
    try:  # every head of a layer sees the same pairs: the window from the first head's missing scores
        window = visible_window(x[:, 0], size)
    except ValueError as err:
        raise ValueError(f"head_scores: model {model!r}, layer {int(layer)}: {err}") from None
    stats = band_statistics(x, size, extras=True, window=window)
    values = {
        "nonrelative_amplitude": np.sqrt(np.clip(stats[METRICS["nonrelative_amplitude"]], 0.0, None)),
        "first_keys_emphasis": stats[METRICS["first_keys_emphasis"]],
    }
    heads = np.arange(x.shape[1])
    n_sequences = int(rows["n_sequences"].max()) if "n_sequences" in rows.columns else -1
    return pd.DataFrame(
        [
            {
                "model": model,
                "kind": kind,
                "layer": int(layer),
                "head": int(h),
                "metric": metric,
                "value": float(values[metric][h]),
                "seq_len": size,
                "n_sequences": n_sequences,
            }
            for metric in METRICS
            for h in heads
        ],
        columns=HEADS_COLUMNS,
    )


def layers_of(table) -> Iterator[pd.DataFrame]:
    """A head_scores io.PartTable a (model, kind, layer) at a time, each read when asked for (heads_frame's parts:
    SmolLM2-135M's table is 8.9M rows at the default size)."""
    return (table.read(dict(zip(KEYS, key))) for key in table.keys(KEYS))


def heads_frame(parts) -> pd.DataFrame:
    """HEADS_COLUMNS from head_scores rows, given as one frame or as an iterable of frames of whole layers (each
    (model, kind, layer) within one frame: a reader that holds one layer at a time). No rows (every extraction
    ran without per_head): an empty table."""
    frames = [parts] if isinstance(parts, pd.DataFrame) else parts
    out = []
    for frame in frames:
        require_columns(frame, NEEDS, "head_scores", allow_empty=True)
        out += [layer_heads(rows) for _, rows in frame.groupby(KEYS, sort=True)]
    if not out:
        return pd.DataFrame(
            {
                c: pd.Series(dtype=t)
                for c, t in zip(
                    HEADS_COLUMNS, ["object", "object", "int64", "int64", "object", "float64", "int64", "int64"]
                )
            }
        )
    return pd.concat(out, ignore_index=True).sort_values(
        ["model", "metric", "layer", "head"], kind="stable", ignore_index=True
    )
