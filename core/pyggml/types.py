"""ggml tensor types: numeric ids as in ggml (so GGUF files map 1:1) and their traits."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from pyggml.errors import ShapeError, UnsupportedTypeError


class GGMLType(IntEnum):
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ2_XXS = 16
    IQ2_XS = 17
    IQ3_XXS = 18
    IQ1_S = 19
    IQ4_NL = 20
    IQ3_S = 21
    IQ2_S = 22
    IQ4_XS = 23
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    IQ1_M = 29
    BF16 = 30
    TQ1_0 = 34
    TQ2_0 = 35
    MXFP4 = 39
    NVFP4 = 40
    Q1_0 = 41

    @property
    def traits(self) -> TypeTraits:
        return _TRAITS[self]

    def __str__(self) -> str:
        return _TRAITS[self].name


@dataclass(frozen=True, slots=True)
class TypeTraits:
    name: str
    blck_size: int
    type_size: int
    is_quantized: bool
    np_dtype: np.dtype[np.generic] | None
    """numpy dtype holding one element, for plain (non-block) types; BF16 is stored as uint16."""
    vec_dot_type: GGMLType | None = None
    """Type activations are converted to for the quantised dot product (ggml's vec_dot_type)."""


def _plain(name: str, size: int, dtype: npt.DTypeLike) -> TypeTraits:
    return TypeTraits(name, 1, size, False, np.dtype(dtype))


def _quant(name: str, blck: int, size: int, dot: GGMLType | None) -> TypeTraits:
    return TypeTraits(name, blck, size, True, None, dot)


T = GGMLType
_TRAITS: dict[GGMLType, TypeTraits] = {
    T.F32: _plain("f32", 4, np.float32),
    T.F16: _plain("f16", 2, np.float16),
    T.BF16: _plain("bf16", 2, np.uint16),
    T.F64: _plain("f64", 8, np.float64),
    T.I8: _plain("i8", 1, np.int8),
    T.I16: _plain("i16", 2, np.int16),
    T.I32: _plain("i32", 4, np.int32),
    T.I64: _plain("i64", 8, np.int64),
    T.Q4_0: _quant("q4_0", 32, 18, T.Q8_0),
    T.Q4_1: _quant("q4_1", 32, 20, T.Q8_1),
    T.Q5_0: _quant("q5_0", 32, 22, T.Q8_0),
    T.Q5_1: _quant("q5_1", 32, 24, T.Q8_1),
    T.Q8_0: _quant("q8_0", 32, 34, T.Q8_0),
    T.Q8_1: _quant("q8_1", 32, 36, T.Q8_1),
    T.Q2_K: _quant("q2_K", 256, 84, T.Q8_K),
    T.Q3_K: _quant("q3_K", 256, 110, T.Q8_K),
    T.Q4_K: _quant("q4_K", 256, 144, T.Q8_K),
    T.Q5_K: _quant("q5_K", 256, 176, T.Q8_K),
    T.Q6_K: _quant("q6_K", 256, 210, T.Q8_K),
    T.Q8_K: _quant("q8_K", 256, 292, None),
    T.IQ2_XXS: _quant("iq2_xxs", 256, 66, T.Q8_K),
    T.IQ2_XS: _quant("iq2_xs", 256, 74, T.Q8_K),
    T.IQ3_XXS: _quant("iq3_xxs", 256, 98, T.Q8_K),
    T.IQ1_S: _quant("iq1_s", 256, 50, T.Q8_K),
    T.IQ4_NL: _quant("iq4_nl", 32, 18, T.Q8_0),
    T.IQ3_S: _quant("iq3_s", 256, 110, T.Q8_K),
    T.IQ2_S: _quant("iq2_s", 256, 82, T.Q8_K),
    T.IQ4_XS: _quant("iq4_xs", 256, 136, T.Q8_K),
    T.IQ1_M: _quant("iq1_m", 256, 56, T.Q8_K),
    T.TQ1_0: _quant("tq1_0", 256, 54, T.Q8_K),
    T.TQ2_0: _quant("tq2_0", 256, 66, T.Q8_K),
    T.MXFP4: _quant("mxfp4", 32, 17, T.Q8_0),
    T.NVFP4: _quant("nvfp4", 64, 36, None),
    T.Q1_0: _quant("q1_0", 128, 18, None),
}

FLOAT_TYPES = frozenset({T.F32, T.F16, T.BF16})
INT_TYPES = frozenset({T.I8, T.I16, T.I32, T.I64})


def type_traits(t: GGMLType) -> TypeTraits:
    return _TRAITS[t]


def parse_type(name: str | int | GGMLType) -> GGMLType:
    """`GGMLType` from an id, an enum member or a name such as 'q4_0' / 'Q4_K'."""
    if isinstance(name, GGMLType):
        return name
    if isinstance(name, int):
        try:
            return GGMLType(name)
        except ValueError:
            raise UnsupportedTypeError(f"unknown ggml type id {name}") from None
    try:
        return GGMLType[name.upper()]
    except KeyError:
        known = ", ".join(str(t) for t in GGMLType)
        raise UnsupportedTypeError(f"unknown ggml type {name!r}; known: {known}") from None


def row_size(t: GGMLType, ne0: int) -> int:
    """Bytes of one row of `ne0` elements (ne0 must be a multiple of the block size)."""
    tr = _TRAITS[t]
    if ne0 % tr.blck_size:
        raise ShapeError(f"row of {ne0} elements is not a multiple of {t}'s block size {tr.blck_size}")
    return ne0 // tr.blck_size * tr.type_size


# ---- F16 / BF16 conversion (round to nearest even, as ggml) ----------------------------------------------


def f32_to_f16(x: npt.ArrayLike) -> npt.NDArray[np.float16]:
    """IEEE half, round to nearest even (numpy's cast does exactly that, like F16C)."""
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def f16_to_f32(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    return np.asarray(x, dtype=np.float16).astype(np.float32)


def f32_to_bf16(x: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """bfloat16 bits, round to nearest even; NaN stays a quiet NaN (ggml_compute_fp32_to_bf16)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = (u.astype(np.uint64) + (0x7FFF + ((u >> 16) & 1))) >> 16
    out = rounded.astype(np.uint16)
    return np.where(nan, ((u >> 16) | 64).astype(np.uint16), out)


def bf16_to_f32(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    return (np.asarray(x, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_f32(data: npt.NDArray[np.generic], t: GGMLType) -> npt.NDArray[np.float32]:
    """Plain-typed element array -> float32 (BF16 arrives as uint16 bits)."""
    if t == T.BF16:
        return bf16_to_f32(data)
    return np.asarray(data).astype(np.float32)


def from_f32(values: npt.ArrayLike, t: GGMLType) -> npt.NDArray[np.generic]:
    """float values -> elements of plain type t (F16/BF16 rounded to nearest even, ints truncated)."""
    if t == T.BF16:
        return f32_to_bf16(values)
    tr = _TRAITS[t]
    if tr.np_dtype is None:
        raise UnsupportedTypeError(f"{t} is a block type; use pyggml.quants.quantize")
    return np.asarray(values).astype(tr.np_dtype)
