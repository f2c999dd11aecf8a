"""Small helpers shared by the reference kernel families."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.backend.op_table import opt_src as opt_src  # re-exported: the kernels take both helpers from here
from pyggml.errors import ShapeError
from pyggml.ops.base import Op
from pyggml.tensor import Ne, Tensor

Array = npt.NDArray[Any]


def src(dst: Tensor, i: int) -> Tensor:
    """dst.src[i], which the op requires: op_table's lookup, but a missing src is a ShapeError here (a reference
    kernel fails on the graph's shape, not on the backend's compute)."""
    t = opt_src(dst, i)
    if t is None:
        raise ShapeError(f"{dst.op.name}: src[{i}] is missing on node '{dst.name}'")
    return t


def tiled(b: Array, shape: tuple[int, ...]) -> Array:
    """b repeated up to shape (ggml broadcasting: whole-multiple tiling, not numpy's size-1 rule)."""
    reps = tuple(s // n for s, n in zip(shape, b.shape, strict=True))
    return np.tile(b, reps)


def placed_view(t: Tensor, ne: Ne, byte_offset: int) -> Tensor:
    """An unrecorded tensor over part of t's memory (t's strides, `ne` elements from `byte_offset`), for kernels
    that write a few rows of a destination without rewriting the rest (quantised rows are not re-encoded)."""
    v = Tensor(t.type, ne, t.nb, op=Op.NONE)
    v.name = f"{t.name} [part]"
    v.buffer = t.buffer
    v.offset = t.offset + byte_offset
    return v


def row_view(t: Tensor, i1: int, i2: int, i3: int) -> Tensor:
    """Row (i1, i2, i3) of t as a placed one-row tensor."""
    return placed_view(t, (t.ne[0], 1, 1, 1), i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3])


def check_index(op: Op, ids: Array, limit: int, what: str) -> None:
    """Every id in [0, limit), else a ShapeError naming the op and the bad value (ggml asserts here)."""
    if ids.size and (ids.min() < 0 or ids.max() >= limit):
        bad = ids[(ids < 0) | (ids >= limit)].flat[0]
        raise ShapeError(f"{op.name}: {what} {int(bad)} is outside [0, {limit})")
