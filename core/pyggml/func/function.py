"""`pyggml.function`: a Python function of tensors, run with numpy arrays in and out.

    mlp = pyggml.function(lambda x, w1, w2: ops.soft_max(ops.relu(x @ w1) @ w2),
                          weights={"w1": W1, "w2": W2}, device="Vulkan0")
    probs = mlp(X)                       # traced, placed and run; the next call with X's shape and dtype replays

The function is called once per input signature (each argument's numpy shape and dtype) with input tensors of
those shapes and the weights as keyword arguments (leaf tensors in numpy order); what it returns, a tensor or a
tuple of them, is built into a graph, placed by a scheduler of its own (the device's backend, then a CPU backend
for ops the device lacks) and kept. Every call writes the arguments into the graph's inputs, computes and reads
the outputs back as numpy arrays: the hand-written scheduler loop of docs/library.md, without the bookkeeping.
Weights are written to the device once, when a graph first reads them (a weight multiplied from the right, `x @ w`,
is stored transposed: pyggml.func.weights). See docs/library.md, "A function of numpy arrays".
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from pyggml.backend.protocol import Backend, Device
from pyggml.backend.sched.backends import DeviceChoice, backends_for
from pyggml.func.plan import Plan, Result, trace
from pyggml.func.signature import signature
from pyggml.func.weights import Weights
from pyggml.graph import DEFAULT_GRAPH_SIZE

TensorFunction = Callable[..., Any]
"""fn(*inputs, **weights) -> Tensor | tuple[Tensor, ...] | list[Tensor]."""


class Function:
    """`fn` traced into one graph per input signature and replayed with numpy arrays (see the module docstring).
    Threads may share it: a signature's first trace holds the function's lock, and each call holds its plan's
    scheduler lock from writing the inputs to reading the outputs."""

    def __init__(self, fn: TensorFunction, *, device: DeviceChoice = None,
                 weights: Mapping[str, npt.ArrayLike] | None = None, graph_size: int = DEFAULT_GRAPH_SIZE) -> None:
        self.fn = fn
        self.name = getattr(fn, "__qualname__", repr(fn))
        self._weights = Weights(weights or {})
        names = self._weights.leafs()
        self._arg_names = [p.name for p in _parameters(fn) if p.name not in names
                           and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.backends: list[Backend] = backends_for(device)
        """The device's backend, then the CPU fallback (absent when the device is a CPU device)."""
        self.graph_size = graph_size
        self._plans: dict[Any, Plan] = {}
        self._lock = threading.Lock()

    @property
    def device(self) -> Device:
        return self.backends[0].device

    def __call__(self, *args: npt.ArrayLike) -> Result:
        """fn's results for these arrays, as numpy arrays (one array, or a tuple when fn returns several)."""
        arrays = [np.asarray(a) for a in args]
        plan = self._plans.get(signature(arrays))
        if plan is None:
            plan = self.plan_for(*arrays)
        return plan.run(arrays)

    def plan_for(self, *args: npt.ArrayLike) -> Plan:
        """The plan (graph, scheduler, input and output tensors) calls with these arrays' shapes and dtypes run,
        traced and placed now if it is new: `f.plan_for(X).sched.debug_text()` shows where each op runs."""
        sig = signature([np.asarray(a) for a in args])
        with self._lock:
            plan = self._plans.get(sig)
            if plan is None:
                plan = trace(self.fn, self.name, self._arg_names, sig, self._weights, self.backends,
                             self.graph_size)
                self._plans[sig] = plan
        return plan

    @property
    def plans(self) -> list[Plan]:
        """The plans traced so far, one per signature called with (each holds its own compute buffers)."""
        return list(self._plans.values())

    def set_weight(self, name: str, values: npt.ArrayLike) -> None:
        """Write new values (the same numpy shape) into weight `name`, on the device, for every later call."""
        with self._lock:
            self._weights.set(name, values)

    def clear(self) -> None:
        """Drop every plan and its compute buffers; the weights stay on the device."""
        with self._lock:
            self._plans.clear()


def _parameters(fn: TensorFunction) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin or callable without a signature: arguments are named argN
        return []


@overload
def function(fn: TensorFunction, *, device: DeviceChoice = None,
             weights: Mapping[str, npt.ArrayLike] | None = None, graph_size: int = DEFAULT_GRAPH_SIZE) -> Function: ...


@overload
def function(fn: None = None, *, device: DeviceChoice = None,
             weights: Mapping[str, npt.ArrayLike] | None = None,
             graph_size: int = DEFAULT_GRAPH_SIZE) -> Callable[[TensorFunction], Function]: ...


def function(fn: TensorFunction | None = None, *, device: DeviceChoice = None,
             weights: Mapping[str, npt.ArrayLike] | None = None,
             graph_size: int = DEFAULT_GRAPH_SIZE) -> Function | Callable[[TensorFunction], Function]:
    """`fn` as a `Function` run on `device` (a name such as "cpu", "OpenCL0", "Vulkan0", a Device, a Backend made
    with options, or None for the default device) with `weights` (name -> array, passed to fn as keyword
    arguments, written to the device once). Also a decorator: `@pyggml.function(device="cpu")`."""
    if fn is None:
        return lambda f: Function(f, device=device, weights=weights, graph_size=graph_size)
    return Function(fn, device=device, weights=weights, graph_size=graph_size)
