"""Gradient rules of the layout, indexing, attention and loss ops: views route the gradient back to the viewed
elements, copies pass it through, GET_ROWS scatters it (GET_ROWS_BACK), masks zero it, SOFT_MAX / ROPE /
CROSS_ENTROPY_LOSS use their backward ops. Index, position and destination sources take no gradient (`ignore`).
"""

from __future__ import annotations

from pyggml import ops
from pyggml.autodiff.rules import Backprop, GradientError, rule
from pyggml.ops.attention import DiagMaskParams, SoftMaxParams
from pyggml.ops.base import Op, describe
from pyggml.ops.layout import AccParams, ConcatParams, PadParams, PermuteParams, ViewParams
from pyggml.ops.rope import RopeParams
from pyggml.tensor import Tensor


def _src(node: Tensor, j: int) -> Tensor:
    s = node.src[j]
    assert s is not None
    return s


def _contiguous(t: Tensor) -> Tensor:
    return t if t.is_contiguous() else ops.cont(t)


def _as(t: Tensor, like: Tensor) -> Tensor:
    """t's elements (in order) with like's shape."""
    return t if t.ne == like.ne and t.is_contiguous() else ops.reshape(_contiguous(t), *like.ne)


# ---- views and copies ----------------------------------------------------------------------------------------------


@rule(Op.RESHAPE)
@rule(Op.CONT)
@rule(Op.CPY, ignore=frozenset({1}))
def _same_elements(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """RESHAPE, CONT and CPY keep src0's elements in order: src0 gets the gradient in its own shape. CPY overwrites
    its destination (src1), whose old values get none."""
    if bp.needs(0):
        bp.add(0, _as(g, _src(node, 0)))


@rule(Op.TRANSPOSE)
def _transpose(node: Tensor, g: Tensor, bp: Backprop) -> None:
    if bp.needs(0):
        bp.add(0, ops.transpose(g))


@rule(Op.PERMUTE)
def _permute(node: Tensor, g: Tensor, bp: Backprop) -> None:
    p: PermuteParams = node.params
    if bp.needs(0):
        back = [0, 0, 0, 0]
        for i, ax in enumerate(p.axes):
            back[ax] = i
        bp.add(0, ops.permute(g, back[0], back[1], back[2], back[3]))


@rule(Op.VIEW)
def _view(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """The viewed elements of src0 get the gradient, the others none: add g into a zero tensor of src0's shape
    through the same view (ACC)."""
    p: ViewParams = node.params
    a = _src(node, 0)
    if not bp.needs(0):
        return
    if not a.is_contiguous():
        raise GradientError(f"VIEW: backward needs a contiguous source, got {describe(a)} nb={list(a.nb)}")
    bp.acc(0, _contiguous(g), node.nb[1], node.nb[2], node.nb[3], p.offset)


@rule(Op.SET)
def _set(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """src1 overwrites a view of src0: src1 gets that view of g, src0 gets g with the view zeroed."""
    p: AccParams = node.params
    b = _src(node, 1)
    g = _contiguous(g)  # the byte strides and offset address src0's contiguous layout, not a transposed g's
    part = ops.view(g, b.ne, (p.nb1, p.nb2, p.nb3), p.offset)
    if bp.needs(0):
        bp.add(0, ops.acc(g, ops.neg(part), p.nb1, p.nb2, p.nb3, p.offset))
    if bp.needs(1):
        bp.add(1, _as(part, b))


@rule(Op.ACC)
def _acc(node: Tensor, g: Tensor, bp: Backprop) -> None:
    p: AccParams = node.params
    b = _src(node, 1)
    if bp.needs(0):
        bp.add(0, g)
    if bp.needs(1):  # the byte strides and offset address src0's contiguous layout, not a transposed g's
        bp.add(1, _as(ops.view(_contiguous(g), b.ne, (p.nb1, p.nb2, p.nb3), p.offset), b))


@rule(Op.REPEAT)
def _repeat(node: Tensor, g: Tensor, bp: Backprop) -> None:
    if bp.needs(0):
        bp.add(0, ops.repeat_back(g, _src(node, 0)))


@rule(Op.CONCAT)
def _concat(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """Each source gets its slab of g along the concatenated dim."""
    p: ConcatParams = node.params
    a, b = _src(node, 0), _src(node, 1)
    g = _contiguous(g)  # views take nb0 to be the element size
    if bp.needs(0):
        bp.add(0, ops.cont(ops.view(g, a.ne, g.nb[1:], 0)))
    if bp.needs(1):
        bp.add(1, ops.cont(ops.view(g, b.ne, g.nb[1:], a.ne[p.dim] * g.nb[p.dim])))


@rule(Op.PAD)
def _pad(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """Zero padding (not in ggml's rules): src0 gets the block of g the padding surrounds."""
    p: PadParams = node.params
    a = _src(node, 0)
    if bp.needs(0):
        g = _contiguous(g)  # views take nb0 to be the element size
        offset = sum(p.lp[i] * g.nb[i] for i in range(4))
        bp.add(0, ops.cont(ops.view(g, a.ne, g.nb[1:], offset)))


# ---- indexing, masks, attention -----------------------------------------------------------------------------------


@rule(Op.GET_ROWS, ignore=frozenset({1}))
def _get_rows(node: Tensor, g: Tensor, bp: Backprop) -> None:
    if bp.needs(0):
        bp.add(0, ops.get_rows_back(g, _src(node, 1), _src(node, 0)))


def _diag_mask(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """Masked elements are constants: their gradient is zero, the others pass through."""
    p: DiagMaskParams = node.params
    if bp.needs(0):
        bp.add(0, ops.diag_mask_zero(g, p.n_past))


rule(Op.DIAG_MASK_INF)(_diag_mask)
rule(Op.DIAG_MASK_ZERO)(_diag_mask)


@rule(Op.SOFT_MAX, ignore=frozenset({1, 2}))
def _soft_max(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """The mask and the sinks take no gradient (ggml: not implemented; here they are constants). dx = scale y (g -
    sum(g y)) holds with sinks too (they only enlarge the denominator) and does not depend on ALiBi's slopes, which
    scale the constant mask: the backward op gets max_bias 0 whatever the forward's was (ggml passes it on and
    then supports only 0)."""
    p: SoftMaxParams = node.params
    if bp.needs(0):
        bp.add(0, ops.soft_max_ext_back(g, node, scale=p.scale, max_bias=0.0))


@rule(Op.ROPE, ignore=frozenset({1, 2}))
def _rope(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """Positions and frequency factors take no gradient; x gets the inverse rotation of g."""
    p: RopeParams = node.params
    if bp.needs(0):
        ff = node.src[2] if len(node.src) > 2 else None
        bp.add(0, ops.rope_back(g, _src(node, 1), p, ff))


@rule(Op.REPEAT_BACK)
def _repeat_back(node: Tensor, g: Tensor, bp: Backprop) -> None:
    if bp.needs(0):
        bp.add(0, ops.repeat(g, _src(node, 0)))


@rule(Op.CROSS_ENTROPY_LOSS, ignore=frozenset({1}))
def _cross_entropy(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """The labels are data (ggml: no gradient for them)."""
    if bp.needs(0):
        bp.add(0, ops.cross_entropy_loss_back(g, _src(node, 0), _src(node, 1)))
