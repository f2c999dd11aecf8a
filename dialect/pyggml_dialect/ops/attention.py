"""FLASH_ATTN_EXT (attention.cl). SOFT_MAX lives with the row reductions (norm.py), DIAG_MASK_* in layout.py."""

from __future__ import annotations

from pyggml.backend.launch import WG, f32, i32
from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.attention import alibi
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


@rules.rule(Op.FLASH_ATTN_EXT, accepts=_ok)
def build_flash_attn(node: Tensor, b: Builder) -> None:
    q, k, v = src(node, 0), src(node, 1), src(node, 2)
    mask, sinks = opt_src(node, 3), opt_src(node, 4)
    p = node.params
    nlog2, m0, m1 = alibi(q.ne[2], p.max_bias)
    s = ProgramSpec.of("attention.cl", TK=tname(k.type), TV=tname(v.type),
                       TM=tname(mask.type if mask is not None else T.F32), WG=WG, DMAX=DMAX)
    b.launch(s, "k_flash_attn", (q.ne[1] * WG, q.ne[2], q.ne[3]), (WG, 1, 1), *b.tensor(q), *b.tensor(k),
             *b.tensor(v), *b.tensor(mask if mask is not None else q), *b.tensor(sinks if sinks is not None else q),
             *b.tensor(node), f32(p.scale), f32(p.max_bias), f32(p.logit_softcap), i32(int(mask is not None)),
             i32(int(sinks is not None)), i32(nlog2), f32(m0), f32(m1))
