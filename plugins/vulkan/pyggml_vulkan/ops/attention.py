"""FLASH_ATTN_EXT: one work group per (query row, head, batch), online softmax over blocks of 64 keys."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from pyggml.ops.attention import KV_TYPES
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_vulkan.ops import register
from pyggml_vulkan.ops.common import READABLE, srcs_ok
from pyggml_vulkan.ops.norm import alibi
from pyggml_vulkan.recorder import grid

if TYPE_CHECKING:
    from pyggml_vulkan.recorder import Planner

T = GGMLType
MAX_HEAD = 640


def _fa_ok(node: Tensor) -> bool:
    q, k, v = node.src[0], node.src[1], node.src[2]
    if q is None or k is None or v is None:
        return False
    kv = KV_TYPES & READABLE
    if not srcs_ok(node, (frozenset({T.F32}), kv, kv, frozenset({T.F32, T.F16}), frozenset({T.F32}))):
        return False
    return (q.ne[0] <= MAX_HEAD and v.ne[0] <= MAX_HEAD and q.is_contiguous_rows() and node.is_contiguous()
            and k.ne[2] < 65536 and k.ne[3] < 65536)


@register(Op.FLASH_ATTN_EXT, supports=_fa_ok)
def flash_attn(node: Tensor, p: Planner) -> None:
    q, k, v = node.src[0], node.src[1], node.src[2]
    mask = node.src[3] if len(node.src) > 3 else None
    sinks = node.src[4] if len(node.src) > 4 else None
    assert q is not None and k is not None and v is not None
    prm = node.params
    m0, m1, nlog2 = alibi(q.ne[2], prm.max_bias)
    mt = mask if mask is not None else q
    push = struct.pack(
        "<26I4fI", q.offset, k.offset, v.offset, mask.offset if mask else 0, sinks.offset if sinks else 0,
        node.offset, q.ne[0], v.ne[0], q.ne[1], q.ne[2], q.nb[1], q.nb[2], q.nb[3],
        k.ne[1], k.ne[2] | (k.ne[3] << 16), q.ne[3], k.nb[1], k.nb[2], k.nb[3], v.nb[1], v.nb[2], v.nb[3],
        mt.nb[1], mt.nb[2], mt.nb[3], mt.ne[2] | (mt.ne[3] << 16),
        prm.scale, prm.logit_softcap, m0, m1, nlog2)
    spec = (int(k.type), int(v.type), int(mt.type), int(mask is not None), int(sinks is not None))
    p.dispatch("flash_attn", spec, [q, k, v, mask, sinks], node, push, grid(q.ne[1] * q.ne[2] * q.ne[3]))
