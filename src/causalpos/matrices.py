"""[query, key] matrices: which pairs are visible, and the diagonal normalisation of Figures 4, 5, 9, 10."""

from __future__ import annotations

import numpy as np


def diagonal_normalise(matrix: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """Subtract from every visible entry the mean of its diagonal (key - query offset)."""
    n = matrix.shape[-1]
    offset = np.arange(n)[None, :] - np.arange(n)[:, None]
    out = np.full_like(matrix, np.nan, dtype=float)
    for k in np.unique(offset[visible]):
        band = visible & (offset == k)
        out[..., band] = matrix[..., band] - matrix[..., band].mean(axis=-1, keepdims=True)
    return out


def visible_pairs(n: int, mask: str) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool)) if mask == "causal" else np.ones((n, n), dtype=bool)
