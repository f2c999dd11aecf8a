"""ROPE and ROPE_BACK (rope.cl): normal and NeoX modes, YaRN, frequency factors; f32 and f16 rows."""

from __future__ import annotations

from pyggml.backend.launch import f32, i32
from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.base import Op
from pyggml.ops.rope import ROPE_TYPE_NEOX, RopeParams
from pyggml.reference.kernels.rope import yarn_corr_dims
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import Builder, tname

rules: RuleSet[Builder] = RuleSet()

T = GGMLType


def _ok(node: Tensor) -> bool:
    a = node.src[0]
    return a is not None and a.type in (T.F32, T.F16) and node.type == a.type


@rules.rule(Op.ROPE, Op.ROPE_BACK, accepts=_ok)
def build_rope(node: Tensor, b: Builder) -> None:
    a, pos = src(node, 0), src(node, 1)
    ff = opt_src(node, 2)
    p: RopeParams = node.params
    lo, hi = yarn_corr_dims(p)  # one definition of YaRN's correction range
    slots = (a.ne[0] + 1) // 2
    b.launch_1d(ProgramSpec.of("rope.cl", T0=tname(a.type)), "k_rope", slots * a.nrows(), *b.tensor(a),
                *b.tensor(pos), *b.tensor(ff if ff is not None else pos), *b.tensor(node), i32(p.n_dims),
                i32(int(p.mode == ROPE_TYPE_NEOX)), i32(int(ff is not None)), f32(p.freq_base),
                f32(p.freq_scale), f32(p.ext_factor), f32(p.attn_factor), f32(lo), f32(hi),
                f32(-1.0 if node.op is Op.ROPE_BACK else 1.0))
