"""The CPU backend of the Monte Carlo engine: the decoder of Eq. 1 compiled with numba.

`engine.simulate` calls `simulate_blocks` on the CPU. It draws the samples of
`sampling.sample_inputs` / `sample_inputs_reduced` / `sample_inputs_official`
(same laws; its own seeded layout) and returns the same moments as the torch path.
"""

from __future__ import annotations

import concurrent.futures
import math

import numba
import numpy as np
import torch
from llvmlite import ir as llvm_ir
from numba.core import cgutils
from numba.extending import intrinsic

from causalpos.simulation.sampling import (
    block_generator,
    block_groups,
    block_sizes,
    chi_dof,
    has_shared_direction,
    mean_sem,
    reduced_shape,
    rope_tables,
)
from causalpos.simulation.variant import LAYERNORM_EPS, Variant

# # The kernel runs the decoder one sample at a time with every buffer small
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

_F32 = np.float32
_ZERO, _ONE = _F32(0.0), _F32(1.0)
_PAD = 8  # floats per AVX2 vector

# Fast-math without nnan/ninf, and without reassociation or contraction: with them LLVM vectorised the row sums
# differently in a kernel compiled in the job and in one loaded from numba's cache (2.3e-9 apart, issue 40); without
# them the two give the same bits (tests/integration/test_simulate.py; bench/bench_kernel_flags.py: the cost).
_FASTMATH = {"nsz", "arcp"}


def _kernel(fn):
    # error_model numpy: no Python-style zero-division checks in the loops
    return numba.njit(fastmath=_FASTMATH, nogil=True, cache=True, error_model="numpy")(fn)


# The kernel's inner loops use explicit 8-float vectors. LLVM's auto-vectoriser
# handles these short, triangular loops poorly (runtime alias checks, scalar
# remainders, no reuse of a loaded row across two output rows, and expf is an
# opaque scalar call); with these operations it emits plain AVX2 code.
# A vector is a numba UniTuple of 8 float32 ([8 x float] in LLVM), converted
# to <8 x float> inside each operation; LLVM folds the conversions away.
# Loads and stores are unaligned and unchecked: callers stay inside the
# padded rows (widths and row lengths are multiples of 8).

_VEC = numba.types.UniTuple(numba.float32, _PAD)
_LLVM_VEC = llvm_ir.VectorType(llvm_ir.FloatType(), _PAD)
_I32 = llvm_ir.IntType(32)


def _as_vector(builder, values):
    vec = llvm_ir.Constant(_LLVM_VEC, llvm_ir.Undefined)
    for lane in range(_PAD):
        vec = builder.insert_element(vec, builder.extract_value(values, lane), _I32(lane))
    return vec


def _as_tuple(context, builder, vec):
    values = llvm_ir.Constant(context.get_value_type(_VEC), llvm_ir.Undefined)
    for lane in range(_PAD):
        values = builder.insert_value(values, builder.extract_element(vec, _I32(lane)), lane)
    return values


def _vector_pointer(context, builder, array_type, array, row, col):
    ary = context.make_array(array_type)(context, builder, array)
    item = cgutils.get_item_pointer(context, builder, array_type, ary, [row, col], wraparound=False)
    return builder.bitcast(item, _LLVM_VEC.as_pointer())


def _vconst(value):
    return llvm_ir.Constant(_LLVM_VEC, [value] * _PAD)


def _broadcast(builder, scalar):
    lane0 = builder.insert_element(llvm_ir.Constant(_LLVM_VEC, llvm_ir.Undefined), scalar, _I32(0))
    return builder.shuffle_vector(
        lane0,
        llvm_ir.Constant(_LLVM_VEC, llvm_ir.Undefined),
        llvm_ir.Constant(llvm_ir.VectorType(_I32, _PAD), [0] * _PAD),
    )


def _vintrinsic(builder, name, *args):
    """Call the LLVM vector intrinsic llvm.<name>.v8f32."""
    fn = cgutils.get_or_insert_function(
        builder.module, llvm_ir.FunctionType(_LLVM_VEC, [_LLVM_VEC] * len(args)), f"llvm.{name}.v{_PAD}f32"
    )
    return builder.call(fn, list(args))


def _exp_lanes(builder, x):
    """float32 exp of 8 lanes: Cephes expf (~1 ulp), x = n ln2 + r with |r| <= ln2/2.

    The library expf is an opaque scalar call; this keeps softmax in vectors.
    Inputs are clamped to [-87, 88]: below -87 the true value (< 2e-38)
    becomes ~1.6e-38, which no sum of softmax weights can see.
    """
    x = _vintrinsic(builder, "minnum", _vintrinsic(builder, "maxnum", x, _vconst(-87.0)), _vconst(88.0))
    n = _vintrinsic(builder, "floor", _vintrinsic(builder, "fma", x, _vconst(1.44269504088896341), _vconst(0.5)))
    r = _vintrinsic(builder, "fma", n, _vconst(-0.693359375), x)  # x - n ln2 in two parts
    r = _vintrinsic(builder, "fma", n, _vconst(2.12194440e-4), r)
    p = _vconst(1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = _vintrinsic(builder, "fma", p, r, _vconst(c))
    p = _vintrinsic(builder, "fma", p, builder.fmul(r, r), builder.fadd(r, _vconst(1.0)))
    int_vec = llvm_ir.VectorType(_I32, _PAD)
    exponent = builder.shl(
        builder.add(builder.fptosi(n, int_vec), llvm_ir.Constant(int_vec, [127] * _PAD)),
        llvm_ir.Constant(int_vec, [23] * _PAD),
    )
    return builder.fmul(p, builder.bitcast(exponent, _LLVM_VEC))  # p * 2^n


@intrinsic
def vload(typingctx, array, row, col):
    """array[row, col:col + 8] as a vector."""

    def codegen(context, builder, signature, args):
        ptr = _vector_pointer(context, builder, signature.args[0], *args)
        return _as_tuple(context, builder, builder.load(ptr, align=4))

    return _VEC(array, row, col), codegen


@intrinsic
def vstore(typingctx, array, row, col, vec):
    """array[row, col:col + 8] = vec."""

    def codegen(context, builder, signature, args):
        ptr = _vector_pointer(context, builder, signature.args[0], *args[:3])
        builder.store(_as_vector(builder, args[3]), ptr, align=4)
        return context.get_dummy_value()

    return numba.types.none(array, row, col, _VEC), codegen


@intrinsic
def _vzero(typingctx):
    def codegen(context, builder, signature, args):
        return _as_tuple(context, builder, llvm_ir.Constant(_LLVM_VEC, [0.0] * _PAD))

    return _VEC(), codegen


@intrinsic
def _vfma(typingctx, scalar, vec, acc):
    """acc + scalar * vec (one fused multiply-add per lane)."""

    def codegen(context, builder, signature, args):
        result = _vintrinsic(
            builder, "fma", _broadcast(builder, args[0]), _as_vector(builder, args[1]), _as_vector(builder, args[2])
        )
        return _as_tuple(context, builder, result)

    return _VEC(numba.float32, _VEC, _VEC), codegen


@intrinsic
def _vadd(typingctx, a, b):
    def codegen(context, builder, signature, args):
        return _as_tuple(context, builder, builder.fadd(_as_vector(builder, args[0]), _as_vector(builder, args[1])))

    return _VEC(_VEC, _VEC), codegen


@intrinsic
def _vscale(typingctx, vec, scalar):
    def codegen(context, builder, signature, args):
        return _as_tuple(context, builder, builder.fmul(_as_vector(builder, args[0]), _broadcast(builder, args[1])))

    return _VEC(_VEC, numba.float32), codegen


@intrinsic
def _vsum(typingctx, vec):
    """Sum of the 8 lanes, in a fixed pairwise order."""

    def codegen(context, builder, signature, args):
        lanes = [builder.extract_value(args[0], lane) for lane in range(_PAD)]
        while len(lanes) > 1:
            lanes = [builder.fadd(lanes[k], lanes[k + 1]) for k in range(0, len(lanes), 2)]
        return lanes[0]

    return numba.float32(_VEC), codegen


@intrinsic
def vexp(typingctx, vec, scale, shift):
    """exp(vec * scale - shift) per lane."""

    def codegen(context, builder, signature, args):
        x = _vintrinsic(
            builder,
            "fma",
            _as_vector(builder, args[0]),
            _broadcast(builder, args[1]),
            builder.fneg(_broadcast(builder, args[2])),
        )
        return _as_tuple(context, builder, _exp_lanes(builder, x))

    return _VEC(_VEC, numba.float32, numba.float32), codegen


@intrinsic
def _vmoments(typingctx, values, scale, shift, acc1, acc2, row, col):
    """With d = values[row, col:col+8] * scale - shift[...]: acc1[...] += d, acc2[...] += d * d."""

    def codegen(context, builder, signature, args):
        types = signature.args
        row_col = args[5:7]
        ptrs = [_vector_pointer(context, builder, types[k], args[k], *row_col) for k in (0, 2, 3, 4)]
        v, h, a1, a2 = (builder.load(ptr, align=4) for ptr in ptrs)
        d = _vintrinsic(builder, "fma", v, _broadcast(builder, args[1]), builder.fneg(h))
        builder.store(builder.fadd(a1, d), ptrs[2], align=4)
        builder.store(_vintrinsic(builder, "fma", d, d, a2), ptrs[3], align=4)
        return context.get_dummy_value()

    return numba.types.none(values, numba.float32, shift, acc1, acc2, row, col), codegen


# Input builders: one sample of X^(0) from its random numbers (`KernelPlan.draw`'s layout).
_FULL, _REDUCED, _OFFICIAL = 0, 1, 2
_LAWS = {"exact_full": _FULL, "exact_reduced": _REDUCED, "official": _OFFICIAL}


@_kernel
def _build_reduced(normals, chi, sqrt_a, sqrt_b, lead, X):
    """One sample of `sample_inputs_reduced`; X [n, >= lead + k] zeroed.

    normals holds row i's min(i, k) below-diagonal entries, rows concatenated;
    the triangle starts at column lead (1 after the shared coordinate, 0 without one).
    """
    n, k = X.shape[0], chi.size
    pos = 0
    for i in range(n):
        m = min(i, k)
        ss = _ZERO
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


@_kernel
def _build_full(normals, sqrt_a, sqrt_b, shared, u, X):
    """One sample of `sample_inputs` from normals [n + 1, d] (row 0: the shared direction).

    Without a shared direction (alpha = 0) u stays zero: nothing is projected
    out and the rows are normalised Gaussians, i.i.d. uniform on the sphere.
    """
    n, d = X.shape[0], normals.shape[1]
    u[:] = _ZERO
    if shared:
        ss = _ZERO
        for c in range(d):
            ss += normals[0, c] * normals[0, c]
        f = _ONE / np.sqrt(ss)
        for c in range(d):
            u[c] = normals[0, c] * f
    for i in range(n):
        dot = _ZERO
        for c in range(d):
            dot += normals[i + 1, c] * u[c]
        ss = _ZERO
        for c in range(d):
            w = normals[i + 1, c] - dot * u[c]
            X[i, c] = w
            ss += w * w
        f = sqrt_b / np.sqrt(ss)
        for c in range(d):
            X[i, c] = sqrt_a * u[c] + f * X[i, c]


@_kernel
def _build_official(normals, lam, X):
    """One sample of `sample_inputs_official`: row i is normalize(normals[i + 1] + lam normals[0])."""
    n, d = X.shape[0], normals.shape[1]
    for i in range(n):
        ss = _ZERO
        for c in range(d):
            val = normals[i + 1, c] + lam * normals[0, c]
            X[i, c] = val
            ss += val * val
        f = _ONE / np.sqrt(ss)
        for c in range(d):
            X[i, c] *= f


@_kernel
def _build(normals, chi, law, shared, consts, u, X):
    """X^(0) of one sample; consts = (sqrt(alpha), sqrt(1 - alpha), sqrt(alpha / (1 - alpha)))."""
    if law == _REDUCED:
        _build_reduced(normals[0], chi, consts[0], consts[1], 1 if shared else 0, X)
    elif law == _OFFICIAL:
        _build_official(normals, consts[2], X)
    else:
        _build_full(normals, consts[0], consts[1], shared, u, X)


@_kernel
def _l2_rows(X, Y, wp):
    for i in range(X.shape[0]):
        ss = _ZERO
        for k in range(wp[i]):
            ss += X[i, k] * X[i, k]
        f = _ONE / np.sqrt(ss)
        for k in range(wp[i]):
            Y[i, k] = X[i, k] * f


@_kernel
def _layernorm_rows(X, Y, d, eps):
    """torch.nn.functional.layer_norm over the first d columns (biased variance)."""
    inv_d = _ONE / _F32(d)
    for i in range(X.shape[0]):
        mean = _ZERO
        for k in range(d):
            mean += X[i, k]
        mean *= inv_d
        var = _ZERO
        for k in range(d):
            var += (X[i, k] - mean) * (X[i, k] - mean)
        f = _ONE / np.sqrt(var * inv_d + eps)
        for k in range(d):
            Y[i, k] = (X[i, k] - mean) * f


@_kernel
def _transpose(Y, QT, wp):
    """QT[k, i] = Y[i, k]: scores then read whole key rows contiguously."""
    for i in range(Y.shape[0]):
        for k in range(wp[i]):
            QT[k, i] = Y[i, k]


@_kernel
def _rope_transpose(Y, QT, cos, sin):
    """QT[:, i] = RoPE(Y[i]) with the half-split pairing of `apply_rope`."""
    half = cos.shape[1] // 2
    for i in range(Y.shape[0]):
        for k in range(half):
            QT[k, i] = Y[i, k] * cos[i, k] - Y[i, k + half] * sin[i, k]
            QT[k + half, i] = Y[i, k + half] * cos[i, k + half] + Y[i, k] * sin[i, k + half]


@_kernel
def _fma4(c0, c1, c2, c3, v0, v1, v2, v3, acc):
    """acc + c0 v0 + c1 v1 + c2 v2 + c3 v3, in that order: the register block of the products."""
    return _vfma(c3, v3, _vfma(c2, v2, _vfma(c1, v1, _vfma(c0, v0, acc))))


@_kernel
def _score_row(QT, S, i, w, lo8, n8):
    """S[i, j] = <q_i, q_j> for j < n8[i]; column k of Q is zero in rows j < lo8[k]."""
    zero = _vzero()
    for t in range(0, n8[i], _PAD):
        vstore(S, i, t, zero)
    k = 0
    while k + 4 <= w[i]:  # four columns per pass: one load and store of S per four products
        a0, a1, a2, a3 = QT[k, i], QT[k + 1, i], QT[k + 2, i], QT[k + 3, i]
        for t in range(lo8[k], n8[i], _PAD):
            q0, q1, q2, q3 = vload(QT, k, t), vload(QT, k + 1, t), vload(QT, k + 2, t), vload(QT, k + 3, t)
            vstore(S, i, t, _fma4(a0, a1, a2, a3, q0, q1, q2, q3, vload(S, i, t)))
        k += 4
    while k < w[i]:
        for t in range(lo8[k], n8[i], _PAD):
            vstore(S, i, t, _vfma(QT[k, i], vload(QT, k, t), vload(S, i, t)))
        k += 1


@_kernel
def _score_row_pair(QT, S, i, w, lo8, n8):
    """`_score_row` for rows i and i + 1 at once: they share every load of Q (1.6x faster)."""
    j = i + 1
    zero = _vzero()
    for t in range(0, n8[j], _PAD):
        vstore(S, i, t, zero)
        vstore(S, j, t, zero)
    k = 0
    while k + 4 <= w[j]:  # QT[k, i] = 0 where k >= w[i]
        a0, a1, a2, a3 = QT[k, i], QT[k + 1, i], QT[k + 2, i], QT[k + 3, i]
        b0, b1, b2, b3 = QT[k, j], QT[k + 1, j], QT[k + 2, j], QT[k + 3, j]
        for t in range(lo8[k], n8[j], _PAD):
            q0, q1, q2, q3 = vload(QT, k, t), vload(QT, k + 1, t), vload(QT, k + 2, t), vload(QT, k + 3, t)
            vstore(S, i, t, _fma4(a0, a1, a2, a3, q0, q1, q2, q3, vload(S, i, t)))
            vstore(S, j, t, _fma4(b0, b1, b2, b3, q0, q1, q2, q3, vload(S, j, t)))
        k += 4
    while k < w[j]:
        for t in range(lo8[k], n8[j], _PAD):
            q0 = vload(QT, k, t)
            vstore(S, i, t, _vfma(QT[k, i], q0, vload(S, i, t)))
            vstore(S, j, t, _vfma(QT[k, j], q0, vload(S, j, t)))
        k += 1


@_kernel
def _scores(QT, S, w, lo8, n8):
    """Lower triangle of S = Q Q^T (plus padding) from QT = Q^T."""
    n = S.shape[0]
    for i in range(0, n - 1, 2):
        _score_row_pair(QT, S, i, w, lo8, n8)
    if n % 2:
        _score_row(QT, S, n - 1, w, lo8, n8)


@_kernel
def _mirror(S):
    """Fill the upper triangle from the lower one (S is symmetric); needed without a mask."""
    n = S.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            S[i, j] = S[j, i]


@_kernel
def _first_key(i, window):
    """The first key query i sees: i - window + 1 under a sliding window (window >= 1), else 0 (window 0)."""
    return max(i - window + 1, 0) if window else 0


@_kernel
def _softmax(S, P, n8, inv_div, causal, window):
    """P = softmax(S * inv_div) over the visible keys; zero elsewhere (padding and, under a sliding window
    (window > 0; causal only), the keys j <= i - window included)."""
    n, width = P.shape
    for i in range(n):
        visible = i + 1 if causal else n
        span = n8[i] if causal else width
        diag = S[i, i] * inv_div
        for t in range(0, span, _PAD):
            vstore(P, i, t, vexp(vload(S, i, t), inv_div, diag))
        for j in range(visible, span):
            P[i, j] = _ZERO
        for j in range(_first_key(i, window)):  # no iteration without a window
            P[i, j] = _ZERO
        total = _vzero()
        for t in range(0, span, _PAD):
            total = _vadd(total, vload(P, i, t))
        r = _ONE / _vsum(total)
        for t in range(0, span, _PAD):
            vstore(P, i, t, _vscale(vload(P, i, t), r))


@_kernel
def _accumulate(V, scale, shift, acc1, acc2, n8, causal):
    """acc1 += V*scale - shift and acc2 += its square, over each row's (padded) visible span."""
    n, width = V.shape
    for i in range(n):
        for t in range(0, n8[i] if causal else width, _PAD):
            _vmoments(V, scale, shift, acc1, acc2, i, t)


@_kernel
def _mix_row(X, Y, P, i, lo, hi, wp):
    """X[i] += sum_{lo <= j < hi} P[i, j] Y[j]; row j of Y is zero past wp[j]. Four keys per pass."""
    j = lo
    while j + 4 <= hi:
        e0, e1, e2, e3 = P[i, j], P[i, j + 1], P[i, j + 2], P[i, j + 3]
        for k in range(0, wp[j + 3], _PAD):  # widths grow with j
            y0, y1, y2, y3 = vload(Y, j, k), vload(Y, j + 1, k), vload(Y, j + 2, k), vload(Y, j + 3, k)
            vstore(X, i, k, _fma4(e0, e1, e2, e3, y0, y1, y2, y3, vload(X, i, k)))
        j += 4
    while j < hi:
        for k in range(0, wp[j], _PAD):
            vstore(X, i, k, _vfma(P[i, j], vload(Y, j, k), vload(X, i, k)))
        j += 1


@_kernel
def _mix_row_pair(X, Y, P, i, lo, hi, wp):
    """`_mix_row` for rows i and i + 1 at once, sharing every load of Y."""
    i1 = i + 1
    j = lo
    while j + 4 <= hi:
        e0, e1, e2, e3 = P[i, j], P[i, j + 1], P[i, j + 2], P[i, j + 3]
        f0, f1, f2, f3 = P[i1, j], P[i1, j + 1], P[i1, j + 2], P[i1, j + 3]
        for k in range(0, wp[j + 3], _PAD):
            y0, y1, y2, y3 = vload(Y, j, k), vload(Y, j + 1, k), vload(Y, j + 2, k), vload(Y, j + 3, k)
            vstore(X, i, k, _fma4(e0, e1, e2, e3, y0, y1, y2, y3, vload(X, i, k)))
            vstore(X, i1, k, _fma4(f0, f1, f2, f3, y0, y1, y2, y3, vload(X, i1, k)))
        j += 4
    while j < hi:
        for k in range(0, wp[j], _PAD):
            y0 = vload(Y, j, k)
            vstore(X, i, k, _vfma(P[i, j], y0, vload(X, i, k)))
            vstore(X, i1, k, _vfma(P[i1, j], y0, vload(X, i1, k)))
        j += 1


@_kernel
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


@_kernel
def _set_widths(w, wp, lo8, triangular, lead, D):
    """Nonzero columns per row (w), padded (wp), and per column the first row using it (lo8)."""
    n = w.size
    for i in range(n):
        w[i] = min(lead + i + 1, D) if triangular else D
        wp[i] = (w[i] + _PAD - 1) // _PAD * _PAD
    j = 0
    for k in range(lo8.size):
        while j < n and w[j] <= k:
            j += 1
        lo8[k] = j // _PAD * _PAD


@_kernel
def _decode_block(
    normals,
    chi,
    law,
    shared,
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
    """Run the decoder on every sample of one block (inputs as `_build`); add shifted moments to acc.

    window: the sliding window (query i sees keys i - window < j <= i; causal only), 0 for every key. The
    scores are still computed and summed for every pair of the lower triangle; the probabilities of the
    hidden keys are zero.

    acc and shift: [layer, 4 | 2, n, n_pad] for (sum S, sum S^2, sum P, sum P^2) | (S, P).
    """
    n, n_pad = acc.shape[2], acc.shape[3]
    d_pad = (D + _PAD - 1) // _PAD * _PAD
    X = np.zeros((n, d_pad), np.float32)
    Y = np.zeros((n, d_pad), np.float32)
    QT = np.zeros((d_pad, n_pad), np.float32)
    S = np.zeros((n, n_pad), np.float32)
    P = np.zeros((n, n_pad), np.float32)
    u = np.zeros(d_pad, np.float32)
    w = np.zeros(n, np.int64)
    wp = np.zeros(n, np.int64)
    lo8 = np.zeros(d_pad, np.int64)
    n8 = np.zeros(n, np.int64)
    reduced, lead = law == _REDUCED, 1 if shared else 0
    for i in range(n):
        n8[i] = (i + _PAD) // _PAD * _PAD
    for b in range(normals.shape[0]):
        X[:] = 0  # padding and the zero triangle must be zero again
        Y[:] = 0
        QT[:] = 0
        _build(normals[b], chi[b], law, shared, consts, u, X)
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
            _accumulate(P, _ONE, shift[layer, 1], acc[layer, 2], acc[layer, 3], n8, causal)
            if layer + 1 < n_layers:
                _mix(X, Y, P, wp, causal, residual, window)
                if not causal and reduced:
                    _set_widths(w, wp, lo8, False, lead, D)  # unmasked mixing fills every column


class KernelPlan:
    """One variant's shapes, constants and random-number layout for the CPU kernel."""

    def __init__(self, v: Variant, sampler: str):
        self.v, self.law, self.reduced = v, _LAWS[sampler], sampler == "exact_reduced"
        n = v.seq_len
        self.shared = has_shared_direction(v.alpha)
        lead, self.k, m = reduced_shape(n, v.d, v.alpha)  # Bartlett triangle columns (reduced sampler)
        self.width = lead + self.k if self.reduced else v.d  # D: columns of X
        self.n_pad = -(-n // _PAD) * _PAD
        self.n_normals = sum(min(i, self.k) for i in range(n))  # below the Bartlett diagonal
        self.chi_dof = chi_dof(n, m).double().numpy()
        a = v.alpha
        self.consts = np.array([math.sqrt(a), math.sqrt(1.0 - a), math.sqrt(a / (1.0 - a))], np.float32)
        if v.pe == "rope":
            self.cos, self.sin = (t.numpy() for t in rope_tables(n, v.d, v.rope_theta))
        else:
            self.cos = self.sin = np.zeros((n, 2), np.float32)

    def draw(self, block: int, size: int):
        """The block's random numbers, from generators seeded by (seed, block).

        full and official: normals [size, n + 1, d], row 0 the shared direction u, rows 1..n
        the g_i; reduced: the Bartlett triangle's normals [size, 1, n_normals] and chi [size, k].
        """
        v, gen = self.v, block_generator(self.v.seed, block, torch.device("cpu"))
        if not self.reduced:
            return torch.randn(size, v.seq_len + 1, v.d, generator=gen).numpy(), np.zeros((size, 0), np.float32)
        normals = torch.randn(size, 1, self.n_normals, generator=gen)  # 3-D as for "full": one kernel signature
        # chi from numpy: torch's CPU gamma sampler costs ~0.6 us a variate, numpy's ~0.05
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([v.seed, block, 1])))
        chi = np.sqrt(rng.chisquare(self.chi_dof, size=(size, self.k)))
        return normals.numpy(), chi.astype(np.float32)

    def inputs(self, block: int, size: int) -> np.ndarray:
        """X^(0) [size, n, D] of one block, exactly as the kernel builds it."""
        normals, chi = self.draw(block, size)
        x = np.zeros((size, self.v.seq_len, self.width), np.float32)
        u = np.zeros(self.v.d, np.float32)
        for b in range(size):
            _build(normals[b], chi[b], self.law, self.shared, self.consts, u, x[b])
        return x

    def run_block(self, block: int, size: int, shift: np.ndarray) -> np.ndarray:
        """Float32 sums [layer, 4, n, n_pad] of (S - shift_S), its square, (P - shift_P), its square."""
        v = self.v
        normals, chi = self.draw(block, size)
        acc = np.zeros((v.n_layers, 4, v.seq_len, self.n_pad), np.float32)
        # eps and the window are arguments, not globals: numba's cache would keep a global of another module
        # stale (window 0: every key; Variant normalises a window >= seq_len to None)
        _decode_block(
            normals,
            chi,
            self.law,
            self.shared,
            self.consts,
            v.d,
            self.width,
            v.n_layers,
            v.norm == "layernorm",
            _F32(LAYERNORM_EPS),
            _F32(1.0 / v.score_divisor),
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
