"""FLASH_ATTN_EXT: one work group per (query row, head, batch), online softmax over blocks of 64 keys; decode at
long contexts splits the keys between work groups and joins their records (flash_attn.comp's MODE)."""

from __future__ import annotations

import struct

from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.attention import KV_TYPES, alibi, key_splits
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


def n_split(node: Tensor) -> int:
    """Splits of the keys (core's key_splits over flash_attn.comp's blocks of 64 keys)."""
    q, k = src(node, 0), src(node, 1)
    return key_splits(q.ne[1] * q.ne[2] * q.ne[3], k.ne[1], 64)


def loop_steps(node: Tensor) -> int:
    """The loop iterations of one flash_attn.comp thread (see LOOPS there): per block of 64 keys of its split, its
    key's dot product and its output dims' sums over the block's keys, four steps an iteration, and two reductions;
    with splits, the join's steps too."""
    q, k, v = src(node, 0), src(node, 1), src(node, 2)
    ns = n_split(node)
    per_block = q.ne[0] // 4 + 3 + -(-v.ne[0] // 64) * 20 + 14
    blocks = -(-k.ne[1] // 64)
    split_blocks = -(-blocks // ns)  # the largest split's
    join = 2 * ns * (2 + -(-v.ne[0] // 64)) if ns > 1 else 0
    return split_blocks * per_block + q.ne[0] // 64 + 30 + join


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

    def push(oq: int, od: int, ns: int) -> bytes:
        """flash_attn.comp's push constants: Q's and d's offsets (the records' in MODE 2 and 1), the splits."""
        return struct.pack(
            "<26I4f2I", oq, k.offset, v.offset, mask.offset if mask else 0, sinks.offset if sinks else 0,
            od, q.ne[0], v.ne[0], q.ne[1], q.ne[2], q.nb[1], q.nb[2], q.nb[3],
            k.ne[1], k.ne[2] | (k.ne[3] << 16), q.ne[3], k.nb[1], k.nb[2], k.nb[3], v.nb[1], v.nb[2], v.nb[3],
            mt.nb[1], mt.nb[2], mt.nb[3], mt.ne[2] | (mt.ne[3] << 16),
            prm.scale, prm.logit_softcap, m0, m1, nlog2, ns)

    spec = (int(k.type), int(v.type), int(mt.type), int(mask is not None), int(sinks is not None))
    rows = q.ne[1] * q.ne[2] * q.ne[3]
    ns = n_split(node)
    if ns == 1:
        p.dispatch("flash_attn", (*spec, 0), [q, k, v, mask, sinks], node, push(q.offset, node.offset, 1), grid(rows))
        return
    rec = p.scratch(4 * rows * ns * (v.ne[0] + 2))  # MODE 1's records: max, sum, Dv values
    p.dispatch("flash_attn", (*spec, 1), [q, k, v, mask, sinks], rec, push(q.offset, rec.offset, ns), grid(rows * ns))
    p.dispatch("flash_attn", (*spec, 2), [rec, None, None, None, sinks], node, push(rec.offset, node.offset, ns),
               grid(rows))
