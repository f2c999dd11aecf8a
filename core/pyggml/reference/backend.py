"""The numpy backend: the reference oracle every other backend is compared with. Slow, float64, obvious."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pyggml.backend.host import HostBuffer, HostBufferType
from pyggml.backend.op_table import needs_kernel
from pyggml.backend.protocol import (
    FALLBACK_PRIORITY,
    Backend,
    BufferType,
    Bytes,
    Device,
    DeviceCaps,
    DeviceType,
    Registry,
)
from pyggml.errors import ComputeError, PyGGMLError
from pyggml.graph import Graph
from pyggml.profile.sink import NodeTime, ProfileSink, now_ns
from pyggml.reference.kernels.rules import Immediate
from pyggml.reference.table import TABLE
from pyggml.tensor import Tensor


class NumpyRegistry(Registry):
    name = "numpy"

    def __init__(self) -> None:
        super().__init__()
        self._devices = [NumpyDevice(self)]

    def devices(self) -> Sequence[Device]:
        return self._devices

    @property
    def priority(self) -> int:
        """The oracle is the default device only where no other device is (it is slow on purpose)."""
        return FALLBACK_PRIORITY


class NumpyDevice(Device):
    def __init__(self, reg: NumpyRegistry) -> None:
        super().__init__(reg, "numpy", DeviceType.CPU, DeviceCaps(buffer_from_host_ptr=True))
        self._buft = HostBufferType("numpy", self)

    @property
    def description(self) -> str:
        return "numpy reference (float64 math, for correctness, not speed)"

    def memory(self) -> tuple[int, int]:
        from pyggml.backend.sysinfo import host_memory

        return host_memory()

    def new_backend(self) -> Backend:
        return NumpyBackend(self)

    def buffer_type(self) -> BufferType:
        return self._buft

    def buffer_from_host_ptr(self, array: Bytes, max_tensor_size: int) -> HostBuffer:
        return self._buft.wrap(array)

    def supports_op(self, op: Tensor) -> bool:
        return TABLE.supports(op)


class NumpyBackend(Backend):
    """Runs each graph on its caller's thread and keeps nothing between calls, so threads share it freely; after
    `free()` it refuses computes as every backend does."""

    freed = False

    def graph_compute(self, graph: Graph) -> None:
        if self.freed:
            raise self.freed_error()
        for node in graph.nodes:
            compute_node(node)

    def compute_profiled(self, graph: Graph, sink: ProfileSink) -> None:
        """Each node timed on the host clock (one lane: this backend runs on its caller's thread)."""
        if self.freed:
            raise self.freed_error()
        times: list[NodeTime] = []
        for i, node in enumerate(graph.nodes):
            t0 = now_ns()
            compute_node(node)
            if needs_kernel(node):
                times.append(NodeTime(node, i, t0, now_ns()))
        sink.nodes(self.name, graph, times, "thread")

    def free(self) -> None:
        self.freed = True


def compute_node(node: Tensor) -> None:
    """Run the reference kernel of one node (views, NONE and empty results do nothing: `needs_kernel`)."""
    if not needs_kernel(node):
        return
    op = node.op
    rule = TABLE.rule_for(node, "numpy")
    b = Immediate()
    b.node = node
    try:
        with np.errstate(all="ignore"):  # IEEE results (NaN, inf) are the semantics, not warnings
            rule.build(node, b)
    except PyGGMLError as e:
        raise ComputeError(f"numpy: node '{node.name}' ({op.name}, {node.type} ne={list(node.ne)}): {e}") from e
    except (ValueError, TypeError, IndexError, FloatingPointError) as e:
        raise ComputeError(f"numpy: node '{node.name}' ({op.name}, {node.type} ne={list(node.ne)}) failed: "
                           f"{type(e).__name__}: {e}") from e
