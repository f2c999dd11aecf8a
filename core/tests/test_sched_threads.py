"""One Scheduler shared by two threads (issue 33, item 4: 33-79 of 80 results were wrong, with no error).

Each method of a Scheduler holds its lock, so two threads computing their own graphs through one scheduler get
their own results; a thread's whole alloc_graph -> set inputs -> graph_compute -> read outputs sequence holds
`sched.lock`; an explicit alloc_graph that another thread displaces before its graph_compute raises."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend import hub
from pyggml.backend.protocol import Backend, DeviceType
from pyggml.backend.sched import Scheduler
from pyggml.errors import GraphError, PyGGMLError
from pyggml.tensor import Tensor
from pyggml_testing.devices import numpy_backend

N = 64
LAYERS = 8
ROUNDS = 60


def _backends() -> list[Backend]:
    """cpu + numpy where the cpu plugin is installed (numpy last: the scheduler's CPU fallback), else numpy."""
    try:
        dev = hub().device("cpu")
    except PyGGMLError:
        return [numpy_backend()]
    return [dev.init_backend(), numpy_backend()] if dev.type is DeviceType.CPU else [numpy_backend()]


@pytest.fixture
def backends() -> list[Backend]:
    return _backends()


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads every 10 us (not 5 ms): a race inside a method shows up within a few rounds."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


@dataclass
class Job:
    """A thread's own graph: LAYERS rounds of x = relu(w @ x) * s, the weights alternately in the first and the
    last backend's memory."""

    graph: gg.Graph
    n: int
    x: Tensor
    out: Tensor
    expected: Callable[[np.ndarray], np.ndarray]


def _weight(buft_of: Backend, values: np.ndarray, name: str) -> Tensor:
    ctx = gg.Context(no_alloc=True)
    t = ctx.new_tensor(gg.F32, *values.shape, name=name)
    alloc_ctx_tensors(ctx, buft_of.device.buffer_type())
    t.set(values)
    return t


def _job(backends: list[Backend], k: int, *, static_io: bool) -> Job:
    """static_io: x and the result live in buffers of their own (not the scheduler's compute buffer), so each
    graph_compute alone is a whole use of the scheduler; otherwise x is a graph input placed by alloc_graph."""
    rng = np.random.default_rng(k)
    n = N * (k + 1)  # graphs of different sizes: each plan places the compute buffer differently
    mats = [rng.standard_normal((n, n)).astype(np.float32) / np.sqrt(n) for _ in range(LAYERS)]
    ws = [_weight(backends[i % len(backends)], m, f"w{i}.{k}") for i, m in enumerate(mats)]
    scale = 1.0 + k
    ctx = gg.Context(no_alloc=True)
    x = ctx.new_tensor(gg.F32, n, name=f"x.{k}").set_input()
    dst = ctx.new_tensor(gg.F32, n, name=f"out.{k}") if static_io else None
    if static_io:
        alloc_ctx_tensors(ctx, backends[-1].device.buffer_type())
    y = x
    for w in ws:
        y = ops.scale(ops.relu(ops.mul_mat(w, y)), scale)
    out = (ops.cpy(y, dst) if dst is not None else y).set_output()
    g = gg.Graph(8 * LAYERS + 16)
    g.build_forward_expand(out)

    def expected(xv: np.ndarray) -> np.ndarray:
        v = xv.astype(np.float64)
        for m in mats:
            v = np.maximum(m.astype(np.float64) @ v, 0.0) * scale
        return v

    return Job(g, n, x, out, expected)


def _run_threads(work: Callable[[int], None], n: int = 2) -> None:
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            work(i)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread did not finish (deadlock?)"
    if errors:
        raise errors[0]


def _check_rounds(jobs: list[Job], seed: int, one: Callable[[Job, np.ndarray], np.ndarray]) -> None:
    """Two threads, thread i running ROUNDS rounds of `one(jobs[i], x)` on new random inputs: every result right."""
    wrong: list[str] = []

    def work(i: int) -> None:
        job = jobs[i]
        rng = np.random.default_rng(seed + i)
        for r in range(ROUNDS):
            xv = rng.standard_normal(job.n).astype(np.float32)
            if not np.allclose(one(job, xv), job.expected(xv.astype(np.float64)), rtol=1e-4, atol=1e-4):
                wrong.append(f"thread {i} round {r}")

    _run_threads(work)
    assert not wrong, f"{len(wrong)} of {2 * ROUNDS} results wrong: {wrong[:5]}"


def test_graph_compute_from_two_threads_gives_each_its_result(backends: list[Backend],
                                                               fast_switching: None) -> None:
    """Each thread computes its own graph again and again through the shared scheduler, so nearly every call
    re-plans and re-places; before the lock, the two threads' plans and placements mixed (wrong results, or
    "buffer used after free" from a compute buffer the other thread had just replaced)."""
    sched = Scheduler(backends)
    jobs = [_job(backends, k, static_io=True) for k in range(2)]

    def one(job: Job, xv: np.ndarray) -> np.ndarray:
        job.x.set(xv)
        sched.graph_compute(job.graph)
        return job.out.numpy().astype(np.float64)

    _check_rounds(jobs, 100, one)


def test_a_compute_holds_the_scheduler_until_it_ends(backends: list[Backend]) -> None:
    """Deterministic: while thread A is inside graph_compute (held in the eval callback), thread B's alloc_graph
    of another graph waits; before the lock it re-planned and re-placed the compute buffer under A's run."""
    sched = Scheduler(backends)
    a, b = (_job(backends, k, static_io=True) for k in range(2))
    inside, go, b_done = threading.Event(), threading.Event(), threading.Event()

    def hold(node: Tensor, ask: bool) -> bool:
        if threading.current_thread().name == "A" and not inside.is_set():
            inside.set()
            assert go.wait(60)
        return False  # observe nothing: the graph runs whole

    sched.set_eval_callback(hold)
    a.x.set(np.ones(a.n, np.float32))
    b.x.set(np.ones(b.n, np.float32))
    ta = threading.Thread(target=sched.graph_compute, args=(a.graph,), name="A")
    ta.start()
    assert inside.wait(60)

    def alloc_b() -> None:
        sched.alloc_graph(b.graph)
        b_done.set()

    tb = threading.Thread(target=alloc_b, name="B")
    tb.start()
    blocked = not b_done.wait(0.3)
    go.set()
    ta.join(60)
    tb.join(60)
    assert blocked, "alloc_graph on thread B ran while thread A was computing on the same scheduler"
    assert b_done.is_set()
    np.testing.assert_allclose(a.out.numpy(), a.expected(np.ones(a.n)), rtol=1e-4, atol=1e-4)
    sched.graph_compute(b.graph)
    np.testing.assert_allclose(b.out.numpy(), b.expected(np.ones(b.n)), rtol=1e-4, atol=1e-4)


def test_alloc_set_compute_read_under_the_lock(backends: list[Backend], fast_switching: None) -> None:
    """The issue's loop (alloc_graph; set inputs; graph_compute; read), the inputs and the result in the
    scheduler's compute buffer: each thread holds `sched.lock` over its sequence and every result is right."""
    sched = Scheduler(backends)
    jobs = [_job(backends, k, static_io=False) for k in range(2)]

    def one(job: Job, xv: np.ndarray) -> np.ndarray:
        with sched.lock:
            sched.alloc_graph(job.graph)
            job.x.set(xv)
            sched.graph_compute(job.graph)
            return job.out.numpy().astype(np.float64)

    _check_rounds(jobs, 200, one)


def test_alloc_displaced_by_another_thread_raises(backends: list[Backend]) -> None:
    """Thread A places its graph and writes its input; thread B places another graph over the same compute
    buffer; A's graph_compute would run on lost inputs: it raises GraphError instead of a wrong result."""
    sched = Scheduler(backends)
    a, b = (_job(backends, k, static_io=False) for k in range(2))
    placed, displaced = threading.Event(), threading.Event()
    seen: list[BaseException] = []

    def thread_a() -> None:
        sched.alloc_graph(a.graph)
        a.x.set(np.ones(a.n, np.float32))
        placed.set()
        assert displaced.wait(60)
        try:
            sched.graph_compute(a.graph)
        except GraphError as e:
            seen.append(e)
        # after the error, a fresh alloc_graph on this thread starts over
        sched.alloc_graph(a.graph)
        a.x.set(np.ones(a.n, np.float32))
        sched.graph_compute(a.graph)
        np.testing.assert_allclose(a.out.numpy(), a.expected(np.ones(a.n)), rtol=1e-4, atol=1e-4)

    def thread_b() -> None:
        assert placed.wait(60)
        sched.alloc_graph(b.graph)
        b.x.set(np.full(b.n, 2.0, np.float32))
        sched.graph_compute(b.graph)
        np.testing.assert_allclose(b.out.numpy(), b.expected(np.full(b.n, 2.0)), rtol=1e-4, atol=1e-4)
        displaced.set()

    _run_threads(lambda i: (thread_a, thread_b)[i]())
    assert len(seen) == 1
    assert "another thread" in str(seen[0]) and "sched.lock" in str(seen[0])


def test_one_thread_may_still_replan_between_alloc_and_compute(backends: list[Backend]) -> None:
    """Single-threaded use keeps its meaning: alloc_graph(a), alloc_graph(b), graph_compute(a) plans a again."""
    sched = Scheduler(backends)
    a, b = (_job(backends, k, static_io=True) for k in range(2))
    a.x.set(np.ones(a.n, np.float32))
    b.x.set(np.ones(b.n, np.float32))
    sched.alloc_graph(a.graph)
    sched.alloc_graph(b.graph)
    sched.graph_compute(a.graph)
    np.testing.assert_allclose(a.out.numpy(), a.expected(np.ones(a.n)), rtol=1e-4, atol=1e-4)
