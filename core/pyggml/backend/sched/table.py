"""What the scheduler knows about its backends: priority order, buffer types, and cached capability answers.

Backend ids are list positions: 0 is the highest priority, the last one is the CPU fallback. `supports_op`
answers are cached per graph (cleared by `new_graph`); `supports_buft` answers are cached for the table's
lifetime (a device's ability to read a buffer type never changes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyggml.backend.op_table import FREE_OPS
from pyggml.backend.protocol import Backend, Buffer, BufferType, Device, DeviceType
from pyggml.errors import PyGGMLError
from pyggml.tensor import Tensor

MAX_BACKENDS = 16
"""The most backends one scheduler takes (GGML_SCHED_MAX_BACKENDS)."""
MAX_COPIES = 4
"""The most copies of the graph inputs a scheduler keeps for pipeline parallelism (GGML_SCHED_MAX_COPIES)."""


class SchedulerConfigError(PyGGMLError, ValueError):
    """The scheduler was given an unusable list of backends, buffer types or copies."""


def _owns_nothing(buf: Buffer) -> bool:
    return False


class BackendTable:
    """The scheduler's backends in priority order with their buffer types."""

    def __init__(self, backends: Sequence[Backend], bufts: Sequence[BufferType | None] | None,
                 owns: Callable[[Buffer], bool] = _owns_nothing) -> None:
        if not backends:
            raise SchedulerConfigError("a Scheduler needs at least one backend (the last one a CPU backend)")
        if len(backends) > MAX_BACKENDS:
            raise SchedulerConfigError(
                f"too many backends: {len(backends)} given, a Scheduler takes at most {MAX_BACKENDS}"
            )
        if len({id(b) for b in backends}) != len(backends):
            raise SchedulerConfigError(f"a backend is listed twice: {[b.name for b in backends]}")
        last = backends[-1]
        if last.device.type is not DeviceType.CPU:
            raise SchedulerConfigError(
                f"the last backend must be a CPU backend (the fallback for every op and the home of graph "
                f"inputs); got '{last.name}' of type {last.device.type.value}"
            )
        if bufts is not None and len(bufts) != len(backends):
            raise SchedulerConfigError(f"{len(bufts)} buffer types given for {len(backends)} backends")
        self.backends: list[Backend] = list(backends)
        self.devices: list[Device] = [b.device for b in backends]
        chosen = [None] * len(backends) if bufts is None else list(bufts)
        self.bufts: list[BufferType] = [
            bt if bt is not None else dev.buffer_type() for bt, dev in zip(chosen, self.devices, strict=True)
        ]
        self.n = len(backends)
        self.last = self.n - 1
        self._buft_ok: dict[int, tuple[BufferType, list[bool]]] = {}
        for b, (backend, buft) in enumerate(zip(self.backends, self.bufts, strict=True)):
            if not self.supports_buft(b, buft):
                raise SchedulerConfigError(
                    f"backend '{backend.name}' cannot use its buffer type '{buft.name}' (device "
                    f"'{self.devices[b].name}' does not support it)"
                )
        # backends that share one buffer type object share memory: group = first backend with that buft
        self.group: list[int] = [next(i for i in range(b + 1) if self.bufts[i] is self.bufts[b])
                                 for b in range(self.n)]
        self._op_ok: list[dict[int, bool]] = [{} for _ in range(self.n)]
        self.owns = owns
        """Whether a buffer is one of the scheduler's compute buffers (its tensors are re-placed every run): the
        scheduler sets its graph allocator's `owns`, the allocator being built over this table's buffer types."""

    def preallocated(self, t: Tensor) -> Buffer | None:
        """The buffer t's data lives in when it was placed by someone else than the scheduler (weights, KV
        caches, user buffers): such a tensor pins its backend. None for unplaced or scheduler-placed tensors."""
        owner = t.view_src if t.view_src is not None else t
        buf = owner.buffer
        return None if buf is None or self.owns(buf) else buf

    # ---- capabilities ---------------------------------------------------------------------------------------

    def new_graph(self) -> None:
        """Forget cached supports_op answers (tensor ids may be reused by a new graph)."""
        for cache in self._op_ok:
            cache.clear()

    def supports_op(self, b: int, t: Tensor) -> bool:
        if t.op in FREE_OPS:  # ops that do no work: every backend 'supports' them (ggml_op_is_empty)
            return True
        cache = self._op_ok[b]
        k = id(t)
        r = cache.get(k)
        if r is None:
            r = cache[k] = bool(self.backends[b].supports_op(t))
        return r

    def supports_buft(self, b: int, buft: BufferType) -> bool:
        entry = self._buft_ok.get(id(buft))
        if entry is None or entry[0] is not buft:
            entry = (buft, [bool(dev.supports_buft(buft)) for dev in self.devices])
            self._buft_ok[id(buft)] = entry
        return entry[1][b]

    def from_buffer(self, owner: Tensor, op_node: Tensor) -> int:
        """The highest-priority backend that can use owner's buffer and run op_node; -1 if none (or no buffer)."""
        buf = owner.buffer
        if buf is None:
            return -1
        buft = buf.buft
        for b in range(self.n):
            if self.supports_buft(b, buft) and self.supports_op(b, op_node):
                return b
        return -1

    def buffer_supported(self, t: Tensor, b: int, backend_of: dict[int, int]) -> bool:
        """Whether backend b can read t where it lives: its (owner's) buffer if placed, else the buffer type of
        the backend it is assigned to (ggml_backend_sched_buffer_supported)."""
        buf = self.preallocated(t)
        if buf is not None:
            return self.supports_buft(b, buf.buft)
        a = backend_of.get(id(t), -1)
        if a < 0 and t.view_src is not None:
            a = backend_of.get(id(t.view_src), -1)
        if a < 0:
            return False
        return a == b or self.group[a] == self.group[b] or self.supports_buft(b, self.bufts[a])

    def names(self) -> str:
        return ", ".join(f"{b}:{be.name}" for b, be in enumerate(self.backends))
