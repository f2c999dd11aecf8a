"""Reference kernels: copies and layout (DUP, CONT, CPY, REPEAT, CONCAT, PAD, SET, ACC, DIAG, GET_ROWS,
SET_ROWS, ARANGE).

Copies move elements in logical order (ne[0] fastest, then ne[1], ...), so a copy may change the shape; the
destination's type decides the conversion (F16/BF16 round to nearest even, integer types truncate, block
types quantise row by row).
"""

from __future__ import annotations

import numpy as np

from pyggml.errors import ShapeError
from pyggml.ops.base import Op
from pyggml.reference.access import load, raw_bytes, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import Array, check_index, row_view, src
from pyggml.tensor import Tensor
from pyggml.types import INT_TYPES

rules = KernelRules()


def load_native(t: Tensor) -> Array:
    """Integer tensors keep their integer dtype (no float rounding of large ids); the rest load as float64."""
    return load(t, None) if t.type in INT_TYPES else load(t)


@rules.kernel(Op.DUP, Op.CONT, Op.CPY)
def copy(dst: Tensor) -> None:
    """dst's elements, in logical order, are src0's, converted to dst's type. Between contiguous tensors of the
    same block type the bytes are copied as they are (no re-quantisation)."""
    a = src(dst, 0)
    if a.type == dst.type and a.type.traits.is_quantized and a.is_contiguous() and dst.is_contiguous():
        raw_bytes(dst)[...] = raw_bytes(a)
        return
    store(dst, load_native(a).reshape(dst.ne[::-1]))


@rules.kernel(Op.REPEAT)
def repeat(dst: Tensor) -> None:
    """src0 tiled to dst's shape: dst[i] = src0[i mod src0.ne] in every dim."""
    a = load_native(src(dst, 0))
    store(dst, np.tile(a, tuple(d // s for d, s in zip(dst.ne[::-1], a.shape, strict=True))))


def block_units(t: Tensor) -> Array:
    """Writable (ne3, ne2, ne1, blocks, block bytes) uint8 view of a block-type tensor's bytes."""
    tr = t.type.traits
    shape = (t.ne[3], t.ne[2], t.ne[1], t.ne[0] // tr.blck_size, tr.type_size)
    strides = (t.nb[3], t.nb[2], t.nb[1], t.nb[0], 1)
    return np.lib.stride_tricks.as_strided(raw_bytes(t), shape, strides)


@rules.kernel(Op.CONCAT)
def concat(dst: Tensor) -> None:
    """src0 then src1 along dim params.dim; block types move whole blocks as bytes (no re-quantisation)."""
    axis = 3 - dst.params.dim
    if dst.type.traits.is_quantized:
        block_units(dst)[...] = np.concatenate([block_units(src(dst, 0)), block_units(src(dst, 1))], axis=axis)
        return
    store(dst, np.concatenate([load_native(src(dst, 0)), load_native(src(dst, 1))], axis=axis))


@rules.kernel(Op.PAD)
def pad(dst: Tensor) -> None:
    """src0 with lp[i] zeros before and rp[i] zeros after it in each dim i."""
    p = dst.params
    widths = [(p.lp[i], p.rp[i]) for i in range(3, -1, -1)]
    store(dst, np.pad(load(src(dst, 0)), widths))


def _view_indices(dst: Tensor, b: Tensor) -> Array:
    """Element indices, into src0's contiguous elements, of the view (nb1, nb2, nb3, offset) shaped as src1."""
    p = dst.params
    es = src(dst, 0).type.traits.type_size
    for name, v in (("nb1", p.nb1), ("nb2", p.nb2), ("nb3", p.nb3), ("offset", p.offset)):
        if v % es:
            raise ShapeError(f"{dst.op.name}: {name}={v} is not a multiple of the element size {es}")
    strides = (p.nb3 // es, p.nb2 // es, p.nb1 // es, 1)
    idx = np.full(b.ne[::-1], p.offset // es, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(b.ne[::-1], strides, strict=True)):
        shape = [1, 1, 1, 1]
        shape[axis] = n
        idx = idx + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return idx


@rules.kernel(Op.SET, Op.ACC)
def set_acc(dst: Tensor) -> None:
    """A copy of src0 (or src0 itself, in place) in which the view of src0 with element size, byte strides
    nb1..nb3 and byte offset, shaped as src1, is overwritten by src1 (SET) or has src1 added (ACC)."""
    a = src(dst, 0)
    b = src(dst, 1)
    flat = load(a).reshape(-1)
    idx = _view_indices(dst, b)
    vals = load(b)
    flat[idx] = vals if dst.op is Op.SET else flat[idx] + vals
    store(dst, flat.reshape(dst.ne[::-1]))


@rules.kernel(Op.DIAG)
def diag(dst: Tensor) -> None:
    """Each row vector src0[:, 0, i2, i3] becomes the diagonal of a square matrix of zeros."""
    x = load(src(dst, 0))[:, :, 0, :]  # (ne3, ne2, n)
    n = x.shape[-1]
    out = np.zeros((*x.shape[:2], n, n))
    out[..., np.arange(n), np.arange(n)] = x
    store(dst, out)


@rules.kernel(Op.ARANGE)
def arange(dst: Tensor) -> None:
    """start + step * i for i < ne0."""
    p = dst.params
    store(dst, p.start + p.step * np.arange(dst.ne[0], dtype=np.float64))


@rules.kernel(Op.GET_ROWS)
def get_rows(dst: Tensor) -> None:
    """dst[:, i10, i11, i12] = src0[:, ids[i10, i11, i12], i11, i12], dequantised (I32 rows stay I32). Only the
    rows named are read."""
    a = src(dst, 0)
    ids = load(src(dst, 1), None)[0].astype(np.int64)  # (ne3 of src0, ne2 of src0, n)
    check_index(Op.GET_ROWS, ids, a.ne[1], "row id")
    rows = np.empty(dst.ne[::-1], dtype=np.int64 if a.type in INT_TYPES else np.float64)
    for i3, i2, i in np.ndindex(*ids.shape):
        rows[i3, i2, i] = load_native(row_view(a, int(ids[i3, i2, i]), i2, i3)).reshape(-1)
    store(dst, rows)


@rules.kernel(Op.SET_ROWS)
def set_rows(dst: Tensor) -> None:
    """Row i of src1 in batch (i2, i3) is written (converted to the destination's type) to row
    ids[i, i2 % ids.ne[1], i3 % ids.ne[2]] of the destination; other rows are untouched (on a repeated id the
    last write wins)."""
    rows = load(src(dst, 1))  # (ne3, ne2, n, ne0)
    ids = load(src(dst, 2), None)[0].astype(np.int64)  # (c2, c1, n)
    check_index(Op.SET_ROWS, ids, dst.ne[1], "row id")
    n3, n2, n = rows.shape[:3]
    for i3 in range(n3):
        for i2 in range(n2):
            for i in range(n):
                target = int(ids[i3 % ids.shape[0], i2 % ids.shape[1], i])
                store(row_view(dst, target, i2, i3), rows[i3, i2, i])
