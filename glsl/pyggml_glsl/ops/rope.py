"""ROPE and ROPE_BACK (normal and NeoX) with YaRN and frequency factors: one thread per rotated pair."""

from __future__ import annotations

import math
import struct

from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.base import Op
from pyggml.ops.rope import ROPE_TYPE_NEOX, RopeParams
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import grid, groups_for, srcs_ok

rules: RuleSet[Builder] = RuleSet()

T = GGMLType


def corr_dims(p: RopeParams) -> tuple[float, float]:
    """YaRN's ramp range (pair indices), as the reference computes it (n_ctx_orig 0 -> (0, -inf))."""

    def dim(n_rot: float) -> float:
        ratio = p.n_ctx_orig / (n_rot * 2.0 * math.pi)
        return p.n_dims * (math.log(ratio) if ratio > 0 else -math.inf) / (2.0 * math.log(p.freq_base))

    low = math.floor(dim(p.beta_fast)) if p.n_ctx_orig > 0 else -math.inf
    high = math.ceil(dim(p.beta_slow)) if p.n_ctx_orig > 0 else -math.inf
    return max(0.0, low), min(p.n_dims - 1.0, high)


def _rope_ok(node: Tensor) -> bool:
    return srcs_ok(node, (frozenset({T.F32, T.F16}), frozenset({T.I32}), frozenset({T.F32})))


@rules.rule(Op.ROPE, Op.ROPE_BACK, accepts=_rope_ok)
def rope(node: Tensor, p: Builder) -> None:
    a, pos, ff = src(node, 0), src(node, 1), opt_src(node, 2)
    prm: RopeParams = node.params
    c0, c1 = corr_dims(prm)
    push = struct.pack("<17I6f", a.offset, pos.offset, ff.offset if ff else 0, node.offset, *a.ne, *a.nb,
                       *node.nb, prm.n_dims, prm.freq_base, prm.freq_scale, prm.ext_factor, prm.attn_factor, c0, c1)
    spec = (int(a.type), int(prm.mode == ROPE_TYPE_NEOX), int(ff is not None), int(node.op is Op.ROPE_BACK))
    p.dispatch("rope", spec, [a, pos, ff], node, push, grid(groups_for(a.nelements() // 2)))
