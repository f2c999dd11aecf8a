"""ADD_ID (moe.cl): a + b[ids] row by row, the per-expert bias of gpt-oss."""

from __future__ import annotations

from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import PLAIN, Builder, tname

rules: RuleSet[Builder] = RuleSet()

FILE = "moe.cl"


def _add_id_ok(node: Tensor) -> bool:
    a, b, ids = node.src[0], node.src[1], node.src[2]
    return (a is not None and b is not None and ids is not None and ids.type == GGMLType.I32
            and all(t.type in PLAIN for t in (node, a, b)))


@rules.rule(Op.ADD_ID, accepts=_add_id_ok)
def build_add_id(node: Tensor, b: Builder) -> None:
    a, bias, ids = src(node, 0), src(node, 1), src(node, 2)
    spec = ProgramSpec.of(FILE, T0=tname(a.type), T1=tname(bias.type), TD=tname(node.type))
    b.launch_1d(spec, "k_add_id", node.nelements(), *b.tensor(a), *b.tensor(bias), *b.tensor(ids),
                *b.tensor(node), *b.error_args(f"a row id of src1 outside 0..{bias.ne[1] - 1}"))
