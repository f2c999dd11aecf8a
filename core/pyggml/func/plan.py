"""One traced graph of a `pyggml.function`, placed once, replayed by every call with the same signature."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy.typing as npt

from pyggml.backend.protocol import Backend
from pyggml.backend.sched import Scheduler
from pyggml.context import Context
from pyggml.errors import GraphError
from pyggml.func.signature import Signature, ggml_type, ne_of
from pyggml.func.weights import Weights
from pyggml.graph import Graph, build_graph
from pyggml.ops.base import Op
from pyggml.tensor import Tensor, label
from pyggml.tensor_io import TensorIO

Result = npt.NDArray[Any] | tuple[npt.NDArray[Any], ...]


@dataclass
class Plan:
    """The graph of one signature, with its own scheduler (and compute buffers)."""

    signature: Signature
    graph: Graph
    sched: Scheduler
    inputs: list[Tensor]
    """One per argument, numpy order; those the function does not read have no memory and are not written."""
    outputs: list[Tensor]
    single: bool
    """The function returned one tensor (the call returns one array), not a tuple or list of them."""
    writes: list[tuple[int, TensorIO]]
    """(argument index, its input) of the inputs the graph reads."""
    reads: list[TensorIO]
    """The outputs."""

    def run(self, arrays: Sequence[npt.NDArray[Any]]) -> Result:
        """Write the inputs, compute, read the outputs back: what a hand-written scheduler loop does (through
        numpy views where the tensors are in host memory: TensorIO)."""
        sched = self.sched
        with sched.lock:
            for i, io in self.writes:
                io.write(arrays[i])
            sched.graph_compute(self.graph)
            outs = [io.read() for io in self.reads]
        return outs[0] if self.single else tuple(outs)


def trace(fn: Callable[..., Any], name: str, arg_names: Sequence[str], sig: Signature, weights: Weights,
          backends: Sequence[Backend], graph_size: int) -> Plan:
    """Call `fn` on input leafs of signature `sig` and the weights' leafs, build the graph of what it returns,
    store weights multiplied from the right transposed, place the weights read and the graph."""
    ctx = Context(no_alloc=True)
    with ctx:
        inputs = []
        for i, (shape, dtype) in enumerate(sig):
            what = f"{name}: argument {i} ({arg_names[i] if i < len(arg_names) else '?'})"
            nm = arg_names[i] if i < len(arg_names) else f"arg{i}"
            inputs.append(ctx.new_tensor(ggml_type(dtype, what), *ne_of(shape, what), name=nm).set_input())
        returned = fn(*inputs, **weights.leafs())
    outputs, single = _outputs(returned, name)
    graph = build_graph(*outputs, size=graph_size)
    if weights.fold_transposes(graph):
        graph = build_graph(*outputs, size=graph_size)
    sched = Scheduler(backends, graph_size=graph_size)
    weights.place(graph, sched.buffer_type(0))
    sched.alloc_graph(graph)
    writes = [(i, TensorIO(t)) for i, t in enumerate(inputs) if t.buffer is not None]
    return Plan(sig, graph, sched, inputs, outputs, single, writes, [TensorIO(t) for t in outputs])


def _outputs(returned: object, name: str) -> tuple[list[Tensor], bool]:
    single = isinstance(returned, Tensor)
    items = [returned] if single else list(returned) if isinstance(returned, (tuple, list)) else None
    if not items or not all(isinstance(t, Tensor) for t in items):
        raise GraphError(f"{name} returned {type(returned).__name__}; a function traced by pyggml.function returns "
                         "a Tensor, or a tuple or list of Tensors, computed from its arguments")
    outs: list[Tensor] = [t for t in items if isinstance(t, Tensor)]
    for t in outs:
        if t.op is Op.NONE and t.view_src is None:
            raise GraphError(f"{name} returns {label(t)}, one of its arguments or weights unchanged; return "
                             "results of ops (numpy has the array already)")
    return outs, single
