"""Reductions on reduce.comp: SUM_ROWS, MEAN, ARGMAX, SUM and COUNT_EQUAL (a row split over work groups of at
most SPAN elements, their partials combined by a second dispatch), CUMSUM (a work group per row)."""

from __future__ import annotations

from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import PLAIN, generic_pc, grid, loop_share, patch_pc, srcs_ok

rules: RuleSet[Builder] = RuleSet()

F32 = frozenset({GGMLType.F32})
I32 = frozenset({GGMLType.I32})
CODE = {Op.SUM_ROWS: 0, Op.MEAN: 1, Op.ARGMAX: 2, Op.CUMSUM: 3, Op.SUM: 4, Op.COUNT_EQUAL: 5}
SPAN = 128 * 1024
"""Elements one work group reduces (1024 per thread): as reduce.comp's SPAN."""
CUMSUM_MAX_ROW = 128 * loop_share(2)
"""CUMSUM scans a row with one work group: two passes of ne0 / 128 iterations per thread, within LAVAPIPE_LOOPS
(2^21)."""


def _ok(node: Tensor) -> bool:
    if node.op is Op.COUNT_EQUAL:
        return srcs_ok(node, (I32, I32))
    if node.op is Op.SUM:
        return srcs_ok(node, (PLAIN,))
    if node.op is Op.CUMSUM and node.ne[0] > CUMSUM_MAX_ROW:
        return False
    return srcs_ok(node, (F32,))


def _with_offsets(push: bytes, oa: int | None = None, od: int | None = None, g: int = 1) -> bytes:
    """GENERIC_PC with a's or d's byte offset replaced (the partials' scratch) and u0 = G."""
    words = {"u0": g}
    if oa is not None:
        words["oa"] = oa
    if od is not None:
        words["od"] = od
    return patch_pc(push, **words)


@rules.rule(*CODE, accepts=_ok)
def reduce(node: Tensor, p: Builder) -> None:
    a, b = src(node, 0), opt_src(node, 1)
    whole = node.op in (Op.SUM, Op.COUNT_EQUAL)
    rows = 1 if whole else a.nrows()
    n = a.nelements() if whole else a.ne[0]
    g = max(1, -(-n // SPAN))
    code, ta = CODE[node.op], int(a.type)
    push = generic_pc(a, b, node)
    if node.op is Op.CUMSUM or g == 1:
        p.dispatch("reduce", (code, ta, 0), [a, b], node, _with_offsets(push), grid(rows))
        return
    partials = p.scratch(rows * g * 8)  # ARGMAX keeps (value, index) pairs
    p.dispatch("reduce", (code, ta, 1), [a, b], partials, _with_offsets(push, od=partials.offset, g=g),
               grid(rows * g))
    p.dispatch("reduce", (code, ta, 2), [partials], node, _with_offsets(push, oa=partials.offset, g=g), grid(rows))
