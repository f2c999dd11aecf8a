"""Reference (de)quantisation of ggml's block types in numpy, byte for byte as ggml's C reference.

Every codec works on all blocks of an array at once (numpy over a leading block axis); only the small, fixed
search loops of ggml's quantizers (the candidate scales of ``make_qkx2_quants`` / ``make_qx_quants``, the
coordinate passes of ``make_q3_quants``) iterate in Python.

Bit-exactness rules followed throughout (they mirror the scalar C code compiled without FMA contraction,
which is how ggml's portable base library is built):

* float32 everywhere, one rounding per C operator, the C evaluation order (``w*x*l`` is ``(w*x)*l``);
* running sums are sequential (``np.cumsum`` accumulates left to right; ``np.sum`` is pairwise and would not
  match);
* ``nearest_int`` is ggml's magic-number trick (round half to even); ``roundf``/``lroundf`` (Q8_0, Q8_1, TQ*)
  round half away from zero; float -> int8/uint8 casts truncate and wrap as the C code does;
* fp32 -> fp16 rounds to nearest even; NaN becomes the quiet NaN 0x7E00 with its sign, as ggml's converter;
* the legacy 4/5-bit types round with ``(int)(v + 8.5f)`` etc., i.e. half *up* after the offset;
* min/max scans keep the first of equal values and the signed max starts from +0.0, so the sign of a zero
  scale or min (0x0000 vs 0x8000) is ggml's, not whatever numpy's min/max return.

Reproduced quirks: an all-zero IQ4_NL block repeats the previous block's nibbles (ggml skips it without
refreshing its index buffer; a leading one is uninitialised memory in C, zeros here); an all-zero Q8_K block
gets zero bsums (left unwritten in C).

Non-finite input is pyggml's rule, not ggml's (whose quantisers skip a NaN in their max scans and then convert it,
or the NaN that `x * (1 / inf)` makes, to an integer: undefined in C, some finite value per CPU): a block
holding a NaN or an infinity becomes `nan_block(qtype)`, NaN in every scale field and zero in every other byte, so
it dequantises to NaN everywhere (MXFP4, whose scale ggml decodes without a NaN, to zeros); the other blocks are
quantised as if it were not there.  Every backend's quantisers follow this (docs/op-semantics.md, Conventions).

Block layouts are ggml's (``ggml-common.h``), little-endian.  Block sizes and byte sizes come from
``pyggml.types.type_traits``.
"""


from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.errors import ShapeError, UnsupportedTypeError
from pyggml.quants.common import F32, U8
from pyggml.quants.kquants import (
    iq4_xs_dequant,
    iq4_xs_quant,
    q2_k_dequant,
    q2_k_quant,
    q3_k_dequant,
    q3_k_quant,
    q4_k_dequant,
    q4_k_quant,
    q5_k_dequant,
    q5_k_quant,
    q6_k_dequant,
    q6_k_quant,
    q8_k_dequant,
    q8_k_quant,
)
from pyggml.quants.legacy import (
    iq4_nl_dequant,
    iq4_nl_quant,
    mxfp4_dequant,
    mxfp4_quant,
    q4_0_dequant,
    q4_0_quant,
    q4_1_dequant,
    q4_1_quant,
    q5_0_dequant,
    q5_0_quant,
    q5_1_dequant,
    q5_1_quant,
    q8_0_dequant,
    q8_0_quant,
    q8_1_dequant,
    q8_1_quant,
)
from pyggml.quants.ternary import tq1_0_dequant, tq1_0_quant, tq2_0_dequant, tq2_0_quant
from pyggml.types import GGMLType, type_traits

__all__ = ["DEQUANT_TYPES", "QUANT_TYPES", "dequantize", "nan_block", "quantize"]

# ---------------------------------------------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------------------------------------------

_T = GGMLType
_CODECS: dict[GGMLType, tuple[Callable[[U8], F32], Callable[[F32], U8] | None]] = {
    _T.Q4_0: (q4_0_dequant, q4_0_quant),
    _T.Q4_1: (q4_1_dequant, q4_1_quant),
    _T.Q5_0: (q5_0_dequant, q5_0_quant),
    _T.Q5_1: (q5_1_dequant, q5_1_quant),
    _T.Q8_0: (q8_0_dequant, q8_0_quant),
    _T.Q8_1: (q8_1_dequant, q8_1_quant),
    _T.Q2_K: (q2_k_dequant, q2_k_quant),
    _T.Q3_K: (q3_k_dequant, q3_k_quant),
    _T.Q4_K: (q4_k_dequant, q4_k_quant),
    _T.Q5_K: (q5_k_dequant, q5_k_quant),
    _T.Q6_K: (q6_k_dequant, q6_k_quant),
    _T.Q8_K: (q8_k_dequant, q8_k_quant),
    _T.IQ4_NL: (iq4_nl_dequant, iq4_nl_quant),
    _T.IQ4_XS: (iq4_xs_dequant, iq4_xs_quant),
    _T.TQ1_0: (tq1_0_dequant, tq1_0_quant),
    _T.TQ2_0: (tq2_0_dequant, tq2_0_quant),
    _T.MXFP4: (mxfp4_dequant, mxfp4_quant),
}

_F16_NAN = b"\x00\x7e"
"""The quiet NaN 0x7E00, little-endian: what ggml's fp32 -> fp16 converter makes of a positive NaN."""
_NAN_SCALES: dict[GGMLType, tuple[int, bytes]] = {
    _T.Q4_0: (0, _F16_NAN), _T.Q4_1: (0, _F16_NAN * 2), _T.Q5_0: (0, _F16_NAN), _T.Q5_1: (0, _F16_NAN * 2),
    _T.Q8_0: (0, _F16_NAN), _T.Q8_1: (0, _F16_NAN * 2), _T.Q2_K: (80, _F16_NAN * 2), _T.Q3_K: (108, _F16_NAN),
    _T.Q4_K: (0, _F16_NAN * 2), _T.Q5_K: (0, _F16_NAN * 2), _T.Q6_K: (208, _F16_NAN),
    _T.Q8_K: (0, b"\x00\x00\xc0\x7f"), _T.IQ4_NL: (0, _F16_NAN), _T.IQ4_XS: (0, _F16_NAN),
    _T.TQ1_0: (52, _F16_NAN), _T.TQ2_0: (64, _F16_NAN), _T.MXFP4: (0, b"\xff"),
}
"""Per quantisable type, where its scale fields start in a block and the bytes that make them NaN: d (and m, dmin
or s where the type has one, always the next fp16), Q8_K's f32 d; MXFP4's E8M0 exponent 0xFF, the MX format's
NaN, which ggml decodes as 2^127 (times the zero nibbles: 0)."""


def nan_block(qtype: GGMLType) -> U8:
    """The block that a block of `qtype` holding a NaN or an infinity quantises to: every scale field NaN
    (`_NAN_SCALES`), every other byte zero."""
    qtype = GGMLType(qtype)
    if qtype not in _NAN_SCALES:
        raise UnsupportedTypeError(f"pyggml.quants cannot quantize to {qtype}")
    off, fields = _NAN_SCALES[qtype]
    out = np.zeros(type_traits(qtype).type_size, dtype=np.uint8)
    out[off : off + len(fields)] = np.frombuffer(fields, dtype=np.uint8)
    return out


QUANT_TYPES: frozenset[GGMLType] = frozenset(t for t, (_, q) in _CODECS.items() if q is not None)
"""Block types this module both quantizes and dequantizes."""
DEQUANT_TYPES: frozenset[GGMLType] = frozenset(_CODECS)
"""Block types this module dequantizes (a superset of QUANT_TYPES)."""


def dequantize(raw: npt.NDArray[Any], qtype: GGMLType, n_elements: int | None = None) -> F32:
    """Decode whole blocks of `qtype` (bytes, any shape and dtype, C-contiguous) into a 1-D float32 array.

    With `n_elements`, only the first `n_elements` values (a whole number of blocks) are decoded; `raw` may be
    longer.  Without it, `raw` must hold a whole number of blocks.
    """
    qtype = GGMLType(qtype)
    codec = _CODECS.get(qtype)
    if codec is None:
        raise UnsupportedTypeError(f"pyggml.quants cannot dequantize {qtype}")
    tr = type_traits(qtype)
    data = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    if n_elements is None:
        if data.size % tr.type_size:
            raise ShapeError(f"{data.size} bytes is not a whole number of {qtype} blocks ({tr.type_size} bytes)")
        nblocks = data.size // tr.type_size
    else:
        if n_elements < 0 or n_elements % tr.blck_size:
            raise ShapeError(f"{n_elements} elements is not a whole number of {qtype} blocks ({tr.blck_size})")
        nblocks = n_elements // tr.blck_size
        if nblocks * tr.type_size > data.size:
            raise ShapeError(f"{n_elements} {qtype} elements need {nblocks * tr.type_size} bytes, got {data.size}")
    blocks = data[: nblocks * tr.type_size].reshape(nblocks, tr.type_size)
    if nblocks == 0:
        return np.zeros(0, dtype=np.float32)
    with np.errstate(all="ignore"):  # garbage bytes may hold inf/NaN scales: decode them as C does, silently
        out = codec[0](blocks)
    return np.ascontiguousarray(out, dtype=np.float32).reshape(-1)


def quantize(values: npt.ArrayLike, qtype: GGMLType) -> U8:
    """Encode float values (any shape; size a multiple of the block size) as ggml blocks: a 1-D uint8 array.

    Blocks are taken from the flattened (C order) values, as ggml quantizes rows laid end to end.
    """
    qtype = GGMLType(qtype)
    codec = _CODECS.get(qtype)
    if codec is None or codec[1] is None:
        raise UnsupportedTypeError(f"pyggml.quants cannot quantize to {qtype}")
    tr = type_traits(qtype)
    x = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    if x.size % tr.blck_size:
        raise ShapeError(f"{x.size} values is not a whole number of {qtype} blocks ({tr.blck_size})")
    if x.size == 0:
        return np.zeros(0, dtype=np.uint8)
    blocks = x.reshape(-1, tr.blck_size)
    finite = np.logical_and.reduce(np.isfinite(blocks), axis=1)
    bad = ~finite
    if bad.any():  # quantise the others alone (the codecs see finite values only), then mark these NaN
        blocks = np.where(finite[:, None], blocks, np.float32(0))
    with np.errstate(all="ignore"):
        out = codec[1](blocks)
    assert out.shape == (x.size // tr.blck_size, tr.type_size), (qtype, out.shape)
    if bad.any():
        out[bad] = nan_block(qtype)
    return np.ascontiguousarray(out, dtype=np.uint8).reshape(-1)

