"""How numpy arrays become graph tensors in `pyggml.function`: the ggml type of a dtype, the `ne` of a numpy
shape, and the key a plan is cached under (each argument's shape and dtype)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.errors import ShapeError, UnsupportedTypeError
from pyggml.tensor import MAX_DIMS
from pyggml.types import GGMLType

Signature = tuple[tuple[tuple[int, ...], np.dtype[Any]], ...]
"""Per argument, its numpy shape and dtype: one plan (graph, placement) per signature."""

TYPE_OF_DTYPE: dict[np.dtype[Any], GGMLType] = {
    np.dtype(np.float32): GGMLType.F32,
    np.dtype(np.float64): GGMLType.F32,
    np.dtype(np.float16): GGMLType.F16,
    np.dtype(np.int32): GGMLType.I32,
}
"""float64 arrays become F32 tensors (ggml computes in float32, as JAX does by default); results come back as
float32."""


def ggml_type(dtype: np.dtype[Any], what: str) -> GGMLType:
    """The ggml type an array of `dtype` is written into; UnsupportedTypeError naming `what` otherwise."""
    t = TYPE_OF_DTYPE.get(dtype)
    if t is None:
        kinds = ", ".join(sorted({str(d) for d in TYPE_OF_DTYPE}))
        raise UnsupportedTypeError(f"{what}: arrays of dtype {dtype} have no ggml type here; pass one of {kinds} "
                                   "(astype)")
    return t


def ne_of(shape: tuple[int, ...], what: str) -> tuple[int, ...]:
    """ggml's ne of a numpy shape: reversed (a 0-d array is one element); ShapeError beyond 4 dimensions."""
    if len(shape) > MAX_DIMS:
        raise ShapeError(f"{what}: numpy shape {shape} has {len(shape)} dimensions; ggml tensors have at most "
                         f"{MAX_DIMS}")
    return tuple(reversed(shape)) if shape else (1,)


def signature(arrays: list[npt.NDArray[Any]]) -> Signature:
    return tuple((a.shape, a.dtype) for a in arrays)
