"""The CPU backend of the Monte Carlo engine: the decoder of Eq. 1 compiled with numba.

`engine.simulate` calls `simulate_blocks` on the CPU. It draws the samples of
`sampling.sample_inputs` / `sample_inputs_reduced` / `sample_inputs_official`
(same laws; its own seeded layout) and returns the same moments as the torch path.
"""

from __future__ import annotations

import concurrent.futures
import math

import numpy as np

from causalpos.simulation.cpu_inputs import (
    OFFICIAL_REDUCED,
    REDUCED,
    build_sample,
    chi_variates,
    law_code,
    normals_per_sample,
)
from causalpos.simulation.cpu_layers import (
    l2_rows,
    layernorm_rows,
    mix,
    rope_transpose,
    scores,
    set_widths,
    softmax,
    transpose,
)
from causalpos.simulation.cpu_random import block_state
from causalpos.simulation.cpu_tiles import TILE
from causalpos.simulation.cpu_vectors import F32, PAD, kernel
from causalpos.simulation.sampling import (
    block_groups,
    block_sizes,
    chi_dof,
    has_shared_direction,
    kernel_basis_is_reduced,
    mean_sem,
    reduced_shape,
    rope_tables,
)
from causalpos.simulation.variant import LAYERNORM_EPS, Variant

# The kernel runs the decoder one sample at a time with every buffer small
# enough to stay in L1/L2, and skips the work that structure makes zero:
# - Q = K, so S is symmetric: under the causal mask only its lower triangle is
#   computed (in whole register tiles, `cpu_layers`).
# - In the reduced basis (exact_reduced, and the official law where exact),
#   row i of X^(0) is nonzero only in its first
#   w_i = min(lead + i + 1, D) columns (the shared coordinate 0 when alpha > 0,
#   lead = 1, then the Bartlett triangle), and
#   causal mixing (row i of AY uses rows j <= i) keeps that shape in every
#   layer. So S and AY cost about n^3/6 multiply-adds instead of n^2 D each.
# - Softmax shifts each row by its diagonal score S_ii instead of a max pass:
#   any shift gives the same softmax, and S_ij <= |q_i||q_j| ~ S_ii keeps the
#   exponents <= ~0 (all rows of Q have one norm, up to LayerNorm's eps).
# Moments are summed in float32 over one block of RNG_BLOCK samples (shifted
# by the block-0 mean, so the sums are small) and added up in float64.


@kernel
def _decode_block(
    state,
    chi,
    n_normals,
    law,
    lead,
    consts,
    d,
    D,
    n_layers,
    layernorm,
    ln_eps,
    inv_div,
    causal,
    window,
    residual,
    rope_cos,
    rope_sin,
    use_rope,
    shift,
    acc,
):
    """Run the decoder on the next chi.shape[0] samples of the stream (`cpu_inputs.build_sample`); add shifted
    moments to acc.

    window: the sliding window (query i sees keys i - window < j <= i; causal only), 0 for every key. The
    scores are still computed and summed for every pair of the lower triangle; the probabilities of the
    hidden keys are zero.

    acc and shift: [layer, 4 | 2, n, n_pad] for (sum S, sum S^2, sum P, sum P^2) | (S, P).
    """
    n, n_pad = acc.shape[2], acc.shape[3]
    d16, n16 = -(-D // TILE) * TILE, -(-n // TILE) * TILE  # whole register tiles
    X = np.zeros((n, d16), np.float32)
    Y = np.zeros((-(-n // PAD) * PAD, d16), np.float32)  # whole blocks of 8 rows for `transpose`
    QT = np.zeros((d16, n16), np.float32)
    S = np.zeros((n, n16), np.float32)
    P = np.zeros((n, n16), np.float32)
    u = np.zeros(d16, np.float32)
    normals = np.empty(n_normals, np.float32)
    w = np.zeros(n, np.int64)
    wp = np.zeros(n, np.int64)
    first_row = np.zeros(d16 // TILE, np.int64)
    cols = np.zeros(n, np.int64)  # the columns of row i that the softmax and the sums see
    for i in range(n):
        cols[i] = (i + PAD) // PAD * PAD if causal else n_pad
    reduced = law == REDUCED or law == OFFICIAL_REDUCED
    for b in range(chi.shape[0]):
        if not causal and reduced:  # the last sample's unmasked mixing filled the zero triangle
            X[:] = 0
            Y[:] = 0
            QT[:] = 0
        build_sample(state, normals, chi[b], law, d, lead, consts, u, X)
        set_widths(w, wp, first_row, reduced and causal, lead, D)
        for layer in range(n_layers):
            if layernorm:
                layernorm_rows(X, Y, d, ln_eps)
            else:
                l2_rows(X, Y, QT, wp, not use_rope)
            if use_rope:
                rope_transpose(Y, QT, rope_cos, rope_sin)
            elif layernorm:
                transpose(Y, QT, wp)
            scores(QT, S, w, cols, n)
            softmax(S, P, cols, inv_div, causal, window, shift[layer], acc[layer])
            if layer + 1 < n_layers:
                mix(X, Y, P, wp, first_row, causal, residual, window, n)
                if not causal and reduced:
                    set_widths(w, wp, first_row, False, lead, D)  # unmasked mixing fills every column


class KernelPlan:
    """One variant's shapes, constants and random-number layout for the CPU kernel."""

    def __init__(self, v: Variant, sampler: str):
        n = v.seq_len
        self.v, self.shared = v, has_shared_direction(v.alpha)
        self.lead, self.k, m = reduced_shape(n, v.d, v.alpha)  # Bartlett triangle columns (reduced bases)
        self.reduced = kernel_basis_is_reduced(v, sampler)
        self.law = law_code(sampler, self.reduced)
        self.width = self.lead + self.k if self.reduced else v.d  # D: columns of X
        self.n_pad = -(-n // PAD) * PAD
        self.n_normals = normals_per_sample(self.law, n, v.d, self.k, self.lead)
        dof = chi_dof(n, m).double().numpy() if self.reduced else np.zeros(0)
        if self.law == OFFICIAL_REDUCED and self.lead:
            dof = np.append(dof, v.d)  # |u|, the shared Gaussian's length
        self.chi_dof = dof
        a = v.alpha
        self.consts = np.array([math.sqrt(a), math.sqrt(1.0 - a), math.sqrt(a / (1.0 - a))], np.float32)
        if v.pe == "rope":
            self.cos, self.sin = (t.numpy() for t in rope_tables(n, v.d, v.rope_theta))
        else:
            self.cos = self.sin = np.zeros((n, 2), np.float32)

    def draw(self, block: int, size: int):
        """The block's random streams, seeded by (seed, block): the normal generator's state (`cpu_random`),
        and the reduced bases' chi variates [size, len(chi_dof)] (numpy: its gamma sampler is exact and fast)."""
        v = self.v
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([v.seed, block, 1])))
        return block_state(v.seed, block), chi_variates(rng, self.chi_dof, size)

    def inputs(self, block: int, size: int) -> np.ndarray:
        """X^(0) [size, n, D] of one block, exactly as the kernel builds it (in rows padded as there)."""
        state, chi = self.draw(block, size)
        x = np.zeros((size, self.v.seq_len, self.width), np.float32)
        padded = np.zeros((self.v.seq_len, -(-self.width // TILE) * TILE), np.float32)
        u = np.zeros(padded.shape[1], np.float32)
        normals = np.empty(self.n_normals, np.float32)
        for b in range(size):
            padded[:] = 0
            build_sample(state, normals, chi[b], self.law, self.v.d, self.lead, self.consts, u, padded)
            x[b] = padded[:, : self.width]
        return x

    def run_block(self, block: int, size: int, shift: np.ndarray) -> np.ndarray:
        """Float32 sums [layer, 4, n, n_pad] of (S - shift_S), its square, (P - shift_P), its square."""
        v = self.v
        state, chi = self.draw(block, size)
        acc = np.zeros((v.n_layers, 4, v.seq_len, self.n_pad), np.float32)
        # eps and the window are arguments, not globals: numba's cache would keep a global of another module
        # stale (window 0: every key; Variant normalises a window >= seq_len to None)
        _decode_block(
            state,
            chi,
            self.n_normals,
            self.law,
            self.lead,
            self.consts,
            v.d,
            self.width,
            v.n_layers,
            v.norm == "layernorm",
            F32(LAYERNORM_EPS),
            F32(1.0 / v.score_divisor),
            v.mask == "causal",
            v.window or 0,
            v.residual,
            self.cos,
            self.sin,
            v.pe == "rope",
            shift,
            acc,
        )
        return acc


def _in_order(pool, fn, items, window: int):
    """pool.map that keeps at most `window` tasks in flight (bounded memory), results in order."""
    pending = []
    for item in items:
        pending.append(pool.submit(fn, *item))
        if len(pending) >= window:
            yield pending.pop(0).result()
    for fut in pending:
        yield fut.result()


def simulate_blocks(v: Variant, sampler: str, threads: int, progress):
    """The CPU kernel over all blocks on a thread pool; returns like `_simulate_torch`: (score mean, sem),
    (prob mean, sem), and (score sums per group of blocks [G, layer, n, n], samples per group [G])."""
    plan = KernelPlan(v, sampler)
    blocks = block_sizes(v.n_samples)
    groups = block_groups(len(blocks))
    # shift = mean of block 0, so that the float32 block sums stay small
    first = plan.run_block(*blocks[0], np.zeros((v.n_layers, 2, v.seq_len, plan.n_pad), np.float32))
    shift = (first[:, 0::2] / blocks[0][1]).astype(np.float32)
    total = np.zeros(first.shape, np.float64)
    group_total = np.zeros((int(groups[-1]) + 1, v.n_layers) + first.shape[2:], np.float64)
    group_sizes = np.zeros(group_total.shape[0], np.int64)
    done = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        for (block, size), acc in zip(
            blocks, _in_order(pool, lambda b, s: plan.run_block(b, s, shift), blocks, 2 * threads)
        ):
            total += acc  # in block order: bitwise independent of threads and chunking
            group_total[groups[block]] += acc[:, 0]
            group_sizes[groups[block]] += size
            done += size
            if progress is not None:
                progress(done, v.n_samples)
    n = v.seq_len
    score = mean_sem(shift[:, 0, :, :n], total[:, 0, :, :n], total[:, 1, :, :n], v.n_samples)
    prob = mean_sem(shift[:, 1, :, :n], total[:, 2, :, :n], total[:, 3, :, :n], v.n_samples)
    group_sums = group_total[..., :n] + group_sizes[:, None, None, None] * shift[None, :, 0, :, :n].astype(np.float64)
    if v.mask == "causal":
        upper = np.triu(np.ones((n, n), dtype=bool), 1)
        for scores in score:  # S is symmetric: its upper triangle mirrors the lower one
            scores[:, upper] = scores.transpose(0, 2, 1)[:, upper]
        for probs in prob:  # masked: exactly zero
            probs[:, upper] = 0.0
        group_sums[:, :, upper] = group_sums.transpose(0, 1, 3, 2)[:, :, upper]
    return score, prob, (group_sums, group_sizes)
