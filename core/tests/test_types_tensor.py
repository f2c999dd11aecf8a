"""Types, F16/BF16 conversion and tensor facts (strides, nbytes, contiguity, read-back)."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.errors import AllocationError, ShapeError, UnsupportedTypeError
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
