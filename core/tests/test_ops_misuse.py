"""Bad input refused at record time (issue 19): what a hostile user passes to the public op API gets a clear
PyGGMLError naming the op and tensor before any backend sees it."""

from __future__ import annotations

import pytest

import pyggml as gg
from pyggml import ops
from pyggml.errors import ShapeError, UnsupportedTypeError


@pytest.fixture
def ctx() -> gg.Context:
    return gg.Context(mem_size=1 << 20)


@pytest.mark.parametrize("nb,offset", [((-(1 << 40),), 0), ((-4,), 0), ((16, -48), 0), ((1 << 63,), 0),
                                       ((1.5,), 0), ((16,), -1), ((16,), 1 << 64)])
def test_view_refuses_negative_or_wrapping_strides(ctx: gg.Context, nb: tuple[int, ...], offset: int) -> None:
    a = ctx.new_tensor("f32", 4, 3, 1, name="a")
    ne = (4, 3) if len(nb) == 1 else (4, 3, 1)
    with pytest.raises(ShapeError, match=r"VIEW: (stride nb\[\d\]|offset) .*'a' f32"):
        ops.cont(ops.view(a, ne, nb, offset))


def test_view_of_a_negative_stride_never_reaches_a_kernel(ctx: gg.Context) -> None:
    """The issue's reproduction (SIGSEGV on numpy, cpu and OpenCL0 before)."""
    a = ctx.new_tensor("f32", 4, 3, name="a")
    with pytest.raises(ShapeError):
        ops.cont(ops.view(a, (4, 3), (-(1 << 40),)))


@pytest.mark.parametrize("op", [ops.set_, ops.acc])
def test_set_acc_refuse_negative_strides(ctx: gg.Context, op: object) -> None:
    a = ctx.new_tensor("f32", 4, 3, name="a")
    b = ctx.new_tensor("f32", 2, 2, name="b")
    with pytest.raises(ShapeError, match=r"(SET|ACC): stride nb\[1\] = -16"):
        op(a, b, -16, 0, 0, 32)  # type: ignore[operator]


def test_valid_views_still_work(ctx: gg.Context) -> None:
    a = ctx.new_tensor("f32", 4, 3, name="a")
    a.set([float(i) for i in range(12)])
    v = ops.view(a, (2, 3), (16,), 8)
    assert v.nb[:2] == (4, 16)
    z = ops.view(a, (4, 1), (0,))  # a zero stride over a dim of one is fine
    assert z.ne[1] == 1


def test_matrix_products_refuse_integer_weights(ctx: gg.Context) -> None:
    """mul_mat accepted I32 src0 at record time."""
    w = ctx.new_tensor("i32", 8, 4, name="w")
    x = ctx.new_tensor("f32", 8, 2, name="x")
    with pytest.raises(UnsupportedTypeError, match=r"MUL_MAT: src0 'w' i32"):
        ops.mul_mat(w, x)
    with pytest.raises(UnsupportedTypeError, match=r"OUT_PROD: src0 'w' i32"):
        ops.out_prod(w, ctx.new_tensor("f32", 3, 4))
    experts = ctx.new_tensor("i32", 8, 4, 2, name="experts")
    with pytest.raises(UnsupportedTypeError, match=r"MUL_MAT_ID: src0 \(experts\) 'experts' i32"):
        ops.mul_mat_id(experts, ctx.new_tensor("f32", 8, 1, 3), ctx.new_tensor("i32", 1, 3))
    assert ops.mul_mat(ctx.new_tensor("q4_0", 32, 4), ctx.new_tensor("f32", 32, 2)).ne[:2] == (4, 2)


@pytest.mark.parametrize("order", ["asc", 1, None])
def test_argsort_validates_the_order(ctx: gg.Context, order: object) -> None:
    a = ctx.new_tensor("f32", 8, name="a")
    with pytest.raises(ShapeError, match="ARGSORT: order must be SortOrder"):
        ops.argsort(a, order)  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [1.5, "2", True])
def test_top_k_validates_k(ctx: gg.Context, k: object) -> None:
    with pytest.raises(ShapeError, match="TOP_K: k must be an integer"):
        ops.top_k(ctx.new_tensor("f32", 8, name="a"), k)  # type: ignore[arg-type]


@pytest.mark.parametrize("kw", [{"n_ctx_orig": 2**32 - 1}, {"n_ctx_orig": -1}, {"freq_base": 0.0},
                                {"freq_base": float("nan")}, {"freq_scale": float("inf")}])
def test_rope_refuses_parameters_no_kernel_can_use(ctx: gg.Context, kw: dict[str, float]) -> None:
    """context_length = 2^32 - 1 from a GGUF file gave an OverflowError deep in the cpu plugin; freq_base 0 NaN."""
    a = ctx.new_tensor("f32", 8, 2, 3, name="q")
    pos = ctx.new_tensor("i32", 3, name="pos")
    with pytest.raises(ShapeError, match=r"ROPE: .* \(f32 ne=\[8, 2, 3, 1\]|ROPE: .*'q'"):
        ops.rope(a, pos, 8, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("eps", [float("nan"), float("inf"), -1.0])
def test_norms_refuse_bad_eps(ctx: gg.Context, eps: float) -> None:
    a = ctx.new_tensor("f32", 8, name="x")
    for fn in (ops.rms_norm, ops.norm):
        with pytest.raises(ShapeError, match=r"eps .* must be a finite number"):
            fn(a, eps)
