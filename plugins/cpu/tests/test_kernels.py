"""Block formats: C (de)quantisation against core's numpy reference, and the dot products on both paths."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import quants
from pyggml.types import GGMLType
from pyggml_cpu import kernels

T = GGMLType
LEGACY = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
K_TYPES = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]


@pytest.mark.parametrize("t", LEGACY + K_TYPES)
def test_quantize_matches_reference_bytes(t: GGMLType) -> None:
    x = np.random.default_rng(int(t)).standard_normal((4, 256)).astype(np.float32)
    np.testing.assert_array_equal(kernels.quantize(x, t), quants.quantize(x.ravel(), t))


@pytest.mark.parametrize("t", LEGACY + K_TYPES)
def test_dequantize_matches_reference(t: GGMLType) -> None:
    x = np.random.default_rng(int(t)).standard_normal(512).astype(np.float32)
    raw = quants.quantize(x, t)
    np.testing.assert_array_equal(kernels.dequantize(raw, t, 512).ravel(), quants.dequantize(raw, t, 512))


@pytest.mark.parametrize("t", LEGACY + K_TYPES)
def test_vec_dot_close_to_float_dot(t: GGMLType, simd: str) -> None:
    rng = np.random.default_rng(100 + int(t))
    n = 1024
    w = rng.standard_normal(n).astype(np.float32)
    a = rng.standard_normal(n).astype(np.float32)
    wq = quants.quantize(w, t)
    partner = t.traits.vec_dot_type
    assert partner is not None
    aq = kernels.quantize(a, partner)
    prods = quants.dequantize(wq, t, n) * quants.dequantize(aq, partner, n)
    got = kernels.vec_dot(t, wq, aq, n)
    # Q8_1 carries its block sums rounded to fp16, so allow that rounding on the sum of magnitudes
    assert got == pytest.approx(float(prods.sum()), abs=1e-3 * float(np.abs(prods).sum()))


def test_both_paths_agree_on_q4_0_dot() -> None:
    rng = np.random.default_rng(7)
    wq = quants.quantize(rng.standard_normal(4096).astype(np.float32), T.Q4_0)
    aq = kernels.quantize(rng.standard_normal(4096).astype(np.float32), T.Q8_0)
    before = kernels.simd_level()
    try:
        kernels.set_simd_level(0)
        slow = kernels.vec_dot(T.Q4_0, wq, aq, 4096)
        kernels.set_simd_level(-1)
        fast = kernels.vec_dot(T.Q4_0, wq, aq, 4096)
    finally:
        kernels.set_simd_level(0 if before == "portable" else -1)
    assert fast == pytest.approx(slow, rel=1e-5)
