"""Allreduce: sum one tensor per device, in place, on every device.

`Communicator` is the interface the meta backend reduces through; it is also where an engine that spans processes
(MPI: one device per rank) plugs in later, since the meta backend only ever calls `allreduce(tensors)`.

- `ExtensionCommunicator`: what a backend registry offers through the `comm_init` extension (NCCL-like); a False
  answer sends that one call to the fallback.
- `InProcessCommunicator`: every device's tensor read to the host, summed in float32, written back to every
  device. Simple and exact in its order of additions; for devices of one process.
- `ButterflyAllreduce`: the generic fallback, built only from what every backend has (tensor copies and an ADD
  node): devices at or above P (the largest power of two <= n) are folded into device j - P, then P/2, ..., 1 rounds
  of butterfly exchange (copy into a temporary on the partner, ADD in place), then the sums are copied back to the
  folded devices. ceil(log2 n) rounds of copies and adds; every device ends with bit-identical sums.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from typing import cast

import numpy as np

from pyggml.backend.core_options import ALLREDUCE
from pyggml.backend.extensions import COMM_INIT, CommContext, CommInit
from pyggml.backend.protocol import Backend, Buffer, tensor_copy
from pyggml.errors import PyGGMLError, UnsupportedTypeError
from pyggml.graph import Graph
from pyggml.ops.base import Op
from pyggml.tensor import Tensor, TensorFlag
from pyggml.types import GGMLType, from_f32, to_f32

log = logging.getLogger(__name__)

REDUCIBLE = frozenset({GGMLType.F32, GGMLType.F16, GGMLType.BF16})


class Communicator(ABC):
    """Sums tensors[j] (on device j) into every tensors[j]."""

    name = "communicator"

    @abstractmethod
    def allreduce(self, tensors: Sequence[Tensor]) -> bool:
        """Reduce in place; True when done (results usable after the devices' backends synchronise), False when
        this communicator cannot do it (the caller then uses the fallback for this call)."""

    def bind(self, backends: Sequence[Backend]) -> None:
        """(optional) learn the meta backend's per-device backends, for a communicator made before them."""

    def close(self) -> None:
        """Release what the communicator holds."""


def _check(tensors: Sequence[Tensor]) -> None:
    t = tensors[0]
    if t.type not in REDUCIBLE:
        raise UnsupportedTypeError(f"allreduce of '{t.name}': {t.type} cannot be summed across devices "
                                   f"(F32, F16 or BF16)")
    if any(x.ne != t.ne or x.type != t.type for x in tensors):
        raise PyGGMLError(f"allreduce of '{t.name}': the devices' tensors differ in shape or type")


class ExtensionCommunicator(Communicator):
    """A registry's comm_init context behind the Communicator interface."""

    name = "extension"

    def __init__(self, ctx: CommContext) -> None:
        self.ctx = ctx

    def allreduce(self, tensors: Sequence[Tensor]) -> bool:
        return bool(self.ctx.allreduce_tensor(list(tensors)))


def comm_from_registry(backends: Sequence[Backend]) -> Communicator | None:
    """Ask the first device's registry for the comm_init extension (ggml's ggml_backend_comm_init)."""
    if len(backends) < 2:
        return None
    ext = backends[0].device.reg.get_extension(COMM_INIT)
    if ext is None:
        return None
    ctx = cast(CommInit, ext)(list(backends))
    return None if ctx is None else ExtensionCommunicator(ctx)


class InProcessCommunicator(Communicator):
    """Through host memory: read every device's tensor, sum in float32, write the sum to every device."""

    name = "inprocess"

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.backends = list(backends)

    def allreduce(self, tensors: Sequence[Tensor]) -> bool:
        _check(tensors)
        t0 = tensors[0]
        if not all(t.is_contiguous() for t in tensors):
            return False
        for b in self.backends:
            b.synchronize()
        acc = np.zeros(t0.nelements(), dtype=np.float32)
        for t in tensors:
            raw = _buffer(t).get_tensor(t)
            dtype = t.type.traits.np_dtype
            assert dtype is not None
            acc += to_f32(raw.view(dtype), t.type)
        out = acc.view(np.uint8) if t0.type == GGMLType.F32 else from_f32(acc, t0.type).view(np.uint8)
        for t in tensors:
            _buffer(t).set_tensor(t, out)
        return True


_Rounds = list[list[tuple[Tensor, Graph]]]
"""Per round, per pair: the temporary on the destination and the one-node graph adding it in place."""


class ButterflyAllreduce(Communicator):
    """The generic fallback: copies and in-place ADD nodes on the devices' own backends."""

    name = "butterfly"
    MAX_CACHED = 4096
    """Tensor sets whose ADD graphs are kept, least recently used dropped first. It must exceed the allreduces
    of one graph (one per layer or two): a graph that needs more than the cache holds would get fresh ADD graphs,
    and so fresh backend plans, on every compute."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.backends = list(backends)
        n = len(self.backends)
        p = 1
        while p * 2 <= n:
            p *= 2
        self.p = p
        self.n_steps = (n - p > 0) + p.bit_length() - 1
        self._tmp: list[list[Buffer | None]] = [[None] * max(self.n_steps, 1) for _ in range(n)]
        self._adds: OrderedDict[tuple[tuple[int, int, int], ...], tuple[int, _Rounds]] = OrderedDict()
        self._tmp_gen = 0
        """Bumped when a temporary buffer is replaced: cached ADD graphs whose temporaries lay in it are stale."""

    def steps(self) -> list[list[tuple[int, int]]]:
        """(source, destination) pairs of each round."""
        n, p = len(self.backends), self.p
        out: list[list[tuple[int, int]]] = []
        if n > p:
            out.append([(j, j - p) for j in range(p, n)])
        off = p // 2
        while off >= 1:
            out.append([(j, j ^ off) for j in range(p)])
            off //= 2
        return out

    def allreduce(self, tensors: Sequence[Tensor]) -> bool:
        _check(tensors)
        if not all(t.is_contiguous() for t in tensors):
            raise PyGGMLError(f"allreduce of '{tensors[0].name}': the devices' tensors must be contiguous")
        adds = self._prepared(tensors)
        for r, pairs in enumerate(self.steps()):
            for (src, dst), (tmp, _) in zip(pairs, adds[r], strict=True):
                self._copy(src, tensors[src], dst, tmp)
            # a copy may run on either device's stream: all must be done before any ADD changes a source
            for j in {j for pair in pairs for j in pair}:
                self.backends[j].synchronize()
            for (_, dst), (_, graph) in zip(pairs, adds[r], strict=True):
                self.backends[dst].graph_compute_async(graph)
        p = self.p
        for j in range(p, len(self.backends)):
            self._copy(j - p, tensors[j - p], j, tensors[j])
            self.backends[j].synchronize()
        return True

    def _copy(self, src: int, s: Tensor, dst: int, d: Tensor) -> None:
        bs, bd = self.backends[src], self.backends[dst]
        bs.synchronize()
        bd.synchronize()
        if not bd.cpy_tensor_async(bs, s, d):
            tensor_copy(s, d)

    def _prepared(self, tensors: Sequence[Tensor]) -> _Rounds:
        """Per round, per pair: the temporary on the destination and the one-node graph adding it in place."""
        key = tuple((t.serial, _serial_of(t.buffer), t.offset) for t in tensors)  # serials: never reused
        hit = self._adds.get(key)
        if hit is not None and hit[0] == self._tmp_gen:
            self._adds.move_to_end(key)
            return hit[1]
        rounds = []
        for r, pairs in enumerate(self.steps()):
            rounds.append([self._add_graph(tensors[dst], self._temp(dst, r, tensors[dst])) for _, dst in pairs])
        self._adds.pop(key, None)
        while len(self._adds) >= self.MAX_CACHED:
            self._adds.popitem(last=False)
        self._adds[key] = (self._tmp_gen, rounds)
        return rounds

    def _temp(self, j: int, r: int, like: Tensor) -> Tensor:
        size = like.nbytes()
        buf = self._tmp[j][r]
        if buf is None or buf.size < size:
            if buf is not None:
                buf.free()
                self._tmp_gen += 1
            buf = self._tmp[j][r] = self.backends[j].device.buffer_type().alloc_buffer(size)
        t = Tensor(like.type, like.ne, op=Op.NONE)
        t.set_name(f"{like.name} (allreduce in)")
        t.buffer, t.offset = buf, 0
        buf.init_tensor(t)
        return t

    @staticmethod
    def _add_graph(dst: Tensor, tmp: Tensor) -> tuple[Tensor, Graph]:
        owner = dst.data_owner
        node = Tensor(dst.type, dst.ne, dst.nb, op=Op.ADD, src=(dst, tmp), view_src=owner,
                      view_offs=dst.view_offs if dst.view_src is not None else 0)
        node.buffer, node.offset = dst.buffer, dst.offset
        node.flags = TensorFlag.COMPUTE
        node.set_name(f"{dst.name} (allreduce)")
        assert node.buffer is not None
        node.buffer.init_tensor(node)
        g = Graph(1)
        g.nodes = [node]
        return tmp, g

    def close(self) -> None:
        for row in self._tmp:
            for b in row:
                if b is not None:
                    b.free()
        self._tmp = [[None] * max(self.n_steps, 1) for _ in self.backends]
        self._adds.clear()


def make_communicator(kind: Communicator | str | None, backends: Sequence[Backend]) -> Communicator:
    """A communicator by name (`ALLREDUCE`: auto, inprocess, butterfly; None: auto) or as given. The meta backend
    gives its device's `MetaOptions.allreduce` (PYGGML_META_ALLREDUCE) when it is given none."""
    if isinstance(kind, Communicator):
        kind.bind(backends)
        return kind
    name = (kind or "auto").lower()
    if name == "auto":
        comm = comm_from_registry(backends)
        return comm if comm is not None else ButterflyAllreduce(backends)
    if name == "inprocess":
        return InProcessCommunicator(backends)
    if name == "butterfly":
        return ButterflyAllreduce(backends)
    raise PyGGMLError(f"unknown allreduce {name!r} ({', '.join(ALLREDUCE)})")


def _buffer(t: Tensor) -> Buffer:
    assert t.buffer is not None
    return t.buffer


def _serial_of(buf: Buffer | None) -> int:
    return 0 if buf is None else buf.serial
