"""One layer of the decoder on one sample, for the CPU kernel (`cpu_kernel._decode_block` runs them in order).

Rows are padded to multiples of 8 floats (PAD) so that inner loops run on whole vectors; padding entries are
zero in X, Y and QT, so they add nothing. S = QQ^T and the mixing P Y are computed in register tiles of four
rows by 16 columns (`cpu_tiles`); the arrays' columns are padded to 16 for them.
"""

from __future__ import annotations

import numpy as np

from causalpos.simulation.cpu_rows import exp_row, scale_row, squares_row
from causalpos.simulation.cpu_tiles import ROWS, TILE, mix_tile, score_tile, transpose8
from causalpos.simulation.cpu_vectors import F32, ONE, PAD, ZERO, kernel, vload, vscale, vstore


@kernel
def l2_rows(X, Y, QT, wp, transposed):
    """Y = X with unit rows, and (transposed) QT = Y^T: scores then read whole key rows contiguously."""
    for i in range(X.shape[0]):
        f = ONE / np.sqrt(squares_row(X, i, wp[i]))
        for t in range(0, wp[i], PAD):
            vstore(Y, i, t, vscale(vload(X, i, t), f))
    if transposed:
        transpose(Y, QT, wp)


@kernel
def layernorm_rows(X, Y, d, eps):
    """torch.nn.functional.layer_norm over the first d columns (biased variance)."""
    inv_d = ONE / F32(d)
    for i in range(X.shape[0]):
        mean = ZERO
        for k in range(d):
            mean += X[i, k]
        mean *= inv_d
        var = ZERO
        for k in range(d):
            var += (X[i, k] - mean) * (X[i, k] - mean)
        f = ONE / np.sqrt(var * inv_d + eps)
        for k in range(d):
            Y[i, k] = (X[i, k] - mean) * f


@kernel
def transpose(Y, QT, wp):
    """QT = Y^T in blocks of 8 x 8; Y has its rows padded to a multiple of 8 (zero past n)."""
    n = wp.size
    for i in range(0, n, PAD):
        for k in range(0, wp[min(i + PAD - 1, n - 1)], PAD):  # widths grow with the row
            transpose8(Y, QT, i, k)


@kernel
def rope_transpose(Y, QT, cos, sin):
    """QT[:, i] = RoPE(Y[i]) with the half-split pairing of `apply_rope`."""
    half = cos.shape[1] // 2
    for i in range(Y.shape[0]):
        for k in range(half):
            QT[k, i] = Y[i, k] * cos[i, k] - Y[i, k + half] * sin[i, k]
            QT[k + half, i] = Y[i, k + half] * cos[i, k + half] + Y[i, k] * sin[i, k + half]


@kernel
def first_key(i, window):
    """The first key query i sees: i - window + 1 under a sliding window (window >= 1), else 0 (window 0)."""
    return max(i - window + 1, 0) if window else 0


@kernel
def softmax(S, P, cols, inv_div, causal, window, shift, acc):
    """P = softmax(S * inv_div) over the visible keys, zero elsewhere (padding and, under a sliding window
    (window > 0; causal only), the keys j <= i - window); and the moments of both over each row's span
    cols[i]: acc [4, n, n_pad] += (S inv_div - shift[0], its square, P - shift[1], its square)."""
    n = cols.size
    for i in range(n):
        visible = i + 1 if causal else n
        total = exp_row(S, P, i, cols[i], first_key(i, window), visible, inv_div, shift[0], acc[0], acc[1])
        scale_row(P, i, cols[i], ONE / total, shift[1], acc[2], acc[3])


@kernel
def scores(QT, S, w, cols, n):
    """S = Q Q^T from QT = Q^T, row i at least up to column cols[i] (a tile of rows computes its last row's
    span, in whole tiles). Row j of Q is zero past column w[j] and w grows with j, so a tile of keys t..t + 15
    needs k < w[t + 15] only. Tiles of rows are counted from the last row, so that where n is not a multiple of 4 the first one (the
    cheapest) repeats row 0 (the same values twice)."""
    for r3 in range(n - 1, -1, -ROWS):
        r0, r1, r2 = max(r3 - 3, 0), max(r3 - 2, 0), max(r3 - 1, 0)
        for t in range(0, cols[r3], TILE):
            kmax = min(w[r3], w[min(t + TILE - 1, n - 1)])
            score_tile(QT, S, r0, r1, r2, r3, t, kmax)


@kernel
def mix(X, Y, P, wp, first_row, causal, residual, window, n):
    """X = P Y + X (or P Y); Y holds the normalised old X, so X is updated in place (a tile reads its own rows
    of X once, before it writes them).

    Causal: P[r, j] = 0 for j > r, so a tile of rows takes the keys up to its last row. Under a sliding window
    (window > 0) the keys before the tile's first row's first key have P = 0 and are skipped; so are the rows of
    Y that are zero in the tile's columns (j < first_row[kt // 16]). Adding any of them would add exact zeros."""
    for r3 in range(n - 1, -1, -ROWS):
        r0, r1, r2 = max(r3 - 3, 0), max(r3 - 2, 0), max(r3 - 1, 0)
        hi = r3 + 1 if causal else n
        for kt in range(0, wp[r3], TILE):
            lo = max(first_key(r0, window), first_row[kt // TILE])
            mix_tile(X, Y, P, r0, r1, r2, r3, kt, lo, hi, residual)


@kernel
def set_widths(w, wp, first_row, triangular, lead, D):
    """Nonzero columns per row (w), padded (wp), and per tile of 16 columns the first row using it."""
    n = w.size
    for i in range(n):
        w[i] = min(lead + i + 1, D) if triangular else D
        wp[i] = (w[i] + PAD - 1) // PAD * PAD
    j = 0
    for q in range(first_row.size):
        while j < n and w[j] <= q * TILE:
            j += 1
        first_row[q] = j
