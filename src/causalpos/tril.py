"""Packed lower triangles: the pairs (query, key <= query) of S positions, diagonal included, row by row.

Pair (q, k) sits at q (q + 1) / 2 + k, the order of np.tril_indices(S) and of np.nonzero(np.tril(ones)).
The extraction's accumulators and tables, the groups' sums and the analysis' [pairs, N] arrays all use
this one order, so a packed vector written by one is read correctly by the others.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np


def packed_size(seq_len: int) -> int:
    """Pairs of the lower triangle of S = `seq_len` positions, S (S + 1) / 2: also where row S starts."""
    return seq_len * (seq_len + 1) // 2


@lru_cache(maxsize=16)
def packed_pairs(seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(query, key) of every pair, int64, in packed order. Cached, hence read-only: copy before changing them."""
    query, key = np.tril_indices(seq_len)
    query.setflags(write=False)
    key.setflags(write=False)
    return query, key


def packed_index(query, key) -> np.ndarray:
    """Packed position of the pairs (query, key), key <= query (not checked)."""
    query = np.asarray(query, dtype=np.int64)
    return query * (query + 1) // 2 + np.asarray(key, dtype=np.int64)


def seq_len_of_packed(length: int) -> int:
    """S of a packed vector of `length` pairs; ValueError if no lower triangle has that many."""
    seq_len = (math.isqrt(8 * length + 1) - 1) // 2 if length >= 0 else -1
    if seq_len < 0 or packed_size(seq_len) != length:
        raise ValueError(f"{length} is not the size of a lower triangle (S (S + 1) / 2 pairs)")
    return seq_len
