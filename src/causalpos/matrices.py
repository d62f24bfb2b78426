"""[query, key] matrices: long rows as arrays, which pairs are visible, and the diagonal normalisation of
Figures 4, 5, 9, 10."""

from __future__ import annotations

import numpy as np
import pandas as pd


def maps(rows: pd.DataFrame, value: str, lead=(), label: str = "one panel") -> np.ndarray:
    """Long rows (lead..., query_pos, key_pos, value[, seq_len]) as an array [lead..., query, key], float64, NaN
    where no row: the one reader of maps from long rows (figures, the results API). A lead column's index is its value
    (0-based layers, heads). The size is the rows' one seq_len (else the largest position + 1)."""
    if rows.empty:
        raise ValueError(f"{label}: the table has no rows")
    if "seq_len" in rows.columns:
        sizes = rows["seq_len"].unique()
        if len(sizes) != 1:
            raise ValueError(f"{label} has several seq_len values: {sorted(sizes)}")
        n = int(sizes[0])
    else:
        n = int(max(rows["query_pos"].max(), rows["key_pos"].max())) + 1
    index = tuple(rows[c].to_numpy(np.int64) for c in [*lead, "query_pos", "key_pos"])
    shape = tuple(int(i.max()) + 1 for i in index[:-2]) + (n, n)
    seen = np.zeros(shape, dtype=bool)
    seen[index] = True
    if seen.sum() != len(rows):
        raise ValueError(f"{label}: the table has several rows for one ({', '.join([*lead, 'query_pos', 'key_pos'])})")
    out = np.full(shape, np.nan)
    out[index] = rows[value].to_numpy(dtype=float, na_value=np.nan)
    return out


def diagonal_normalise(matrix: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """Subtract from every visible entry the mean of its diagonal (key - query offset); NaN where not visible.

    `matrix` is [..., n, n]; one pass per leading index, so memory stays that of one [n, n] slice.
    """
    n = matrix.shape[-1]
    offset = (np.arange(n)[None, :] - np.arange(n)[:, None] + n - 1)[visible]  # 0 .. 2n - 2
    counts = np.bincount(offset, minlength=2 * n - 1)
    out = np.full(matrix.shape, np.nan)
    flat_in, flat_out = matrix.reshape(-1, n, n), out.reshape(-1, n, n)
    for index in range(len(flat_in)):
        values = flat_in[index][visible]
        means = np.bincount(offset, weights=values, minlength=2 * n - 1) / np.maximum(counts, 1)
        flat_out[index][visible] = values - means[offset]
    return out


def visible_pairs(n: int, mask: str, window: int | None = None) -> np.ndarray:
    """[n, n] bool, query x key: causal j <= i (and, with a sliding window, j > i - window), or every key without
    a mask."""
    if mask != "causal":
        if window is not None:
            raise ValueError("a sliding window needs the causal mask")
        return np.ones((n, n), dtype=bool)
    offset = np.arange(n)[:, None] - np.arange(n)[None, :]
    return (offset >= 0) & (offset < window) if window is not None else offset >= 0
