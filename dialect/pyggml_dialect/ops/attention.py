"""FLASH_ATTN_EXT (attention.cl). SOFT_MAX lives with the row reductions (norm.py), DIAG_MASK_* in layout.py."""

from __future__ import annotations

from pyggml.backend.launch import WG, f32, i32, i64
from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.attention import alibi, key_splits
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import PLAIN, QUANT32, Builder, tname

rules: RuleSet[Builder] = RuleSet()

T = GGMLType
DMAX = 576
"""Largest head size (d_k and d_v) the kernel holds."""
KV = PLAIN | QUANT32


def _ok(node: Tensor) -> bool:
    q, k, v = node.src[0], node.src[1], node.src[2]
    sinks = opt_src(node, 4)
    return (q is not None and k is not None and v is not None and q.type == T.F32 and k.type in KV
            and v.type in KV and k.is_contiguous_rows() and v.is_contiguous_rows() and q.ne[0] <= DMAX
            and v.ne[0] <= DMAX and (sinks is None or sinks.is_contiguous()))


def n_split(q: Tensor, k: Tensor) -> int:
    """Splits of the keys (core's key_splits over chunks of WG keys)."""
    return key_splits(q.ne[1] * q.ne[2] * q.ne[3], k.ne[1], WG)


@rules.rule(Op.FLASH_ATTN_EXT, accepts=_ok)
def build_flash_attn(node: Tensor, b: Builder) -> None:
    q, k, v = src(node, 0), src(node, 1), src(node, 2)
    mask, sinks = opt_src(node, 3), opt_src(node, 4)
    p = node.params
    nlog2, m0, m1 = alibi(q.ne[2], p.max_bias)
    s = ProgramSpec.of("attention.cl", TK=tname(k.type), TV=tname(v.type),
                       TM=tname(mask.type if mask is not None else T.F32), WG=WG, DMAX=DMAX)
    ns = n_split(q, k)
    # the splits' records (REC in attention.cl); with one split none, and the output's memory stands in
    part = b.scratch(4 * q.ne[1] * q.ne[2] * q.ne[3] * ns * (v.ne[0] + 2)) if ns > 1 else b.tensor(node)[0]
    sink_args = b.tensor(sinks if sinks is not None else q)
    b.launch(s, "k_flash_attn", (q.ne[1] * ns * WG, q.ne[2], q.ne[3]), (WG, 1, 1), *b.tensor(q), *b.tensor(k),
             *b.tensor(v), *b.tensor(mask if mask is not None else q), *sink_args, *b.tensor(node), part, i64(0),
             i32(ns), f32(p.scale), f32(p.max_bias), f32(p.logit_softcap), i32(int(mask is not None)),
             i32(int(sinks is not None)), i32(nlog2), f32(m0), f32(m1))
    if ns > 1:
        b.launch(s, "k_flash_attn_merge", (q.ne[1] * WG, q.ne[2], q.ne[3]), (WG, 1, 1), *sink_args,
                 *b.tensor(node), part, i64(0), i32(ns), i32(int(sinks is not None)))
