"""Spatial ops (spatial.cl): POOL_1D, POOL_2D (f32 / f16 input) and its gradient POOL_2D_BACK, UPSCALE (every
mode and flag), PAD_REFLECT_1D, TIMESTEP_EMBEDDING, ROLL, WIN_PART, WIN_UNPART, GET_REL_POS (f16), ADD_REL_POS (in
place too); one work-item per destination element over any strides."""

from __future__ import annotations

from collections.abc import Callable

from pyggml.backend.launch import i32
from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.ops.spatial import Pool1DParams, Pool2DParams, PoolOp, ScaleMode, UpscaleParams
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import Builder, tname

rules: RuleSet[Builder] = RuleSet()

T = GGMLType
F32 = frozenset({T.F32})
F32_F16 = frozenset({T.F32, T.F16})


def _spec(node: Tensor) -> ProgramSpec:
    return ProgramSpec.of("spatial.cl", T0=tname(src(node, 0).type))


def _types(inputs: frozenset[GGMLType]) -> Callable[[Tensor], bool]:
    """The predicate: src0 of one of `inputs`, an f32 result."""

    def ok(node: Tensor) -> bool:
        a = node.src[0]
        return a is not None and a.type in inputs and node.type == T.F32

    return ok


_pool_ok = _types(F32_F16)
_f32_ok = _types(F32)


@rules.rule(Op.POOL_1D, accepts=_pool_ok)
def build_pool_1d(node: Tensor, b: Builder) -> None:
    p: Pool1DParams = node.params
    b.launch_1d(_spec(node), "k_pool_1d", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node),
                *map(i32, (int(p.op is PoolOp.AVG), p.k0, p.s0, p.p0)))


@rules.rule(Op.POOL_2D, accepts=_pool_ok)
def build_pool_2d(node: Tensor, b: Builder) -> None:
    p: Pool2DParams = node.params
    b.launch_1d(_spec(node), "k_pool_2d", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node),
                *map(i32, (int(p.op is PoolOp.AVG), p.k0, p.k1, p.s0, p.s1, p.p0, p.p1)))


def _pool_2d_back_ok(node: Tensor) -> bool:
    g, x = node.src[0], node.src[1]
    return g is not None and x is not None and g.type == T.F32 and x.type in F32_F16 and node.type == T.F32


@rules.rule(Op.POOL_2D_BACK, accepts=_pool_2d_back_ok)
def build_pool_2d_back(node: Tensor, b: Builder) -> None:
    """A gather: each input element sums the shares of the windows holding it (T0 the pool input's type)."""
    p: Pool2DParams = node.params
    g, x = src(node, 0), src(node, 1)
    b.launch_1d(ProgramSpec.of("spatial.cl", T0=tname(x.type)), "k_pool_2d_back", node.nelements(), *b.tensor(g),
                *b.tensor(x), *b.tensor(node), *map(i32, (int(p.op is PoolOp.AVG), p.k0, p.k1, p.s0, p.s1, p.p0,
                                                          p.p1)))


@rules.rule(Op.UPSCALE, accepts=_f32_ok)
def build_upscale(node: Tensor, b: Builder) -> None:
    p: UpscaleParams = node.params
    mode = {ScaleMode.NEAREST: 0, ScaleMode.BILINEAR: 1, ScaleMode.BICUBIC: 2}[ScaleMode(p.scale_mode)]
    b.launch_1d(_spec(node), "k_upscale", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node), i32(mode),
                i32(int(p.align_corners)), i32(int(p.antialias)))


@rules.rule(Op.PAD_REFLECT_1D, accepts=_f32_ok)
def build_pad_reflect_1d(node: Tensor, b: Builder) -> None:
    b.launch_1d(_spec(node), "k_pad_reflect_1d", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node),
                i32(node.params.p0))


@rules.rule(Op.TIMESTEP_EMBEDDING, accepts=_f32_ok)
def build_timestep_embedding(node: Tensor, b: Builder) -> None:
    b.launch_1d(_spec(node), "k_timestep_embedding", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node),
                i32(node.params.max_period))


@rules.rule(Op.ROLL, accepts=_f32_ok)
def build_roll(node: Tensor, b: Builder) -> None:
    b.launch_1d(_spec(node), "k_roll", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node),
                *map(i32, node.params.shifts))


@rules.rule(Op.WIN_PART, Op.WIN_UNPART, accepts=_f32_ok)
def build_win(node: Tensor, b: Builder) -> None:
    """npx: windows along the image's width (WIN_UNPART: of its w0 columns)."""
    p = node.params
    npx = p.npx if node.op is Op.WIN_PART else -(-p.w0 // p.w)
    kernel = "k_win_part" if node.op is Op.WIN_PART else "k_win_unpart"
    b.launch_1d(_spec(node), kernel, node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node), i32(npx))


def _get_rel_pos_ok(node: Tensor) -> bool:
    a = node.src[0]
    return a is not None and a.type == T.F16 and node.type == T.F16


@rules.rule(Op.GET_REL_POS, accepts=_get_rel_pos_ok)
def build_get_rel_pos(node: Tensor, b: Builder) -> None:
    b.launch_1d(_spec(node), "k_get_rel_pos", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node))


def _add_rel_pos_ok(node: Tensor) -> bool:
    return node.type == T.F32 and all(s is not None and s.type == T.F32 for s in node.src[:3])


@rules.rule(Op.ADD_REL_POS, accepts=_add_rel_pos_ok)
def build_add_rel_pos(node: Tensor, b: Builder) -> None:
    b.launch_1d(_spec(node), "k_add_rel_pos", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(src(node, 1)),
                *b.tensor(src(node, 2)), *b.tensor(node))
