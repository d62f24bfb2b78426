"""Closed forms of Section 3 and Appendix A for the parameter-free l2 decoder.

Positions are 1-based in the formulas (as in the paper) and 0-based in every
array and table this module returns.

Input assumption: unit-norm token vectors with E<x_i, x_j> = alpha for i != j,
0 <= alpha < 1. The first layer's attention then puts weight e on the diagonal
and e^alpha on every earlier key (Eq. 2), normalised by c(i) = e + (i-1)e^alpha.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from causalpos.tril import packed_pairs

E = np.e


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha < 1.0:
        raise ValueError(f"alpha must satisfy 0 <= alpha < 1, got {alpha}")


def _positions(i) -> np.ndarray:
    i = np.asarray(i, dtype=float)
    if np.any(i < 1):
        raise ValueError("positions are 1-based in the closed forms")
    return i


def softmax_denominator(i, alpha: float) -> np.ndarray:
    """c(i) = e + (i-1) e^alpha, the row sum of exp(scores) in layer 1."""
    return E + (_positions(i) - 1) * np.exp(alpha)


def layer1_attention(n: int, alpha: float) -> np.ndarray:
    """Expected first-layer attention (Eq. 2 after softmax), shape (n, n), 0 above the diagonal."""
    _check_alpha(alpha)
    i = np.arange(1, n + 1)
    weights = np.tril(np.full((n, n), np.exp(alpha)), k=-1) + np.diag(np.full(n, E))
    return weights / softmax_denominator(i, alpha)[:, None]


def g(i, alpha: float) -> np.ndarray:
    """<x_i^(1), x_j^(1)> for j < i (with residual); depends on the query i only."""
    _check_alpha(alpha)
    i = _positions(i)
    return 2 * (2 * alpha * E + np.exp(alpha) * (1 + alpha * (2 * i - 3))) / softmax_denominator(i, alpha)


def h(i, alpha: float) -> np.ndarray:
    """||x_i^(1)|| with residual (Eq. 3)."""
    _check_alpha(alpha)
    i = _positions(i)
    ea = np.exp(alpha)
    a = 2 * E + (i - 1) * ea  # coefficient of x_i itself: attention weight e plus the residual
    sq = a**2 + 2 * a * ea * alpha * (i - 1) + ea**2 * (i - 1) * (1 + (i - 2) * alpha)
    return np.sqrt(sq) / softmax_denominator(i, alpha)


def g_no_residual(i, alpha: float) -> np.ndarray:
    """g'(i) of Appendix A.2: <x_i^(1), x_j^(1)> for j < i without the residual."""
    _check_alpha(alpha)
    i = _positions(i)
    return (E * alpha + np.exp(alpha) * (1 + alpha * (i - 2))) / softmax_denominator(i, alpha)


def h_no_residual(i, alpha: float) -> np.ndarray:
    """h'(i) of Appendix A.2: ||x_i^(1)|| without the residual."""
    _check_alpha(alpha)
    i = _positions(i)
    ea = np.exp(alpha)
    sq = E**2 + 2 * E * ea * alpha * (i - 1) + ea**2 * (i - 1) * (1 + alpha * (i - 2))
    return np.sqrt(sq) / softmax_denominator(i, alpha)


def layer2_scores(n: int, alpha: float, residual: bool = True) -> np.ndarray:
    """Second-layer score <y_i^(2), y_j^(2)> = g(i) / (h(i) h(j)) (Eq. 4).

    Entry [i-1, j-1] is query i, key j: 1 on the diagonal, NaN above it.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    gf, hf = (g, h) if residual else (g_no_residual, h_no_residual)
    pos = np.arange(1, n + 1)
    hv = hf(pos, alpha)
    scores = gf(pos, alpha)[:, None] / (hv[:, None] * hv[None, :])
    scores[np.triu_indices(n, k=1)] = np.nan
    np.fill_diagonal(scores, 1.0)
    return scores


def theory_frame(seq_len: int, alphas) -> pd.DataFrame:
    """Long table of the layer-2 closed form for every alpha, with and without residual.

    Columns: alpha, residual, seq_len, query_pos, key_pos (0-based), score, g, h_query, h_key.
    Rows only for visible pairs (key_pos <= query_pos).
    """
    frames = []
    qi, kj = packed_pairs(seq_len)
    for alpha in alphas:
        for residual in (True, False):
            gf, hf = (g, h) if residual else (g_no_residual, h_no_residual)
            scores = layer2_scores(seq_len, alpha, residual)
            frames.append(
                pd.DataFrame(
                    {
                        "alpha": float(alpha),
                        "residual": residual,
                        "seq_len": seq_len,
                        "query_pos": qi,
                        "key_pos": kj,
                        "score": scores[qi, kj],
                        "g": gf(qi + 1, alpha),
                        "h_query": hf(qi + 1, alpha),
                        "h_key": hf(kj + 1, alpha),
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)
