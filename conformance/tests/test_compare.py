"""NMSE, NaN, infinity, exact and set comparisons."""

from __future__ import annotations

import numpy as np

from pyggml_conformance.case import Compare
from pyggml_conformance.compare import check


def test_nmse_within_and_over_threshold() -> None:
    a = np.linspace(1, 2, 100)
    assert check(Compare.NMSE, a, a * (1 + 1e-5), 1e-7).ok
    v = check(Compare.NMSE, a, a * 1.01, 1e-7)
    assert not v.ok and v.nmse is not None and v.nmse > 1e-7 and "NMSE" in (v.error or "")


def test_nan_always_fails() -> None:
    a = np.ones(10)
    b = a.copy()
    b[3] = np.nan
    v = check(Compare.NMSE, a, b, 1.0)
    assert not v.ok and "NaN in the backend's output at [3]" in (v.error or "")
    assert not check(Compare.NMSE, b, a, 1.0).ok


def test_infinities_must_match() -> None:
    a = np.array([1.0, -np.inf, 2.0])
    assert check(Compare.NMSE, a, a.copy(), 1e-7).ok
    assert not check(Compare.NMSE, a, np.array([1.0, np.inf, 2.0]), 1e-7).ok
    assert not check(Compare.NMSE, a, np.array([1.0, -1e30, 2.0]), 1e-7).ok
    assert check(Compare.NMSE, a, np.array([1.0, -3.5e38, 2.0]), 1e-7).ok  # -FLT_MAX counts as -inf


def test_all_zero_is_a_match() -> None:
    assert check(Compare.NMSE, np.zeros(5), np.zeros(5), 1e-7).ok
    assert not check(Compare.NMSE, np.zeros(5), np.ones(5), 1e-7).ok


def test_exact_and_set() -> None:
    a = np.array([[3, 1, 2], [0, 5, 4]])
    assert check(Compare.EXACT, a, a.copy(), 0).ok
    assert not check(Compare.EXACT, a, a[:, ::-1].copy(), 0).ok
    assert check(Compare.SET, a, a[:, ::-1].copy(), 0).ok
    assert not check(Compare.SET, a, np.array([[3, 1, 2], [0, 5, 6]]), 0).ok
