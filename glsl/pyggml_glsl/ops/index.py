"""Index-mapping ops on gather.comp: REPEAT, CONCAT, PAD, DIAG, DIAG_MASK_INF/ZERO, ARANGE, SET, ACC."""

from __future__ import annotations

from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import INTS, PLAIN, generic_pc, grid, groups_for, srcs_ok, unit_words, units_ok

rules: RuleSet[Builder] = RuleSet()

F32 = frozenset({GGMLType.F32})
ANY_PLAIN = PLAIN | INTS
CODE = {Op.REPEAT: 0, Op.CONCAT: 1, Op.PAD: 2, Op.DIAG: 3, Op.DIAG_MASK_INF: 4, Op.DIAG_MASK_ZERO: 5,
        Op.ARANGE: 6, Op.SET: 7, Op.ACC: 8}


def _gather(node: Tensor, p: Builder, a: Tensor | None, b: Tensor | None, d: Tensor, u0: int = 0,
            f: tuple[float, ...] = ()) -> None:
    ta = int(a.type) if a is not None else int(d.type)
    spec = (ta, int(d.type), CODE[node.op])
    p.dispatch("gather", spec, [a, b], d, generic_pc(a, b, d, u0, f), grid(groups_for(d.nelements())))


def _same_type_ok(node: Tensor) -> bool:
    if not all(s is None or s.type == node.type for s in node.src[:2]):
        return False
    if node.op is Op.CONCAT and node.type not in ANY_PLAIN:  # block types and i64 move as bytes
        return all(units_ok(t) for t in (*node.src[:2], node))
    return srcs_ok(node, (ANY_PLAIN, ANY_PLAIN))


@rules.rule(Op.REPEAT, Op.CONCAT, accepts=_same_type_ok)
def repeat_concat(node: Tensor, p: Builder) -> None:
    a, b = src(node, 0), opt_src(node, 1)
    if node.op is Op.REPEAT:
        _gather(node, p, a, None, node)
    elif node.type not in ANY_PLAIN:
        n = node.nelements() // node.type.traits.blck_size
        p.dispatch("blocks", (unit_words(node), 1), [a, b], node, generic_pc(a, b, node, node.params.dim, units=True),
                   grid(groups_for(n)))
    else:
        _gather(node, p, a, b, node, u0=node.params.dim)


def _f32_ok(node: Tensor) -> bool:
    return srcs_ok(node, (F32,)) and node.type == GGMLType.F32


@rules.rule(Op.PAD, Op.DIAG, Op.DIAG_MASK_INF, Op.DIAG_MASK_ZERO, Op.ARANGE, accepts=_f32_ok)
def f32_maps(node: Tensor, p: Builder) -> None:
    a = opt_src(node, 0)  # ARANGE has none
    prm = node.params
    if node.op is Op.PAD:
        _gather(node, p, a, None, node, f=tuple(float(x) for x in prm.lp))
    elif node.op in (Op.DIAG_MASK_INF, Op.DIAG_MASK_ZERO):
        _gather(node, p, a, None, node, u0=prm.n_past)
    elif node.op is Op.ARANGE:
        _gather(node, p, None, None, node, f=(prm.start, prm.step))
    else:
        _gather(node, p, a, None, node)


def _set_ok(node: Tensor) -> bool:
    a = node.src[0]
    if a is None or not srcs_ok(node, (PLAIN, PLAIN)) or node.type != a.type:
        return False
    es = a.type.traits.type_size
    prm = node.params
    return all(v % es == 0 for v in (prm.nb1, prm.nb2, prm.nb3, prm.offset))


def _view_of(t: Tensor, b: Tensor, prm: object) -> Tensor:
    """A layout tensor over t's memory: b's shape, the op's view strides and offset."""
    es = t.type.traits.type_size
    v = Tensor(t.type, b.ne, (es, prm.nb1, prm.nb2, prm.nb3), op=Op.NONE)  # type: ignore[attr-defined]
    v.buffer, v.offset = t.buffer, t.offset + prm.offset  # type: ignore[attr-defined]
    return v


@rules.rule(Op.SET, Op.ACC, accepts=_set_ok)
def set_acc(node: Tensor, p: Builder) -> None:
    a, b = src(node, 0), src(node, 1)
    if not (a.buffer is node.buffer and a.offset == node.offset):
        p.dispatch("cpy", (int(a.type), int(node.type)), [a], node, generic_pc(a, None, node),
                   grid(groups_for(node.nelements())))
    dview = _view_of(node, b, node.params)
    spec = (int(a.type), int(node.type), CODE[node.op])
    push = generic_pc(_view_of(a, b, node.params), b, dview)
    p.dispatch("gather", spec, [a, b], node, push, grid(groups_for(b.nelements())))
