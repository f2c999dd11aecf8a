"""The convolution family (conv.cl): IM2COL and its gradient IM2COL_BACK, IM2COL_3D, CONV_2D, CONV_2D_DW, CONV_3D,
CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D, COL2IM_1D, one work-item per destination element over any strides and every
float type core allows (F32, F16, BF16 kernels, inputs, patches and columns)."""

from __future__ import annotations

from pyggml.backend.launch import i32, i64
from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.ops.conv import Col2im1dParams, Conv2dParams, Conv3dParams, Im2col3dParams, Im2colBackParams, Im2colParams
from pyggml.tensor import Tensor
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import PLAIN, Builder, tname

rules: RuleSet[Builder] = RuleSet()


def _plain(node: Tensor) -> bool:
    """Kernel, input and result of the float types the kernels load and store."""
    return node.type in PLAIN and all(s is not None and s.type in PLAIN for s in node.src[:2])


def _spec(node: Tensor) -> ProgramSpec:
    """T0 the kernel's type (COL2IM_1D: its columns'; IM2COL_BACK: its gradient's), T1 the input's (IM2COL_BACK:
    T0, as its kernel is read for its shape only and its type need not make another program), TD the result's."""
    a = src(node, 0)
    b = src(node, 1) if len(node.src) > 1 and node.op is not Op.IM2COL_BACK else a
    return ProgramSpec.of("conv.cl", T0=tname(a.type), T1=tname(b.type), TD=tname(node.type))


def _args(node: Tensor, b: Builder) -> list[object]:
    return [*b.tensor(src(node, 0)), *b.tensor(src(node, 1)), *b.tensor(node)]


@rules.rule(Op.IM2COL, Op.IM2COL_BACK, accepts=_plain)
def build_im2col(node: Tensor, b: Builder) -> None:
    """IM2COL, and its gradient IM2COL_BACK (src0 the gradient, src1 the kernel), on IM2COL's words; the gradient
    is a gather: each input element sums the patch entries IM2COL copied it to."""
    p: Im2colParams | Im2colBackParams = node.params
    kernel = "k_im2col" if node.op is Op.IM2COL else "k_im2col_back"
    b.launch_1d(_spec(node), kernel, node.nelements(), *_args(node, b), *map(i32, (p.s0, p.s1, p.p0, p.p1, p.d0,
                p.d1, int(p.is_2d))))


@rules.rule(Op.IM2COL_3D, accepts=_plain)
def build_im2col_3d(node: Tensor, b: Builder) -> None:
    p: Im2col3dParams = node.params
    n = src(node, 1).ne[3] // p.ic
    b.launch_1d(_spec(node), "k_im2col_3d", node.nelements(), *_args(node, b),
                *map(i32, (p.s0, p.s1, p.s2, p.p0, p.p1, p.p2, p.d0, p.d1, p.d2, p.ic)), i64(node.ne[3] // n))


@rules.rule(Op.CONV_2D, Op.CONV_2D_DW, accepts=_plain)
def build_conv_2d(node: Tensor, b: Builder) -> None:
    p: Conv2dParams = node.params
    kernel = "k_conv_2d" if node.op is Op.CONV_2D else "k_conv_2d_dw"
    b.launch_1d(_spec(node), kernel, node.nelements(), *_args(node, b),
                *map(i32, (p.s0, p.s1, p.p0, p.p1, p.d0, p.d1)))


@rules.rule(Op.CONV_3D, accepts=_plain)
def build_conv_3d(node: Tensor, b: Builder) -> None:
    p: Conv3dParams = node.params
    b.launch_1d(_spec(node), "k_conv_3d", node.nelements(), *_args(node, b),
                *map(i32, (p.s0, p.s1, p.s2, p.p0, p.p1, p.p2, p.d0, p.d1, p.d2, p.c, p.oc)))


@rules.rule(Op.CONV_TRANSPOSE_1D, accepts=_plain)
def build_conv_transpose_1d(node: Tensor, b: Builder) -> None:
    b.launch_1d(_spec(node), "k_conv_transpose_1d", node.nelements(), *_args(node, b), i32(node.params.s0))


@rules.rule(Op.CONV_TRANSPOSE_2D, accepts=_plain)
def build_conv_transpose_2d(node: Tensor, b: Builder) -> None:
    b.launch_1d(_spec(node), "k_conv_transpose_2d", node.nelements(), *_args(node, b), i32(node.params.stride))


@rules.rule(Op.COL2IM_1D, accepts=_plain)
def build_col2im_1d(node: Tensor, b: Builder) -> None:
    p: Col2im1dParams = node.params
    b.launch_1d(_spec(node), "k_col2im_1d", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node), i32(p.s0),
                i32(p.p0))
