"""Reading and writing tensors in host memory for the reference kernels.

`load(t)` gives a float64 (or integer) numpy array in numpy order (shape ne[::-1], always 4-D) of a tensor's
elements, dequantizing block types; `store(t, values)` converts and writes values into t's memory, honouring its
strides. Every reference kernel goes through these two functions, so type handling lives here only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.errors import AllocationError, ShapeError
from pyggml.tensor import Tensor
from pyggml.types import GGMLType, from_f32, to_f32

Array = npt.NDArray[Any]


def raw_bytes(t: Tensor) -> npt.NDArray[np.uint8]:
    """Writable uint8 view of the tensor's byte span in its host buffer."""
    buf = t.buffer
    if buf is None:
        raise AllocationError(f"tensor '{t.name}' is not allocated")
    host = buf.host_array()
    if host is None:
        raise AllocationError(f"tensor '{t.name}' is not in host memory ({buf!r})")
    return host[t.offset : t.offset + t.nbytes()]


def elements(t: Tensor) -> Array:
    """Strided numpy view (numpy order, 4-D) of a plain-typed tensor; writes go to the tensor."""
    return t.element_view(raw_bytes(t))


def _quantized_rows(t: Tensor) -> tuple[npt.NDArray[np.uint8], int]:
    """A quantized tensor's bytes and row size: its blocks are (de)quantized a row at a time, so each row must be
    contiguous (rows, planes and batches may be strided)."""
    if not t.is_contiguous_rows():
        raise ShapeError(f"quantized tensor '{t.name}' needs contiguous rows")
    return raw_bytes(t), t.row_size()


def load(t: Tensor, dtype: npt.DTypeLike | None = np.float64) -> Array:
    """The tensor's values as a new 4-D array (ne[::-1]) of `dtype` (None: integer types keep theirs)."""
    tr = t.type.traits
    if tr.is_quantized:
        from pyggml.quants import dequantize

        raw, rs = _quantized_rows(t)
        out = np.empty(t.ne[::-1], dtype=np.float32)
        for i3 in range(t.ne[3]):
            for i2 in range(t.ne[2]):
                base = i2 * t.nb[2] + i3 * t.nb[3]
                if t.nb[1] == rs:
                    out[i3, i2] = dequantize(raw[base : base + rs * t.ne[1]], t.type).reshape(t.ne[1], t.ne[0])
                else:
                    for i1 in range(t.ne[1]):
                        o = base + i1 * t.nb[1]
                        out[i3, i2, i1] = dequantize(raw[o : o + rs], t.type)
        return out.astype(dtype) if dtype is not None else out
    arr = elements(t)
    if t.type == GGMLType.BF16:
        arr = to_f32(arr, t.type)
    if dtype is None:
        return np.array(arr)
    return np.asarray(arr, dtype=dtype).copy()


def store(t: Tensor, values: npt.ArrayLike) -> None:
    """Write values (broadcastable to t's 4-D numpy shape) into t, converting to its type (rounding to nearest
    even for F16/BF16, quantizing block types row by row)."""
    shape = t.ne[::-1]
    vals = np.broadcast_to(np.asarray(values), shape)
    tr = t.type.traits
    if tr.is_quantized:
        from pyggml.quants import quantize

        raw, rs = _quantized_rows(t)
        for i3 in range(t.ne[3]):
            for i2 in range(t.ne[2]):
                for i1 in range(t.ne[1]):
                    o = i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3]
                    raw[o : o + rs] = quantize(np.ascontiguousarray(vals[i3, i2, i1], dtype=np.float32), t.type)
        return
    dst = elements(t)
    if t.type == GGMLType.BF16:
        dst[...] = from_f32(np.asarray(vals, dtype=np.float32), t.type)
    elif t.type in (GGMLType.F16, GGMLType.F32):
        # round once, from float64 through float32 as a C kernel would
        dst[...] = np.asarray(vals, dtype=np.float32)
    else:
        dst[...] = vals
