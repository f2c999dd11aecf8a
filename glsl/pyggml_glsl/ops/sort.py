"""ARGSORT and TOP_K on sort.comp: a bitonic sort per row, in shared memory for rows up to CHUNK elements, else
through scratch memory (chunk sorts, then global and shared-memory merge stages); TOP_K keeps the first k of the
descending order."""

from __future__ import annotations

import struct

from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.ops.reduce import SortOrder
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import grid, groups_for, srcs_ok

rules: RuleSet[Builder] = RuleSet()

CHUNK = 2048
"""Pairs sorted in shared memory by one work group (16 KiB: every Vulkan device has that much)."""
WG = 256


def _sort_ok(node: Tensor) -> bool:
    return srcs_ok(node, (frozenset({GGMLType.F32}),)) and node.type == GGMLType.I32


def _push(a: Tensor, d: Tensor, np_: int, scratch: int = 0, kk: int = 0, jj: int = 0, last: int = 0) -> bytes:
    return struct.pack("<20I", a.offset, d.offset, scratch, a.ne[0], np_, d.ne[0], a.ne[1], a.ne[2], a.nrows(),
                       *a.nb, *d.nb, kk, jj, last)


@rules.rule(Op.ARGSORT, Op.TOP_K, accepts=_sort_ok)
def sort(node: Tensor, p: Builder) -> None:
    a = src(node, 0)
    desc = node.op is Op.TOP_K or node.params.order is SortOrder.DESC
    order = int(desc)
    n = a.ne[0]
    np_ = 1 << max(1, (n - 1).bit_length())
    rows = a.nrows()
    if np_ <= CHUNK:
        p.dispatch("sort", (order, 0), [a], node, _push(a, node, np_), grid(rows))
        return
    s = p.scratch(rows * np_ * 8)
    chunks = rows * (np_ // CHUNK)
    p.dispatch("sort", (order, 1), [a], s, _push(a, node, np_, s.offset), grid(chunks))
    k = 2 * CHUNK
    while k <= np_:
        j = k // 2
        while j >= CHUNK:
            p.dispatch("sort", (order, 2), [], s, _push(a, node, np_, s.offset, k, j),
                       grid(groups_for(rows * np_ // 2, WG)))
            j //= 2
        if k < np_:
            p.dispatch("sort", (order, 3), [], s, _push(a, node, np_, s.offset, k), grid(chunks))
        else:
            p.dispatch("sort", (order, 3), [None, s], node, _push(a, node, np_, s.offset, k, last=1), grid(chunks))
        k *= 2
