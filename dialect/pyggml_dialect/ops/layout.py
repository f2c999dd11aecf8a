"""Layout ops (layout.cl): REPEAT, CONCAT, PAD, SET, ACC, DIAG, DIAG_MASK_INF / _ZERO, ARANGE; same-block-type
copies."""

from __future__ import annotations

from pyggml.backend.launch import f32, i32, i64
from pyggml.backend.op_table import RuleSet, src, srcs
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import PLAIN, SAME_TYPE, Builder, tname

rules: RuleSet[Builder] = RuleSet()

FILE = "layout.cl"
T = GGMLType


def spec(t0: GGMLType = T.F32, t1: GGMLType = T.F32) -> ProgramSpec:
    return ProgramSpec.of(FILE, T0=tname(t0), T1=tname(t1))


def _repeat_ok(node: Tensor) -> bool:
    a = node.src[0]
    return a is not None and a.type == node.type and node.type in SAME_TYPE


@rules.rule(Op.REPEAT, accepts=_repeat_ok)
def build_repeat(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    b.launch_1d(spec(a.type), "k_repeat", node.nelements(), *b.tensor(a), *b.tensor(node))


def _concat_ok(node: Tensor) -> bool:
    """Same type everywhere: a plain one, or any block type whose blocks lie side by side along dim 0."""
    if not all(s is not None and s.type == node.type for s in node.src):
        return False
    tr = node.type.traits
    if tr.is_quantized:
        return all(t.nb[0] == tr.type_size for t in (node, *srcs(node)))
    return node.type in SAME_TYPE


@rules.rule(Op.CONCAT, accepts=_concat_ok)
def build_concat(node: Tensor, b: Builder) -> None:
    a, c = src(node, 0), src(node, 1)
    tr = node.type.traits  # the kernel moves units of type_size bytes, whatever the type: one program for all
    b.launch_1d(spec(), "k_concat", node.nelements() // tr.blck_size, *b.tensor(a), *b.tensor(c), *b.tensor(node),
                i32(node.params.dim), i64(tr.blck_size), i32(tr.type_size))


def _f32_only(node: Tensor) -> bool:
    return node.type == T.F32 and all(s.type == T.F32 for s in node.src if s is not None)


@rules.rule(Op.PAD, accepts=_f32_only)
def build_pad(node: Tensor, b: Builder) -> None:
    b.launch_1d(spec(), "k_pad", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node),
                *map(i64, node.params.lp))


def copy_into(node: Tensor, a: Tensor, b: Builder) -> None:
    """Copy src `a` into `node`'s memory unless the node is `a` in place."""
    if node.buffer is a.buffer and node.offset == a.offset and node.nb == a.nb:
        return
    b.launch_1d(spec(a.type), "k_copy", node.nelements(), *b.tensor(a), *b.tensor(node))


def _set_acc_ok(node: Tensor) -> bool:
    a, c = node.src[0], node.src[1]
    es = node.type.traits.type_size
    p = node.params
    return (a is not None and c is not None and a.type in PLAIN and c.type in PLAIN and node.is_contiguous()
            and all(v % es == 0 for v in (p.nb1, p.nb2, p.nb3, p.offset)))


@rules.rule(Op.SET, Op.ACC, accepts=_set_acc_ok)
def build_set_acc(node: Tensor, b: Builder) -> None:
    a, c = src(node, 0), src(node, 1)
    p = node.params
    copy_into(node, a, b)
    b.launch_1d(spec(node.type, c.type), "k_set_acc", c.nelements(), *b.tensor(c), *b.tensor(node), i64(p.nb1),
                i64(p.nb2), i64(p.nb3), i64(p.offset), i32(int(node.op is Op.ACC)))


@rules.rule(Op.DIAG, accepts=_f32_only)
def build_diag(node: Tensor, b: Builder) -> None:
    b.launch_1d(spec(), "k_diag", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node))


@rules.rule(Op.DIAG_MASK_INF, Op.DIAG_MASK_ZERO, accepts=_f32_only)
def build_diag_mask(node: Tensor, b: Builder) -> None:
    value = float("-inf") if node.op is Op.DIAG_MASK_INF else 0.0
    b.launch_1d(spec(), "k_diag_mask", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node),
                i32(node.params.n_past), f32(value))


@rules.rule(Op.ARANGE, accepts=_f32_only)
def build_arange(node: Tensor, b: Builder) -> None:
    p = node.params
    b.launch_1d(spec(), "k_arange", node.ne[0], *b.tensor(node), f32(p.start), f32(p.step))


def build_copy_raw(node: Tensor, b: Builder) -> None:
    """Same block type on both sides, both contiguous: the bytes as they are."""
    a = src(node, 0)
    n = node.nbytes()
    b.launch_1d(spec(), "k_copy_raw", n, *b.tensor(a), *b.tensor(node), i64(n))
