"""The R8 weight layout (csrc/repack.h) and the cpu_repack buffer type: the conversion round-trips, every SIMD level
computes the portable kernel's bits, a MUL_MAT over repacked weights gives the R8 kernel's bits column by column and
agrees with the plain kernels (bit for bit where R8 keeps ggml's order), and misuse is an error naming the tensor."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops, quants
from pyggml.alloc import alloc_ctx_tensors
from pyggml.alloc.gallocr import GraphAllocator
from pyggml.backend.registry import devices, get_device
from pyggml.context import Context
from pyggml.errors import ComputeError, PyGGMLError
from pyggml.graph import build_graph
from pyggml.tensor import TensorFlag
from pyggml.types import GGMLType
from pyggml_cpu import native
from pyggml_cpu._pgc import ffi, lib
from pyggml_cpu.repack import RepackBuffer, from_r8, to_r8

T = GGMLType
NCOLS = (7, 27, 262)
"""Columns in the prompt-kernel tests: 7 (passes of 4, 2 and 1 columns), 27 (a wide pass over K types with AVX512-VNNI:
runs of 12, 8, 4, 2 and 1 columns on one unpacked block) and 262 (two calls, R8_MAX_COLS = 256 and 6)."""
R8 = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K]
GGML_ORDER = {T.Q4_1}
"""The R8 types whose kernels sum in ggml's AVX2 order (the others sum each block in integers first)."""


def weights(t: GGMLType, rows: int, k: int, seed: int = 0) -> np.ndarray:
    w = np.random.default_rng(seed).standard_normal((rows, k)).astype(np.float32)
    return quants.quantize(w.ravel(), t)


def r8_matmul(t: GGMLType, packed: np.ndarray, rows: int, k: int, acts: np.ndarray) -> np.ndarray:
    """The R8 kernel of the level in use: rows x each activation row of `acts` (already quantised to t's partner),
    in as many groups and columns a call as a matmul passes."""
    out = np.empty((len(acts), rows), dtype=np.float32)
    y = np.ascontiguousarray(acts)
    rc = lib.pgc_r8_matmul(int(t), ffi.from_buffer(packed), rows, k, ffi.from_buffer(y), len(acts),
                           ffi.from_buffer("float[]", out))
    assert rc == 0
    return out


@pytest.mark.parametrize("t", R8)
def test_round_trip(t: GGMLType) -> None:
    k = 3 * t.traits.blck_size
    plain = weights(t, 24, k)
    packed = to_r8(t, plain, 24, k)
    assert packed.size == plain.size and not np.array_equal(packed, plain)
    np.testing.assert_array_equal(from_r8(t, packed, 24, k), plain)


@pytest.mark.parametrize("t", R8)
@pytest.mark.parametrize("ncols", NCOLS)
def test_every_level_gives_the_portable_bits_close_to_the_float_dot(t: GGMLType, ncols: int) -> None:
    """Two groups and `ncols` columns a call (ncols: every pass width of the prompt kernels), and each column alone
    (mat-vec)."""
    rows, k = 16, 512
    plain = weights(t, rows, k, 1)
    packed = to_r8(t, plain, rows, k)
    partner = t.traits.vec_dot_type
    assert partner is not None
    a = np.random.default_rng(2).standard_normal((ncols, k)).astype(np.float32)
    acts = np.stack([native.quantize(a[c], partner) for c in range(ncols)])
    before = native.simd_level()
    try:
        native.set_simd_level(0)
        want = r8_matmul(t, packed, rows, k, acts)
        for level in range(1, 5):
            if native.SIMD_LEVELS.get(level) is None or native.set_simd_level(level) != native.SIMD_LEVELS[level]:
                continue
            np.testing.assert_array_equal(r8_matmul(t, packed, rows, k, acts), want,
                                          err_msg=f"level {native.simd_level()}")
            for c in range(ncols):
                np.testing.assert_array_equal(r8_matmul(t, packed, rows, k, acts[c : c + 1])[0], want[c],
                                              err_msg=f"level {native.simd_level()}, column {c} alone")
    finally:
        native.set_simd_level(before)
    w = quants.dequantize(plain, t, rows * k).reshape(rows, k)
    exact = quants.dequantize(acts.ravel(), partner, ncols * k).reshape(ncols, k) @ w.T
    scale = np.abs(quants.dequantize(acts.ravel(), partner, ncols * k).reshape(ncols, k)) @ np.abs(w).T
    assert np.all(np.abs(want - exact) <= 1e-3 * scale)


def extreme_block(t: GGMLType) -> np.ndarray:
    """One block of t with every value and every scale (and min) at its largest."""
    f16 = lambda v: np.frombuffer(np.float16(v).tobytes(), np.uint8)  # noqa: E731
    blk = np.full(t.traits.type_size, 0xFF, np.uint8)  # nibbles 15, 6-bit scales and mins 63, fifth / high bits set
    if t == T.Q6_K:
        blk[192:208] = 0x80  # scales -128: (63 - 32) x -128 per value
        blk[208:210] = f16(0.5)
    else:
        blk[0:2], blk[2:4] = f16(0.5), f16(0.25)
    return blk


@pytest.mark.parametrize("t", [T.Q4_K, T.Q5_K, T.Q6_K])
def test_k_extreme_values_give_the_portable_bits_on_every_level(t: GGMLType) -> None:
    """Every value and every scale and min at its largest against activations that quantise to all -128 or all 127:
    the integer sums at their largest (a Q4_K sub-block's 32 products reach 61440, past 16 bits), the case the VNNI
    kernels once wrapped."""
    rows, k = 16, 512
    plain = np.tile(extreme_block(t), rows * k // 256)
    packed = to_r8(t, plain, rows, k)
    acts = np.stack([native.quantize(np.full(k, v, np.float32), T.Q8_K) for v in (1.0, -1.0, 1.0, -1.0)])
    w = quants.dequantize(plain, t, rows * k).reshape(rows, k)
    exact = quants.dequantize(acts.ravel(), T.Q8_K, 4 * k).reshape(4, k) @ w.T
    before = native.simd_level()
    try:
        native.set_simd_level(0)
        want = np.tile(r8_matmul(t, packed, rows, k, acts), (4, 1))
        np.testing.assert_allclose(want[:4], exact, rtol=1e-5)
        for level in range(1, 5):
            if native.SIMD_LEVELS.get(level) is None or native.set_simd_level(level) != native.SIMD_LEVELS[level]:
                continue
            for cols in (np.tile(acts, (4, 1)), acts, acts[:1]):  # 16 columns (a wide pass), four, one
                np.testing.assert_array_equal(r8_matmul(t, packed, rows, k, cols), want[: len(cols)],
                                              err_msg=f"level {native.simd_level()}")
    finally:
        native.set_simd_level(before)


def repack_buft():  # type: ignore[no-untyped-def]
    (buft,) = get_device("cpu").extra_buffer_types()
    return buft


@pytest.mark.parametrize("t", R8)
@pytest.mark.parametrize("n", [1, 3, 17])
def test_mul_mat_over_repacked_weights_gives_the_r8_kernels_bits(t: GGMLType, n: int) -> None:
    """Columns in groups of up to eight (R8_COLS) give each column's one-column bits; the plain kernels' bits where
    R8 keeps ggml's order, else their result within float rounding."""
    rows, k = 48, 256
    raw = weights(t, rows, k, 3)
    x = np.random.default_rng(4).standard_normal((n, k)).astype(np.float32)
    cpu = get_device("cpu").init_backend("n_threads=2")
    got = {}
    for where in ("plain", "repack"):
        wctx = Context(no_alloc=True)
        w = wctx.new_tensor(t, k, rows, name="w")
        buft = repack_buft() if where == "repack" else get_device("cpu").buffer_type()
        wbuf = alloc_ctx_tensors(wctx, buft)
        assert wbuf is not None
        wbuf.set_tensor(w, raw)
        assert isinstance(wbuf, RepackBuffer) == (where == "repack")
        np.testing.assert_array_equal(wbuf.get_tensor(w), raw)  # ggml's bytes back
        ctx = Context(no_alloc=True)
        xt = ctx.new_tensor(T.F32, k, n, name="x")
        xt.flags |= TensorFlag.INPUT
        y = ops.mul_mat(w, xt)
        g = build_graph(y)
        GraphAllocator(get_device("cpu").buffer_type()).alloc_graph(g)
        xt.set(x)
        cpu.graph_compute(g)
        got[where] = y.numpy().reshape(n, rows)
    partner = t.traits.vec_dot_type
    assert partner is not None
    acts = np.stack([native.quantize(x[c], partner) for c in range(n)])
    np.testing.assert_array_equal(got["repack"], r8_matmul(t, to_r8(t, raw, rows, k), rows, k, acts))
    if t in GGML_ORDER:
        np.testing.assert_array_equal(got["repack"], got["plain"])  # the same sums in the same order
    else:
        np.testing.assert_allclose(got["repack"], got["plain"], rtol=0, atol=1e-5 * float(np.abs(got["plain"]).max()))


def test_partial_writes_and_reads_convert_only_their_groups() -> None:
    t, rows, k = T.Q4_1, 32, 64
    raw = weights(t, rows, k, 5)
    ctx = Context(no_alloc=True)
    w = ctx.new_tensor(t, k, rows, name="w")
    buf = alloc_ctx_tensors(ctx, repack_buft())
    assert isinstance(buf, RepackBuffer)
    buf.set_tensor(w, raw)
    row = raw.size // rows
    patch = weights(t, 1, k, 6)
    buf.set_tensor(w, patch, 13 * row)  # one row, inside the second group
    want = raw.copy()
    want[13 * row : 14 * row] = patch
    np.testing.assert_array_equal(buf.get_tensor(w), want)
    np.testing.assert_array_equal(buf.get_tensor(w, 7, 100), want[7:107])
    buf.memset_tensor(w, 0)
    np.testing.assert_array_equal(buf.get_tensor(w), np.zeros_like(raw))


def test_misuse_names_the_tensor() -> None:
    t, rows, k = T.Q8_0, 16, 64
    wctx = Context(no_alloc=True)
    w = wctx.new_tensor(t, k, rows, name="emb")
    buf = alloc_ctx_tensors(wctx, repack_buft())
    assert isinstance(buf, RepackBuffer)
    buf.set_tensor(w, weights(t, rows, k))
    assert buf.host_array() is None
    with pytest.raises(PyGGMLError, match="'emb'"):
        buf.read(0, 16)
    with pytest.raises(PyGGMLError, match="'emb'"):
        buf.write(8, np.zeros(4, np.uint8))
    ctx = Context(no_alloc=True)
    ids = ctx.new_tensor(T.I32, 2, name="ids")
    ids.flags |= TensorFlag.INPUT
    g = build_graph(ops.get_rows(w, ids))  # GET_ROWS would read R8 bytes as ggml's
    GraphAllocator(get_device("cpu").buffer_type()).alloc_graph(g)
    ids.set(np.array([1, 2], np.int32))
    cpu = get_device("cpu").init_backend()
    with pytest.raises(ComputeError, match=r"GET_ROWS.*'emb'.*repacked"):
        cpu.graph_compute(g)
    assert get_device("cpu").supports_buft(repack_buft())
    if any(d.name == "blas" for d in devices()):
        assert not get_device("blas").supports_buft(repack_buft())
        assert get_device("blas").extra_buffer_types() == []


def test_weights_go_to_cpu_repack_only_where_a_simd_kernel_reads_them() -> None:
    """The portable R8 kernel (arm64, PYGGML_CPU_PORTABLE) is slower than those levels' plain kernels."""
    buft = repack_buft()
    before = native.simd_level()
    try:
        native.set_simd_level(0)
        assert not buft.takes_weight(T.Q4_1, (576, 1536))
        if native.set_simd_level(-1) != "portable":  # an x86 level
            assert buft.takes_weight(T.Q4_1, (576, 1536)) and buft.takes_weight(T.Q8_0, (64, 16))
            assert buft.takes_weight(T.Q4_K, (256, 16)) and buft.takes_weight(T.Q6_K, (256, 16))
            assert not buft.takes_weight(T.Q4_1, (576, 12)) and not buft.takes_weight(T.Q3_K, (256, 16))
    finally:
        native.set_simd_level(before)


def test_conversions_check_their_sizes_and_clear_reads_back_as_bytes() -> None:
    with pytest.raises(PyGGMLError, match="take 27200000 bytes, not 16"):
        from_r8(T.Q8_0, np.zeros(16, np.uint8), 800000, 32)  # used to read and write far past both arrays
    with pytest.raises(PyGGMLError, match="no R8 layout"):
        to_r8(T.Q3_K, np.zeros(8 * 110, np.uint8), 8, 256)
    ctx = Context(no_alloc=True)
    w = ctx.new_tensor(T.Q8_0, 64, 16, name="w")
    buf = alloc_ctx_tensors(ctx, repack_buft())
    assert isinstance(buf, RepackBuffer)
    buf.set_tensor(w, weights(T.Q8_0, 16, 64))
    w.name = "renamed"  # a loader may rename what it placed: errors name the tensor as it is now
    with pytest.raises(PyGGMLError, match="'renamed'"):
        buf.read(0, 4)
    for value in (0, 7):  # R8 stores Q8_0 values + 128: the clear goes through the conversion
        buf.clear(value)
        np.testing.assert_array_equal(buf.get_tensor(w), np.full(w.nbytes(), value, np.uint8))
