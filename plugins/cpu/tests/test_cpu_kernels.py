"""Block formats: C (de)quantisation against core's numpy reference, and the dot products on both paths."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import quants
from pyggml.types import GGMLType
from pyggml_cpu import native

T = GGMLType
LEGACY = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
K_TYPES = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]


@pytest.mark.parametrize("t", LEGACY + K_TYPES)
def test_quantize_matches_reference_bytes(t: GGMLType) -> None:
    x = np.random.default_rng(int(t)).standard_normal((4, 256)).astype(np.float32)
    np.testing.assert_array_equal(native.quantize(x, t), quants.quantize(x.ravel(), t))


@pytest.mark.parametrize("t", LEGACY + K_TYPES)
def test_dequantize_matches_reference(t: GGMLType) -> None:
    x = np.random.default_rng(int(t)).standard_normal(512).astype(np.float32)
    raw = quants.quantize(x, t)
    np.testing.assert_array_equal(native.dequantize(raw, t, 512).ravel(), quants.dequantize(raw, t, 512))


@pytest.mark.parametrize("t", LEGACY + K_TYPES)
def test_vec_dot_close_to_float_dot(t: GGMLType, simd: str) -> None:
    rng = np.random.default_rng(100 + int(t))
    n = 1024
    w = rng.standard_normal(n).astype(np.float32)
    a = rng.standard_normal(n).astype(np.float32)
    wq = quants.quantize(w, t)
    partner = t.traits.vec_dot_type
    assert partner is not None
    aq = native.quantize(a, partner)
    prods = quants.dequantize(wq, t, n) * quants.dequantize(aq, partner, n)
    got = native.vec_dot(t, wq, aq, n)
    # Q8_1 carries its block sums rounded to fp16, so allow that rounding on the sum of magnitudes
    assert got == pytest.approx(float(prods.sum()), abs=1e-3 * float(np.abs(prods).sum()))


def test_both_paths_agree_on_q4_0_dot() -> None:
    rng = np.random.default_rng(7)
    wq = quants.quantize(rng.standard_normal(4096).astype(np.float32), T.Q4_0)
    aq = native.quantize(rng.standard_normal(4096).astype(np.float32), T.Q8_0)
    before = native.simd_level()
    try:
        native.set_simd_level(0)
        slow = native.vec_dot(T.Q4_0, wq, aq, 4096)
        native.set_simd_level(-1)
        fast = native.vec_dot(T.Q4_0, wq, aq, 4096)
    finally:
        native.set_simd_level(0 if before == "portable" else -1)
    assert fast == pytest.approx(slow, rel=1e-5)


@pytest.mark.parametrize("level", [1, 2, 3, 4, 5, 6])
def test_every_simd_level_agrees_with_portable(level: int) -> None:
    """Each kernel level this CPU has (x86-64 AVX2, +VNNI, +AVX-512; arm64 NEON, +SDOT) against the portable ones."""
    rng = np.random.default_rng(level)
    n = 2048
    rows = {t: quants.quantize(rng.standard_normal(n).astype(np.float32), t) for t in (T.Q4_0, T.Q4_K, T.Q6_K)}
    acts = rng.standard_normal(n).astype(np.float32)
    partners = {t: native.quantize(acts, t.traits.vec_dot_type) for t in rows}  # type: ignore[arg-type]
    w32 = rng.standard_normal(n).astype(np.float32)
    try:
        native.set_simd_level(0)
        want = {t: native.vec_dot(t, rows[t], partners[t], n) for t in rows}
        want_f = native.vec_dot(T.F32, w32, acts, n)
        got_level = native.set_simd_level(level)
        if got_level != native.SIMD_LEVELS[level]:
            pytest.skip(f"this CPU has no {native.SIMD_LEVELS[level]}")
        for t in rows:
            assert native.vec_dot(t, rows[t], partners[t], n) == pytest.approx(want[t], rel=1e-5, abs=1e-4)
        assert native.vec_dot(T.F32, w32, acts, n) == pytest.approx(want_f, rel=1e-5, abs=1e-4)
    finally:
        native.set_simd_level(-1)


@pytest.mark.parametrize("t", [*LEGACY, T.Q8_1, *K_TYPES, T.Q8_K])
def test_non_finite_blocks_match_reference_bytes(t: GGMLType) -> None:
    """A block holding a NaN or an infinity becomes pyggml.quants.nan_block (NaN scales, zero quants), the other
    blocks are quantised as usual: the same bytes as the reference."""
    bs = t.traits.blck_size
    x = np.random.default_rng(int(t)).standard_normal((3, 4 * bs)).astype(np.float32)
    x[0, 3], x[0, bs + 5], x[0, 3 * bs - 1], x[1, 2 * bs], x[2, bs:2 * bs] = np.nan, np.inf, -np.inf, np.nan, np.nan
    np.testing.assert_array_equal(native.quantize(x, t), quants.quantize(x.ravel(), t))


@pytest.mark.parametrize("level", [0, 1, 2, 3, 4, 5, 6])
def test_nan_blocks_give_nan_dots_at_every_simd_level(level: int) -> None:
    """A NaN block in the weights, or in the activations (a NaN scale in their dot partner), makes the dot NaN."""
    rng = np.random.default_rng(level)
    n = 1024
    try:
        if native.set_simd_level(level) != native.SIMD_LEVELS[level]:
            pytest.skip(f"this CPU has no {native.SIMD_LEVELS[level]}")
        for t in LEGACY + K_TYPES:
            partner = t.traits.vec_dot_type
            assert partner is not None
            w, a = rng.standard_normal((2, n)).astype(np.float32)
            bad = w.copy()
            bad[n // 2 + 1] = np.inf
            wq, aq = quants.quantize(w, t), native.quantize(a, partner)
            assert np.isfinite(native.vec_dot(t, wq, aq, n)), t
            assert np.isnan(native.vec_dot(t, quants.quantize(bad, t), aq, n)), t
            assert np.isnan(native.vec_dot(t, wq, native.quantize(bad, partner), n)), t
    finally:
        native.set_simd_level(-1)
