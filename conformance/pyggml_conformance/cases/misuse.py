"""Lifetime and concurrency scenarios (issue 19): what a careless or hostile caller does with buffers and backends
must end in a clear PyGGMLError or a correct result, never in a crash or a hang.

Lifetime: a buffer used after `free()` (compute, set, get), freed from another thread while a graph that uses it
runs, freed twice. Concurrency: one backend computing from two threads at once (correct results or a clear error,
never a hang; the cpu plugin's pool once spun forever). Each case is a scenario run on each device with a backend
of its own; the graph it builds only decides support. Parameters carry `misuse=...`."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable

import numpy as np

from pyggml import ops
from pyggml.backend.protocol import Backend, Buffer, Device
from pyggml.context import Context
from pyggml.errors import PyGGMLError
from pyggml.graph import Graph, build_graph
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_conformance.case import Case, CaseBuilder, Scenario, fmt_params
from pyggml_conformance.compare import nmse_check
from pyggml_conformance.placement import GuardedArena

K, M, N = 64, 48, 8
JOIN_S = 120.0
"""How long a scenario's threads may take before the device counts as hung."""


class Job:
    """y = a @ x^T + 1 (MUL_MAT then ADD) in one buffer of its own on `dev`, with random inputs (place=False: not
    placed; the caller places the graph, then calls `write_inputs`)."""

    def __init__(self, dev: Device, seed: int, *, place: bool = True) -> None:
        rng = np.random.default_rng(seed)
        self.x = rng.uniform(-1, 1, (N, K)).astype(np.float32)
        self.w = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        ctx = Context(no_alloc=True)
        self.a = ctx.new_tensor("f32", K, M, name="w")
        self.b = ctx.new_tensor("f32", K, N, name="x")
        self.one = ctx.new_tensor("f32", 1, name="one")
        self.y = ops.add(ops.mul_mat(self.a, self.b), self.one)
        self.graph: Graph = build_graph(self.y)
        if place:
            self.buffer: Buffer = _place(self.graph, dev)
            self.write_inputs()

    def write_inputs(self) -> None:
        self.a.set(self.w)
        self.b.set(self.x)
        self.one.set(np.ones(1, np.float32))

    def expected(self) -> np.ndarray:
        return (self.x.astype(np.float64) @ self.w.astype(np.float64).T) + 1.0

    def check(self) -> str | None:
        got = self.y.numpy().astype(np.float64)
        ref = self.expected()
        v = nmse_check(ref, got, 1e-6)
        return None if v.ok else f"wrong result against numpy: {v.error}"


def _place(graph: Graph, dev: Device) -> Buffer:
    """The graph's tensors in one fresh buffer of the device (no guard gaps: misuse cases check errors, not
    stray writes); the caller frees it."""
    return GuardedArena(graph, dev.buffer_type(), guard=0).buffer


def _compute(be: Backend, graph: Graph) -> None:
    be.graph_compute(graph)
    be.synchronize()


def _raises(fn: Callable[[], object], what: str) -> str | None:
    """None when fn raises a PyGGMLError; a complaint when it returns or raises anything else."""
    try:
        fn()
    except PyGGMLError:
        return None
    except Exception as e:
        return f"{what}: {type(e).__name__} instead of a PyGGMLError: {e}"
    return f"{what} raised no error"


def use_after_free(dev: Device) -> str | None:
    be = dev.init_backend()
    try:
        job = Job(dev, 1)
        be.graph_compute(job.graph)
        be.synchronize()
        bad = job.check()
        if bad:
            return bad
        job.buffer.free()
        uses: list[tuple[Callable[[], object], str]] = [
            (lambda: _compute(be, job.graph), "compute after free"),
            (lambda: job.b.set(job.x), "set_tensor after free"),
            (lambda: job.y.numpy(), "get_tensor after free")]
        for fn, what in uses:
            bad = _raises(fn, what)
            if bad:
                return bad
        with contextlib.suppress(PyGGMLError):  # a second free: nothing, or a clear error
            job.buffer.free()
        return None
    finally:
        be.free()


def free_during_compute(dev: Device) -> str | None:
    be = dev.init_backend()
    try:
        for i in range(5):
            job = Job(dev, 10 + i)
            freer = threading.Thread(target=job.buffer.free, daemon=True)
            try:
                be.graph_compute_async(job.graph)
                freer.start()
                be.synchronize()
            except PyGGMLError:
                pass
            freer.join(JOIN_S)
            if freer.is_alive():
                return "free() from another thread during compute did not return"
            bad = _raises(functools.partial(_compute, be, job.graph), "compute after free")
            if bad:
                return bad
        return None
    finally:
        be.free()


def run_threads(work: Callable[[int], None], n: int, problems: list[str]) -> str | None:
    """Run work(0..n-1) on n threads: the problems they added (a PyGGMLError ends a thread quietly: a clear
    refusal is allowed; anything else is one), or that they did not end within JOIN_S (a hang)."""

    def body(i: int) -> None:
        try:
            work(i)
        except PyGGMLError:
            pass
        except Exception as e:  # reported as the scenario's failure
            problems.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    if any(t.is_alive() for t in threads):
        return f"{n} threads did not finish in {JOIN_S:g} s (hang)"
    return "; ".join(problems) or None


def rounds(n: int, step: Callable[[int], str | None], who: str, problems: list[str]) -> None:
    """step(0..n-1) until one reports a problem, which is added naming `who` and the round."""
    for r in range(n):
        bad = step(r)
        if bad:
            problems.append(f"{who} round {r}: {bad}")
            return


def two_threads_one_backend(dev: Device) -> str | None:
    be = dev.init_backend()
    problems: list[str] = []
    jobs: list[Job] = []

    def work(i: int) -> None:
        job = Job(dev, 21 + i)
        jobs.append(job)

        def step(r: int) -> str | None:
            _compute(be, job.graph)
            return job.check()

        rounds(30, step, f"thread {i}", problems)

    try:
        return run_threads(work, 2, problems)
    finally:
        be.free()
        for j in jobs:
            j.buffer.free()


SCENARIOS: dict[str, Scenario] = {
    "use_after_free": use_after_free,
    "free_during_compute": free_during_compute,
    "two_threads_one_backend": two_threads_one_backend,
}


def _support_graph(b: CaseBuilder) -> Tensor:
    """What the scenarios compute (support decides whether a device takes part)."""
    return ops.add(ops.mul_mat(b.input("f32", (K, M)), b.input("f32", (K, N))), b.input("f32", (1,)))


def eval_cases() -> list[Case]:
    return [Case(Op.MUL_MAT, fmt_params(misuse=name), _support_graph, scenario=fn) for name, fn in SCENARIOS.items()]


def perf_cases() -> list[Case]:
    return []
