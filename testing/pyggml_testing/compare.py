"""The error measure the tests compare a device's results with the numpy reference's by."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def nmse(got: npt.ArrayLike, ref: npt.ArrayLike) -> float:
    """Normalised mean squared error of `got` against `ref` over their finite values; infinite when either holds a
    NaN or their infinities differ (a NaN is never "close"), and the plain squared error when `ref` is all zeros."""
    g, r = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if np.isnan(g).any() or np.isnan(r).any():
        return float("inf")
    fin = np.isfinite(r)
    if not np.array_equal(fin, np.isfinite(g)) or not np.array_equal(r[~fin], g[~fin]):
        return float("inf")
    den = float((r[fin] ** 2).sum())
    return float(((g[fin] - r[fin]) ** 2).sum()) / (den if den else 1.0)
