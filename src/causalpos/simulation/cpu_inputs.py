"""X^(0) of one sample inside the CPU kernel: the laws of `sampling`, drawn from the block's own stream.

Each sample takes `NormalLayout.count` normals from the block's generator (`cpu_random`, consumed in
order), and the reduced bases also take chi variates drawn per block with numpy (`chi_variates`).

The official law in the reduced basis. x_i = normalize(g_i + l u) with g_1..g_n and u i.i.d. N(0, I_d):
the joint law of the g_i and u is invariant under rotations, so without RoPE and with l2 normalisation
(where the decoder sees inner products only) any rotation of them gives the same tables. Rotate u onto
e_0: u = |u| e_0 with |u| ~ chi_d, and each g_i splits into a coordinate z_i ~ N(0, 1) along u and a
Gaussian vector in the d - 1 dimensions orthogonal to u, whose n rows have the Bartlett factor of
`sample_inputs_reduced` (m = d - 1). So x_i = normalize(z_i + l chi_d, Bartlett row i), in 1 + min(n, d - 1)
coordinates, lower trapezoidal like our law's reduced basis. At alpha = 0 (l = 0) the shared coordinate
carries nothing and the law is the i.i.d. one: the Bartlett factor of n vectors in R^d, with no lead column.
"""

from __future__ import annotations

import numpy as np

from causalpos.simulation.cpu_random import NORMALS_PER_CALL, normals16
from causalpos.simulation.cpu_rows import squares_row
from causalpos.simulation.cpu_vectors import ONE, PAD, ZERO, kernel, vload, vscale, vstore

FULL, REDUCED, OFFICIAL, OFFICIAL_REDUCED = 0, 1, 2, 3


def law_code(sampler: str, reduced: bool) -> int:
    if sampler == "official":
        return OFFICIAL_REDUCED if reduced else OFFICIAL
    return REDUCED if reduced else FULL


def normals_per_sample(law: int, n: int, d: int, k: int, lead: int) -> int:
    """Normals one sample takes from the stream, rounded up to whole calls of the generator.

    Full bases: n + 1 rows of d (row 0 the shared direction); reduced: the Bartlett triangle's
    below-diagonal entries, after n along the shared direction for the official law with alpha > 0."""
    if law in (FULL, OFFICIAL):
        count = (n + 1) * d
    else:
        count = sum(min(i, k) for i in range(n)) + (n * lead if law == OFFICIAL_REDUCED else 0)
    return -(-count // NORMALS_PER_CALL) * NORMALS_PER_CALL


def chi_variates(rng: np.random.Generator, dof: np.ndarray, size: int) -> np.ndarray:
    """[size, len(dof)] float32 chi variates: sqrt(2 Gamma(dof / 2))."""
    return np.sqrt(2.0 * rng.standard_gamma(np.float32(0.5) * dof.astype(np.float32), (size, dof.size), np.float32))


@kernel
def _fill_normals(state, buffer):
    for pos in range(0, buffer.size, NORMALS_PER_CALL):
        normals16(state, buffer, pos)


@kernel
def _build_reduced(normals, chi, sqrt_a, sqrt_b, lead, X):
    """One sample of `sample_inputs_reduced`; X [n, >= lead + k] zeroed.

    normals holds row i's min(i, k) below-diagonal entries, rows concatenated;
    the triangle starts at column lead (1 after the shared coordinate, 0 without one).
    """
    n, k = X.shape[0], chi.size
    pos = 0
    for i in range(n):
        m = min(i, k)
        ss = ZERO
        for c in range(m):
            val = normals[pos + c]
            X[i, lead + c] = val
            ss += val * val
        pos += m
        if i < k:
            X[i, lead + i] = chi[i]
            ss += chi[i] * chi[i]
        f = sqrt_b / np.sqrt(ss)
        for c in range(m + 1 if i < k else m):
            X[i, lead + c] *= f
        if lead:
            X[i, 0] = sqrt_a


@kernel
def _build_official_reduced(normals, chi, lam, lead, X):
    """The official law in the reduced basis (module docstring); X [n, >= lead + k, padded to 8] zeroed.

    lead = 1: normals[:n] are the z_i along u and chi[k] is |u|; then row i's triangle as `_build_reduced`.
    """
    n, k = X.shape[0], chi.size - lead
    pos = n * lead
    for i in range(n):
        m = min(i, k)
        for c in range(m):
            X[i, lead + c] = normals[pos + c]
        pos += m
        if i < k:
            X[i, lead + i] = chi[i]
        if lead:
            X[i, 0] = normals[i] + lam * chi[k]
    _unit_rows(X, lead + 1, lead + k)


@kernel
def _unit_rows(X, first, most):
    """Each row of X divided by its norm; row i has min(first + i, most) nonzero columns. A pass of its own
    after X is written: a vector load of values just stored one by one would wait for the stores."""
    for i in range(X.shape[0]):
        width = -(-min(first + i, most) // PAD) * PAD
        f = ONE / np.sqrt(squares_row(X, i, width))
        for t in range(0, width, PAD):
            vstore(X, i, t, vscale(vload(X, i, t), f))


@kernel
def _build_full(normals, d, sqrt_a, sqrt_b, shared, u, X):
    """One sample of `sample_inputs` from normals [(n + 1) d] (row 0: the shared direction).

    Without a shared direction (alpha = 0) u stays zero: nothing is projected
    out and the rows are normalised Gaussians, i.i.d. uniform on the sphere.
    """
    n = X.shape[0]
    u[:] = ZERO
    if shared:
        ss = ZERO
        for c in range(d):
            ss += normals[c] * normals[c]
        f = ONE / np.sqrt(ss)
        for c in range(d):
            u[c] = normals[c] * f
    for i in range(n):
        row = (i + 1) * d
        dot = ZERO
        for c in range(d):
            dot += normals[row + c] * u[c]
        ss = ZERO
        for c in range(d):
            w = normals[row + c] - dot * u[c]
            X[i, c] = w
            ss += w * w
        f = sqrt_b / np.sqrt(ss)
        for c in range(d):
            X[i, c] = sqrt_a * u[c] + f * X[i, c]


@kernel
def _build_official(normals, d, lam, X):
    """One sample of `sample_inputs_official`: row i is normalize(g_i + lam u), normals [(n + 1) d], u first;
    X [n, d padded to 8] zeroed."""
    for i in range(X.shape[0]):
        row = (i + 1) * d
        for c in range(d):
            X[i, c] = normals[row + c] + lam * normals[c]
    _unit_rows(X, d, d)


@kernel
def build_sample(state, buffer, chi, law, d, lead, consts, u, X):
    """X^(0) of the next sample of the stream into X (zeroed); consts = (sqrt(alpha), sqrt(1 - alpha),
    sqrt(alpha / (1 - alpha))); buffer holds `normals_per_sample` floats."""
    _fill_normals(state, buffer)
    if law == REDUCED:
        _build_reduced(buffer, chi, consts[0], consts[1], lead, X)
    elif law == OFFICIAL_REDUCED:
        _build_official_reduced(buffer, chi, consts[2], lead, X)
    elif law == OFFICIAL:
        _build_official(buffer, d, consts[2], X)
    else:
        _build_full(buffer, d, consts[0], consts[1], lead == 1, u, X)
