"""Standard normals drawn inside the CPU kernel: 8 lanes of xoshiro128++ and a vector Box-Muller.

Drawing a sample's normals with torch (~4 ns each here) cost as much as decoding it; these vectors make
16 normals in ~40 instructions. The stream of one seeded block is its 8 lanes' state ([4, 8] uint32,
`block_state`), consumed in order sample after sample, so a block's numbers do not depend on threads.

Box-Muller: with u in (0, 1] and theta uniform on the circle, sqrt(-2 ln u) (cos theta, sin theta) are
two independent N(0, 1). The uniforms have 24 bits (u >= 2^-24: the radius stops at 5.77, a tail of
probability 6e-8 a pair, as in torch's float32 normals). theta is drawn as a quarter turn q pi/2 (two
random bits) plus a uniform angle in [-pi/4, pi/4), where short polynomials give sin and cos to float32
accuracy without a range reduction. ln, sin and cos are Cephes' float32 polynomials (~1 ulp).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir as llvm_ir
from numba.core import cgutils
from numba.extending import intrinsic

from causalpos.simulation.cpu_vectors import I32, LLVM_VEC, PAD, vconst, vintrinsic

NORMALS_PER_CALL = 2 * PAD  # one Box-Muller pair of vectors
_IVEC = llvm_ir.VectorType(I32, PAD)


def block_state(seed: int, block: int) -> np.ndarray:
    """The 8 lanes' xoshiro128++ state [4, 8] uint32 of one seeded block (from SeedSequence([seed, block, 2]))."""
    state = np.random.SeedSequence([seed, block, 2]).generate_state(4 * PAD, np.uint32).reshape(4, PAD)
    state[0, ~state.any(axis=0)] = 1  # an all-zero lane would stay zero (probability 2^-128 a lane)
    return state


def _iconst(value):
    return llvm_ir.Constant(_IVEC, [value] * PAD)


def _rotl(builder, x, k):
    return builder.or_(builder.shl(x, _iconst(k)), builder.lshr(x, _iconst(32 - k)))


def _xoshiro(builder, s):
    """One xoshiro128++ step of every lane: (32 random bits a lane, new state)."""
    s0, s1, s2, s3 = s
    result = builder.add(_rotl(builder, builder.add(s0, s3), 7), s0)
    t = builder.shl(s1, _iconst(9))
    s2 = builder.xor(s2, s0)
    s3 = builder.xor(s3, s1)
    s1 = builder.xor(s1, s2)
    s0 = builder.xor(s0, s3)
    s2 = builder.xor(s2, t)
    return result, (s0, s1, s2, _rotl(builder, s3, 11))


def _fma(builder, a, b, c):
    return vintrinsic(builder, "fma", a, b, c)


def _polynomial(builder, x, coefficients):
    """Horner: ((c0 x + c1) x + c2) ..."""
    p = vconst(coefficients[0])
    for c in coefficients[1:]:
        p = _fma(builder, p, x, vconst(c))
    return p


def _minus_two_log(builder, u):
    """-2 ln u for u in (0, 1] (Cephes logf: u = 2^e m, m in [sqrt(1/2), sqrt(2)))."""
    bits = builder.bitcast(u, _IVEC)
    e = builder.sub(builder.lshr(bits, _iconst(23)), _iconst(126))
    m = builder.bitcast(builder.or_(builder.and_(bits, _iconst(0x007FFFFF)), _iconst(0x3F000000)), LLVM_VEC)
    small = builder.fcmp_ordered("<", m, vconst(0.707106781186547524))
    e = builder.sitofp(builder.sub(e, builder.zext(small, _IVEC)), LLVM_VEC)
    x = builder.fsub(builder.select(small, builder.fadd(m, m), m), vconst(1.0))
    z = builder.fmul(x, x)
    coefficients = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
                    -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)  # fmt: skip
    y = builder.fmul(builder.fmul(_polynomial(builder, x, coefficients), x), z)
    y = _fma(builder, e, vconst(-2.12194440e-4), y)
    y = _fma(builder, z, vconst(-0.5), y)
    log = _fma(builder, e, vconst(0.693359375), builder.fadd(x, y))
    return vintrinsic(builder, "maxnum", builder.fmul(log, vconst(-2.0)), vconst(0.0))


def _unit_interval(builder, word, offset):
    """(top 24 bits of word + offset) 2^-24: offset 1 gives (0, 1], offset 0 gives [0, 1)."""
    top = builder.add(builder.lshr(word, _iconst(8)), _iconst(offset))
    return builder.fmul(builder.uitofp(top, LLVM_VEC), vconst(2.0**-24))


def _circle(builder, word):
    """(cos, sin) of a uniform angle: q pi/2 (q = the word's two low bits) + pi/2 (v - 1/2), v from its top bits."""
    theta = builder.fmul(builder.fsub(_unit_interval(builder, word, 0), vconst(0.5)), vconst(math.pi / 2))
    z = builder.fmul(theta, theta)
    sin = _fma(builder, builder.fmul(theta, z), _polynomial(builder, z, (-1.9515295891e-4, 8.3321608736e-3,
               -1.6666654611e-1)), theta)  # fmt: skip
    cos_tail = _polynomial(builder, z, (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2))
    cos = _fma(builder, builder.fmul(z, z), cos_tail, _fma(builder, z, vconst(-0.5), vconst(1.0)))
    quarter = builder.icmp_unsigned("!=", builder.and_(word, _iconst(1)), _iconst(0))  # turn by pi/2
    half = builder.icmp_unsigned("!=", builder.and_(word, _iconst(2)), _iconst(0))  # turn by pi
    cos, sin = builder.select(quarter, builder.fneg(sin), cos), builder.select(quarter, cos, sin)
    return builder.select(half, builder.fneg(cos), cos), builder.select(half, builder.fneg(sin), sin)


@intrinsic
def normals16(typingctx, state, out, pos):
    """Advance every lane of state [4, 8] (uint32) twice; out[pos:pos + 16] = 16 standard normals (float32)."""

    def codegen(context, builder, signature, args):
        state_type, out_type, _ = signature.args
        rows = context.make_array(state_type)(context, builder, args[0])
        ptrs = [
            builder.bitcast(
                cgutils.get_item_pointer(
                    context,
                    builder,
                    state_type,
                    rows,
                    [context.get_constant(numba.intp, r), context.get_constant(numba.intp, 0)],
                ),
                _IVEC.as_pointer(),
            )
            for r in range(4)
        ]
        s = [builder.load(p, align=4) for p in ptrs]
        radius_bits, s = _xoshiro(builder, s)
        angle_bits, s = _xoshiro(builder, s)
        for p, value in zip(ptrs, s):
            builder.store(value, p, align=4)
        radius = vintrinsic(builder, "sqrt", _minus_two_log(builder, _unit_interval(builder, radius_bits, 1)))
        cos, sin = _circle(builder, angle_bits)
        flat = context.make_array(out_type)(context, builder, args[1])
        first = cgutils.get_item_pointer(context, builder, out_type, flat, [args[2]], wraparound=False)
        first = builder.bitcast(first, LLVM_VEC.as_pointer())
        builder.store(builder.fmul(radius, cos), first, align=4)
        builder.store(builder.fmul(radius, sin), builder.gep(first, [I32(1)]), align=4)
        return context.get_dummy_value()

    return numba.types.none(state, out, pos), codegen
