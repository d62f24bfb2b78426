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
from causalpos.simulation.cpu_random import block_state
from causalpos.simulation.cpu_vectors import (
    F32,
    ONE,
    PAD,
    ZERO,
    fma4,
    kernel,
    vadd,
    vexp,
    vfma,
    vload,
    vmoments,
    vscale,
    vstore,
    vsum,
    vzero,
)
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
# - Q = K, so S is symmetric: only its lower triangle is computed.
# - With the reduced sampler, row i of X^(0) is nonzero only in its first
#   w_i = min(lead + i + 1, D) columns (the shared coordinate 0 when alpha > 0,
#   lead = 1, then the Bartlett triangle), and
#   causal mixing (row i of AY uses rows j <= i) keeps that shape in every
#   layer. So S and AY cost about n^3/6 multiply-adds instead of n^2 D each.
# - Softmax shifts each row by its diagonal score S_ii instead of a max pass:
#   any shift gives the same softmax, and S_ij <= |q_i||q_j| ~ S_ii keeps the
#   exponents <= ~0 (all rows of Q have one norm, up to LayerNorm's eps).
# Rows are padded to multiples of 8 floats so that inner loops run on whole
# AVX2 vectors; padding entries are zero in X, Y and QT, so they add nothing.
# Moments are summed in float32 over one block of RNG_BLOCK samples (shifted
# by the block-0 mean, so the sums are small) and added up in float64.


@kernel
def _l2_rows(X, Y, wp):
    for i in range(X.shape[0]):
        ss = ZERO
        for k in range(wp[i]):
            ss += X[i, k] * X[i, k]
        f = ONE / np.sqrt(ss)
        for k in range(wp[i]):
            Y[i, k] = X[i, k] * f


@kernel
def _layernorm_rows(X, Y, d, eps):
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
def _transpose(Y, QT, wp):
    """QT[k, i] = Y[i, k]: scores then read whole key rows contiguously."""
    for i in range(Y.shape[0]):
        for k in range(wp[i]):
            QT[k, i] = Y[i, k]


@kernel
def _rope_transpose(Y, QT, cos, sin):
    """QT[:, i] = RoPE(Y[i]) with the half-split pairing of `apply_rope`."""
    half = cos.shape[1] // 2
    for i in range(Y.shape[0]):
        for k in range(half):
            QT[k, i] = Y[i, k] * cos[i, k] - Y[i, k + half] * sin[i, k]
            QT[k + half, i] = Y[i, k + half] * cos[i, k + half] + Y[i, k] * sin[i, k + half]


@kernel
def _score_row(QT, S, i, w, lo8, n8):
    """S[i, j] = <q_i, q_j> for j < n8[i]; column k of Q is zero in rows j < lo8[k]."""
    zero = vzero()
    for t in range(0, n8[i], PAD):
        vstore(S, i, t, zero)
    k = 0
    while k + 4 <= w[i]:  # four columns per pass: one load and store of S per four products
        a0, a1, a2, a3 = QT[k, i], QT[k + 1, i], QT[k + 2, i], QT[k + 3, i]
        for t in range(lo8[k], n8[i], PAD):
            q0, q1, q2, q3 = vload(QT, k, t), vload(QT, k + 1, t), vload(QT, k + 2, t), vload(QT, k + 3, t)
            vstore(S, i, t, fma4(a0, a1, a2, a3, q0, q1, q2, q3, vload(S, i, t)))
        k += 4
    while k < w[i]:
        for t in range(lo8[k], n8[i], PAD):
            vstore(S, i, t, vfma(QT[k, i], vload(QT, k, t), vload(S, i, t)))
        k += 1


@kernel
def _score_row_pair(QT, S, i, w, lo8, n8):
    """`_score_row` for rows i and i + 1 at once: they share every load of Q (1.6x faster)."""
    j = i + 1
    zero = vzero()
    for t in range(0, n8[j], PAD):
        vstore(S, i, t, zero)
        vstore(S, j, t, zero)
    k = 0
    while k + 4 <= w[j]:  # QT[k, i] = 0 where k >= w[i]
        a0, a1, a2, a3 = QT[k, i], QT[k + 1, i], QT[k + 2, i], QT[k + 3, i]
        b0, b1, b2, b3 = QT[k, j], QT[k + 1, j], QT[k + 2, j], QT[k + 3, j]
        for t in range(lo8[k], n8[j], PAD):
            q0, q1, q2, q3 = vload(QT, k, t), vload(QT, k + 1, t), vload(QT, k + 2, t), vload(QT, k + 3, t)
            vstore(S, i, t, fma4(a0, a1, a2, a3, q0, q1, q2, q3, vload(S, i, t)))
            vstore(S, j, t, fma4(b0, b1, b2, b3, q0, q1, q2, q3, vload(S, j, t)))
        k += 4
    while k < w[j]:
        for t in range(lo8[k], n8[j], PAD):
            q0 = vload(QT, k, t)
            vstore(S, i, t, vfma(QT[k, i], q0, vload(S, i, t)))
            vstore(S, j, t, vfma(QT[k, j], q0, vload(S, j, t)))
        k += 1


@kernel
def _scores(QT, S, w, lo8, n8):
    """Lower triangle of S = Q Q^T (plus padding) from QT = Q^T."""
    n = S.shape[0]
    for i in range(0, n - 1, 2):
        _score_row_pair(QT, S, i, w, lo8, n8)
    if n % 2:
        _score_row(QT, S, n - 1, w, lo8, n8)


@kernel
def _mirror(S):
    """Fill the upper triangle from the lower one (S is symmetric); needed without a mask."""
    n = S.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            S[i, j] = S[j, i]


@kernel
def _first_key(i, window):
    """The first key query i sees: i - window + 1 under a sliding window (window >= 1), else 0 (window 0)."""
    return max(i - window + 1, 0) if window else 0


@kernel
def _softmax(S, P, n8, inv_div, causal, window):
    """P = softmax(S * inv_div) over the visible keys; zero elsewhere (padding and, under a sliding window
    (window > 0; causal only), the keys j <= i - window included)."""
    n, width = P.shape
    for i in range(n):
        visible = i + 1 if causal else n
        span = n8[i] if causal else width
        diag = S[i, i] * inv_div
        for t in range(0, span, PAD):
            vstore(P, i, t, vexp(vload(S, i, t), inv_div, diag))
        for j in range(visible, span):
            P[i, j] = ZERO
        for j in range(_first_key(i, window)):  # no iteration without a window
            P[i, j] = ZERO
        total = vzero()
        for t in range(0, span, PAD):
            total = vadd(total, vload(P, i, t))
        r = ONE / vsum(total)
        for t in range(0, span, PAD):
            vstore(P, i, t, vscale(vload(P, i, t), r))


@kernel
def _accumulate(V, scale, shift, acc1, acc2, n8, causal):
    """acc1 += V*scale - shift and acc2 += its square, over each row's (padded) visible span."""
    n, width = V.shape
    for i in range(n):
        for t in range(0, n8[i] if causal else width, PAD):
            vmoments(V, scale, shift, acc1, acc2, i, t)


@kernel
def _mix_row(X, Y, P, i, lo, hi, wp):
    """X[i] += sum_{lo <= j < hi} P[i, j] Y[j]; row j of Y is zero past wp[j]. Four keys per pass."""
    j = lo
    while j + 4 <= hi:
        e0, e1, e2, e3 = P[i, j], P[i, j + 1], P[i, j + 2], P[i, j + 3]
        for k in range(0, wp[j + 3], PAD):  # widths grow with j
            y0, y1, y2, y3 = vload(Y, j, k), vload(Y, j + 1, k), vload(Y, j + 2, k), vload(Y, j + 3, k)
            vstore(X, i, k, fma4(e0, e1, e2, e3, y0, y1, y2, y3, vload(X, i, k)))
        j += 4
    while j < hi:
        for k in range(0, wp[j], PAD):
            vstore(X, i, k, vfma(P[i, j], vload(Y, j, k), vload(X, i, k)))
        j += 1


@kernel
def _mix_row_pair(X, Y, P, i, lo, hi, wp):
    """`_mix_row` for rows i and i + 1 at once, sharing every load of Y."""
    i1 = i + 1
    j = lo
    while j + 4 <= hi:
        e0, e1, e2, e3 = P[i, j], P[i, j + 1], P[i, j + 2], P[i, j + 3]
        f0, f1, f2, f3 = P[i1, j], P[i1, j + 1], P[i1, j + 2], P[i1, j + 3]
        for k in range(0, wp[j + 3], PAD):
            y0, y1, y2, y3 = vload(Y, j, k), vload(Y, j + 1, k), vload(Y, j + 2, k), vload(Y, j + 3, k)
            vstore(X, i, k, fma4(e0, e1, e2, e3, y0, y1, y2, y3, vload(X, i, k)))
            vstore(X, i1, k, fma4(f0, f1, f2, f3, y0, y1, y2, y3, vload(X, i1, k)))
        j += 4
    while j < hi:
        for k in range(0, wp[j], PAD):
            y0 = vload(Y, j, k)
            vstore(X, i, k, vfma(P[i, j], y0, vload(X, i, k)))
            vstore(X, i1, k, vfma(P[i1, j], y0, vload(X, i1, k)))
        j += 1


@kernel
def _mix(X, Y, P, wp, causal, residual, window):
    """X = P Y + X (or P Y); Y holds the normalised old X, so X is updated in place.

    Under a sliding window (window > 0) the keys before row i's first visible key have P = 0 and are skipped
    (adding them would add exact zeros: the same numbers)."""
    n = X.shape[0]
    if not residual:
        X[:] = 0
    for i in range(0, n - 1, 2):
        # under the mask P[i, i + 1] = 0, so both rows can take keys up to i + 1; row i + 1 sees no key
        # before row i's first
        _mix_row_pair(X, Y, P, i, _first_key(i, window), i + 2 if causal else n, wp)
    if n % 2:
        _mix_row(X, Y, P, n - 1, _first_key(n - 1, window), n, wp)


@kernel
def _set_widths(w, wp, lo8, triangular, lead, D):
    """Nonzero columns per row (w), padded (wp), and per column the first row using it (lo8)."""
    n = w.size
    for i in range(n):
        w[i] = min(lead + i + 1, D) if triangular else D
        wp[i] = (w[i] + PAD - 1) // PAD * PAD
    j = 0
    for k in range(lo8.size):
        while j < n and w[j] <= k:
            j += 1
        lo8[k] = j // PAD * PAD


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
    d_pad = (D + PAD - 1) // PAD * PAD
    X = np.zeros((n, d_pad), np.float32)
    Y = np.zeros((n, d_pad), np.float32)
    QT = np.zeros((d_pad, n_pad), np.float32)
    S = np.zeros((n, n_pad), np.float32)
    P = np.zeros((n, n_pad), np.float32)
    u = np.zeros(d_pad, np.float32)
    normals = np.empty(n_normals, np.float32)
    w = np.zeros(n, np.int64)
    wp = np.zeros(n, np.int64)
    lo8 = np.zeros(d_pad, np.int64)
    n8 = np.zeros(n, np.int64)
    reduced = law == REDUCED or law == OFFICIAL_REDUCED
    for i in range(n):
        n8[i] = (i + PAD) // PAD * PAD
    for b in range(chi.shape[0]):
        X[:] = 0  # padding and the zero triangle must be zero again
        Y[:] = 0
        QT[:] = 0
        build_sample(state, normals, chi[b], law, d, lead, consts, u, X)
        _set_widths(w, wp, lo8, reduced and causal, lead, D)
        for layer in range(n_layers):
            if layernorm:
                _layernorm_rows(X, Y, d, ln_eps)
            else:
                _l2_rows(X, Y, wp)
            if use_rope:
                _rope_transpose(Y, QT, rope_cos, rope_sin)
            else:
                _transpose(Y, QT, wp)
            _scores(QT, S, w, lo8, n8)
            if not causal:
                _mirror(S)
            _softmax(S, P, n8, inv_div, causal, window)
            _accumulate(S, inv_div, shift[layer, 0], acc[layer, 0], acc[layer, 1], n8, causal)
            _accumulate(P, ONE, shift[layer, 1], acc[layer, 2], acc[layer, 3], n8, causal)
            if layer + 1 < n_layers:
                _mix(X, Y, P, wp, causal, residual, window)
                if not causal and reduced:
                    _set_widths(w, wp, lo8, False, lead, D)  # unmasked mixing fills every column


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
        """X^(0) [size, n, D] of one block, exactly as the kernel builds it."""
        state, chi = self.draw(block, size)
        x = np.zeros((size, self.v.seq_len, self.width), np.float32)
        u = np.zeros(self.v.d, np.float32)
        normals = np.empty(self.n_normals, np.float32)
        for b in range(size):
            build_sample(state, normals, chi[b], self.law, self.v.d, self.lead, self.consts, u, x[b])
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
