"""The cpu backend: one executor (thread pool, plan cache, graph_compute) over the cpu op table, and the
`set_n_threads` extension of the cpu and blas registries."""

from __future__ import annotations

from typing import NoReturn

from pyggml.backend.protocol import Backend, Device
from pyggml.errors import PyGGMLError
from pyggml.graph import Graph
from pyggml.profile.sink import ProfileSink
from pyggml_cpu.executor import Executor
from pyggml_cpu.op_table import TABLE


def set_n_threads(backend: Backend, n_threads: int) -> None:
    """The `set_n_threads` extension of the cpu and blas registries."""
    if not isinstance(backend, ExecutorBackend):
        raise PyGGMLError(f"set_n_threads: {backend!r} is not a cpu or blas backend")
    if backend.name == "blas":  # its one C thread only widens operands; OpenBLAS's threads do the work
        from pyggml_cpu.blas import set_blas_threads

        set_blas_threads(n_threads)
        return
    backend.executor.set_n_threads(n_threads)


class ExecutorBackend(Backend):
    """A backend whose graphs one `Executor` runs (the cpu and blas backends)."""

    def __init__(self, device: Device, executor: Executor) -> None:
        super().__init__(device)
        self.executor = executor

    def graph_compute(self, graph: Graph) -> None:
        self.executor.compute(graph, self)

    def compute_profiled(self, graph: Graph, sink: ProfileSink) -> None:
        """Per node and pool thread: the kernels' own C timestamps."""
        self.executor.compute(graph, self, sink)

    def free(self) -> None:
        self.executor.free()


class CpuBackend(ExecutorBackend):
    def __init__(self, device: Device, n_threads: int) -> None:
        super().__init__(device, Executor(TABLE, "cpu", n_threads))

    @property
    def n_threads(self) -> int:
        return self.executor.n_threads

    def set_n_threads(self, n: int) -> None:
        self.executor.set_n_threads(n)

    def __getstate__(self) -> NoReturn:
        raise TypeError("cpu backends cannot be pickled")
