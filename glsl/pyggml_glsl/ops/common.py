"""Helpers shared by the op families: the type sets the shaders read and write, push-constant packing (GENERIC_PC of
common.glsl), type and layout checks, dispatch sizes, and the loop budget of CPU-emulated devices."""

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
LAVAPIPE_LOOPS = 65535
"""Loop iterations lavapipe (llvmpipe) lets one shader invocation take, counted over all its loops together; past
it the loops end silently with a wrong result, so ops size their per-thread work from this on CPU-emulated
devices."""


def loop_share(passes: int) -> int:
    """The largest power of two of iterations per pass that keeps `passes` passes within LAVAPIPE_LOOPS."""
    return 1 << ((LAVAPIPE_LOOPS // passes).bit_length() - 1)


def aligned(t: Tensor | None) -> bool:
    """Offsets and strides the shaders can address: element-aligned (2 bytes for block types), < 4 GiB."""
    if t is None:
        return True
    tr = t.type.traits
    unit = 2 if tr.is_quantized else min(tr.type_size, 4)
    return t.offset % unit == 0 and all(nb % unit == 0 for nb in t.nb) and t.offset + t.nbytes() <= MAX_U32


def fits_u32(node: Tensor) -> bool:
    """The op table's limit (`OpTable.fits`): the shaders count elements and bytes in 32 bits (push constants,
    invocation ids), so every ne[i], nb[i] and element count of the node and its srcs is at most 2^32 - 1. Only a
    view can pass that and still be placed (a broadcast view of 2^32 rows, a stride of 2^62 over one row): its
    counts would wrap (a SUM over 2^32 + 6 elements gave 12; GET_ROWS refused ids in range)."""
    for t in (node, *node.src):
        if t is not None and (t.nelements() > MAX_U32 or any(n > MAX_U32 for n in (*t.ne, *t.nb))):
            return False
    return True


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


GENERIC_PC_WORDS: dict[str, int] = {name: i for i, name in enumerate((
    "oa", "ob", "od", *(f"{t}_{k}{i}" for t in "abd" for k in ("ne", "nb") for i in range(4)),
    "u0", "f0", "f1", "f2", "f3"))}
"""Word index of each GENERIC_PC field (as common.glsl lays it out): e.g. b_nb2 is b's nb[2], f3 the last float."""


def patch_pc(push: bytes, **words: int) -> bytes:
    """GENERIC_PC push constants with the named fields (GENERIC_PC_WORDS) replaced by uint32 values; a float
    field so named takes the value's bits (the status code travels that way in f3: builder.status_push)."""
    pc = bytearray(push)
    for name, value in words.items():
        if name not in GENERIC_PC_WORDS:
            raise KeyError(f"GENERIC_PC has no field '{name}' (fields: {', '.join(GENERIC_PC_WORDS)})")
        struct.pack_into("<I", pc, 4 * GENERIC_PC_WORDS[name], value)
    return bytes(pc)


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


MAX_GROUPS_X = 65535


def grid(n_groups: int) -> tuple[int, int, int]:
    """A 2-D grid of n_groups workgroups (x at most 65535); shaders use wg_id() and bounds-check."""
    n = max(1, n_groups)
    if n <= MAX_GROUPS_X:
        return (n, 1, 1)
    return (MAX_GROUPS_X, -(-n // MAX_GROUPS_X), 1)
