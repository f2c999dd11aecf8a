"""The toy backend: one table of kernels, which both `supports_op` and `graph_compute` read, so what the device
claims and what it runs cannot drift apart.

Kernels read and write tensors through strided numpy views of the buffer's memory, so any layout (permuted,
strided, in place) works; they accept F32 only. Nodes that do no work (NONE and the view ops) are accepted and
skipped, as the protocol requires: refusing them would make the scheduler and the conformance suite treat every
graph holding a view as unsupported.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from pyggml.backend.op_table import FREE_OPS, needs_kernel
from pyggml.backend.protocol import Backend
from pyggml.errors import ComputeError, PyGGMLError
from pyggml.graph import Graph
from pyggml.ops.base import Op
from pyggml.ops.elementwise import ScaleParams
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_toy.buffer import ToyBuffer
from pyggml_toy.device import ToyDevice

F32 = npt.NDArray[np.float32]


def view(t: Tensor) -> F32:
    """t's elements (numpy order) as a strided view into its buffer's memory."""
    buf = t.buffer
    if not isinstance(buf, ToyBuffer):
        raise ComputeError(f"toy: tensor '{t.name}' is in {buf!r}, not in a toy buffer")
    return np.ndarray(t.ne[::-1], np.float32, buf.array, t.offset, t.nb[::-1])


def repeated(b: F32, shape: tuple[int, ...]) -> F32:
    """b repeated to `shape` (ggml broadcasts by whole repeats: each dim of b divides the result's)."""
    reps = tuple(n // m for n, m in zip(shape, b.shape, strict=True))
    return b if all(r == 1 or m == 1 for r, m in zip(reps, b.shape, strict=True)) else np.tile(b, reps)


def _add(node: Tensor, a: F32, b: F32) -> F32:
    return a + repeated(b, a.shape)


def _mul(node: Tensor, a: F32, b: F32) -> F32:
    return a * repeated(b, a.shape)


def _scale(node: Tensor, a: F32) -> F32:
    p: ScaleParams = node.params
    return (a.astype(np.float64) * p.s + p.b).astype(np.float32)


KERNELS: dict[Op, Callable[..., F32]] = {Op.ADD: _add, Op.MUL: _mul, Op.SCALE: _scale}


def supports(node: Tensor) -> bool:
    """Views and NONE always; the kernels' ops when the result and every source are F32."""
    if node.op in FREE_OPS:
        return True
    return node.op in KERNELS and all(t.type is GGMLType.F32 for t in (node, *node.src) if t is not None)


class ToyBackend(Backend):
    device: ToyDevice

    def __init__(self, device: ToyDevice) -> None:
        super().__init__(device)
        self._lock = threading.Lock()
        """One graph at a time: two threads sharing this backend get correct results, one after the other."""

    def graph_compute(self, graph: Graph) -> None:
        with self._lock:
            for node in graph.nodes:
                if not needs_kernel(node):  # core's one filter: leaves, views and empty results do no work
                    continue
                kernel = KERNELS.get(node.op)
                if kernel is None or not supports(node):
                    raise ComputeError(f"toy: node '{node.name}' ({node.op.name}, {node.type}) is not supported "
                                       "(supports_op refuses it)")
                try:
                    srcs = [view(s) for s in node.src if s is not None]
                    view(node)[...] = kernel(node, *srcs)
                except PyGGMLError as e:
                    raise ComputeError(f"toy: node '{node.name}' ({node.op.name}): {e}") from e
                except (ValueError, TypeError) as e:
                    raise ComputeError(f"toy: node '{node.name}' ({node.op.name}) failed: "
                                       f"{type(e).__name__}: {e}") from e
