"""Running a plan: per split, wait for the backends it depends on, copy its inputs, compute, record an event.

Ordering rules (events exist per (backend, pipeline slot) only with n_copies > 1 and a device with events; where
there is none, the host synchronises the backend instead):
- before a split: its `wait_for` backends (results read through shared memory; the previous backend when the split
  has no inputs, as the allocator may reuse memory across splits) are waited for;
- user INPUT tensors are copied at once with a blocking copy, after the split backend finished with the slot,
  so the caller may overwrite them as soon as graph_compute_async returns;
- other inputs are copied asynchronously when the split backend can (`cpy_tensor_async`), else the source
  backend is synchronised and the copy is a blocking one;
- after a split, the split backend records its event for the current slot.

With a profile sink (`pyggml.profile`), each split, wait and copy is reported, and each split is computed with
`Backend.compute_profiled` (synchronously: the times are the work's own, not its queueing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyggml.backend.protocol import Backend, Event, tensor_copy
from pyggml.backend.sched.splits import SplitPlan
from pyggml.backend.sched.stats import SchedStats
from pyggml.errors import ComputeError, PyGGMLError
from pyggml.graph import Graph
from pyggml.profile.sink import ProfileSink, now_ns
from pyggml.tensor import Tensor, TensorFlag

EvalCallback = Callable[[Tensor, bool], bool]
"""cb(node, ask): with ask=True, whether the caller wants to see `node` once computed; with ask=False, called
after the node was computed (its backend synchronised); returning False stops the graph."""

Events = Sequence[Sequence[Event | None]]


def compute_splits(backends: Sequence[Backend], plan: SplitPlan, slot: int, events: Events | None,
                   eval_cb: EvalCallback | None, stats: SchedStats, sink: ProfileSink | None = None) -> bool:
    """Run every split of `plan` with pipeline slot `slot`, counting its copies in `stats` and reporting its times
    to `sink` when profiling. False when the eval callback stopped the graph."""
    for i, split in enumerate(plan.splits):
        b = split.backend_id
        backend = backends[b]
        ev_b = events[b][slot] if events is not None else None
        t_split = now_ns() if sink is not None else 0
        try:
            for w in split.wait_for:
                t0 = now_ns() if sink is not None else 0
                ev = events[w][slot] if events is not None else None
                if ev is not None:
                    backend.event_wait(ev)
                else:
                    backends[w].synchronize()
                if sink is not None:
                    sink.span("waits", f"split {i} waits for {backends[w].name}", t0, now_ns(), "wait")
            for src, cps, ib in zip(split.inputs, split.input_copies, split.input_backends, strict=True):
                if sink is None:
                    _copy_input(backends, src, cps[slot], ib, b, ev_b)
                else:
                    _copy_profiled(backends, src, cps[slot], ib, b, ev_b, sink)
            if split.inputs:
                stats.count_copies(len(split.inputs), split.input_bytes)
            graph = split.graphs[slot]
            if eval_cb is None:
                if sink is None:
                    backend.graph_compute_async(graph)
                else:
                    backend.compute_profiled(graph, sink)
            elif not _compute_observed(backend, graph, eval_cb, sink):
                return False
            if ev_b is not None:
                backend.event_record(ev_b)
            if sink is not None:
                sink.span("splits", f"split {i} on {backend.name} ({split.i_end - split.i_start} nodes)", t_split,
                          now_ns(), "split")
        except PyGGMLError as e:
            raise ComputeError(f"scheduler split {i} of {len(plan.splits)} on backend '{backend.name}': {e}") from e
        except Exception as e:
            raise ComputeError(f"scheduler split {i} of {len(plan.splits)} on backend '{backend.name}' failed: "
                               f"{type(e).__name__}: {e}") from e
    return True


def _copy_input(backends: Sequence[Backend], src: Tensor, dst: Tensor, ib: int, b: int, ev: Event | None) -> None:
    backend = backends[b]
    if src.flags & TensorFlag.INPUT:
        if ib != b:
            backends[ib].synchronize()
        _host_wait(backend, ev)
        tensor_copy(src, dst)
        return
    if ev is not None:
        backend.event_wait(ev)
    else:
        backend.synchronize()
    if not backend.cpy_tensor_async(backends[ib], src, dst):
        backends[ib].synchronize()
        _host_wait(backend, ev)
        tensor_copy(src, dst)


def _copy_profiled(backends: Sequence[Backend], src: Tensor, dst: Tensor, ib: int, b: int, ev: Event | None,
                   sink: ProfileSink) -> None:
    """`_copy_input`, waited for and reported as a copy from the source's backend to the split's."""
    t0 = now_ns()
    _copy_input(backends, src, dst, ib, b, ev)
    backends[b].synchronize()
    sink.copy(backends[ib].name, backends[b].name, src, t0, now_ns())


def _host_wait(backend: Backend, ev: Event | None) -> None:
    """Block the host until `backend` is done with the current slot (its event), or with everything."""
    if ev is not None:
        ev.synchronize()
    else:
        backend.synchronize()


def _compute_observed(backend: Backend, graph: Graph, cb: EvalCallback, sink: ProfileSink | None) -> bool:
    """Compute in chunks that end at each node the callback wants to see (profiled with a sink); False if it asked
    to stop."""
    nodes = graph.nodes
    n = len(nodes)
    j0 = 0
    while j0 < n:
        j1 = j0
        need = cb(nodes[j1], True)
        while not need and j1 < n - 1:
            j1 += 1
            need = cb(nodes[j1], True)
        chunk = graph if j0 == 0 and j1 == n - 1 else graph.view(j0, j1 + 1)
        if sink is None:
            backend.graph_compute_async(chunk)
        else:
            backend.compute_profiled(chunk, sink)
        backend.synchronize()
        if need and not cb(nodes[j1], False):
            return False
        j0 = j1 + 1
    return True

