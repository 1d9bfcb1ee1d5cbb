"""Many words' Gaussian vectors in one compiled call: numpy's PCG64 and its ziggurat normal
sampler, the same arithmetic as numpy's C (`pcg64.h`, `distributions.c`), compiled by numba
with the GIL released.

`HashingEmbedder.word_vectors` reseeding one numpy generator per word from Python costs ~8 us
a word on an idle core: most of a 977 KB bulk (110,000 new words), and, as that loop holds
the GIL, time taken from the event loop while bulks run. Here the seeding, the 128-bit LCG,
the XSL-RR output and the ziggurat (numpy's own tables, as numba ships them for its
`np.random.Generator` support) run per word in native code, outside the GIL: each word's
vector is bit for bit `np.random.default_rng(seed).standard_normal(dim)` rounded to float32
(tests/server/test_units.py pins it against numpy itself, rare branches included).

`embedding.py` imports this module on the first large batch only, so a server that never
sees one never pays for numba's import; the compiled code is cached on disk (`cache=True`).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic
from numba.np.random import _constants as zig

_U64 = np.uint64
_ZERO, _ONE = _U64(0), _U64(1)
_S8, _S11, _S58, _S63, _S64 = _U64(8), _U64(11), _U64(58), _U64(63), _U64(64)
_MULT_HI, _MULT_LO = _U64(0x2360ED051FC65DA4), _U64(0x4385DF649FCCF645)  # PCG's 128-bit mult
_MANT52, _BYTE = _U64(0x000FFFFFFFFFFFFF), _U64(0xFF)
_WI, _KI, _FI = zig.wi_double, zig.ki_double, zig.fi_double
_NOR_R, _NOR_INV_R = zig.ziggurat_nor_r, zig.ziggurat_nor_inv_r
_TO_DOUBLE = 1.0 / 9007199254740992.0  # numpy's next_double: (u64 >> 11) * 2**-53

_inline = numba.njit(nogil=True, cache=True, inline="always")


@intrinsic
def _mulhi(typingctx, a, b):  # noqa: ARG001 - the high 64 bits of a * b: one 128-bit mul
    def codegen(context, builder, signature, args):  # noqa: ARG001
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        return builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))
    return types.uint64(types.uint64, types.uint64), codegen


@_inline
def _step(sh, sl, ih, il):  # state * MULT + inc, mod 2**128, as (high, low) words
    mh = _mulhi(sl, _MULT_LO) + sh * _MULT_LO + sl * _MULT_HI
    ml = sl * _MULT_LO
    lo = ml + il
    return mh + ih + (_ONE if lo < ml else _ZERO), lo


@_inline
def _output(sh, sl):  # XSL-RR: (high ^ low) rotated right by the state's top 6 bits
    value, rot = sh ^ sl, sh >> _S58
    return (value >> rot) | (value << ((_S64 - rot) & _S63))


@numba.njit(nogil=True, cache=True)
def _fill(states, out):
    for w in range(states.shape[0]):
        # pcg64_set_seed: inc = initseq << 1 | 1; from state 0: step (= inc), += seed, step
        ih = (states[w, 2] << _ONE) | (states[w, 3] >> _S63)
        il = (states[w, 3] << _ONE) | _ONE
        sl = il + states[w, 1]
        sh = ih + states[w, 0] + (_ONE if sl < il else _ZERO)
        sh, sl = _step(sh, sl, ih, il)
        for k in range(out.shape[1]):
            while True:  # random_standard_normal: numpy's ziggurat, draw by draw
                sh, sl = _step(sh, sl, ih, il)
                r = _output(sh, sl)
                idx = r & _BYTE
                r >>= _S8
                rabs = (r >> _ONE) & _MANT52
                x = float(rabs) * _WI[idx]
                if r & _ONE:
                    x = -x
                if rabs < _KI[idx]:
                    break
                if idx == _ZERO:  # the tail
                    while True:
                        sh, sl = _step(sh, sl, ih, il)
                        xx = -_NOR_INV_R * np.log1p(-float(_output(sh, sl) >> _S11)
                                                    * _TO_DOUBLE)
                        sh, sl = _step(sh, sl, ih, il)
                        yy = -np.log1p(-float(_output(sh, sl) >> _S11) * _TO_DOUBLE)
                        if yy + yy > xx * xx:
                            break
                    x = -(_NOR_R + xx) if (rabs >> _S8) & _ONE else _NOR_R + xx
                    break
                sh, sl = _step(sh, sl, ih, il)
                u = float(_output(sh, sl) >> _S11) * _TO_DOUBLE
                if (_FI[idx - _ONE] - _FI[idx]) * u + _FI[idx] < np.exp(-0.5 * x * x):
                    break
            out[w, k] = x


def standard_normals(states: np.ndarray, out: np.ndarray) -> None:
    """Into `out`'s first `len(states)` rows (float32, C order, `dim` columns): for each row
    `(s0, s1, i0, i1)` of `states` (numpy's `SeedSequence(seed).generate_state(4, uint64)`),
    `dim` draws of numpy's `Generator(PCG64(seed)).standard_normal()` (float64), rounded."""
    if len(states):
        _fill(np.ascontiguousarray(states, dtype=np.uint64), out)
