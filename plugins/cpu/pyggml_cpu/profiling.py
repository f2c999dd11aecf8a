"""Per-node, per-thread times of the cpu executor: C writes each kernel's start and end (CLOCK_MONOTONIC ns, the
clock of `pyggml.profile`) per thread into one int64 array, only when a profile asked (`Stamps`); with profiling
off the pool gets NULL and reads no clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyggml.profile.sink import NodeTime
from pyggml_cpu._pgc import ffi

if TYPE_CHECKING:
    from pyggml.graph import Graph
    from pyggml.tensor import Tensor
    from pyggml_cpu._pgc import CData


class Stamps:
    """The array C fills for `n` descriptors run by `n_threads` threads: descriptor i, thread t at
    [2 * (i * n_threads + t)] (start) and the next entry (end)."""

    def __init__(self, n: int, n_threads: int) -> None:
        self.n_threads = n_threads
        self.array: CData = ffi.new("int64_t[]", 2 * n * n_threads)

    def at(self, start: int) -> CData:
        """Where descriptor `start`'s entries begin (C runs the rows between custom ops from there)."""
        return self.array + 2 * start * self.n_threads

    def set_host(self, i: int, start_ns: int, end_ns: int) -> None:
        """A descriptor Python ran (a custom op): its time, on thread 0's lane."""
        self.array[2 * i * self.n_threads] = start_ns
        self.array[2 * i * self.n_threads + 1] = end_ns

    def node_times(self, names: list[Tensor], graph: Graph) -> list[NodeTime]:
        """One NodeTime per descriptor and thread that ran (a thread that had no rows still reports its span)."""
        index = {id(n): i for i, n in enumerate(graph.nodes)}
        nth = self.n_threads
        a = self.array
        out: list[NodeTime] = []
        for i, node in enumerate(names):
            for t in range(nth):
                s, e = int(a[2 * (i * nth + t)]), int(a[2 * (i * nth + t) + 1])
                if s:
                    out.append(NodeTime(node, index.get(id(node), i), s, e, t))
        return out

    def by_op(self, names: list[Tensor], profile: dict[str, int]) -> None:
        """Add each descriptor's span (first thread's start to last thread's end) to `profile`, keyed by
        `OP src0type` (the executor's `profile` dict)."""
        nth = self.n_threads
        a = self.array
        for i, node in enumerate(names):
            pairs = [(int(a[2 * (i * nth + t)]), int(a[2 * (i * nth + t) + 1])) for t in range(nth)]
            ran = [p for p in pairs if p[0]]
            if ran:
                key = f"{node.op.name} {node.src[0].type if node.src and node.src[0] is not None else ''}"
                profile[key] = profile.get(key, 0) + max(e for _, e in ran) - min(s for s, _ in ran)
