"""Reference kernels, layout family: DUP/CONT/CPY (logical order, type conversion, quantised both ways), REPEAT,
CONCAT, PAD, SET/ACC (in place or on a copy), DIAG, ARANGE, GET_ROWS (batched, F16/I32/quantised), SET_ROWS
(I32/I64 ids broadcast, F16 and quantised destinations)."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.reference.access import raw_bytes
from pyggml.types import GGMLType as T
from pyggml.types import bf16_to_f32, f32_to_bf16
from pyggml_testing.graphs import compute, f16, f32, new_ctx, q8_0_bytes, q8_0_tensor, rand, result, tensor


def test_dup_and_cont_of_a_permuted_view() -> None:
    ctx = new_ctx()
    x = rand(2, 3, 4, seed=100)
    p = ops.permute(tensor(ctx, x), 1, 2, 0, 3)  # dim0 -> 1, dim1 -> 2, dim2 -> 0
    # result ne (4, 2, 3)... numpy (3, 4, 2): element [j, k, i] is x[i, j, k]
    expected = np.array([[[x[i, j, k] for i in range(2)] for k in range(4)] for j in range(3)])
    for out in (ops.dup(p), ops.cont(p)):
        assert out.is_contiguous()
        np.testing.assert_array_equal(result(out), expected)


def test_cont_with_new_shape_uses_logical_order() -> None:
    ctx = new_ctx()
    x = rand(3, 4, seed=101)
    out = ops.cont(ops.transpose(tensor(ctx, x)), 6, 2)
    flat = [x[i, j] for j in range(4) for i in range(3)]  # x.T in row-major order
    np.testing.assert_array_equal(result(out), np.array(flat).reshape(2, 6))


@pytest.mark.parametrize(("src_t", "dst_t"), [(T.F32, T.F16), (T.F16, T.F32), (T.F32, T.BF16), (T.BF16, T.F16),
                                              (T.I32, T.F32), (T.F32, T.F32)], ids=str)
def test_cpy_converts(src_t: T, dst_t: T) -> None:
    ctx = new_ctx()
    x = np.round(rand(2, 6, seed=102, scale=100.0)) if src_t == T.I32 else rand(2, 6, seed=102)
    ts = tensor(ctx, x.astype(np.int32) if src_t == T.I32 else x, src_t)
    held = ts.numpy().astype(np.float64)
    dst = ctx.new_tensor(dst_t, 4, 3)  # other shape, same count
    out = ops.cpy(ts, dst)
    assert out.view_src is dst
    compute(out)
    conv = {T.F32: f32, T.F16: f16, T.BF16: lambda v: bf16_to_f32(f32_to_bf16(v)).astype(np.float64)}[dst_t]
    np.testing.assert_array_equal(dst.numpy(), conv(held).reshape(3, 4))


def test_cpy_f32_to_i32_truncates() -> None:
    ctx = new_ctx()
    dst = ctx.new_tensor(T.I32, 4)
    compute(ops.cpy(tensor(ctx, [2.7, -2.7, 0.4, -0.9]), dst))
    np.testing.assert_array_equal(dst.numpy(), [2, -2, 0, 0])


def test_cpy_into_a_view_leaves_the_rest() -> None:
    ctx = new_ctx()
    big = tensor(ctx, np.zeros((4, 5)))
    col = ops.view(big, (1, 4), (20,), 8)  # column 2
    compute(ops.cpy(tensor(ctx, [1.0, 2.0, 3.0, 4.0]), col))
    expected = np.zeros((4, 5))
    expected[:, 2] = [1, 2, 3, 4]
    np.testing.assert_array_equal(big.numpy(), expected)


def test_cpy_quantised_both_ways() -> None:
    ctx = new_ctx()
    x = rand(2, 64, seed=103)
    raw, held = q8_0_bytes(x)
    q = ctx.new_tensor(T.Q8_0, 64, 2)
    compute(ops.cpy(tensor(ctx, x), q))
    np.testing.assert_array_equal(raw_bytes(q), raw)  # F32 -> Q8_0 encodes as ggml's reference quantiser
    back = ctx.new_tensor(T.F32, 64, 2)
    compute(ops.cpy(q, back))
    np.testing.assert_array_equal(back.numpy(), f32(held))
    same = ctx.new_tensor(T.Q8_0, 64, 2)
    compute(ops.cpy(q, same))
    np.testing.assert_array_equal(raw_bytes(same), raw)


@pytest.mark.parametrize("ttype", [T.F32, T.F16, T.I32], ids=str)
def test_repeat_tiles(ttype: T) -> None:
    ctx = new_ctx()
    x = np.arange(6).reshape(1, 2, 3)
    like = ctx.new_tensor(T.F32, 6, 4, 3)
    out = ops.repeat(tensor(ctx, x, ttype), like)
    expected = np.array([[[x[0, j % 2, i % 3] for i in range(6)] for j in range(4)] for _ in range(3)])
    np.testing.assert_array_equal(result(out), expected)


@pytest.mark.parametrize("dim", [0, 1, 2, 3])
def test_concat(dim: int) -> None:
    ctx = new_ctx()
    a = rand(2, 2, 2, 2, seed=104)
    shape_b = [2, 2, 2, 2]
    shape_b[3 - dim] = 3
    b = rand(*shape_b, seed=105)
    got = result(ops.concat(tensor(ctx, a), tensor(ctx, b), dim))
    axis = 3 - dim
    for idx in np.ndindex(*got.shape):
        i = idx[axis]
        src, j = (a, i) if i < 2 else (b, i - 2)
        assert got[idx] == src[(*idx[:axis], j, *idx[axis + 1:])]


def test_concat_i32() -> None:
    ctx = new_ctx()
    a = np.array([[1, 2]], np.int32)
    b = np.array([[3, 4, 5]], np.int32)
    np.testing.assert_array_equal(result(ops.concat(tensor(ctx, a, T.I32), tensor(ctx, b, T.I32), 0)),
                                  [1, 2, 3, 4, 5])


def test_pad_ext() -> None:
    ctx = new_ctx()
    x = rand(2, 3, seed=106)
    got = result(ops.pad_ext(tensor(ctx, x), lp=(1, 0, 0, 0), rp=(2, 1, 0, 0)))
    assert got.shape == (3, 6)
    expected = np.zeros((3, 6))
    for i in range(2):
        for j in range(3):
            expected[i, j + 1] = x[i, j]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("op", ["set_", "acc"])
def test_set_and_acc(op: str, inplace: bool) -> None:
    ctx = new_ctx()
    a = rand(3, 4, 5, seed=107)
    b = rand(2, 2, 3, seed=108)
    ta = tensor(ctx, a)
    # view of a: rows of 3 elements, row stride 5 elements, plane stride 20, starting at element 6
    out = getattr(ops, op)(ta, tensor(ctx, b), 5 * 4, 20 * 4, 60 * 4, 6 * 4, inplace=inplace)
    expected = a.copy().ravel()
    for i2, i1, i0 in np.ndindex(*b.shape):
        k = 6 + i0 + 5 * i1 + 20 * i2
        expected[k] = b[i2, i1, i0] + (expected[k] if op == "acc" else 0.0)
    got = result(out)
    np.testing.assert_array_equal(got, f32(expected).reshape(a.shape))
    np.testing.assert_array_equal(ta.numpy(), got if inplace else a)


def test_diag() -> None:
    ctx = new_ctx()
    x = rand(2, 1, 3, seed=109)
    got = result(ops.diag(tensor(ctx, x)))
    for b, i, j in np.ndindex(2, 3, 3):
        assert got[b, i, j] == (x[b, 0, i] if i == j else 0.0)


def test_arange() -> None:
    ctx = new_ctx()
    out = ops.arange(ctx, 1.0, 3.0, 0.5)
    np.testing.assert_array_equal(result(out), [1.0, 1.5, 2.0, 2.5])
    np.testing.assert_array_equal(result(ops.arange(ctx, 5.0, 0.0, -2.0)), [5.0, 3.0, 1.0])


@pytest.mark.parametrize("ttype", [T.F32, T.F16, T.BF16, T.I32], ids=str)
def test_get_rows_batched(ttype: T) -> None:
    ctx = new_ctx()
    x = np.round(rand(2, 3, 5, 4, seed=110, scale=50.0))  # ne (4, 5 rows, 3, 2)
    ids = np.array([[[4, 0], [1, 1], [2, 3]], [[0, 0], [3, 2], [4, 4]]], np.int32)  # ne (2, 3, 2)
    tx = tensor(ctx, x.astype(np.int32) if ttype == T.I32 else x, ttype)
    out = ops.get_rows(tx, tensor(ctx, ids, T.I32))
    assert out.type == (T.I32 if ttype == T.I32 else T.F32) and out.ne == (4, 2, 3, 2)
    got = result(out)
    for i3, i2, i in np.ndindex(2, 3, 2):
        np.testing.assert_array_equal(got[i3, i2, i], x[i3, i2, ids[i3, i2, i]])


def test_get_rows_quantised_and_bad_id() -> None:
    from pyggml.errors import ComputeError

    ctx = new_ctx()
    q, _, held = q8_0_tensor(ctx, rand(4, 32, seed=111))
    got = result(ops.get_rows(q, tensor(ctx, np.array([3, 0, 3], np.int32), T.I32)))
    np.testing.assert_array_equal(got, f32(held[[3, 0, 3]]))
    with pytest.raises(ComputeError, match="GET_ROWS: row id 4 is outside"):
        result(ops.get_rows(q, tensor(ctx, np.array([4], np.int32), T.I32)))


@pytest.mark.parametrize("itype", [T.I32, T.I64], ids=str)
def test_set_rows_broadcast_ids_into_f16(itype: T) -> None:
    ctx = new_ctx()
    dst = tensor(ctx, np.zeros((2, 2, 6, 4)), T.F16)  # ne (4, 6 rows, 2, 2)
    rows = rand(2, 2, 3, 4, seed=112)
    ids = np.array([[[5, 0, 2]]], np.int64)  # ne (3, 1, 1): broadcast over dims 2 and 3
    out = ops.set_rows(dst, tensor(ctx, rows), tensor(ctx, ids.astype(itype.traits.np_dtype), itype))
    assert out.view_src is dst
    compute(out)
    expected = np.zeros((2, 2, 6, 4))
    for i3, i2, i in np.ndindex(2, 2, 3):
        expected[i3, i2, ids[0, 0, i]] = f16(rows[i3, i2, i])
    np.testing.assert_array_equal(dst.numpy(), expected)


def test_set_rows_quantised_leaves_other_rows_bytes() -> None:
    ctx = new_ctx()
    q, raw, _ = q8_0_tensor(ctx, rand(4, 32, seed=113))
    new = rand(1, 32, seed=114)
    new_raw, _ = q8_0_bytes(new)
    compute(ops.set_rows(q, tensor(ctx, new), tensor(ctx, np.array([2], np.int32), T.I32)))
    expected = raw.copy()
    expected[2 * 34 : 3 * 34] = new_raw
    np.testing.assert_array_equal(raw_bytes(q), expected)


def test_cont_of_a_strided_quantised_view() -> None:
    ctx = new_ctx()
    q, _, held = q8_0_tensor(ctx, rand(4, 32, seed=115))
    every_other = ops.view(q, (32, 2), (2 * q.nb[1],), 0)  # rows 0 and 2
    out = ops.cont(every_other)
    assert out.type == T.Q8_0
    np.testing.assert_allclose(result(out), held[[0, 2]], rtol=1e-6)  # re-encoding Q8_0 values is stable
