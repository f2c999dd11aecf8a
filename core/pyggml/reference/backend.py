"""The numpy backend: the reference oracle every other backend is compared with. Slow, float64, obvious."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pyggml.backend.host import HostBuffer, HostBufferType
from pyggml.backend.protocol import Backend, BufferType, Bytes, Device, DeviceCaps, DeviceType, Registry
from pyggml.errors import ComputeError, PyGGMLError, UnsupportedOpError
from pyggml.graph import Graph
from pyggml.ops.base import VIEW_OPS, Op
from pyggml.reference.kernels import KERNELS
from pyggml.tensor import Tensor, TensorFlag


class NumpyRegistry(Registry):
    def __init__(self) -> None:
        super().__init__("numpy")
        self._devices = [NumpyDevice(self)]

    def devices(self) -> Sequence[Device]:
        return self._devices


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

    def init_backend(self, params: str | None = None) -> Backend:
        return NumpyBackend(self)

    def buffer_type(self) -> BufferType:
        return self._buft

    def buffer_from_host_ptr(self, array: Bytes, max_tensor_size: int) -> HostBuffer:
        return self._buft.wrap(array)

    def supports_op(self, op: Tensor) -> bool:
        return op.op is Op.NONE or op.op in VIEW_OPS or op.op in KERNELS


class NumpyBackend(Backend):
    def graph_compute(self, graph: Graph) -> None:
        for node in graph.nodes:
            compute_node(node)


def compute_node(node: Tensor) -> None:
    """Run the reference kernel of one node (views and NONE do nothing)."""
    op = node.op
    if op is Op.NONE or op in VIEW_OPS or not node.flags & TensorFlag.COMPUTE or node.nelements() == 0:
        return  # an empty result has nothing to compute (as every backend skips it)
    kernel = KERNELS.get(op)
    if kernel is None:
        raise UnsupportedOpError(f"numpy backend has no kernel for {op.name} (node '{node.name}')")
    try:
        with np.errstate(all="ignore"):  # IEEE results (NaN, inf) are the semantics, not warnings
            kernel(node)
    except PyGGMLError as e:
        raise ComputeError(f"numpy: node '{node.name}' ({op.name}, {node.type} ne={list(node.ne)}): {e}") from e
    except (ValueError, TypeError, IndexError, FloatingPointError) as e:
        raise ComputeError(f"numpy: node '{node.name}' ({op.name}, {node.type} ne={list(node.ne)}) failed: "
                           f"{type(e).__name__}: {e}") from e
