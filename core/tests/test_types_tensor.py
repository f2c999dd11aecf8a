"""Types, F16/BF16 conversion and tensor facts (strides, nbytes, contiguity, read-back)."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.errors import AllocationError, ShapeError, UnsupportedTypeError
from pyggml.tensor import label
from pyggml.types import GGMLType, bf16_to_f32, f32_to_bf16, parse_type, row_size, type_traits


def test_type_ids_and_sizes_match_gguf() -> None:
    for t in GGMLType:
        q = gguf.GGMLQuantizationType[t.name]
        assert int(q) == int(t), t
        blck, size = gguf.GGML_QUANT_SIZES[q]
        if t is GGMLType.Q8_1:  # gguf-py still lists f32 d and s (40 bytes); ggml's block_q8_1 holds two f16s
            assert (blck, size, type_traits(t).type_size) == (32, 40, 36)
            continue
        assert (type_traits(t).blck_size, type_traits(t).type_size) == (blck, size), t


def test_parse_type_and_row_size() -> None:
    assert parse_type("q4_k") is GGMLType.Q4_K and parse_type(8) is GGMLType.Q8_0
    assert row_size(GGMLType.Q4_0, 4096) == 4096 // 32 * 18
    with pytest.raises(UnsupportedTypeError, match="unknown ggml type 'q9_0'"):
        parse_type("q9_0")
    with pytest.raises(ShapeError, match="multiple of q4_K's block size 256"):
        row_size(GGMLType.Q4_K, 100)


def test_bf16_round_to_nearest_even() -> None:
    x = np.array([1.0, 1.00390625, 1.01171875, -2.5, np.inf, -np.inf, 3.0e38], dtype=np.float32)
    bits = f32_to_bf16(x)
    # 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even mantissa (1.0) wins; 1 + 3*2^-8 rounds up to 1 + 2^-6
    assert bf16_to_f32(bits).tolist()[:4] == [1.0, 1.0, 1.015625, -2.5]
    assert np.isinf(bf16_to_f32(bits)[4:6]).all()
    nan = f32_to_bf16(np.array([np.nan], dtype=np.float32))
    assert np.isnan(bf16_to_f32(nan)).all()


def test_strides_nbytes_contiguity() -> None:
    ctx = gg.Context(no_alloc=True)
    a = ctx.new_tensor(gg.F32, 5, 3, 2)
    assert a.nb == (4, 20, 60, 120) and a.nbytes() == 120 and a.is_contiguous()
    t = ops.transpose(a)
    assert not t.is_contiguous() and t.is_transposed() and t.nbytes() == 120
    q = ctx.new_tensor(GGMLType.Q4_0, 64, 3)
    assert q.nb == (18, 36, 108, 108) and q.nbytes() == 108
    assert a.shape == (2, 3, 5) and a.n_dims == 3


def test_numpy_read_back_and_set() -> None:
    ctx = gg.Context(mem_size=1 << 16)
    a = ctx.new_tensor(gg.F32, 4, 3, name="a")
    a.set(np.arange(12, dtype=np.float32))
    assert a.numpy().tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).tolist()
    h = ctx.new_tensor(gg.BF16, 4)
    h.set(np.array([1.5, -2.0, 3.25, 0.5], dtype=np.float32))
    assert h.numpy().tolist() == [1.5, -2.0, 3.25, 0.5]
    with pytest.raises(ShapeError, match=r"'a' f32 ne=\[4, 3, 1, 1\] holds 12 elements"):
        a.set(np.zeros(5))
    lazy = gg.Context(no_alloc=True).new_tensor(gg.F32, 4, name="lazy")
    with pytest.raises(AllocationError, match=r"'lazy'.*has no buffer"):
        lazy.numpy()


def test_context_with_memory_runs_a_graph() -> None:
    from pyggml.backend import init_backend

    ctx = gg.Context(mem_size=1 << 16)
    a = ctx.new_tensor(gg.F32, 4, 3)
    b = ctx.new_tensor(gg.F32, 4)
    a.set(np.arange(12))
    b.set(np.ones(4))
    y = ops.add(a, b)
    init_backend("numpy").graph_compute(gg.build_graph(y))
    assert y.numpy().tolist() == (np.arange(12).reshape(3, 4) + 1).tolist()
    with pytest.raises(UnsupportedTypeError):
        ops.add(ctx.new_tensor(GGMLType.I32, 4), b)


def test_set_checks_the_numpy_shape() -> None:
    """ne=(64, 128) is numpy shape (128, 64): a (64, 128) array has the right count but would be written
    transposed, so it is refused; 1-D arrays, the numpy shape (with or without leading 1s) and flat=True pass."""
    ctx = gg.Context(mem_size=1 << 17)
    w = ctx.new_tensor(gg.F32, 64, 128, name="w1")
    assert w.shape == (128, 64)
    good = np.arange(64 * 128, dtype=np.float32).reshape(128, 64)
    for arr in (good, good.reshape(-1), good.reshape(1, 128, 64), good.reshape(1, 1, 128, 64)):
        w.set(arr)
        np.testing.assert_array_equal(w.numpy(), good)
    with pytest.raises(ShapeError, match=r"tensor 'w1' f32 ne=\[64, 128, 1, 1\] has numpy shape \(128, 64\) \(numpy "
                       r"order is ne reversed\), got an array of shape \(64, 128\)"):
        w.set(good.reshape(64, 128))
    with pytest.raises(ShapeError, match=r"got an array of shape \(128, 64, 1\)"):
        w.set(good.reshape(128, 64, 1))
    w.set(good.T, flat=True)                                   # any shape, in C order, when asked for
    np.testing.assert_array_equal(w.numpy(), good.T.reshape(128, 64))
    col = ctx.new_tensor(gg.F32, 1, 3, name="col")             # ne=(1, 3): numpy (3, 1); the inner 1 stays
    col.set(np.ones((3, 1)))
    col.set(np.ones(3))
    with pytest.raises(ShapeError, match=r"'col'.*numpy shape \(3, 1\).*shape \(1, 3\)"):
        col.set(np.ones((1, 3)))
    one = ctx.new_tensor(gg.F32, 1, name="one")
    one.set(2.5)                                               # a scalar into a one-element tensor
    assert one.numpy().tolist() == [2.5]


def test_quantised_set_checks_the_shape_too() -> None:
    ctx = gg.Context(mem_size=1 << 16)
    q = ctx.new_tensor(GGMLType.Q4_0, 64, 2, name="q")
    x = np.linspace(-1, 1, 128, dtype=np.float32).reshape(2, 64)
    q.set(x)
    assert np.abs(q.numpy() - x).max() < 0.1
    with pytest.raises(ShapeError, match=r"'q' q4_0 .* got an array of shape \(64, 2\)"):
        q.set(x.reshape(64, 2))


def test_unnamed_tensors_are_labelled_and_missing_buffers_say_what_to_do() -> None:
    ctx = gg.Context(no_alloc=True)
    a = ctx.new_tensor(gg.F32, 4)
    y = ops.add(a, a)
    assert (label(a), label(y), label(ops.reshape(a, 2, 2)), label(ctx.view_tensor(a))) == (
        "<unnamed leaf>", "<unnamed ADD node>", "<unnamed RESHAPE node>", "<unnamed view>")
    assert label(a.set_name("a")) == "'a'"
    with pytest.raises(AllocationError, match=r"tensor <unnamed ADD node> f32 ne=\[4, 1, 1, 1\] has no buffer yet.*"
                       r"Scheduler.alloc_graph\(graph\).*Scheduler.graph_compute\(graph\), then read it"):
        y.numpy()
    with pytest.raises(AllocationError, match=r"'a' .* has no buffer yet, so nothing can write into it: place it "
                       r"first: alloc_ctx_tensors"):
        a.set(np.zeros(4))


def test_written_marks_follow_every_write_path() -> None:
    """Tensor.set, Buffer.set_tensor / memset_tensor and writes through a view mark the data owner written."""
    ctx = gg.Context(mem_size=1 << 16)
    a, b, c = (ctx.new_tensor(gg.F32, 4, name=n) for n in "abc")
    v = ops.view(a, (2,), offset=8)
    assert not (a.written or b.written or c.written)
    v.set(np.ones(2))
    assert a.written and not v.written
    assert ctx.buffer is not None
    ctx.buffer.set_tensor(b, np.zeros(4, np.float32).view(np.uint8))
    ctx.buffer.memset_tensor(c, 0)
    assert b.written and c.written
