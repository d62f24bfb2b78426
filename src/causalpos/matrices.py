"""[query, key] matrices: which pairs are visible, and the diagonal normalisation of Figures 4, 5, 9, 10."""

from __future__ import annotations

import numpy as np


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
