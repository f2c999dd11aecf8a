"""Running a custom op's Python callable on host memory: what every host backend (numpy, cpu) does for
MAP_CUSTOM1/2/3 and CUSTOM nodes, so the call convention lives in one place.

`run_custom(node, n_threads)` builds numpy views of the node's tensors (dst writable, srcs read-only; numpy
order, the tensors' own strides; BF16 as its uint16 bits), works out nth with ggml's rule (`CustomParams.tasks`),
and calls the callable once per ith, tasks 1.. on the workers of one module-wide pool and task 0 on the caller's
thread, as ggml's thread pool does. numpy releases the GIL in its loops, so tasks over disjoint rows do run in
parallel. The pool is created on first use and grows to the number of tasks in flight at once, so that every task
of a call runs at the same time, on a thread of its own, even when several graphs compute concurrently; starting
threads per node and per compute would cost more than small custom ops do.

A callable that raises fails the node: `CustomOpError` (a ComputeError naming the callable and the task, chained
to the callable's exception), which the backend wraps with the node's name as it does any kernel's error. Nothing
the backend holds depends on the callable, so the backend stays usable.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.errors import ComputeError
from pyggml.ops.base import Op
from pyggml.ops.custom import CUSTOM_OPS, CustomParams
from pyggml.reference.access import raw_bytes
from pyggml.tensor import Tensor

__all__ = ["CustomOpError", "is_custom", "run_custom"]


class CustomOpError(ComputeError):
    """A custom op's callable raised; `__cause__` is its exception."""


def is_custom(node: Tensor) -> bool:
    return node.op in CUSTOM_OPS


def _view(t: Tensor, writeable: bool) -> npt.NDArray[Any]:
    v = t.element_view(raw_bytes(t))
    if not writeable:
        v = np.lib.stride_tricks.as_strided(v, v.shape, v.strides, writeable=False)
    return v


class _Worker:
    """One daemon thread of the pool, running the jobs handed to it one at a time (an idle worker blocks no exit)."""

    def __init__(self, n: int) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name=f"pyggml-custom-{n}", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self.jobs.get()()


class _Pool:
    """The workers that run tasks 1.. of custom calls, created on first need and kept. Each task of a call gets a
    worker of its own (never one behind a sibling: a callable may wait for its sibling tasks, and ggml gives every
    task its own thread), so the pool grows to the most tasks ever in flight at once. A stdlib ThreadPoolExecutor
    would hand a quick task's worker the next task too, running two tasks of one call on one thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._started = 0

    def run(self, jobs: list[Callable[[], None]]) -> Callable[[], None]:
        """Start each job on an idle (or new) worker; returns the function that waits for all of them."""
        with self._lock:
            while len(self._idle) < len(jobs):
                self._started += 1
                self._idle.append(_Worker(self._started))
            workers = [self._idle.pop() for _ in jobs]
        done = threading.Semaphore(0)

        def wrap(w: _Worker, job: Callable[[], None]) -> Callable[[], None]:
            def run_job() -> None:
                try:
                    job()
                finally:
                    with self._lock:
                        self._idle.append(w)
                    done.release()
            return run_job

        for w, job in zip(workers, jobs, strict=True):
            w.jobs.put(wrap(w, job))

        def wait() -> None:
            for _ in jobs:
                done.acquire()
        return wait


_pool = _Pool()


def run_custom(node: Tensor, n_threads: int) -> None:
    """Compute a custom node with up to n_threads tasks (see the module docstring)."""
    p = node.params
    if not isinstance(p, CustomParams):
        raise ComputeError(f"{node.op.name} carries {type(p).__name__}, not CustomParams")
    nth = max(1, p.tasks(max(1, n_threads)))
    dst = _view(node, True)
    srcs = tuple(_view(s, False) for s in node.src if s is not None)
    if node.op is Op.CUSTOM:
        def call(ith: int) -> None:
            p.fn(dst, srcs, ith, nth, p.userdata)
    else:
        def call(ith: int) -> None:
            p.fn(dst, *srcs, ith, nth, p.userdata)

    errors: list[tuple[int, Exception]] = []
    lock = threading.Lock()

    def task(ith: int) -> None:
        try:
            call(ith)
        except Exception as e:  # every failure of user code becomes the node's error
            with lock:
                errors.append((ith, e))

    wait = _pool.run([functools.partial(task, i) for i in range(1, nth)])
    task(0)
    wait()
    if errors:
        ith, e = min(errors, key=lambda x: x[0])
        fn = getattr(p.fn, "__qualname__", repr(p.fn))
        raise CustomOpError(f"the custom callable {fn} raised {type(e).__name__}: {e} (task {ith} of {nth})") from e
