"""Placing a case's graph in one buffer of a device, with guard bytes around every tensor.

The whole buffer is first filled with a sentinel pattern (a NaN in F32, F16 and BF16, an unusual integer in
I32), then every data owner gets an aligned slot followed by a guard gap; views are placed by
`pyggml.context.init_view`. After compute, `check` reads the buffer back and reports
- guard bytes that changed (a kernel wrote outside every tensor),
- bytes of an owner that no node of the graph writes, or that lie outside the elements the graph's nodes write
  into it, that changed (a kernel wrote outside its output view, or into an input).
Unwritten output elements keep the sentinel, so they read back as NaN and fail the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pyggml.backend.op_table import needs_kernel
from pyggml.backend.protocol import Buffer, BufferType
from pyggml.context import init_view
from pyggml.errors import PyGGMLError
from pyggml.graph import Graph
from pyggml.ops.optim import written_srcs
from pyggml.tensor import Tensor
from pyggml_conformance.inputs import graph_inputs

Bytes = npt.NDArray[np.uint8]
SENTINEL = np.array([0xFD, 0xFE, 0xFF, 0xFF], dtype=np.uint8)
"""Little-endian 0xFFFFFEFD: a NaN as F32 and in both F16 halves, -259 as I32."""
GUARD = 64
"""Guard bytes after every tensor (at least; gaps grow to the buffer type's alignment)."""


def sentinel(size: int) -> Bytes:
    """`size` bytes of the sentinel pattern."""
    reps = -(-size // SENTINEL.size)
    return np.frombuffer(SENTINEL.tobytes() * reps, dtype=np.uint8)[:size]


def graph_tensors(graph: Graph) -> list[Tensor]:
    """Leafs and nodes, each once, in graph order."""
    seen: dict[int, Tensor] = {}
    for t in (*graph.leafs, *graph.nodes):
        seen.setdefault(id(t), t)
        if t.view_src is not None:
            seen.setdefault(id(t.view_src), t.view_src)
    return list(seen.values())


def unit_offsets(t: Tensor) -> tuple[npt.NDArray[np.int64], int]:
    """Byte offsets (relative to t's first byte) of each element, or each block for block types, in numpy order,
    and the unit size in bytes."""
    tr = t.type.traits
    counts = (t.ne[0] // tr.blck_size, t.ne[1], t.ne[2], t.ne[3])
    offs = np.zeros((1, 1, 1, 1), dtype=np.int64)
    for d in range(4):
        shape = [1, 1, 1, 1]
        shape[3 - d] = counts[d]
        offs = offs + (np.arange(counts[d], dtype=np.int64) * t.nb[d]).reshape(shape)
    return offs, tr.type_size


def byte_mask(t: Tensor, span: int) -> npt.NDArray[np.bool_]:
    """Which of the `span` bytes of t's data owner t's elements cover."""
    mask = np.zeros(span, dtype=bool)
    base = t.offset - t.data_owner.offset
    if t.is_contiguous():  # one range (and no per-byte index arrays for the suite's 16M-element rows)
        mask[max(base, 0) : max(base + t.nbytes(), 0)] = True
        return mask
    offs, size = unit_offsets(t)
    idx = (base + offs.reshape(-1, 1) + np.arange(size, dtype=np.int64)).reshape(-1)
    mask[idx[(idx >= 0) & (idx < span)]] = True
    return mask


@dataclass
class Slot:
    tensor: Tensor
    offset: int
    size: int
    """Bytes reserved (the buffer type's alloc_size); the guard starts after them."""


class ArenaTooLarge(PyGGMLError):
    """The case's tensors (with their guards) need one buffer larger than the device's buffer limit: a limit of this
    harness, which places a whole case in one buffer, so the runners report the case skipped, with this reason."""


class GuardedArena:
    """A graph's tensors placed in one freshly allocated buffer."""

    def __init__(self, graph: Graph, buft: BufferType, guard: int = GUARD) -> None:
        self.graph = graph
        tensors = graph_tensors(graph)
        align = max(buft.alignment, 1)
        owners = [t for t in tensors if t.view_src is None]
        self.slots: list[Slot] = []
        off = _align(guard, align)
        for t in owners:
            size = max(buft.alloc_size(t), t.nbytes())
            self.slots.append(Slot(t, off, size))
            off = _align(off + size + guard, align)
        self.size = max(off, 1)
        if self.size > buft.max_size:
            raise ArenaTooLarge(f"the case's tensors need one buffer of {self.size} bytes, over {buft.name}'s limit "
                                f"of {buft.max_size} bytes")
        self.buffer: Buffer = buft.alloc_buffer(self.size)
        self.buffer.write(0, sentinel(self.size))
        for s in self.slots:
            s.tensor.buffer = self.buffer
            s.tensor.offset = s.offset
            self.buffer.init_tensor(s.tensor)
        for t in tensors:
            if t.view_src is not None:
                init_view(t)
        self.before: Bytes | None = None

    def upload(self, data: dict[str, Bytes], snapshot: bool = True) -> None:
        """Write each leaf input's bytes, then (snapshot) remember the buffer's content for `check`."""
        for t in graph_inputs(self.graph):
            self.buffer.set_tensor(t, data[t.name])
        if snapshot:
            self.before = self.buffer.read(0, self.size)

    def check(self) -> list[str]:
        """Problems found by comparing the buffer with its content before compute (empty: none)."""
        assert self.before is not None, "upload() first"
        after = self.buffer.read(0, self.size)
        changed = after != self.before
        problems: list[str] = []
        covered = np.zeros(self.size, dtype=bool)
        written: dict[int, npt.NDArray[np.bool_]] = {}
        for node in self.graph.nodes:
            if needs_kernel(node):  # the nodes a backend writes (views, leaves and empty results write nothing)
                owner = node.data_owner
                span = owner.nbytes()
                m = byte_mask(node, span)
                prev = written.get(id(owner))
                written[id(owner)] = m if prev is None else (prev | m)
                for ws in written_srcs(node):  # state an op updates in place (AdamW's moments)
                    so = ws.data_owner
                    sm = byte_mask(ws, so.nbytes())
                    prev = written.get(id(so))
                    written[id(so)] = sm if prev is None else (prev | sm)
        for s in self.slots:
            covered[s.offset : s.offset + s.size] = True
            t = s.tensor
            span = t.nbytes()
            region = changed[s.offset : s.offset + span]
            mask = written.get(id(t))
            outside = region if mask is None else region & ~mask
            if outside.any():
                first = int(np.argmax(outside))
                what = "an input no node writes" if mask is None else "outside the elements its nodes write"
                problems.append(f"{int(outside.sum())} bytes of '{t.name}' {t.type} ne={list(t.ne)} changed, "
                                f"{what} (first at byte {first})")
        hit = changed & ~covered
        if hit.any():
            problems.extend(self._guard_report(hit))
        return problems

    def _guard_report(self, hit: npt.NDArray[np.bool_]) -> list[str]:
        out: list[str] = []
        positions = np.flatnonzero(hit)
        for s in self.slots:
            lo = s.offset + s.size
            nxt = [x.offset for x in self.slots if x.offset > s.offset]
            hi = min(nxt) if nxt else self.size
            n = int(((positions >= lo) & (positions < hi)).sum())
            if n:
                out.append(f"guard after '{s.tensor.name}' {s.tensor.type} ne={list(s.tensor.ne)}: {n} bytes "
                           f"overwritten (out-of-bounds write)")
        first = self.slots[0].offset if self.slots else self.size
        n0 = int((positions < first).sum())
        if n0:
            out.append(f"guard before the first tensor: {n0} bytes overwritten (out-of-bounds write)")
        return out

    def free(self) -> None:
        self.buffer.free()


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a
