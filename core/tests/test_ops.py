"""Op constructors: shapes inferred as ggml does and bad input refused with messages naming op and tensors."""

from __future__ import annotations

import pytest

import pyggml as gg
from pyggml import ops
from pyggml.errors import AllocationError, ShapeError, UnsupportedTypeError
from pyggml.ops import OPS, Op
from pyggml.types import GGMLType as T


@pytest.fixture
def ctx() -> gg.Context:
    return gg.Context(no_alloc=True)


def test_every_op_has_a_definition() -> None:
    assert set(OPS) == set(Op) - {Op.NONE}


def test_binary_broadcast_rules(ctx: gg.Context) -> None:
    a = ctx.new_tensor(T.F32, 8, 6, 4, 2, name="a")
    assert ops.add(a, ctx.new_tensor(T.F32, 8, 3, 1, 2)).ne == (8, 6, 4, 2)
    with pytest.raises(ShapeError, match=r"ADD: src1 must broadcast.*'a' f32 ne=\[8, 6, 4, 2\]"):
        ops.add(a, ctx.new_tensor(T.F32, 8, 4))


def test_mul_mat_shapes_and_errors(ctx: gg.Context) -> None:
    w = ctx.new_tensor(T.Q4_0, 256, 16, name="w")
    x = ctx.new_tensor(T.F32, 256, 5, 3, name="x")
    y = ops.mul_mat(w, x)
    assert (y.type, y.ne) == (T.F32, (16, 5, 3, 1))
    with pytest.raises(ShapeError, match="MUL_MAT: src0 and src1 must have the same row length"):
        ops.mul_mat(w, ctx.new_tensor(T.F32, 128, 5))
    with pytest.raises(ShapeError, match="must not be transposed"):
        ops.mul_mat(ops.transpose(ctx.new_tensor(T.F32, 4, 4)), ctx.new_tensor(T.F32, 4, 2))


def test_block_size_enforced(ctx: gg.Context) -> None:
    with pytest.raises(ShapeError, match=r"q8_0 stores rows in blocks of 32 elements, so ne\[0\] must be a "
                       r"multiple of 32, got ne=\[33, 2, 1, 1\]"):
        ctx.new_tensor(T.Q8_0, 33, 2)
    with pytest.raises(ShapeError, match=r"new tensor 'w': q4_K .* multiple of 256, got ne=\[100, 4, 1, 1\] "
                       r"\(K-quants"):
        gg.Context(no_alloc=True).new_tensor(T.Q4_K, 100, 4, name="w")


def test_type_errors_name_the_slot(ctx: gg.Context) -> None:
    a = ctx.new_tensor(T.F32, 4, 3)
    with pytest.raises(UnsupportedTypeError, match=r"GET_ROWS: src1 \(row ids\) .* must be one of i32"):
        ops.get_rows(a, ctx.new_tensor(T.F32, 2))


def test_views(ctx: gg.Context) -> None:
    a = ctx.new_tensor(T.F32, 6, 4, 2, name="a")
    p = ops.permute(a, 1, 0, 2, 3)
    assert p.ne == (4, 6, 2, 1) and p.nb == (24, 4, 96, 192) and p.is_permuted()
    v = ops.view(a, (3, 2), (24,), offset=12)
    assert v.ne == (3, 2, 1, 1) and v.nb == (4, 24, 48, 48) and v.view_offs == 12
    with pytest.raises(ShapeError, match=r"VIEW: view of .* bytes at offset .* outside"):
        ops.view(a, (6, 4, 2), offset=8)
    with pytest.raises(ShapeError, match="RESHAPE: src must be contiguous"):
        ops.reshape(p, 48)
    with pytest.raises(ShapeError, match="RESHAPE: cannot reshape 48 elements"):
        ops.reshape(a, 5, 10)


def test_attention_shapes(ctx: gg.Context) -> None:
    q = ctx.new_tensor(T.F32, 64, 7, 8)
    k = ctx.new_tensor(T.F16, 64, 32, 2)
    v = ctx.new_tensor(T.F16, 64, 32, 2)
    mask = ctx.new_tensor(T.F16, 32, 8)
    out = ops.flash_attn_ext(q, k, v, mask, scale=0.125)
    assert out.ne == (64, 8, 7, 1)
    with pytest.raises(ShapeError, match="multiple of kv heads"):
        ops.flash_attn_ext(ctx.new_tensor(T.F32, 64, 7, 3), k, v)
    with pytest.raises(ShapeError, match="ALiBi"):
        ops.soft_max(ctx.new_tensor(T.F32, 4, 4), max_bias=8.0)


def test_rope_checks(ctx: gg.Context) -> None:
    x = ctx.new_tensor(T.F32, 64, 8, 5)
    pos = ctx.new_tensor(T.I32, 5)
    assert ops.rope(x, pos, 64, ops.ROPE_TYPE_NEOX).ne == x.ne
    with pytest.raises(ShapeError, match=r"positions must be a vector of src0\.ne\[2\]"):
        ops.rope(x, ctx.new_tensor(T.I32, 4), 64)
    with pytest.raises(ShapeError, match="n_dims=63"):
        ops.rope(x, pos, 63)


def test_inplace_is_a_view_of_src0(ctx: gg.Context) -> None:
    a = ctx.new_tensor(T.F32, 4, 4, name="a")
    s = ops.scale(a, 2.0, inplace=True)
    assert s.view_src is a and s.op is Op.SCALE and s.ne == a.ne


def test_cpy_and_set_rows_are_views_of_destination(ctx: gg.Context) -> None:
    src = ctx.new_tensor(T.F32, 64, 3)
    dst = ctx.new_tensor(T.F16, 64, 3, name="cache")
    c = ops.cpy(src, dst)
    assert c.view_src is dst and c.src == (src, dst)
    ids = ctx.new_tensor(T.I64, 3)
    r = ops.set_rows(ctx.new_tensor(T.F16, 64, 10), src, ids)
    assert r.op is Op.SET_ROWS and r.view_src is not None
    with pytest.raises(ShapeError, match="CPY: src and dst element counts differ"):
        ops.cpy(src, ctx.new_tensor(T.F16, 64, 2))


def test_context_budget() -> None:
    ctx = gg.Context(mem_size=1000, no_alloc=True)
    ctx.new_tensor(T.F32, 4)
    ctx.new_tensor(T.F32, 4)
    with pytest.raises(AllocationError, match="context budget exceeded"):
        ctx.new_tensor(T.F32, 4)
    assert len(ctx) == 2  # the failed tensor left nothing behind


def test_reductions_and_misc(ctx: gg.Context) -> None:
    a = ctx.new_tensor(T.F32, 10, 3, 2)
    assert ops.sum_rows(a).ne == (1, 3, 2, 1)
    assert ops.top_k(a, 4).ne == (4, 3, 2, 1)
    assert ops.argmax(ctx.new_tensor(T.F32, 10, 3)).type == T.I32
    assert ops.concat(a, a, 1).ne == (10, 6, 2, 1)
    assert ops.pad(a, 2, 1).ne == (12, 4, 2, 1)
    assert ops.swiglu(a).ne == (5, 3, 2, 1)
    assert ops.arange(ctx, 0, 10, 3).ne == (4, 1, 1, 1)
    assert ops.get_rows(ctx.new_tensor(T.Q8_0, 64, 100), ctx.new_tensor(T.I32, 7)).ne == (64, 7, 1, 1)
