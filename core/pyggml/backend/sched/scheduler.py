"""Scheduler: run one graph across several backends (ggml_backend_sched).

    sched = Scheduler([gpu, cpu])            # priority = list order; the last one must be a CPU backend
    sched.reserve(worst_case_graph)          # optional: size the compute buffers once
    sched.alloc_graph(graph)                 # passes 1-5, then the graph allocator places every tensor
    inp.set(values)                          # write inputs into their (now placed) tensors
    sched.graph_compute(graph)               # copies between splits, events, compute
    sched.graph_compute(graph)               # replay: no pass, no allocation

A plan (assignments, splits, copies, allocation graph) is kept for the last graph. Calling alloc_graph or
graph_compute with that same graph object (same node and leaf counts, no set_tensor_backend since) reuses it; any
other graph is planned afresh. reset() drops the plan and the user's backend assignments.

Threads: every method holds the scheduler's `lock` (a re-entrant lock), so threads sharing a scheduler never
see each other's half-made plan. Its compute buffers are shared too: a thread that places a graph, writes its
inputs, computes and reads its outputs holds `with sched.lock:` over that whole sequence. An alloc_graph whose
placement another thread replaced before this thread's graph_compute of that graph raises GraphError (the inputs
written in between were lost) instead of computing on them. See docs/backend-protocol.md, "Threads".
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Sequence

from pyggml.alloc import GraphAllocator
from pyggml.backend.core_options import SchedulerOptions
from pyggml.backend.protocol import Backend, BufferType, Event
from pyggml.backend.sched import debug
from pyggml.backend.sched.compute import EvalCallback, compute_splits
from pyggml.backend.sched.passes import assign_backends
from pyggml.backend.sched.splits import Split, SplitPlan, cut_splits
from pyggml.backend.sched.stats import SchedStats
from pyggml.backend.sched.table import MAX_COPIES, BackendTable, SchedulerConfigError
from pyggml.errors import AllocationError, GraphError, InputNotWrittenError
from pyggml.graph import DEFAULT_GRAPH_SIZE, Graph
from pyggml.profile.sink import active_sink
from pyggml.tensor import Tensor, TensorFlag, label

log = logging.getLogger(__name__)


class Scheduler:
    """One graph over several backends. See the module docstring and docs/scheduler.md."""

    def __init__(self, backends: Sequence[Backend], bufts: Sequence[BufferType | None] | None = None,
                 graph_size: int = DEFAULT_GRAPH_SIZE, parallel: bool = False, op_offload: bool = True,
                 *, n_copies: int | None = None, options: SchedulerOptions | None = None) -> None:
        copies = (MAX_COPIES if parallel else 1) if n_copies is None else n_copies
        if not 1 <= copies <= MAX_COPIES:
            raise SchedulerConfigError(f"n_copies must be in 1..{MAX_COPIES} (pipeline slots), got {copies}")
        self._lock = threading.RLock()
        self._pending: dict[int, int] = {}
        """Thread id -> uid of the graph that thread placed with alloc_graph and has not computed yet."""
        self._tab = BackendTable(backends, bufts)
        self._galloc = GraphAllocator(self._tab.bufts)  # over the table's buffer types, resolved and checked
        self._tab.owns = self._galloc.owns  # the allocator's buffers are the ones whose tensors move every run
        self.graph_size = graph_size
        self.op_offload = op_offload
        self._n_copies = copies
        self._events: list[list[Event | None]] | None = None
        if copies > 1:
            self._events = [[dev.event_new() if dev.caps.events else None for _ in range(copies)]
                            for dev in self._tab.devices]
        self._cur_copy = 0
        self._next_copy = 0
        self._user: dict[int, tuple[Tensor, int]] = {}
        self._dirty = False
        self._plan: SplitPlan | None = None
        self._is_alloc = False
        self._inputs: list[Tensor] = []
        """The placed graph's inputs: its leafs (data owners with elements) that the graph allocator placed."""
        self._consumed: list[Tensor] = []
        """Those of `_inputs` whose memory the allocator may give to intermediates (all but OUTPUT ones): a compute
        consumes what was written into them."""
        self._prev_groups: tuple[list[int], list[int]] | None = None
        self._eval_cb: EvalCallback | None = None
        self.stats = SchedStats()
        self.debug_level = (options or SchedulerOptions.from_env()).debug
        """Plans printed to stderr: 0 none, 1 splits, 2 nodes too (`SchedulerOptions.debug`, PYGGML_SCHED_DEBUG)."""

    @property
    def lock(self) -> threading.RLock:
        """The re-entrant lock every method holds. Threads sharing this scheduler hold it over a whole use:
        `with sched.lock: sched.alloc_graph(g); set inputs; sched.graph_compute(g); read outputs`."""
        return self._lock

    def _forget_pending(self) -> None:
        """This thread changes the plan itself: its last alloc_graph is no longer waiting for its compute."""
        self._pending.pop(threading.get_ident(), None)

    # ---- queries ----------------------------------------------------------------------------------------------

    @property
    def backends(self) -> list[Backend]:
        return list(self._tab.backends)

    @property
    def n_backends(self) -> int:
        return self._tab.n

    @property
    def n_copies(self) -> int:
        """Pipeline slots (1, or up to 4 with parallel=True)."""
        return self._n_copies

    @property
    def cur_copy(self) -> int:
        return self._cur_copy

    @property
    def splits(self) -> list[Split]:
        with self._lock:
            return [] if self._plan is None else list(self._plan.splits)

    @property
    def n_splits(self) -> int:
        with self._lock:
            return 0 if self._plan is None else len(self._plan.splits)

    @property
    def n_split_inputs(self) -> int:
        """Tensors copied between backends per run of the current plan (each once per (tensor, backend))."""
        with self._lock:
            return 0 if self._plan is None else self._plan.n_split_inputs

    @property
    def split_input_bytes(self) -> int:
        """Bytes those copies move per run of the current plan."""
        with self._lock:
            return 0 if self._plan is None else self._plan.split_input_bytes

    @property
    def plan(self) -> SplitPlan | None:
        return self._plan

    def backend_index(self, backend: Backend | int) -> int:
        if isinstance(backend, int):
            if not 0 <= backend < self._tab.n:
                raise SchedulerConfigError(f"backend index {backend} is not in 0..{self._tab.n - 1}")
            return backend
        for i, b in enumerate(self._tab.backends):
            if b is backend:
                return i
        raise SchedulerConfigError(f"backend '{backend.name}' is not one of this scheduler's: {self._tab.names()}")

    def buffer_type(self, backend: Backend | int) -> BufferType:
        return self._tab.bufts[self.backend_index(backend)]

    def buffer_size(self, backend: Backend | int) -> int:
        """Bytes of compute buffer for this backend (0 when it shares an earlier backend's buffer type)."""
        with self._lock:
            return self._galloc.buffer_size(self.backend_index(backend))

    # ---- assignments ------------------------------------------------------------------------------------------

    def set_tensor_backend(self, tensor: Tensor, backend: Backend | int) -> None:
        """Run (or place) `tensor` on `backend`; kept until reset(), applied when the next graph is planned."""
        with self._lock:
            self._forget_pending()
            self._user[id(tensor)] = (tensor, self.backend_index(backend))
            self._dirty = True

    def get_tensor_backend(self, tensor: Tensor) -> Backend | None:
        """The backend `tensor` is assigned to by the current plan (or by set_tensor_backend), else None."""
        with self._lock:
            b = -1
            if self._plan is not None:
                b = self._plan.backend_of.get(id(tensor), -1)
            if b < 0 and id(tensor) in self._user:
                b = self._user[id(tensor)][1]
            return self._tab.backends[b] if b >= 0 else None

    def set_eval_callback(self, cb: EvalCallback | None) -> None:
        """cb(node, ask) -> bool: see pyggml.backend.sched.compute.EvalCallback. It runs inside graph_compute,
        with the scheduler's lock held."""
        with self._lock:
            self._eval_cb = cb

    # ---- planning ---------------------------------------------------------------------------------------------

    def split_graph(self, graph: Graph) -> SplitPlan:
        """Passes 1-5 on `graph` (dropping any previous plan); nothing is allocated."""
        with self._lock:
            self._forget_pending()
            return self._split_graph(graph)

    def _split_graph(self, graph: Graph) -> SplitPlan:
        self._drop_plan()
        n = graph.n_nodes + graph.n_leafs
        if n > self.graph_size:
            raise GraphError(f"graph {graph.uid} has {graph.n_nodes} nodes and {graph.n_leafs} leafs; this scheduler "
                             f"was made for graph_size={self.graph_size}")
        tab = self._tab
        tab.new_graph()
        backend_of: dict[int, int] = {}
        cause: dict[int, str] = {}
        for k, (_, b) in self._user.items():
            backend_of[k] = b
            cause[k] = "usr"
        assign_backends(tab, graph, backend_of, cause, self.op_offload)
        plan = cut_splits(tab, graph, backend_of, cause, self._n_copies, self._cur_copy)
        self._plan = plan
        self._dirty = False
        self.stats.plans += 1
        log.debug("planned graph %d: %d nodes -> %d splits, %d copies", graph.uid, graph.n_nodes,
                  len(plan.splits), plan.n_split_inputs)
        if self.debug_level > 0:
            print(debug.format_plan(tab, plan, self.debug_level), file=sys.stderr)
        return plan

    def _drop_plan(self) -> None:
        if self._plan is not None:
            self._plan.restore()
            self._plan = None
        self._is_alloc = False
        self._inputs = self._consumed = []

    def _is_current(self, graph: Graph) -> bool:
        p = self._plan
        return (p is not None and p.graph is graph and p.n_nodes == graph.n_nodes and p.n_leafs == graph.n_leafs
                and not self._dirty)

    def reserve(self, graph: Graph) -> None:
        """Size the compute buffers for `graph` (a worst-case graph), then forget it: later graphs that fit are
        placed without growing the buffers."""
        with self._lock:
            self.synchronize()
            plan = self.split_graph(graph)
            try:
                self._reserve(plan)
            finally:
                self.reset()

    def _reserve(self, plan: SplitPlan) -> None:
        self._galloc.reserve(plan.alloc_graph, plan.node_ids, plan.leaf_ids)
        self._prev_groups = self._groups(plan)
        self.stats.reserves += 1

    def _groups(self, plan: SplitPlan) -> tuple[list[int], list[int]]:
        group = self._tab.group
        return [group[b] for b in plan.node_ids], [group[b] for b in plan.leaf_ids]

    def alloc_graph(self, graph: Graph) -> None:
        """Advance the pipeline slot, plan `graph` (unless it is the current plan's graph) and place its tensors.
        With threads sharing the scheduler, hold `lock` from here to the end of the graph's use (see `lock`)."""
        with self._lock:
            self._forget_pending()
            self._alloc_graph(graph)
            self._pending[threading.get_ident()] = graph.uid

    def _alloc_graph(self, graph: Graph) -> None:
        self._cur_copy = self._next_copy
        self._next_copy = (self._next_copy + 1) % self._n_copies
        if self._is_current(graph) and self._is_alloc:
            assert self._plan is not None
            self._plan.wire(self._cur_copy)
            return
        plan = self._split_graph(graph)
        self._alloc(plan)

    def _alloc(self, plan: SplitPlan) -> None:
        galloc = self._galloc
        self.stats.allocs += 1
        if self._prev_groups != self._groups(plan) or not galloc.alloc_graph(plan.alloc_graph):
            # placements move: nothing queued may still use the old addresses
            log.debug("graph %d: reserving compute buffers", plan.graph.uid)
            for b in self._tab.backends:
                b.synchronize()
            self._reserve(plan)
            if not galloc.alloc_graph(plan.alloc_graph):
                raise AllocationError(f"scheduler: graph {plan.graph.uid} does not fit right after its own reserve")
        self._is_alloc = True
        self._find_inputs(plan.graph)

    def _find_inputs(self, graph: Graph) -> None:
        """List the graph inputs the allocator just placed; what was written into them before is gone."""
        galloc = self._galloc
        inputs = [t for t in graph.leafs
                  if t.view_src is None and t.buffer is not None and galloc.owns(t.buffer) and t.nelements() > 0]
        for t in inputs:
            t.written = False
        self._inputs = inputs
        self._consumed = [t for t in inputs if not t.flags & TensorFlag.OUTPUT]

    def _consume_inputs(self, graph: Graph) -> None:
        """InputNotWrittenError naming the graph inputs not written since they were placed or last consumed;
        else the compute consumes them (docs/scheduler.md, "Graph inputs")."""
        missing = [t for t in self._inputs if not t.written]
        if missing:
            names = ", ".join(f"{label(t)} {t.type} ne={list(t.ne)}" for t in missing[:8])
            more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
            raise InputNotWrittenError(
                f"scheduler: graph {graph.uid} reads {len(missing)} input(s) not written since alloc_graph placed "
                f"them or the last graph_compute consumed them: {names}{more}. The memory of a graph input (a leaf "
                "the scheduler places) is given to intermediates once its last reader ran, on every device: write "
                "every input (Tensor.set) after alloc_graph and before each graph_compute. A value that must last "
                "across computes belongs in a buffer of its own (alloc_ctx_tensors), or mark the leaf set_output() "
                "so that its memory is never reused"
            )
        for t in self._consumed:
            t.written = False

    # ---- running ----------------------------------------------------------------------------------------------

    def graph_compute_async(self, graph: Graph) -> bool:
        """Queue every split of `graph` (planning and allocating it first unless it is allocated already).
        Returns False when the eval callback stopped the run. GraphError when this thread placed `graph` with
        alloc_graph and another thread planned, placed or reset this scheduler before this call."""
        with self._lock:
            placed = self._pending.pop(threading.get_ident(), None)
            for t in [t for t, uid in self._pending.items() if uid == graph.uid]:  # computed: nothing waits
                del self._pending[t]
            ready = self._is_alloc and self._is_current(graph)
            if placed == graph.uid and not ready:
                raise GraphError(f"scheduler: graph {graph.uid} was placed by alloc_graph on this thread, then "
                                 "another thread planned, placed or reset this scheduler before its graph_compute; "
                                 "what was written into its tensors since (its inputs) is lost. Threads sharing a "
                                 "scheduler hold `with sched.lock:` over alloc_graph, setting the inputs, "
                                 "graph_compute and reading the outputs")
            if not ready:
                self._alloc_graph(graph)
            plan = self._plan
            assert plan is not None
            self._consume_inputs(graph)
            self.stats.begin_compute()
            return compute_splits(self._tab.backends, plan, self._cur_copy, self._events, self._eval_cb, self.stats,
                                  active_sink())

    def graph_compute(self, graph: Graph) -> bool:
        with self._lock:
            done = self.graph_compute_async(graph)
            self.synchronize()
            return done

    def synchronize(self) -> None:
        """Wait for every backend. Without an allocated graph the next one starts at pipeline slot 0 again."""
        with self._lock:
            for b in self._tab.backends:
                b.synchronize()
            if not self._is_alloc:
                self._next_copy = 0

    def reset(self) -> None:
        """Forget the plan (the graph's srcs are restored) and the set_tensor_backend assignments."""
        with self._lock:
            self._forget_pending()
            self._drop_plan()
            self._user.clear()
            self._dirty = False

    # ---- debugging --------------------------------------------------------------------------------------------

    def debug_text(self, level: int = 2) -> str:
        """The plan as text: level 1 splits and their inputs, level 2 every node with backend, cause, uses."""
        with self._lock:
            if self._plan is None:
                return "(no graph planned)"
            return debug.format_plan(self._tab, self._plan, level)

    def to_dot(self) -> str:
        """Graphviz DOT of the planned graph: nodes coloured by backend, one cluster per split, copies dashed."""
        with self._lock:
            if self._plan is None:
                raise GraphError("scheduler: no graph planned; call alloc_graph or split_graph first")
            return debug.to_dot(self._tab, self._plan)

    def to_svg(self) -> str:
        """An SVG picture of the planned graph: one lane per backend, nodes in execution order, split
        boundaries and copies (drawn by pyggml, no Graphviz needed)."""
        with self._lock:
            if self._plan is None:
                raise GraphError("scheduler: no graph planned; call alloc_graph or split_graph first")
            return debug.to_svg(self._tab, self._plan)
