"""Register tiles of the CPU kernel's two products, S = Q Q^T and P Y, as numba intrinsics.

A tile is four rows by 16 columns (two 8-float vectors): eight accumulators, each a chain of fused
multiply-adds in the order of the summed index, so that two FMA units always have independent work.
They are emitted as an LLVM loop whose accumulators are <8 x float> values: a numba tuple carried
around a Python loop is split into scalars at every iteration, which made the tiles 3x slower than
the products they replaced.
"""

from __future__ import annotations

import numba
from llvmlite import ir as llvm_ir
from numba.core import cgutils
from numba.extending import intrinsic

from causalpos.simulation.cpu_vectors import LLVM_VEC, PAD, broadcast, vintrinsic

ROWS = 4  # rows of a tile
TILE = 2 * PAD  # columns of a tile


def _element(context, builder, array_type, array, row, col):
    return cgutils.get_item_pointer(context, builder, array_type, array, [row, col], wraparound=False)


def _vector(context, builder, array_type, array, row, col):
    return builder.bitcast(_element(context, builder, array_type, array, row, col), LLVM_VEC.as_pointer())


def _tile_loop(context, builder, accumulators, start, stop, vectors, coefficient):
    """for index in [start, stop): accumulators[r][h] = fma(coefficient(index, r), vectors(index)[h], ...).

    The accumulators live in allocas of vector type, which LLVM promotes to registers."""
    slots = [[cgutils.alloca_once(builder, LLVM_VEC) for _ in range(2)] for _ in range(ROWS)]
    for row, pair in zip(slots, accumulators):
        for slot, value in zip(row, pair):
            builder.store(value, slot)
    one = context.get_constant(numba.intp, 1)
    with cgutils.for_range_slice(builder, start, stop, one) as (index, _):
        halves = vectors(index)
        for r in range(ROWS):
            c = broadcast(builder, coefficient(index, r))
            for h in range(2):
                builder.store(vintrinsic(builder, "fma", c, halves[h], builder.load(slots[r][h])), slots[r][h])
    return [[builder.load(slot) for slot in row] for row in slots]


def _store_tile(context, builder, array_type, array, rows, col, values):
    for row, pair in zip(rows, values):
        for h, value in enumerate(pair):
            column = builder.add(col, context.get_constant(numba.intp, h * PAD))
            builder.store(value, _vector(context, builder, array_type, array, row, column), align=4)


@intrinsic
def score_tile(typingctx, QT, S, r0, r1, r2, r3, t, kmax):
    """S[r, t:t + 16] = sum_{k < kmax} QT[k, r] QT[k, t:t + 16] for r = r0..r3, summed in k order from 0."""

    def codegen(context, builder, signature, args):
        qt_type, s_type = signature.args[:2]
        qt = context.make_array(qt_type)(context, builder, args[0])
        s = context.make_array(s_type)(context, builder, args[1])
        rows, col, stop = args[2:6], args[6], args[7]
        col_high = builder.add(col, context.get_constant(numba.intp, PAD))

        def vectors(k):
            return [builder.load(_vector(context, builder, qt_type, qt, k, c), align=4) for c in (col, col_high)]

        def coefficient(k, r):
            return builder.load(_element(context, builder, qt_type, qt, k, rows[r]))

        zero = llvm_ir.Constant(LLVM_VEC, [0.0] * PAD)
        start = context.get_constant(numba.intp, 0)
        sums = _tile_loop(context, builder, [[zero, zero]] * ROWS, start, stop, vectors, coefficient)
        _store_tile(context, builder, s_type, s, rows, col, sums)
        return context.get_dummy_value()

    return numba.types.none(QT, S, r0, r1, r2, r3, t, kmax), codegen


@intrinsic
def mix_tile(typingctx, X, Y, P, r0, r1, r2, r3, kt, lo, hi, residual):
    """X[r, kt:kt + 16] = (X[r, kt:kt + 16] if residual else 0) + sum_{lo <= j < hi} P[r, j] Y[j, kt:kt + 16],
    summed in j order, for r = r0..r3 (X is read before it is written)."""

    def codegen(context, builder, signature, args):
        x_type, y_type, p_type = signature.args[:3]
        x, y, p = (context.make_array(ty)(context, builder, a) for ty, a in zip(signature.args[:3], args[:3]))
        rows, col, start, stop = args[3:7], args[7], args[8], args[9]
        col_high = builder.add(col, context.get_constant(numba.intp, PAD))
        zero = llvm_ir.Constant(LLVM_VEC, [0.0] * PAD)
        initial = []
        for r in rows:
            pair = [builder.load(_vector(context, builder, x_type, x, r, c), align=4) for c in (col, col_high)]
            initial.append([builder.select(args[10], value, zero) for value in pair])

        def vectors(j):
            return [builder.load(_vector(context, builder, y_type, y, j, c), align=4) for c in (col, col_high)]

        def coefficient(j, r):
            return builder.load(_element(context, builder, p_type, p, rows[r], j))

        sums = _tile_loop(context, builder, initial, start, stop, vectors, coefficient)
        _store_tile(context, builder, x_type, x, rows, col, sums)
        return context.get_dummy_value()

    return numba.types.none(X, Y, P, r0, r1, r2, r3, kt, lo, hi, residual), codegen


def _shuffle(builder, a, b, lanes):
    return builder.shuffle_vector(a, b, llvm_ir.Constant(llvm_ir.VectorType(llvm_ir.IntType(32), PAD), lanes))


@intrinsic
def transpose8(typingctx, Y, QT, i, k):
    """QT[k + c, i:i + 8] = Y[i:i + 8, k + c] for c < 8: an 8 x 8 block through three rounds of shuffles
    (pairs of rows interleaved, then pairs of pairs, then the 128-bit halves), instead of 64 scalar copies."""

    def codegen(context, builder, signature, args):
        y_type, qt_type = signature.args[:2]
        y, qt = (context.make_array(ty)(context, builder, a) for ty, a in zip(signature.args[:2], args[:2]))
        row, col = args[2], args[3]

        def offset(base, c):
            return builder.add(base, context.get_constant(numba.intp, c))

        r = [builder.load(_vector(context, builder, y_type, y, offset(row, c), col), align=4) for c in range(PAD)]
        t = []
        for a, b in zip(r[0::2], r[1::2]):
            t += [
                _shuffle(builder, a, b, [0, 8, 1, 9, 4, 12, 5, 13]),
                _shuffle(builder, a, b, [2, 10, 3, 11, 6, 14, 7, 15]),
            ]
        u = []
        for first in (0, 4):  # t[first..first + 3]: rows 4 first // 4 .. + 3
            for a, b in ((t[first], t[first + 2]), (t[first + 1], t[first + 3])):
                u += [
                    _shuffle(builder, a, b, [0, 1, 8, 9, 4, 5, 12, 13]),
                    _shuffle(builder, a, b, [2, 3, 10, 11, 6, 7, 14, 15]),
                ]
        for c in range(4):  # u[c]: column c (low half) and c + 4 (high half) of rows 0-3; u[c + 4] of rows 4-7
            low = _shuffle(builder, u[c], u[c + 4], [0, 1, 2, 3, 8, 9, 10, 11])
            high = _shuffle(builder, u[c], u[c + 4], [4, 5, 6, 7, 12, 13, 14, 15])
            builder.store(low, _vector(context, builder, qt_type, qt, offset(col, c), row), align=4)
            builder.store(high, _vector(context, builder, qt_type, qt, offset(col, c + 4), row), align=4)
        return context.get_dummy_value()

    return numba.types.none(Y, QT, i, k), codegen
