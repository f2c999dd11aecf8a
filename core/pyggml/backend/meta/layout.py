"""Where a split dimension goes when a tensor is reshaped or viewed: by element counts (reshape, cont, copies in
logical order) or by strides (views). Both raise ShapeError when the split cannot follow."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pyggml.backend.meta.state import SplitState
from pyggml.errors import ShapeError
from pyggml.tensor import MAX_DIMS, Ne, Tensor


def _prod(ne: Sequence[int]) -> int:
    return math.prod(ne)


def map_by_elements(src_ne: Ne, dst_ne: Ne, s: SplitState, what: str) -> SplitState:
    """The state of a tensor holding src's elements in the same logical order with shape dst_ne (reshape, cont).
    The split dimension's span (it and the dimensions inside it) must end where a dimension of dst ends; every
    chunk must hold whole units of that dimension. A span merged with outer blocks repeats the segment pattern."""
    if not s.is_split:
        return s
    a = int(s.axis)
    inner = _prod(src_ne[:a])
    span = inner * src_ne[a]
    for d in range(MAX_DIMS):
        below, upto = _prod(dst_ne[:d]), _prod(dst_ne[: d + 1])
        if upto >= span:
            if upto % span:
                raise ShapeError(f"{what}: dimension {d} of {list(dst_ne)} cuts across split dimension {a} of "
                                 f"{list(src_ne)}")
            return s.with_axis(d).scaled(inner, below, what).repeated(upto // span, what)
    raise ShapeError(f"{what}: {list(dst_ne)} does not hold the split dimension {a} of {list(src_ne)}")


def map_by_strides(node: Tensor, src: Tensor, s: SplitState, rel_offs: int, what: str) -> SplitState:
    """The state of a strided view `node` of `src` starting rel_offs bytes into it. The view's dimension with the
    largest stride inside one span of the split dimension must cover that span exactly (the view sees every
    device's slice), dimensions inside it must stay within one of its steps, outer strides must be whole spans,
    and the view must start at a slice boundary."""
    if not s.is_split:
        return s
    a = int(s.axis)
    blck = src.type.traits.blck_size if a == 0 else 1  # axis 0 of a block type (a quantised KV cache split
    # by heads) holds nb[0] bytes per block of blck elements
    unit, span = src.nb[a], src.nb[a] * (src.ne[a] // blck)
    if all(node.nb[d] == src.nb[d] or (node.ne[d] == 1 and src.ne[d] == 1) for d in range(MAX_DIMS)) \
            and node.ne[a] == src.ne[a] and rel_offs % span < unit:
        return s
    ne = (node.ne[0] // node.type.traits.blck_size, *node.ne[1:])  # dimension 0 in blocks
    inside = [d for d in range(MAX_DIMS) if ne[d] > 1 and node.nb[d] < span]
    outer = [d for d in range(MAX_DIMS) if ne[d] > 1 and node.nb[d] >= span]
    if not inside:
        raise ShapeError(f"{what}: the view stays inside one element of split dimension {a}")
    dim = max(inside, key=lambda d: node.nb[d])
    step = node.nb[dim]
    reach = sum((ne[d] - 1) * node.nb[d] for d in inside if d != dim) + node.type.traits.type_size
    if step * ne[dim] != span or reach > step or any(node.nb[d] % span for d in outer):
        raise ShapeError(f"{what}: view ne={list(node.ne)} nb={list(node.nb)} does not cover split dimension {a} "
                         f"of ne={list(src.ne)} nb={list(src.nb)} slice by slice")
    if rel_offs % span >= min(unit, step):
        raise ShapeError(f"{what}: the view starts {rel_offs % span} bytes into split dimension {a}")
    return s.with_axis(dim).scaled(unit, step * blck, what)
