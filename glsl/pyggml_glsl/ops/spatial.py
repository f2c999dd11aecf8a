"""Spatial ops on spatial.comp: POOL_1D, POOL_2D (f32 / f16 input) and its gradient POOL_2D_BACK (a gather: each
input element sums the windows holding it), UPSCALE (nearest, bilinear, bicubic, antialiased bilinear, align
corners), PAD_REFLECT_1D, TIMESTEP_EMBEDDING, ROLL, WIN_PART, WIN_UNPART, GET_REL_POS (f16) and ADD_REL_POS (in
place too); one thread per destination element.
Refused (left to another backend): pool sizes, strides or paddings of 2^15 or more (16-bit halves of a
push-constant word) and a thread whose loops would run past LAVAPIPE_LOOPS (loop_share(1) iterations, the exact
divisions' 26 steps each counted too)."""

from __future__ import annotations

from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.ops.spatial import Pool1DParams, Pool2DParams, PoolOp, ScaleMode, UpscaleParams
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import generic_pc, grid, groups_for, loop_share, patch_pc, srcs_ok

rules: RuleSet[Builder] = RuleSet()

T = GGMLType
F32 = frozenset({T.F32})
F32_F16 = frozenset({T.F32, T.F16})
CODE = {Op.POOL_1D: 0, Op.POOL_2D: 1, Op.UPSCALE: 2, Op.PAD_REFLECT_1D: 3, Op.TIMESTEP_EMBEDDING: 4, Op.ROLL: 5,
        Op.WIN_PART: 6, Op.WIN_UNPART: 7, Op.GET_REL_POS: 8, Op.ADD_REL_POS: 9, Op.POOL_2D_BACK: 10}
F16 = frozenset({T.F16})
MAX_LOOP = loop_share(1)
HALF_WORD = 1 << 15
DIV_STEPS = 26
"""Loop iterations of one exact division (quant.glsl's div_rn)."""


def _pool_geometry(node: Tensor) -> tuple[int, int, int, int, int, int]:
    """(k0, k1, s0, s1, p0, p1) of a pool; POOL_1D's dim-1 window is one element."""
    p = node.params
    if isinstance(p, Pool1DParams):
        return p.k0, 1, p.s0, 1, p.p0, 0
    assert isinstance(p, Pool2DParams)
    return p.k0, p.k1, p.s0, p.s1, p.p0, p.p1


def _pool_2d_back_iterations(node: Tensor) -> int:
    """The most loop iterations one thread of POOL_2D_BACK takes: every window holding its element (at most
    ceil(k/s) along each dim), MAX rescanning each one."""
    k0, k1, s0, s1, _, _ = _pool_geometry(node)
    scan = 0 if node.params.op is PoolOp.AVG else k1 * (1 + k0)
    return 1 + -(-k1 // s1) * (1 + -(-k0 // s0) * (1 + scan))


def _support(nd: int, ns: int, align: bool) -> int:
    """The antialias triangle's half-width max(1, 1 / scale), rounded up (the scale of the corners when aligned)."""
    if align and nd > 1 and ns > 1:
        nd, ns = nd - 1, ns - 1
    return max(1, -(-ns // nd))


def _upscale_iterations(node: Tensor) -> int:
    """The most loop iterations one thread of UPSCALE takes: its exact divisions and the filter's taps."""
    a = src(node, 0)
    p: UpscaleParams = node.params
    nearest_dims = 4 if p.scale_mode == ScaleMode.NEAREST else 2
    steps = nearest_dims * 2 * DIV_STEPS
    if p.scale_mode == ScaleMode.BICUBIC:
        steps += 4 * 5
    if p.antialias:
        taps = [2 * _support(node.ne[d], a.ne[d], p.align_corners) + 3 for d in (0, 1)]
        steps += 2 * 3 * DIV_STEPS + taps[0] + taps[1] * (taps[0] + 1)
    return steps


def _ok(node: Tensor) -> bool:
    if node.op is Op.GET_REL_POS:
        return node.type == T.F16 and srcs_ok(node, (F16,))
    pools = node.op in (Op.POOL_1D, Op.POOL_2D)
    types = (F32, F32_F16) if node.op is Op.POOL_2D_BACK else (F32_F16 if pools else F32, F32, F32)
    if node.type != T.F32 or not srcs_ok(node, types):
        return False
    if node.op is Op.POOL_2D_BACK:
        return max(_pool_geometry(node)) < HALF_WORD and _pool_2d_back_iterations(node) <= MAX_LOOP
    if pools:
        g = _pool_geometry(node)
        return max(g) < HALF_WORD and 1 + g[1] * (g[0] + 1) <= MAX_LOOP
    if node.op is Op.UPSCALE:
        return _upscale_iterations(node) <= MAX_LOOP
    return True


@rules.rule(*CODE, accepts=_ok)
def spatial(node: Tensor, p: Builder) -> None:
    a = src(node, 0)
    b = src(node, 1) if node.op is Op.ADD_REL_POS else None
    if node.op is Op.POOL_2D_BACK:  # a the pool's input (the shader's typed source), b the f32 gradient
        a, b = src(node, 1), a
    srcs: list[Tensor | None] = [a, b, src(node, 2) if node.op is Op.ADD_REL_POS else None]
    words: tuple[int, ...]
    if node.op in (Op.POOL_1D, Op.POOL_2D, Op.POOL_2D_BACK):
        k0, k1, s0, s1, p0, p1 = _pool_geometry(node)
        words = (int(node.params.op is PoolOp.AVG), k0 | k1 << 16, s0 | s1 << 16, p0 | p1 << 16)
    elif node.op is Op.UPSCALE:
        up: UpscaleParams = node.params
        words = (up.scale_mode, int(up.align_corners), int(up.antialias), 0)
    elif node.op is Op.PAD_REFLECT_1D:
        words = (node.params.p0,)
    elif node.op is Op.TIMESTEP_EMBEDDING:
        words = (node.params.max_period,)
    elif node.op is Op.ROLL:
        words = tuple(s % n for s, n in zip(node.params.shifts, a.ne, strict=True))
    elif node.op in (Op.WIN_PART, Op.WIN_UNPART):
        words = (node.params.npx if node.op is Op.WIN_PART else -(-node.params.w0 // node.params.w),)
    elif node.op is Op.ADD_REL_POS:
        ph = src(node, 2)
        words = (ph.offset, *ph.nb)
    else:
        words = ()
    words = (*words, 0, 0, 0, 0, 0)[:5]
    push = patch_pc(generic_pc(a, b, node, words[0]), f0=words[1], f1=words[2], f2=words[3], f3=words[4])
    p.dispatch("spatial", (CODE[node.op], int(a.type), int(node.type)), srcs, node, push,
               grid(groups_for(node.nelements())))
