"""The convolution family on conv.comp: IM2COL (1-D and 2-D) and its gradient IM2COL_BACK (a gather, as the
transposed convolutions), CONV_2D, CONV_2D_DW, CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D, IM2COL_3D, CONV_3D and
COL2IM_1D, one thread per destination element, every float type core allows. Refused (left to another backend):
strides, paddings or dilations of 2^15 or more (2^10 for the 3-D ops; they travel packed in push-constant words),
3-D channel counts of 2^16 or more, and a thread whose loops would run past LAVAPIPE_LOOPS (loop_share(1)
iterations, the loop heads counted too)."""

from __future__ import annotations

from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import PLAIN, generic_pc, grid, groups_for, loop_share, patch_pc, srcs_ok

rules: RuleSet[Builder] = RuleSet()

CODE = {Op.IM2COL: 0, Op.CONV_2D: 1, Op.CONV_2D_DW: 2, Op.CONV_TRANSPOSE_1D: 3, Op.CONV_TRANSPOSE_2D: 4,
        Op.IM2COL_3D: 5, Op.CONV_3D: 6, Op.COL2IM_1D: 7, Op.IM2COL_BACK: 8}
THREE_D = (Op.IM2COL_3D, Op.CONV_3D)
MAX_LOOP = loop_share(1)
"""Loop iterations one thread may take (all its loops together)."""
HALF_WORD = 1 << 15
TENTH = 1 << 10
"""The bound of each of the 3-D ops' strides, paddings and dilations (three to a 32-bit word)."""


def _geometry(node: Tensor) -> tuple[int, int, int, int, int, int, int]:
    """(s0, s1, p0, p1, d0, d1, is_2d) of the node (unused ones 0)."""
    p = node.params
    if node.op is Op.COL2IM_1D:
        return p.s0, 0, p.p0, 0, 0, 0, 0
    if node.op in (Op.CONV_TRANSPOSE_1D, Op.CONV_TRANSPOSE_2D):
        return (p.s0 if node.op is Op.CONV_TRANSPOSE_1D else p.stride), 0, 0, 0, 0, 0, 0
    is_2d = int(p.is_2d) if node.op in (Op.IM2COL, Op.IM2COL_BACK) else 1
    return p.s0, p.s1, p.p0, p.p1, p.d0, p.d1, is_2d


def _words_3d(node: Tensor) -> tuple[int, int, int, int, int] | None:
    """The 3-D ops' push-constant words (u0..u4: strides, paddings, dilations, IC, OC), None where a value does not
    fit."""
    p = node.params
    triples = ((p.s0, p.s1, p.s2), (p.p0, p.p1, p.p2), (p.d0, p.d1, p.d2))
    ic, oc = (p.ic, 0) if node.op is Op.IM2COL_3D else (p.c, p.oc)
    if any(not 0 <= v < TENTH for t in triples for v in t) or not (0 < ic < 1 << 16 and 0 <= oc < 1 << 16):
        return None
    w0, w1, w2 = (t[0] | t[1] << 10 | t[2] << 20 for t in triples)
    return w0, w1, w2, ic, oc


def _iterations(node: Tensor) -> int:
    """The loop iterations (heads included) of one thread, the most any element takes."""
    a = src(node, 0)
    kw, kh, ic = a.ne[0], a.ne[1], a.ne[2]
    if node.op is Op.CONV_2D:
        return ic * (1 + kh * (1 + kw))
    if node.op is Op.CONV_2D_DW:
        return 1 + kh * (1 + kw)
    if node.op is Op.IM2COL_BACK:  # a gather over the kernel's taps (src1, the kernel: [KW, KH, ..] or [KW, ..])
        k = src(node, 1)
        return 1 + (k.ne[1] if node.params.is_2d else 1) * (1 + k.ne[0])
    s = _geometry(node)[0]
    if node.op is Op.COL2IM_1D:
        oc: int = node.params.oc
        return -(-(kw // oc) // s) + 1
    if node.op is Op.CONV_TRANSPOSE_1D:
        return ic * (1 + -(-kw // s) + 1)
    if node.op is Op.CONV_TRANSPOSE_2D:
        return a.ne[3] * (1 + (-(-kh // s) + 1) * (1 + -(-kw // s) + 1))
    return 0


def _iterations_3d(node: Tensor) -> int:
    a = src(node, 0)
    if node.op is Op.IM2COL_3D:
        return 0
    ic: int = node.params.c
    return ic * (1 + a.ne[2] * (1 + a.ne[1] * (1 + a.ne[0])))


def _ok(node: Tensor) -> bool:
    if not (srcs_ok(node, (PLAIN, PLAIN)) and node.type in PLAIN):
        return False
    if node.op in THREE_D:
        return _words_3d(node) is not None and _iterations_3d(node) <= MAX_LOOP
    return all(0 <= v < HALF_WORD for v in _geometry(node)) and _iterations(node) <= MAX_LOOP


@rules.rule(*CODE, accepts=_ok)
def conv(node: Tensor, p: Builder) -> None:
    a, b = src(node, 0), opt_src(node, 1)
    b = a if b is None else b  # COL2IM_1D has one src
    if node.op in THREE_D:
        w = _words_3d(node)
        assert w is not None
        push = patch_pc(generic_pc(a, b, node, w[0]), f0=w[1], f1=w[2], f2=w[3], f3=w[4])
    else:
        s0, s1, p0, p1, d0, d1, is_2d = _geometry(node)
        push = patch_pc(generic_pc(a, b, node, s0 | s1 << 16), f0=p0 | p1 << 16, f1=d0 | d1 << 16, f2=is_2d)
    tb = a.type if node.op is Op.IM2COL_BACK else b.type  # IM2COL_BACK reads its kernel's shape only
    p.dispatch("conv", (CODE[node.op], int(a.type), int(tb), int(node.type)), [a, b], node, push,
               grid(groups_for(node.nelements())))
