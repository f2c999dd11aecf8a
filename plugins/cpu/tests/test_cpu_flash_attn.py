"""FLASH_ATTN_EXT's tiled cpu kernel where the conformance suite does not look: KV-cache cells that every query masks
(-inf) hold garbage (NaN), as unused cells of a cache may, and change nothing; and the result does not depend on
how the keys are split between threads (4 threads over 2 KV heads split them), nor on whether the heads share the
cache's rows (as a KV cache's do: each thread then takes a range of keys for every head, block by block); and two
sequences in one batch (each query row masks the other's cells) do not see each other's NaN, though their queries
share the kernel's blocks of keys."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import Device
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml.types import GGMLType, row_size

D, N_KV, USED, HEADS, KV_HEADS = 64, 200, 150, 8, 2


def _attend(dev: Device, kv_type: GGMLType, garbage: bool, n_threads: int, shared_rows: bool = False) -> np.ndarray:
    rng = np.random.default_rng(3)
    ctx = Context(no_alloc=True)
    q = ctx.new_tensor("f32", D, 1, HEADS)
    if shared_rows:  # a cache row holds every head's values; a head's K / V is a view of its slices
        caches = ctx.new_tensor(kv_type, D * KV_HEADS, N_KV), ctx.new_tensor(kv_type, D * KV_HEADS, N_KV)
        k, v = (ops.view(c, (D, N_KV, KV_HEADS), (c.nb[1], row_size(kv_type, D))) for c in caches)
    else:
        k, v = caches = ctx.new_tensor(kv_type, D, N_KV, KV_HEADS), ctx.new_tensor(kv_type, D, N_KV, KV_HEADS)
    mask = ctx.new_tensor("f16", N_KV, 1)
    out = ops.flash_attn_ext(q, k, v, mask, scale=0.125)
    g = build_graph(out)
    assert alloc_ctx_tensors(ctx, dev.buffer_type()) is not None
    q.set(rng.standard_normal((HEADS, 1, D)).astype(np.float32))
    kv = rng.standard_normal((2, KV_HEADS, N_KV, D)).astype(np.float32)
    kv[:, :, USED:] = np.nan if garbage else 0.0  # the cells past the used ones
    for cache, values in zip(caches, kv, strict=True):
        cache.set(values.transpose(1, 0, 2).reshape(N_KV, KV_HEADS * D) if shared_rows else values)
    m = np.zeros((1, N_KV), np.float32)
    m[0, USED:] = -np.inf
    mask.set(m)
    be = dev.init_backend(f"n_threads={n_threads}")
    try:
        be.graph_compute(g)
        return out.numpy().copy()
    finally:
        be.free()


@pytest.mark.parametrize("kv_type", [GGMLType.F16, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_1])
def test_masked_cells_holding_nan_change_nothing(cpu_device: Device, simd: str, kv_type: GGMLType) -> None:
    clean = _attend(cpu_device, kv_type, garbage=False, n_threads=2)
    assert np.isfinite(clean).all()
    for n_threads in (1, 2, 4):
        got = _attend(cpu_device, kv_type, garbage=True, n_threads=n_threads)
        np.testing.assert_allclose(got, clean, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kv_type", [GGMLType.F16, GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_1])
def test_heads_sharing_the_cache_rows_give_what_separate_heads_give(cpu_device: Device, simd: str,
                                                                    kv_type: GGMLType) -> None:
    want = _attend(cpu_device, kv_type, garbage=False, n_threads=1)
    for n_threads in (1, 2, 4):
        got = _attend(cpu_device, kv_type, garbage=True, n_threads=n_threads, shared_rows=True)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _two_sequences(dev: Device, kv_type: GGMLType, poison: str, n_threads: int) -> np.ndarray:
    """Query rows 0-3 see keys [0, USED) only, rows 4-7 keys [USED, N_KV) only; `poison` ("k", "v" or "") puts a
    NaN into every K or V row of the second sequence's keys."""
    rng = np.random.default_rng(5)
    ctx = Context(no_alloc=True)
    rows = 8
    q = ctx.new_tensor("f32", D, rows, HEADS)
    k, v = ctx.new_tensor(kv_type, D, N_KV, KV_HEADS), ctx.new_tensor(kv_type, D, N_KV, KV_HEADS)
    mask = ctx.new_tensor("f16", N_KV, rows)
    out = ops.flash_attn_ext(q, k, v, mask, scale=0.125)
    g = build_graph(out)
    assert alloc_ctx_tensors(ctx, dev.buffer_type()) is not None
    q.set(rng.standard_normal((HEADS, rows, D)).astype(np.float32))
    kv = rng.standard_normal((2, KV_HEADS, N_KV, D)).astype(np.float32)
    if poison:
        kv["kv".index(poison), :, USED:, D // 2] = np.nan
    k.set(kv[0])
    v.set(kv[1])
    m = np.full((rows, N_KV), -np.inf, np.float32)
    m[:4, :USED] = 0.0
    m[4:, USED:] = 0.0
    mask.set(m)
    be = dev.init_backend(f"n_threads={n_threads}")
    try:
        be.graph_compute(g)
        return out.numpy().copy()  # (rows, HEADS, D)
    finally:
        be.free()


@pytest.mark.parametrize("kv_type", [GGMLType.F16, GGMLType.F32, GGMLType.Q8_0, GGMLType.Q4_0])
def test_a_sequence_never_reads_the_cells_it_masks(cpu_device: Device, simd: str, kv_type: GGMLType) -> None:
    clean = _two_sequences(cpu_device, kv_type, "", 2)
    assert np.isfinite(clean).all()
    for poison, n_threads in (("k", 1), ("v", 2), ("k", 4)):
        got = _two_sequences(cpu_device, kv_type, poison, n_threads)
        np.testing.assert_allclose(got[:4], clean[:4], rtol=1e-5, atol=1e-6)
        assert np.isnan(got[4:]).any(axis=-1).all(), "every query of the poisoned sequence reads a NaN"
