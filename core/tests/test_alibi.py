"""pyggml.ops.attention.alibi: the one definition of ALiBi's (n_head_log2, m0, m1) every backend passes to its
kernels, and the slopes the numpy reference applies."""

from __future__ import annotations

import numpy as np

from pyggml.ops.attention import alibi
from pyggml.reference.kernels.attention import alibi_slopes


def test_without_bias_every_slope_is_one_by_the_formula() -> None:
    a = alibi(12, 0.0)
    assert a == (1, 1.0, 1.0)
    assert [a.slope(h) for h in range(12)] == [1.0] * 12
    np.testing.assert_array_equal(alibi_slopes(12, 0.0), np.ones(12))


def test_ggml_parameters_rounded_to_float32() -> None:
    a = alibi(12, 8.0)  # n_head_log2 = 8: m0 = 2^-1, m1 = 2^-0.5
    assert a.n_head_log2 == 8 and a.m0 == 0.5
    assert a.m1 == float(np.float32(2.0 ** -0.5))
    assert a.slope(0) == 0.5 and a.slope(7) == 0.5 ** 8 and a.slope(8) == a.m1
    assert alibi(32, 0.1).m0 == float(np.float32(2.0 ** (-float(np.float32(0.1)) / 32)))
