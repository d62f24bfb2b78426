"""Explicit 8-float vector operations for the CPU kernels (numba intrinsics emitting LLVM vector code).

The kernel's inner loops use explicit 8-float vectors. LLVM's auto-vectoriser
handles its short, triangular loops poorly (runtime alias checks, scalar
remainders, no reuse of a loaded row across two output rows, and expf is an
opaque scalar call); with these operations it emits plain AVX2 code.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir as llvm_ir
from numba.core import cgutils
from numba.extending import intrinsic

F32 = np.float32
ZERO, ONE = F32(0.0), F32(1.0)
PAD = 8  # floats per AVX2 vector

# Fast-math without nnan/ninf, and without reassociation or contraction: with them LLVM vectorised the row sums
# differently in a kernel compiled in the job and in one loaded from numba's cache (2.3e-9 apart, issue 40); without
# them the two give the same bits (tests/integration/test_simulate.py; bench/bench_kernel_flags.py: the cost).
FASTMATH = {"nsz", "arcp"}


def kernel(fn):
    # error_model numpy: no Python-style zero-division checks in the loops
    return numba.njit(fastmath=FASTMATH, nogil=True, cache=True, error_model="numpy")(fn)


# A vector is a numba UniTuple of 8 float32 ([8 x float] in LLVM), converted
# to <8 x float> inside each operation; LLVM folds the conversions away (but not
# around a loop: a tuple carried from one iteration to the next is split into
# scalars, so loops with vector accumulators are emitted in LLVM: cpu_tiles, cpu_rows).
# Loads and stores are unaligned and unchecked: callers stay inside the
# padded rows (widths and row lengths are multiples of 8).

VEC = numba.types.UniTuple(numba.float32, PAD)
LLVM_VEC = llvm_ir.VectorType(llvm_ir.FloatType(), PAD)
I32 = llvm_ir.IntType(32)


def as_vector(builder, values):
    vec = llvm_ir.Constant(LLVM_VEC, llvm_ir.Undefined)
    for lane in range(PAD):
        vec = builder.insert_element(vec, builder.extract_value(values, lane), I32(lane))
    return vec


def as_tuple(context, builder, vec):
    values = llvm_ir.Constant(context.get_value_type(VEC), llvm_ir.Undefined)
    for lane in range(PAD):
        values = builder.insert_value(values, builder.extract_element(vec, I32(lane)), lane)
    return values


def vector_pointer(context, builder, array_type, array, row, col):
    ary = context.make_array(array_type)(context, builder, array)
    item = cgutils.get_item_pointer(context, builder, array_type, ary, [row, col], wraparound=False)
    return builder.bitcast(item, LLVM_VEC.as_pointer())


def vconst(value):
    return llvm_ir.Constant(LLVM_VEC, [value] * PAD)


def broadcast(builder, scalar):
    lane0 = builder.insert_element(llvm_ir.Constant(LLVM_VEC, llvm_ir.Undefined), scalar, I32(0))
    return builder.shuffle_vector(
        lane0,
        llvm_ir.Constant(LLVM_VEC, llvm_ir.Undefined),
        llvm_ir.Constant(llvm_ir.VectorType(I32, PAD), [0] * PAD),
    )


def vintrinsic(builder, name, *args):
    """Call the LLVM vector intrinsic llvm.<name>.v8f32."""
    fn = cgutils.get_or_insert_function(
        builder.module, llvm_ir.FunctionType(LLVM_VEC, [LLVM_VEC] * len(args)), f"llvm.{name}.v{PAD}f32"
    )
    return builder.call(fn, list(args))


def exp_lanes(builder, x):
    """float32 exp of 8 lanes: Cephes expf (~1 ulp), x = n ln2 + r with |r| <= ln2/2.

    The library expf is an opaque scalar call; this keeps softmax in vectors.
    Inputs are clamped to [-87, 88]: below -87 the true value (< 2e-38)
    becomes ~1.6e-38, which no sum of softmax weights can see.
    """
    x = vintrinsic(builder, "minnum", vintrinsic(builder, "maxnum", x, vconst(-87.0)), vconst(88.0))
    n = vintrinsic(builder, "floor", vintrinsic(builder, "fma", x, vconst(1.44269504088896341), vconst(0.5)))
    r = vintrinsic(builder, "fma", n, vconst(-0.693359375), x)  # x - n ln2 in two parts
    r = vintrinsic(builder, "fma", n, vconst(2.12194440e-4), r)
    p = vconst(1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = vintrinsic(builder, "fma", p, r, vconst(c))
    p = vintrinsic(builder, "fma", p, builder.fmul(r, r), builder.fadd(r, vconst(1.0)))
    int_vec = llvm_ir.VectorType(I32, PAD)
    exponent = builder.shl(
        builder.add(builder.fptosi(n, int_vec), llvm_ir.Constant(int_vec, [127] * PAD)),
        llvm_ir.Constant(int_vec, [23] * PAD),
    )
    return builder.fmul(p, builder.bitcast(exponent, LLVM_VEC))  # p * 2^n


@intrinsic
def vload(typingctx, array, row, col):
    """array[row, col:col + 8] as a vector."""

    def codegen(context, builder, signature, args):
        ptr = vector_pointer(context, builder, signature.args[0], *args)
        return as_tuple(context, builder, builder.load(ptr, align=4))

    return VEC(array, row, col), codegen


@intrinsic
def vstore(typingctx, array, row, col, vec):
    """array[row, col:col + 8] = vec."""

    def codegen(context, builder, signature, args):
        ptr = vector_pointer(context, builder, signature.args[0], *args[:3])
        builder.store(as_vector(builder, args[3]), ptr, align=4)
        return context.get_dummy_value()

    return numba.types.none(array, row, col, VEC), codegen


@intrinsic
def vscale(typingctx, vec, scalar):
    def codegen(context, builder, signature, args):
        return as_tuple(context, builder, builder.fmul(as_vector(builder, args[0]), broadcast(builder, args[1])))

    return VEC(VEC, numba.float32), codegen


@intrinsic
def vexp(typingctx, vec, scale, shift):
    """exp(vec * scale - shift) per lane."""

    def codegen(context, builder, signature, args):
        x = vintrinsic(
            builder,
            "fma",
            as_vector(builder, args[0]),
            broadcast(builder, args[1]),
            builder.fneg(broadcast(builder, args[2])),
        )
        return as_tuple(context, builder, exp_lanes(builder, x))

    return VEC(VEC, numba.float32, numba.float32), codegen
