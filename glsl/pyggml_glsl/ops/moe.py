"""ADD_ID (add_id.comp): a + b[ids] row by row, the per-expert bias of gpt-oss."""

from __future__ import annotations

from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import PLAIN, generic_pc, grid, groups_for, patch_pc, srcs_ok

rules: RuleSet[Builder] = RuleSet()

I32 = frozenset({GGMLType.I32})


def _add_id_ok(node: Tensor) -> bool:
    return srcs_ok(node, (PLAIN, PLAIN, I32)) and node.type in PLAIN


@rules.rule(Op.ADD_ID, accepts=_add_id_ok)
def add_id(node: Tensor, p: Builder) -> None:
    a, b, ids = src(node, 0), src(node, 1), src(node, 2)
    pc = patch_pc(generic_pc(a, b, node, ids.offset), b_nb2=ids.nb[0], b_nb3=ids.nb[1])
    p.dispatch("add_id", (int(a.type), int(b.type), int(node.type)), [a, b, ids], node, pc,
               grid(groups_for(node.nelements())), checks=f"a row id of src1 outside 0..{b.ne[1] - 1}")
