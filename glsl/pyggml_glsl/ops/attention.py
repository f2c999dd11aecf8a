"""FLASH_ATTN_EXT: one work group per (query row, head, batch), online softmax over blocks of 64 keys."""

from __future__ import annotations

import struct

from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.attention import KV_TYPES, alibi
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import LAVAPIPE_LOOPS, READABLE, grid, srcs_ok

rules: RuleSet[Builder] = RuleSet()

T = GGMLType
MAX_HEAD = 640


LOOP_LIMIT = (LAVAPIPE_LOOPS + 1) // 4 * 3
"""Loop iterations one invocation may take on a CPU-emulated device (49152): lavapipe ends an invocation's loops
after LAVAPIPE_LOOPS in all, silently (head size 128 went wrong past about 15,000 keys); a quarter is left as the
estimate's margin."""


def loop_steps(node: Tensor) -> int:
    """The loop iterations of one flash_attn.comp thread (see LOOPS there): per block of 64 keys, its key's dot
    product and its output dims' sums over the block's keys, four steps an iteration, and two reductions."""
    q, k, v = src(node, 0), src(node, 1), src(node, 2)
    per_block = q.ne[0] // 4 + 3 + -(-v.ne[0] // 64) * 20 + 14
    return -(-k.ne[1] // 64) * per_block + q.ne[0] // 64 + 30


def fits_cpu_emulated(node: Tensor) -> bool:
    """Whether a CPU-emulated device runs the node whole: FLASH_ATTN_EXT within LOOP_LIMIT (others: True)."""
    return node.op is not Op.FLASH_ATTN_EXT or loop_steps(node) <= LOOP_LIMIT


def _fa_ok(node: Tensor) -> bool:
    q, k, v = node.src[0], node.src[1], node.src[2]
    if q is None or k is None or v is None:
        return False
    kv = KV_TYPES & READABLE
    if not srcs_ok(node, (frozenset({T.F32}), kv, kv, frozenset({T.F32, T.F16}), frozenset({T.F32}))):
        return False
    return (q.ne[0] <= MAX_HEAD and v.ne[0] <= MAX_HEAD and q.is_contiguous_rows() and node.is_contiguous()
            and k.ne[2] < 65536 and k.ne[3] < 65536)


@rules.rule(Op.FLASH_ATTN_EXT, accepts=_fa_ok)
def flash_attn(node: Tensor, p: Builder) -> None:
    q, k, v, mask, sinks = src(node, 0), src(node, 1), src(node, 2), opt_src(node, 3), opt_src(node, 4)
    prm = node.params
    nlog2, m0, m1 = alibi(q.ne[2], prm.max_bias)
    m0 = m0 if prm.max_bias > 0.0 else 0.0  # m0 = 0: the shader skips the slopes
    mt = mask if mask is not None else q
    push = struct.pack(
        "<26I4fI", q.offset, k.offset, v.offset, mask.offset if mask else 0, sinks.offset if sinks else 0,
        node.offset, q.ne[0], v.ne[0], q.ne[1], q.ne[2], q.nb[1], q.nb[2], q.nb[3],
        k.ne[1], k.ne[2] | (k.ne[3] << 16), q.ne[3], k.nb[1], k.nb[2], k.nb[3], v.nb[1], v.nb[2], v.nb[3],
        mt.nb[1], mt.nb[2], mt.nb[3], mt.ne[2] | (mt.ne[3] << 16),
        prm.scale, prm.logit_softcap, m0, m1, nlog2)
    spec = (int(k.type), int(v.type), int(mt.type), int(mask is not None), int(sinks is not None))
    p.dispatch("flash_attn", spec, [q, k, v, mask, sinks], node, push, grid(q.ne[1] * q.ne[2] * q.ne[3]))
