"""Reading an output back as numbers and comparing it with the reference's.

NMSE = sum((ref - out)^2) / sum(ref^2) over the finite entries (0 when both sums are 0), as ggml's
test-backend-ops: any NaN fails, an infinity (or +-FLT_MAX) must be matched by one of the same sign. Exact ops
compare every value; TOP_K compares each row as a set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.tensor import Tensor
from pyggml.types import GGMLType, bf16_to_f32
from pyggml_conformance.case import Compare

Array = npt.NDArray[Any]
FLT_MAX = float(np.finfo(np.float32).max)


def decode(t: Tensor, raw: npt.NDArray[np.uint8]) -> Array:
    """t's values in numpy order (4-D, ne[::-1]) from `raw`, the t.nbytes() bytes starting at t's first byte:
    float64 for float and block types, int64 for integer types."""
    tr = t.type.traits
    if tr.is_quantized:
        from pyggml.quants import dequantize

        rs = t.row_size()
        out = np.empty(tuple(reversed(t.ne)), dtype=np.float64)
        for i3 in range(t.ne[3]):
            for i2 in range(t.ne[2]):
                for i1 in range(t.ne[1]):
                    o = i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3]
                    out[i3, i2, i1] = np.asarray(dequantize(raw[o : o + rs], t.type), dtype=np.float64)
        return out
    view = t.element_view(raw)
    if t.type == GGMLType.BF16:
        return bf16_to_f32(np.ascontiguousarray(view)).astype(np.float64)
    if view.dtype.kind in "iu":
        return np.array(view, dtype=np.int64)
    return np.array(view, dtype=np.float64)


@dataclass
class Verdict:
    ok: bool
    nmse: float | None = None
    error: str | None = None


def _index(shape: tuple[int, ...], flat: int) -> list[int]:
    """ggml-order index [i0, i1, i2, i3] of a flat numpy-order position."""
    return list(reversed([int(i) for i in np.unravel_index(flat, shape)]))


def nmse_check(ref: Array, out: Array, threshold: float) -> Verdict:
    a = np.asarray(ref, dtype=np.float64)
    b = np.asarray(out, dtype=np.float64)
    for arr, who in ((b, "backend"), (a, "reference")):
        nan = np.isnan(arr)
        if nan.any():
            at = _index(arr.shape, int(np.argmax(nan)))
            return Verdict(False, None, f"NaN in the {who}'s output at {at} ({int(nan.sum())} NaN values)")
    a_inf = np.where(np.abs(a) >= FLT_MAX, np.sign(a), 0)
    b_inf = np.where(np.abs(b) >= FLT_MAX, np.sign(b), 0)
    bad = a_inf != b_inf
    if bad.any():
        i = int(np.argmax(bad))
        at = _index(a.shape, i)
        return Verdict(False, None, f"infinity mismatch at {at}: reference {a.reshape(-1)[i]!r}, "
                                    f"backend {b.reshape(-1)[i]!r}")
    fin = a_inf == 0
    diff = float(np.sum((a[fin] - b[fin]) ** 2))
    norm = float(np.sum(a[fin] ** 2))
    err = 0.0 if diff == 0 else (diff / norm if norm > 0 else float("inf"))
    if err > threshold:
        i = int(np.argmax(np.where(fin, np.abs(a - b), -1)))
        at = _index(a.shape, i)
        return Verdict(False, err, f"NMSE {err:.3g} > {threshold:.3g} (largest difference at {at}: reference "
                                   f"{a.reshape(-1)[i]:.6g}, backend {b.reshape(-1)[i]:.6g})")
    return Verdict(True, err)


def exact_check(ref: Array, out: Array) -> Verdict:
    a, b = np.asarray(ref), np.asarray(out)
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        nan = np.isnan(b) if b.dtype.kind == "f" else np.zeros(b.shape, bool)
        if nan.any():
            return Verdict(False, None, f"NaN in the backend's output at {_index(b.shape, int(np.argmax(nan)))}")
    bad = a != b
    if bad.any():
        i = int(np.argmax(bad))
        return Verdict(False, None, f"{int(bad.sum())} of {a.size} values differ; first at "
                                    f"{_index(a.shape, i)}: reference {a.reshape(-1)[i]}, backend {b.reshape(-1)[i]}")
    return Verdict(True, 0.0)


def set_check(ref: Array, out: Array) -> Verdict:
    """Rows (dim 0) equal as sets."""
    v = exact_check(np.sort(ref, axis=-1), np.sort(out, axis=-1))
    if not v.ok and v.error:
        v.error = "rows differ as sets: " + v.error
    return v


def nan_check(ref: Array, out: Array) -> tuple[Verdict | None, Array, Array]:
    """For cases with NaN inputs: NaN exactly where the reference has NaN; then both with those entries zeroed."""
    a, b = np.asarray(ref), np.asarray(out)
    if a.dtype.kind != "f" and b.dtype.kind != "f":
        return None, a, b
    na = np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
    nb = np.isnan(b) if b.dtype.kind == "f" else np.zeros(b.shape, bool)
    bad = na != nb
    if bad.any():
        i = int(np.argmax(bad))
        return (Verdict(False, None, f"NaN where the reference has none or the reverse ({int(bad.sum())} values); "
                                     f"first at {_index(a.shape, i)}: reference {a.reshape(-1)[i]!r}, backend "
                                     f"{b.reshape(-1)[i]!r}"), a, b)
    return None, np.where(na, 0, a), np.where(nb, 0, b)


def check(mode: Compare, ref: Array, out: Array, threshold: float, nan_ok: bool = False) -> Verdict:
    if ref.shape != out.shape:
        return Verdict(False, None, f"output shapes differ: reference {ref.shape}, backend {out.shape}")
    if nan_ok:
        bad, ref, out = nan_check(ref, out)
        if bad is not None:
            return bad
    if mode is Compare.EXACT:
        return exact_check(ref, out)
    if mode is Compare.SET:
        return set_check(ref, out)
    return nmse_check(ref, out, threshold)
