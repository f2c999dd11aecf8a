"""The `comm_init` extension: allreduce (in-place sum on every device) for the meta device's tensor split.

With NCCL (see `pyggml_cuda.nccl`) one grouped ncclAllReduce per call. Without it, peer copies on the streams:
device 0 waits for every device's work, copies each tensor j in turn into a temporary and adds it (the shared
k_binary kernel), then every device waits for device 0 and copies the sum back, and device 0 waits for those
copies before its stream goes on. No host round trip; the sum is added in device order, so every device ends
with the same bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyggml.backend.extensions import CommContext
from pyggml.backend.protocol import Backend
from pyggml.graph import Graph
from pyggml.ops.base import Op
from pyggml.tensor import Tensor, TensorFlag
from pyggml_cuda.backend import CudaBackend
from pyggml_cuda.buffer import CudaBuffer, device_copy
from pyggml_cuda.device import CudaEvent
from pyggml_cuda.nccl import DTYPES, Nccl

log = logging.getLogger(__name__)


def comm_init(backends: list[Backend]) -> CommContext | None:
    """An allreduce over `backends` when all are CUDA backends on distinct devices, else None."""
    if len(backends) < 2 or not all(isinstance(b, CudaBackend) for b in backends):
        return None
    cb = [b for b in backends if isinstance(b, CudaBackend)]
    if len({id(b.dev) for b in cb}) != len(cb):
        return None
    nccl = Nccl.load() if cb[0].dev.options().nccl else None
    if nccl is not None:
        try:
            return NcclComm(cb, nccl)
        except Exception as e:
            log.warning("NCCL communicator failed (%s); using peer copies", e)
    return PeerComm(cb)


def _usable(backends: Sequence[CudaBackend], tensors: Sequence[Tensor]) -> bool:
    if len(tensors) != len(backends) or tensors[0].type not in DTYPES:
        return False
    for b, t in zip(backends, tensors, strict=True):
        buf = t.buffer
        if not isinstance(buf, CudaBuffer) or buf.dev is not b.dev or not t.is_contiguous():
            return False
    return all(t.ne == tensors[0].ne and t.type == tensors[0].type for t in tensors)


class NcclComm:
    name = "nccl"

    def __init__(self, backends: Sequence[CudaBackend], nccl: Nccl) -> None:
        self.backends = list(backends)
        self.nccl = nccl
        self.comms = nccl.comm_init_all([b.dev.info.ordinal for b in self.backends])

    def allreduce_tensor(self, tensors: list[Tensor]) -> bool:
        if not _usable(self.backends, tensors):
            return False
        n = tensors[0].nelements()
        self.nccl.group_start()
        try:
            for b, t, comm in zip(self.backends, tensors, self.comms, strict=True):
                assert isinstance(t.buffer, CudaBuffer)
                self.nccl.all_reduce_sum(t.buffer.ptr + t.offset, n, t.type, comm, b.stream.handle)
        finally:
            self.nccl.group_end()
        return True

    def close(self) -> None:
        for c in self.comms:
            self.nccl.destroy(c)
        self.comms = []


class PeerComm:
    name = "peer"

    def __init__(self, backends: Sequence[CudaBackend]) -> None:
        self.backends = list(backends)
        self._tmp: CudaBuffer | None = None
        self._adds: dict[tuple[int, int, int], tuple[Tensor, Graph]] = {}

    def allreduce_tensor(self, tensors: list[Tensor]) -> bool:
        if not _usable(self.backends, tensors):
            return False
        b0, t0 = self.backends[0], tensors[0]
        tmp, add = self._add_graph(t0)
        size = t0.nbytes()
        assert isinstance(t0.buffer, CudaBuffer) and isinstance(tmp.buffer, CudaBuffer)
        for b in self.backends[1:]:
            b0.event_wait(self._record(b))
        for t in tensors[1:]:
            assert isinstance(t.buffer, CudaBuffer)
            device_copy(b0.dev, tmp.buffer.ptr, t.buffer.dev, t.buffer.ptr + t.offset, size, b0.stream)
            b0.graph_compute_async(add)
        done0 = self._record(b0)
        for b, t in zip(self.backends[1:], tensors[1:], strict=True):
            assert isinstance(t.buffer, CudaBuffer)
            b.event_wait(done0)
            device_copy(b.dev, t.buffer.ptr + t.offset, b0.dev, t0.buffer.ptr + t0.offset, size, b.stream)
        for b in self.backends[1:]:
            b0.event_wait(self._record(b))  # device 0 must not change t0 before the copies have read it
        return True

    @staticmethod
    def _record(b: CudaBackend) -> CudaEvent:
        ev = CudaEvent(b.dev)
        ev.record(b)
        return ev

    def _add_graph(self, t0: Tensor) -> tuple[Tensor, Graph]:
        """A temporary on device 0 shaped like t0 and the one-node graph t0 += temporary (cached per tensor)."""
        key = (t0.serial, t0.offset, 0 if t0.buffer is None else t0.buffer.serial)  # serials: never reused
        hit = self._adds.get(key)
        if hit is not None:
            return hit
        size = t0.nbytes()
        if self._tmp is None or self._tmp.size < size:
            self._tmp = self.backends[0].dev.buffer_type().alloc_buffer(size)  # type: ignore[assignment]
            self._adds.clear()
        tmp = Tensor(t0.type, t0.ne, op=Op.NONE)
        tmp.set_name(f"{t0.name} (allreduce in)")
        tmp.buffer, tmp.offset = self._tmp, 0
        node = Tensor(t0.type, t0.ne, t0.nb, op=Op.ADD, src=(t0, tmp), view_src=t0.data_owner,
                      view_offs=t0.view_offs if t0.view_src is not None else 0)
        node.buffer, node.offset = t0.buffer, t0.offset
        node.flags = TensorFlag.COMPUTE
        node.set_name(f"{t0.name} (allreduce)")
        g = Graph(1)
        g.nodes = [node]
        self._adds[key] = (tmp, g)
        return tmp, g

    def close(self) -> None:
        self._adds.clear()
        if self._tmp is not None:
            self._tmp.free()
            self._tmp = None
