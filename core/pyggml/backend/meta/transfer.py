"""Reading and writing meta tensors: the full tensor's bytes scattered to, or gathered from, the simple tensors.

- split (AXIS_0..3): the tensor must be contiguous; it is cut into outer blocks of nb[axis + 1] bytes and every
  block into chunks in (segment, repeat, device) order; a device's chunks, in order, make its block. Ranges must
  be whole outer blocks.
- MIRRORED: every device is written; reads come from device 0.
- PARTIAL: writes divide every (F32) value by the number of contributing devices and give the others zeros, so
  the sum is the value written; reads are refused (a partial sum is not a value) unless the allreduce ran.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pyggml.backend.meta.state import Axis, SplitState, describe_state
from pyggml.backend.meta.tensors import Entry, TensorTable, axis_bytes
from pyggml.backend.protocol import Buffer, Bytes
from pyggml.errors import AllocationError, ShapeError, UnsupportedOpError, UnsupportedTypeError
from pyggml.tensor import MAX_DIMS, Tensor
from pyggml.types import GGMLType

Pieces = list[list[tuple[int, int]]]


def pieces(t: Tensor, st: SplitState) -> tuple[int, Pieces]:
    """(bytes of one outer block, per device the byte ranges of its chunks inside a block)."""
    a = int(st.axis)
    block = t.nb[a + 1] if a + 1 < MAX_DIMS else t.nb[a] * t.ne[a]
    out: Pieces = [[] for _ in range(st.n_devices)]
    pos = 0
    for seg in st.segments:
        for _ in range(seg.nr):
            for j, n in enumerate(seg.ne):
                w = axis_bytes(t, a, n)
                if w:
                    out[j].append((pos, pos + w))
                pos += w
    if pos != block:
        raise ShapeError(f"tensor '{t.name}': chunks of {describe_state(st)} cover {pos} of {block} bytes")
    return block, out


def _readable_state(table: TensorTable, t: Tensor) -> tuple[SplitState, Entry]:
    st = table.state(t, False)
    e = table.entry(t)
    if st.axis == Axis.PARTIAL and e.reduced:
        return SplitState(Axis.MIRRORED), e
    return st, e


def _block_range(t: Tensor, st: SplitState, offset: int, size: int, what: str) -> tuple[int, int, int, Pieces]:
    if not t.is_contiguous():
        raise ShapeError(f"{what} of '{t.name}' ({describe_state(st)}): a split tensor must be contiguous, "
                         f"nb={list(t.nb)}")
    block, pcs = pieces(t, st)
    if block == 0 or offset % block or size % block:
        raise ShapeError(f"{what} of '{t.name}' ({describe_state(st)}): range [{offset}, {offset + size}) is not "
                         f"whole blocks of {block} bytes along the split")
    return block, offset // block, size // block, pcs


def set_tensor(table: TensorTable, t: Tensor, data: Bytes, offset: int) -> None:
    st, _ = _readable_state(table, t)
    simple = table.simple(t)
    _check_range(t, offset, data.size)
    if st.axis == Axis.MIRRORED:
        for tj in simple:
            _buf(tj).set_tensor(tj, data, offset)
        return
    if st.axis == Axis.PARTIAL:
        if t.type != GGMLType.F32:
            raise UnsupportedTypeError(f"setting PARTIAL tensor '{t.name}': only F32 values can be divided among "
                                       f"devices, not {t.type}")
        contrib = [j for j in range(table.n) if st.contributes(j)] or list(range(table.n))
        share = (data.view(np.float32) / np.float32(len(contrib))).astype(np.float32).view(np.uint8)
        zero = np.zeros_like(share)
        for j, tj in enumerate(simple):
            _buf(tj).set_tensor(tj, share if j in contrib else zero, offset)
        return
    block, i0, n, pcs = _block_range(t, st, offset, data.size, "set")
    full = data.reshape(n, block)
    spmd = table.spmd
    for j, (tj, ranges) in enumerate(zip(simple, pcs, strict=True)):
        if not ranges or (spmd is not None and not spmd.is_local(j)):  # another process's slice: not read
            continue
        local = np.concatenate([full[:, lo:hi] for lo, hi in ranges], axis=1)
        _buf(tj).set_tensor(tj, np.ascontiguousarray(local).reshape(-1), i0 * local.shape[1])


def get_tensor(table: TensorTable, t: Tensor, offset: int, size: int) -> Bytes:
    st, e = _readable_state(table, t)
    _check_range(t, offset, size)
    if st.axis == Axis.PARTIAL or e.pending:
        raise UnsupportedOpError(f"reading '{t.name}': every device holds a partial sum (PARTIAL); it is a value "
                                 f"only after its allreduce")
    simple = table.simple(t)
    spmd = table.spmd
    if st.axis == Axis.MIRRORED:
        j = 0 if spmd is None else min(spmd.local)
        return _buf(simple[j]).get_tensor(simple[j], offset, size)
    block, i0, n, pcs = _block_range(t, st, offset, size, "get")
    out = np.empty((n, block), dtype=np.uint8)
    for tj, ranges in zip(simple, pcs, strict=True):
        width = sum(hi - lo for lo, hi in ranges)
        if not width:
            continue
        raw = _buf(tj).get_tensor(tj, i0 * width, n * width).reshape(n, width)
        pos = 0
        for lo, hi in ranges:
            out[:, lo:hi] = raw[:, pos : pos + hi - lo]
            pos += hi - lo
    if spmd is not None:  # other processes' chunks read as zeros here: join them
        out = np.ascontiguousarray(out)
        spmd.combine(out.reshape(-1))
    return out.reshape(-1)


def memset_tensor(table: TensorTable, t: Tensor, value: int, offset: int, size: int) -> None:
    st, _ = _readable_state(table, t)
    simple = table.simple(t)
    _check_range(t, offset, size)
    if st.axis == Axis.PARTIAL and value != 0:
        raise UnsupportedOpError(f"memset of PARTIAL tensor '{t.name}' to {value}: only zero is a partial sum")
    if not st.is_split:
        for tj in simple:
            _buf(tj).memset_tensor(tj, value, offset, size)
        return
    _, i0, n, pcs = _block_range(t, st, offset, size, "memset")
    for tj, ranges in zip(simple, pcs, strict=True):
        width = sum(hi - lo for lo, hi in ranges)
        if width:
            _buf(tj).memset_tensor(tj, value, i0 * width, n * width)


def zero_simple(tensors: Sequence[Tensor]) -> None:
    for tj in tensors:
        _buf(tj).memset_tensor(tj, 0)


def _check_range(t: Tensor, offset: int, size: int) -> None:
    if offset < 0 or size < 0 or offset + size > t.nbytes():
        raise AllocationError(f"tensor '{t.name}' ({t.nbytes()} bytes): range [{offset}, {offset + size}) is "
                              f"outside the tensor")


def _buf(t: Tensor) -> Buffer:
    assert t.buffer is not None
    return t.buffer
