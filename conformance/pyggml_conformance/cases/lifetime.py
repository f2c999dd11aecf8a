"""Lifetimes and sharing across threads (issue 33), the misuse family's second half: buffers, backends and
schedulers freed, reused and shared the way docs/backend-protocol.md (Threads) allows, on every device. Each
scenario must end in right numbers or a clear PyGGMLError, never in a crash, a hang or a wrong result.

- free_during_compute_loop: one thread computes a chain of MUL_MATs again and again, another frees its buffer;
  every compute that returns gave the right result, the others raised, and the next compute is refused.
- backend_use_after_free / free_backend_during_compute: `Backend.free()` from the same thread or while another
  thread computes on it; every later compute raises ComputeError, a second free does nothing, the device stays
  usable through a new backend.
- reuse_freed_memory: a buffer freed, a new one of the same size allocated (the driver may hand back the same
  memory, handle or address) and computed on; the old graph, which still references the old tensors, is refused
  and leaves the new buffer's bytes alone.
- alloc_free_cycles: many buffers of varied sizes allocated, written, read, computed on and freed; a device that
  accounts its memory exactly gets all of it back (within SLACK, over a few looks: see `_lost_memory`).
- two_threads_one_buffer: two threads, each with its own backend and graph, all tensors in one shared buffer.
- two_threads_one_scheduler: one Scheduler shared by a thread that holds `sched.lock` over alloc_graph, inputs,
  compute and outputs, a thread whose inputs and outputs live in buffers of their own, and a thread that resets it.

Parameters carry `misuse=...` like misuse.py's, so `--params misuse=` selects the whole family."""

from __future__ import annotations

import functools
import gc
import threading
import time
import weakref
from collections.abc import Callable

import numpy as np

from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import Backend, Buffer, Bytes, Device
from pyggml.backend.registry import hub
from pyggml.backend.sched import Scheduler
from pyggml.context import Context
from pyggml.errors import PyGGMLError
from pyggml.graph import Graph, build_graph
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_conformance.case import Case, CaseBuilder, Scenario, fmt_params
from pyggml_conformance.cases.misuse import JOIN_S, Job, _compute, _place, _raises, _support_graph, rounds, run_threads
from pyggml_conformance.compare import nmse_check

D, C, LAYERS = 128, 32, 4
"""The chain of free_during_compute_loop: LAYERS MUL_MATs of a DxD matrix into DxC columns (long enough that a
free from another thread lands inside a compute now and then)."""
LOOP_S = 0.4
"""How long the freeing scenarios let computes run before and after the free."""
ROUNDS = 12
"""Rounds per thread of the sharing scenarios."""
CYCLES = 40


class Chain:
    """y = w_L @ ... @ w_1 @ x in one buffer of its own on `dev`."""

    def __init__(self, dev: Device, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.ws = [rng.uniform(-1, 1, (D, D)).astype(np.float32) / np.sqrt(D) for _ in range(LAYERS)]
        self.x = rng.uniform(-1, 1, (C, D)).astype(np.float32)
        ctx = Context(no_alloc=True)
        wt = [ctx.new_tensor("f32", D, D, name=f"w{i}") for i in range(LAYERS)]
        xt = ctx.new_tensor("f32", D, C, name="x")
        y = xt
        for w in wt:
            y = ops.mul_mat(w, y)
        self.y = y
        self.graph = build_graph(y)
        self.buffer = _place(self.graph, dev)
        for t, v in zip(wt, self.ws, strict=True):
            t.set(v)
        xt.set(self.x)

    def check(self) -> str | None:
        v = self.x.astype(np.float64)
        for w in self.ws:
            v = v @ w.astype(np.float64).T
        got = self.y.numpy().astype(np.float64)
        verdict = nmse_check(v, got, 1e-5)
        return None if verdict.ok else f"wrong result against numpy: {verdict.error}"


def _computes_until_refused(compute: Callable[[], object], check: Callable[[], str | None], stop: threading.Event,
                            done: list[int], problems: list[str]) -> None:
    """Compute and check until stop is set or a compute raises a PyGGMLError (the refusal the free brings).
    A result read after a completed compute must be right, or its read raise a PyGGMLError."""
    while not stop.is_set():
        try:
            compute()
            bad = check()
        except PyGGMLError:
            return
        if bad:
            problems.append(bad)
            return
        done[0] += 1


def _free_under_computes(compute: Callable[[], object], check: Callable[[], str | None],
                         free: Callable[[], None]) -> str | None:
    """One thread computes in a loop; after a couple of computes (or LOOP_S) this one frees; then the loop and the
    free must both end and every checked result have been right."""
    stop, done, problems = threading.Event(), [0], list[str]()
    worker = threading.Thread(target=_computes_until_refused, args=(compute, check, stop, done, problems),
                              daemon=True)
    worker.start()
    deadline = time.monotonic() + LOOP_S
    while done[0] < 2 and time.monotonic() < deadline and worker.is_alive():
        time.sleep(0.002)
    freer = threading.Thread(target=free, daemon=True)
    freer.start()
    freer.join(JOIN_S)
    time.sleep(LOOP_S / 4)
    stop.set()
    worker.join(JOIN_S)
    if freer.is_alive() or worker.is_alive():
        return f"free() during computes from another thread did not end in {JOIN_S:g} s (hang)"
    return "; ".join(problems) or None


# ---- buffers ----------------------------------------------------------------------------------------------------


def free_during_compute_loop(dev: Device) -> str | None:
    be = dev.init_backend()
    try:
        for i in range(3):
            chain = Chain(dev, 100 + i)
            compute = functools.partial(_compute, be, chain.graph)
            bad = _free_under_computes(compute, chain.check, chain.buffer.free)
            bad = bad or _raises(compute, "compute after free")
            if bad:
                return f"round {i}: {bad}"
        return None
    finally:
        be.free()


def _reuse_round(dev: Device, be: Backend, seed: int) -> str | None:
    old = Job(dev, seed)
    _compute(be, old.graph)
    bad = old.check()
    if bad:
        return f"before the free: {bad}"
    old.buffer.free()
    new = Job(dev, seed + 100)  # the same sizes: the driver may give the old memory (address, handle) again
    try:
        _compute(be, new.graph)
        bad = new.check()
        if bad:
            return f"in the new buffer: {bad}"
        before = new.buffer.read(0, new.buffer.size)
        for fn, what in ((lambda: _compute(be, old.graph), "compute of the old graph after its buffer's free"),
                         (lambda: old.y.numpy(), "read of an old tensor"),
                         (lambda: old.b.set(old.x), "write of an old tensor")):
            bad = _raises(fn, what)
            if bad:
                return bad
        if not np.array_equal(new.buffer.read(0, new.buffer.size), before):
            return "using the old graph changed the bytes of the buffer allocated after its free"
        return None
    finally:
        new.buffer.free()


def reuse_freed_memory(dev: Device) -> str | None:
    be = dev.init_backend()
    try:
        for i in range(3):
            bad = _reuse_round(dev, be, 200 + i)
            if bad:
                return f"round {i}: {bad}"
        return None
    finally:
        be.free()


SLACK = 64 << 10
"""Device memory that may move besides the buffers a case takes: a buffer's rounding, the small allocations a
backend or an RPC server keeps for its own (a kept graph's plan, say) and gives back later."""


def _exact_accounting(dev: Device) -> bool:
    """Whether the device's free memory drops by what a buffer takes, within SLACK (then a leak is measurable)."""
    size = 3 << 20
    before = dev.memory()[0]
    buf = dev.buffer_type().alloc_buffer(size)
    taken = before - dev.memory()[0]
    buf.free()
    return size <= taken <= size + SLACK


def _lost_memory(dev: Device, free0: int, looks: int = 25) -> int:
    """Device memory free at the start (`free0`) less what is free now, the least of looks 0.2 s apart (up to 5 s,
    ending at the first that finds nothing lost): a device shared with other clients (an RPC server's, the
    conformance suite's other jobs on it) moves by their buffers too, and a leak of this case's own stays in every
    look. One second was too short: through an RPC server on PoCL another job's case held 64 MiB for longer."""
    lost = free0
    for i in range(looks):
        gc.collect()
        lost = min(lost, free0 - dev.memory()[0])
        if lost <= SLACK:
            break
        if i + 1 < looks:
            time.sleep(0.2)
    return lost


def _cycle(dev: Device, size: int, rng: np.random.Generator) -> tuple[str | None, weakref.ref[Bytes] | None]:
    """One buffer of `size` bytes allocated, written, read back and freed: what went wrong, and a weak reference
    to its host memory (None: it has none), which nothing may keep once it is freed."""
    buf = dev.buffer_type().alloc_buffer(size)
    data = rng.integers(0, 256, size, dtype=np.uint8)
    buf.write(0, data)
    host = buf.host_array()
    memory = None if host is None else weakref.ref(host)
    del host
    same = np.array_equal(buf.read(0, size), data)
    buf.free()
    return None if same else f"a buffer of {size} bytes read back other bytes than were written", memory


def alloc_free_cycles(dev: Device) -> str | None:
    be = dev.init_backend()
    exact = _exact_accounting(dev)
    warm = Job(dev, 399)  # the scratch a backend keeps across computes of this shape, taken before the count
    _compute(be, warm.graph)
    warm.buffer.free()
    gc.collect()
    free0 = dev.memory()[0]
    rng = np.random.default_rng(7)
    memories: list[weakref.ref[Bytes]] = []
    try:
        for i in range(CYCLES):
            bad, memory = _cycle(dev, int(rng.integers(1, 1 << 20)), rng)
            memories += [memory] if memory is not None else []
            if i % 8 == 0 and bad is None:
                job = Job(dev, 400 + i)
                _compute(be, job.graph)
                bad = job.check()
                job.buffer.free()
            if bad:
                return f"cycle {i}: {bad}"
    finally:
        be.free()
    lost = _lost_memory(dev, free0)
    if exact and lost > SLACK:
        return f"{lost} bytes of device memory not given back after {CYCLES} alloc/free cycles"
    alive = sum(m() is not None for m in memories)
    if alive:
        return f"the host memory of {alive} of {len(memories)} freed buffers is still alive after their free()"
    return None


def two_threads_one_buffer(dev: Device) -> str | None:
    """Each thread has its own graph and backend; every tensor of both graphs lies in one buffer (disjoint
    bytes), written, computed on and read by both threads at once."""
    jobs = [Job(dev, 500 + k, place=False) for k in range(2)]
    buf = _place(build_graph(*(j.y for j in jobs)), dev)
    problems: list[str] = []
    backends = [dev.init_backend() for _ in jobs]

    def work(i: int) -> None:
        job, be = jobs[i], backends[i]
        rng = np.random.default_rng(600 + i)
        job.write_inputs()

        def step(r: int) -> str | None:
            job.x = rng.uniform(-1, 1, job.x.shape).astype(np.float32)
            job.b.set(job.x)
            _compute(be, job.graph)
            return job.check()

        rounds(ROUNDS, step, f"thread {i}", problems)

    try:
        return run_threads(work, 2, problems)
    finally:
        for be in backends:
            be.free()
        buf.free()


# ---- backends ---------------------------------------------------------------------------------------------------


def backend_use_after_free(dev: Device) -> str | None:
    job = Job(dev, 700)
    be = dev.init_backend()
    try:
        _compute(be, job.graph)
        bad = job.check()
        if bad:
            return bad
        be.free()
        bad = _raises(lambda: _compute(be, job.graph), "compute on a freed backend")
        if bad:
            return bad
        be.free()  # a second free does nothing
        fresh = dev.init_backend()
        try:
            job.b.set(job.x)
            _compute(fresh, job.graph)
            return job.check()
        finally:
            fresh.free()
    finally:
        job.buffer.free()


def free_backend_during_compute(dev: Device) -> str | None:
    for i in range(3):
        chain = Chain(dev, 800 + i)
        be = dev.init_backend()
        try:
            compute = functools.partial(_compute, be, chain.graph)
            bad = _free_under_computes(compute, chain.check, be.free)
            bad = bad or _raises(compute, "compute on a freed backend")
        finally:
            chain.buffer.free()
        if bad:
            return f"round {i}: {bad}"
    return None


# ---- schedulers -------------------------------------------------------------------------------------------------


def _sched_backends(dev: Device) -> list[Backend]:
    """The device's backend, then the numpy reference as the scheduler's CPU fallback (for what the device refuses;
    alone when the device is the reference)."""
    ref = hub().device("numpy")
    return [ref.init_backend()] if dev is ref else [dev.init_backend(), ref.init_backend()]


class SchedJob:
    """y = w @ x + one with w and one in a buffer of the device; x (and y) placed by the scheduler (static=False)
    or in a buffer of their own with y copied out into `out` (static=True)."""

    def __init__(self, dev: Device, seed: int, static: bool) -> None:
        rng = np.random.default_rng(seed)
        k, m, n = 64, 40 + 8 * (seed % 3), 8
        self.w = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        self.rng = rng
        wctx = Context(no_alloc=True)
        w = wctx.new_tensor("f32", k, m, name=f"w{seed}")
        one = wctx.new_tensor("f32", 1, name=f"one{seed}")
        xctx = Context(no_alloc=True)
        self.x = xctx.new_tensor("f32", k, n, name=f"x{seed}")
        dst = xctx.new_tensor("f32", m, n, name=f"out{seed}") if static else None
        self.buffers: list[Buffer | None] = [alloc_ctx_tensors(wctx, dev.buffer_type())]
        if static:
            self.buffers.append(alloc_ctx_tensors(xctx, dev.buffer_type()))
        else:
            self.x.set_input()
        w.set(self.w)
        one.set(np.ones(1, np.float32))
        y = ops.add(ops.mul_mat(w, self.x), one)
        self.out = (ops.cpy(y, dst) if dst is not None else y).set_output()
        self.graph: Graph = build_graph(self.out)

    def run(self, sched: Scheduler, locked: bool) -> str | None:
        xv = self.rng.uniform(-1, 1, (self.x.ne[1], self.x.ne[0])).astype(np.float32)
        if locked:
            with sched.lock:
                sched.alloc_graph(self.graph)
                self.x.set(xv)
                sched.graph_compute(self.graph)
                got = self.out.numpy()
        else:
            self.x.set(xv)
            sched.graph_compute(self.graph)
            got = self.out.numpy()
        ref = xv.astype(np.float64) @ self.w.astype(np.float64).T + 1.0
        v = nmse_check(ref, got.astype(np.float64), 1e-6)
        return None if v.ok else f"wrong result against numpy: {v.error}"

    def free(self) -> None:
        for b in self.buffers:
            if b is not None:
                b.free()


def two_threads_one_scheduler(dev: Device) -> str | None:
    backends = _sched_backends(dev)
    sched = Scheduler(backends)
    jobs = [SchedJob(dev, 900, static=False), SchedJob(dev, 901, static=True)]
    problems: list[str] = []

    def work(i: int) -> None:
        if i == 2:  # resets the shared scheduler now and then
            for _ in range(ROUNDS):
                sched.reset()
                time.sleep(0.001)
            return
        rounds(ROUNDS, lambda r: jobs[i].run(sched, locked=i == 0),
               f"thread {i} ({'under sched.lock' if i == 0 else 'own buffers'})", problems)

    try:
        return run_threads(work, 3, problems)
    finally:
        for j in jobs:
            j.free()
        for be in backends:
            be.free()


SCENARIOS: dict[str, Scenario] = {
    "free_during_compute_loop": free_during_compute_loop,
    "reuse_freed_memory": reuse_freed_memory,
    "alloc_free_cycles": alloc_free_cycles,
    "two_threads_one_buffer": two_threads_one_buffer,
    "backend_use_after_free": backend_use_after_free,
    "free_backend_during_compute": free_backend_during_compute,
    "two_threads_one_scheduler": two_threads_one_scheduler,
}


def _chain_graph(b: CaseBuilder) -> Tensor:
    y = b.input("f32", (D, C))
    for _ in range(LAYERS):
        y = ops.mul_mat(b.input("f32", (D, D)), y)
    return y


SUPPORT: dict[str, Callable[[CaseBuilder], Tensor]] = {"free_during_compute_loop": _chain_graph,
                                                      "free_backend_during_compute": _chain_graph}
"""What decides whether a device takes part: the graph the scenario computes (misuse.py's by default)."""


def eval_cases() -> list[Case]:
    return [Case(Op.MUL_MAT, fmt_params(misuse=name), SUPPORT.get(name, _support_graph), scenario=fn)
            for name, fn in SCENARIOS.items()]


def perf_cases() -> list[Case]:
    return []
