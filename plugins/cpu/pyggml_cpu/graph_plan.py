"""Plans: a graph's computed nodes packed once into an array of C node descriptors (op, types, ne/nb, data
addresses, params), validated here so C never sees a pointer outside its buffer. Plans are cached per graph by
core's `PlanCache` and reused while the graph's tensors keep their places; a replay costs one placement check and
one call into C.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pyggml.backend.host import ArrayBuffer, hold_buffers
from pyggml.backend.op_table import OpTable
from pyggml.backend.plan_cache import check_tensors_not_freed
from pyggml.errors import AllocationError, ComputeError
from pyggml.graph import Graph
from pyggml.tensor import Tensor
from pyggml_cpu._pgc import ffi, lib
from pyggml_cpu.op_table import Descriptors
from pyggml_cpu.repack import R8_FLAG, R8_ROWS, RepackBuffer

if TYPE_CHECKING:
    from pyggml.backend.protocol import Buffer
    from pyggml_cpu._pgc import CData

log = logging.getLogger(__name__)

NSLOT = 8
NODE_DTYPE = np.dtype([
    ("op", "<i4"), ("sub", "<i4"), ("type", "<i4", (NSLOT,)), ("ne", "<i8", (NSLOT, 4)), ("nb", "<i8", (NSLOT, 4)),
    ("data", "<u8", (NSLOT,)), ("ip", "<i4", (16,)), ("fp", "<f4", (16,)),
])
for _name in NODE_DTYPE.names or ():
    if NODE_DTYPE.fields is None or NODE_DTYPE.fields[_name][1] != ffi.offsetof("pgc_node", _name):
        raise ImportError(f"pyggml_cpu: descriptor field {_name} does not match the C struct; rebuild the extension")
if NODE_DTYPE.itemsize != ffi.sizeof("pgc_node"):
    raise ImportError("pyggml_cpu: descriptor size does not match the C struct; rebuild the extension")

def address_of(t: Tensor, node: Tensor) -> int:
    """The host address of t's first byte, after checking t lies inside its host buffer."""
    buf = t.buffer
    if buf is None:
        raise ComputeError(f"cpu: node '{node.name}' ({node.op.name}): tensor '{t.name}' has no buffer")
    if getattr(buf, "freed", False):
        raise AllocationError(f"cpu: node '{node.name}' ({node.op.name}): tensor '{t.name}' is in {buf!r}, "
                              "which was freed (buffer used after free)")
    base = getattr(buf, "address", None)
    if base is None:
        arr = buf.host_array()
        if arr is None:
            raise ComputeError(f"cpu: node '{node.name}' ({node.op.name}): tensor '{t.name}' is in {buf!r}, "
                               f"which is not host memory")
        base = int(arr.ctypes.data)
    n = t.nbytes()
    if t.offset < 0 or t.offset + n > buf.size:
        raise ComputeError(f"cpu: node '{node.name}' ({node.op.name}): tensor '{t.name}' ({n} bytes at offset "
                           f"{t.offset}) lies outside its buffer of {buf.size} bytes")
    return int(base) + t.offset


def repacked(t: Tensor, node: Tensor, slot: int, c_op: int) -> bool:
    """Whether slot `slot` of node's descriptor (operation c_op) reads t in the R8 layout of a cpu_repack buffer;
    ComputeError where a node other than MUL_MAT, or another slot, would read R8 bytes."""
    buf = t.buffer
    if not isinstance(buf, RepackBuffer):
        return False
    rec = buf.overlapping(t.offset, t.nbytes())
    if rec is None:
        return False
    if c_op == lib.PGC_OP_MUL_MAT and slot == 1 and buf.layout_of(t) is rec and t.ne[0] == rec.ne0 \
            and t.ne[1] % R8_ROWS == 0 and t.is_contiguous():
        return True
    raise ComputeError(f"cpu: node '{node.name}' ({node.op.name}) reads '{t.name}', which is kept repacked in a "
                       f"{buf.buft.name} buffer (tensor '{rec.name}'): only MUL_MAT reads it, as its matrix; place "
                       "weights other ops read in the device's buffer type")


@dataclass
class CpuGraphPlan:
    array: np.ndarray
    names: list[Tensor]
    """The node of each descriptor (for error messages)."""
    ptr: CData
    buffers: list[Buffer]
    """The distinct buffers the descriptors point into: a replay holds them while it runs (`hold`)."""
    host: tuple[int, ...] = ()
    """Descriptors Python computes (custom ops), in order: the executor runs the C rows between them."""

    def hold(self, who: str) -> list[ArrayBuffer]:
        """Hold every buffer the descriptors point into while C runs (`pyggml.backend.host.hold_buffers`: a free
        from another thread waits; release them with `release_buffers`). A buffer freed since the plan was built
        raises AllocationError naming a tensor in it, before C sees an address."""
        try:
            return hold_buffers(self.buffers)
        except AllocationError as e:
            check_tensors_not_freed(self.names, who)
            raise AllocationError(f"{who}: {e}") from e


def build_plan(graph: Graph, table: OpTable[Descriptors], backend_name: str) -> CpuGraphPlan:
    d = Descriptors()
    work = table.build(graph.nodes, d, backend_name)
    arr = np.zeros(len(d.rows), dtype=NODE_DTYPE)
    for i, (node, c_op, (sub, ip, fp)) in enumerate(d.rows):
        row = arr[i]
        row["op"] = c_op
        row["sub"] = sub
        row["ip"][: len(ip)] = ip
        row["fp"][: len(fp)] = fp
        row["type"][:] = -1
        slots = (node, *node.src[: NSLOT - 1])
        for s, t in enumerate(slots):
            if t is None:
                continue
            row["type"][s] = int(t.type) | (R8_FLAG if repacked(t, node, s, c_op) else 0)
            row["ne"][s] = t.ne
            row["nb"][s] = t.nb
            row["data"][s] = address_of(t, node) if t.nelements() else 0
    ptr = ffi.cast("pgc_node *", ffi.from_buffer(arr)) if len(arr) else ffi.NULL
    bufs = {id(t.buffer): t.buffer for node in work for t in (node, *node.src[: NSLOT - 1])
            if t is not None and t.buffer is not None}
    return CpuGraphPlan(arr, work, ptr, list(bufs.values()), tuple(d.host))

