"""The CPU kernel's row passes as numba intrinsics: the softmax with its moment sums fused in.

Each is one LLVM loop over a row's 8-float vectors, with its running vector sum in a register (a numba
tuple carried around a Python loop is split into scalars at every iteration). The sums keep the order
of the plain loops they replace: vector by vector in column order, then the 8 lanes pairwise.
"""

from __future__ import annotations

import numba
from llvmlite import ir as llvm_ir
from numba.core import cgutils
from numba.extending import intrinsic

from causalpos.simulation.cpu_vectors import I32, LLVM_VEC, PAD, broadcast, exp_lanes, vintrinsic

_IVEC = llvm_ir.VectorType(I32, PAD)


def _pointer(context, builder, array_type, array, row, col):
    ary = context.make_array(array_type)(context, builder, array)
    item = cgutils.get_item_pointer(context, builder, array_type, ary, [row, col], wraparound=False)
    return builder.bitcast(item, LLVM_VEC.as_pointer())


def _add_moments(context, builder, value, scale, types, arrays, row, col):
    """With d = value * scale - shift[row, col:col+8]: acc1[...] += d, acc2[...] += d * d."""
    shift, acc1, acc2 = (_pointer(context, builder, ty, a, row, col) for ty, a in zip(types, arrays))
    d = vintrinsic(builder, "fma", value, broadcast(builder, scale), builder.fneg(builder.load(shift, align=4)))
    builder.store(builder.fadd(builder.load(acc1, align=4), d), acc1, align=4)
    builder.store(vintrinsic(builder, "fma", d, d, builder.load(acc2, align=4)), acc2, align=4)


def _lane_sum(builder, vec):
    lanes = [builder.extract_element(vec, I32(lane)) for lane in range(PAD)]
    while len(lanes) > 1:
        lanes = [builder.fadd(lanes[k], lanes[k + 1]) for k in range(0, len(lanes), 2)]
    return lanes[0]


def _row_loop(context, builder, span, body):
    """for t in range(0, span, 8): total += body(t); returns the total's lane sum."""
    total = cgutils.alloca_once(builder, LLVM_VEC)
    builder.store(llvm_ir.Constant(LLVM_VEC, [0.0] * PAD), total)
    zero, step = context.get_constant(numba.intp, 0), context.get_constant(numba.intp, PAD)
    with cgutils.for_range_slice(builder, zero, span, step) as (t, _):
        builder.store(builder.fadd(builder.load(total), body(t)), total)
    return _lane_sum(builder, builder.load(total))


@intrinsic
def exp_row(typingctx, S, P, i, span, first, visible, scale, shift, acc1, acc2):
    """P[i, t] = exp(S[i, t] scale - S[i, i] scale) for first <= t < visible, 0 for the other t < span;
    returns their sum. Adds the moments of S[i, :span] scale to acc1, acc2 (`_add_moments`)."""

    def codegen(context, builder, signature, args):
        s_type, p_type = signature.args[:2]
        row, span, first, visible, scale = args[2:7]
        diag_ptr = cgutils.get_item_pointer(
            context, builder, s_type, context.make_array(s_type)(context, builder, args[0]), [row, row]
        )
        diag = builder.fmul(builder.load(diag_ptr), scale)
        lanes = llvm_ir.Constant(_IVEC, list(range(PAD)))
        first, visible = _splat(builder, builder.trunc(first, I32)), _splat(builder, builder.trunc(visible, I32))
        zero = llvm_ir.Constant(LLVM_VEC, [0.0] * PAD)

        def body(t):
            s = builder.load(_pointer(context, builder, s_type, args[0], row, t), align=4)
            _add_moments(context, builder, s, scale, signature.args[7:10], args[7:10], row, t)
            e = exp_lanes(builder, vintrinsic(builder, "fma", s, broadcast(builder, scale), builder.fneg(
                broadcast(builder, diag))))  # fmt: skip
            key = builder.add(lanes, _splat(builder, builder.trunc(t, I32)))
            seen = builder.and_(builder.icmp_signed(">=", key, first), builder.icmp_signed("<", key, visible))
            e = builder.select(seen, e, zero)
            builder.store(e, _pointer(context, builder, p_type, args[1], row, t), align=4)
            return e

        return _row_loop(context, builder, span, body)

    return numba.float32(S, P, i, span, first, visible, scale, shift, acc1, acc2), codegen


def _splat(builder, scalar):
    lane0 = builder.insert_element(llvm_ir.Constant(_IVEC, llvm_ir.Undefined), scalar, I32(0))
    return builder.shuffle_vector(lane0, llvm_ir.Constant(_IVEC, llvm_ir.Undefined), llvm_ir.Constant(_IVEC, [0] * PAD))


@intrinsic
def scale_row(typingctx, P, i, span, r, shift, acc1, acc2):
    """P[i, :span] *= r, and their moments added to acc1, acc2 (`_add_moments` with scale 1)."""

    def codegen(context, builder, signature, args):
        p_type = signature.args[0]
        row, span, r = args[1:4]
        one = context.get_constant(numba.float32, 1.0)

        def body(t):
            ptr = _pointer(context, builder, p_type, args[0], row, t)
            p = builder.fmul(builder.load(ptr, align=4), broadcast(builder, r))
            builder.store(p, ptr, align=4)
            _add_moments(context, builder, p, one, signature.args[4:7], args[4:7], row, t)
            return llvm_ir.Constant(LLVM_VEC, [0.0] * PAD)

        _row_loop(context, builder, span, body)
        return context.get_dummy_value()

    return numba.types.none(P, i, span, r, shift, acc1, acc2), codegen


@intrinsic
def squares_row(typingctx, X, i, width):
    """sum_{t < width} X[i, t]^2 (width a multiple of 8), vector by vector, then the lanes pairwise."""

    def codegen(context, builder, signature, args):
        def body(t):
            x = builder.load(_pointer(context, builder, signature.args[0], args[0], args[1], t), align=4)
            return builder.fmul(x, x)

        return _row_loop(context, builder, args[2], body)

    return numba.float32(X, i, width), codegen
