"""Reference kernels: element-wise ops."""

from __future__ import annotations

import numpy as np

from pyggml.ops.base import Op
from pyggml.reference.access import load, store
from pyggml.reference.kernels import kernel
from pyggml.tensor import Tensor


def _tiled(b: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """b repeated (ggml broadcasting: whole-multiple tiling, not numpy's size-1 rule) up to shape."""
    reps = tuple(s // n for s, n in zip(shape, b.shape, strict=True))
    return np.tile(b, reps)


_BINARY = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.divide}


@kernel(Op.ADD, Op.SUB, Op.MUL, Op.DIV)
def binary(dst: Tensor) -> None:
    a, b = dst.src[0], dst.src[1]
    assert a is not None and b is not None
    x = load(a)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        store(dst, _BINARY[dst.op](x, _tiled(load(b), x.shape)))
