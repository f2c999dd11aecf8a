"""Helpers of the conformance suite's tests (imports pyggml_conformance): the suite's cases once per process, and
test-only backends: the numpy kernels wrapped with a deliberate bug (registered in-process through
`pyggml.backend.hub().register(reg)`), so the suite can be shown to catch each kind of failure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from pyggml.backend import hub
from pyggml.backend.host import HostBufferType
from pyggml.backend.protocol import Backend, BufferType, Device, DeviceType, Registry
from pyggml.graph import Graph
from pyggml.ops.base import Op
from pyggml.reference.access import raw_bytes
from pyggml.reference.backend import compute_node
from pyggml.tensor import Tensor
from pyggml_conformance.case import Case
from pyggml_conformance.cases import all_cases, select


@lru_cache(maxsize=1)
def suite() -> tuple[Case, ...]:
    """Every case of the suite (built once: building them all takes a while)."""
    return tuple(all_cases())


def cases_of(op: str, params: str | None = None, n: int | None = None) -> list[Case]:
    """The cases of `op` whose parameters match `params` (a regex), the first `n` of them."""
    picked = select(suite(), {op}, params)
    return picked[:n] if n is not None else picked


# ---- backends with a deliberate bug -----------------------------------------------------------------------------

Bug = Callable[[Tensor], None]


class BuggyRegistry(Registry):
    def __init__(self, name: str, bug: Bug | None, ops: frozenset[Op], unsupported: frozenset[Op] = frozenset(),
                 replace: bool = False) -> None:
        super().__init__(name)
        self._devices = [BuggyDevice(self, bug, ops, unsupported, replace)]

    def devices(self) -> Sequence[Device]:
        return self._devices


class BuggyDevice(Device):
    def __init__(self, reg: BuggyRegistry, bug: Bug | None, ops: frozenset[Op], unsupported: frozenset[Op],
                 replace: bool) -> None:
        super().__init__(reg, reg.name, DeviceType.CPU)
        self.bug = bug
        self.ops = ops
        self.unsupported = unsupported
        self.replace = replace
        self._buft = HostBufferType(reg.name, self)
        self._numpy = hub().device("numpy")

    @property
    def description(self) -> str:
        return f"numpy kernels with a deliberate bug ({self.name})"

    def memory(self) -> tuple[int, int]:
        return 1 << 30, 1 << 30

    def new_backend(self) -> Backend:
        return BuggyBackend(self)

    def buffer_type(self) -> BufferType:
        return self._buft

    def supports_op(self, op: Tensor) -> bool:
        return op.op not in self.unsupported and self._numpy.supports_op(op)


class BuggyBackend(Backend):
    device: BuggyDevice

    def graph_compute(self, graph: Graph) -> None:
        dev = self.device
        for node in graph.nodes:
            hit = node.op in dev.ops and dev.bug is not None
            if not (hit and dev.replace):
                compute_node(node)
            if hit:
                assert dev.bug is not None
                dev.bug(node)


# ---- the bugs ---------------------------------------------------------------------------------------------------


def write_past_end(node: Tensor) -> None:
    """Four bytes just past the end of the result (a kernel whose loop bound is off by one)."""
    buf = node.buffer
    assert buf is not None
    arr = buf.host_array()
    assert arr is not None
    end = node.offset + node.nbytes()
    arr[end : end + 4] = 0


def write_before_start(node: Tensor) -> None:
    buf = node.buffer
    assert buf is not None
    arr = buf.host_array()
    assert arr is not None
    arr[node.offset - 4 : node.offset] = 7


def scaled(factor: float) -> Bug:
    """A wrong kernel: every result value multiplied by `factor`."""

    def bug(node: Tensor) -> None:
        vals = node.element_view(raw_bytes(node))
        vals[...] = (vals.astype(np.float64) * factor).astype(vals.dtype)

    bug.__name__ = f"scaled_{factor:g}"
    return bug


off_by_one_percent = scaled(1.01)


def crash(node: Tensor) -> None:
    raise RuntimeError(f"kernel exploded on {node.name}")


def nothing(node: Tensor) -> None:
    """Used with replace=True: the kernel never writes its result."""


def scribble_on_input(node: Tensor) -> None:
    """Writes into src[0] (a kernel that works in place when it must not)."""
    s = node.src[0]
    assert s is not None
    raw_bytes(s.data_owner)[:4] ^= 0xFF


def make_nan(node: Tensor) -> None:
    vals = node.element_view(raw_bytes(node))
    vals.reshape(-1)[0] = np.nan
