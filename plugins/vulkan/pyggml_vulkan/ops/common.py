"""Helpers shared by the op families: push-constant packing, type and layout checks, dispatch sizes."""

from __future__ import annotations

import struct
from collections.abc import Iterable

from pyggml.tensor import Tensor
from pyggml.types import GGMLType

T = GGMLType
PLAIN = frozenset({T.F32, T.F16, T.BF16})
INTS = frozenset({T.I8, T.I16, T.I32})
QUANTS = frozenset({T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q8_1, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K})
"""Block types the shaders dequantise (common.glsl `dq`)."""
READABLE = PLAIN | INTS | QUANTS
WG = 256
MAX_U32 = 0xFFFFFFFF


def aligned(t: Tensor | None) -> bool:
    """Offsets and strides the shaders can address: element-aligned (2 bytes for block types), < 4 GiB."""
    if t is None:
        return True
    tr = t.type.traits
    unit = 2 if tr.is_quantized else min(tr.type_size, 4)
    return t.offset % unit == 0 and all(nb % unit == 0 for nb in t.nb) and t.offset + t.nbytes() <= MAX_U32


def srcs_ok(node: Tensor, types: Iterable[frozenset[GGMLType]]) -> bool:
    """Each src i (present) has a type in types[i]; all tensors element-aligned."""
    for s, allowed in zip(node.src, types, strict=False):
        if s is not None and (s.type not in allowed or not aligned(s)):
            return False
    return aligned(node)


def ne_nb(t: Tensor | None, units: bool = False) -> list[int]:
    """ne and nb of t; units: ne[0] counted in blocks (for byte moves of block types)."""
    if t is None:
        return [1, 1, 1, 1, 0, 0, 0, 0]
    ne0 = t.ne[0] // t.type.traits.blck_size if units else t.ne[0]
    return [ne0, *t.ne[1:], *t.nb]


def generic_pc(a: Tensor | None, b: Tensor | None, d: Tensor, u0: int = 0,
               f: tuple[float, ...] = (), units: bool = False) -> bytes:
    """GENERIC_PC of common.glsl: byte offsets, ne/nb of a, b, d, one uint and four floats (units: ne[0] in
    blocks)."""
    fs = (*f, 0.0, 0.0, 0.0, 0.0)[:4]
    words = [a.offset if a else 0, b.offset if b else 0, d.offset, *ne_nb(a, units), *ne_nb(b, units),
             *ne_nb(d, units), u0]
    return struct.pack("<28I4f", *(w & MAX_U32 for w in words), *fs)


def groups_for(n: int, per_group: int = WG) -> int:
    return -(-n // per_group)


def unit_words(t: Tensor) -> int:
    """16-bit words per unit (block or element) of t's type, for blocks.comp."""
    return t.type.traits.type_size // 2


def units_ok(t: Tensor | None) -> bool:
    """t can be moved in whole units by blocks.comp: units of whole 16-bit words, a block's bytes together."""
    if t is None:
        return True
    tr = t.type.traits
    return tr.type_size % 2 == 0 and (tr.blck_size == 1 or t.nb[0] == tr.type_size) and aligned(t)
