"""What a backend reports to a profile: the `ProfileSink` protocol, the node times it takes, the host clock every
report is on, and the one active profile that schedulers pick up (`active_sink`).

Every time is in nanoseconds on the host's monotonic clock (`now_ns`, CLOCK_MONOTONIC on Linux, the clock the cpu
plugin's C timestamps read). A device with a clock of its own (OpenCL event profiling, Vulkan timestamp queries,
CUDA events) shifts its times onto it (`align_device_times`) before it reports them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyggml.graph import Graph
    from pyggml.tensor import Tensor

now_ns = time.monotonic_ns
"""The profile clock: every start and end a sink receives is on it."""


class ProfileWarning(UserWarning):
    """A profile request that cannot be served as asked: a backend that cannot time its nodes (the profile then holds
    its whole-graph times instead), or a profile that recorded nothing."""


@dataclass(frozen=True, slots=True)
class NodeTime:
    """One node's run on one thread (or queue) of a backend: `index` is its position in the graph computed."""

    node: Tensor
    index: int
    start_ns: int
    end_ns: int
    thread: int = 0


class ProfileSink(Protocol):
    """Where backends and the scheduler report times (`pyggml.profile.Profile` is the one implementation).
    `backend` is the reporting backend's name: its lane in the trace."""

    def nodes(self, backend: str, graph: Graph, times: Sequence[NodeTime], lane: str = "queue") -> None:
        """Per-node times of one compute of `graph`; `lane` names the backend's threads ("thread" for the cpu
        pool's threads, "queue" for a device queue)."""

    def graph(self, backend: str, graph: Graph, start_ns: int, end_ns: int) -> None:
        """A whole-graph time, from a backend that cannot time its nodes (the sink warns, once per backend)."""

    def span(self, lane: str, name: str, start_ns: int, end_ns: int, category: str) -> None:
        """A scheduler interval (a split, a wait on another backend) on the scheduler's `lane`."""

    def copy(self, src_backend: str, dst_backend: str, tensor: Tensor, start_ns: int, end_ns: int) -> None:
        """A copy of `tensor` between backends, drawn as a flow from the source's lane to the destination's."""


_active: list[ProfileSink] = []


def active_sink() -> ProfileSink | None:
    """The profile being recorded (`with Profile():`), or None: one list read, what schedulers pay when off."""
    return _active[-1] if _active else None


def push_sink(sink: ProfileSink) -> None:
    _active.append(sink)


def pop_sink(sink: ProfileSink) -> None:
    if sink in _active:
        _active.remove(sink)


def align_device_times(device_ns: Sequence[tuple[int, int]], host_end_ns: int) -> list[tuple[int, int]]:
    """(start, end) pairs on a device clock, moved onto the host clock so that the last end falls at `host_end_ns`
    (taken right after the host saw the work finish): durations and gaps are the device's own."""
    if not device_ns:
        return []
    shift = host_end_ns - max(e for _, e in device_ns)
    return [(s + shift, e + shift) for s, e in device_ns]


def runs_of(items: Sequence[object]) -> list[tuple[int, int]]:
    """(first, last) positions of each run of consecutive identical items: the runs of one node's kernels in a
    backend's launch list, which a device that stamps times brackets (a node's launches are consecutive)."""
    runs: list[tuple[int, int]] = []
    for i, x in enumerate(items):
        if runs and items[runs[-1][0]] is x:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def run_nodes(graph: Graph, work: Sequence[Tensor | None], runs: Sequence[tuple[int, int]]) -> list[int]:
    """The graph index of each run's node (`work[i]`: the node of the backend's i-th kernel; -1 where it is not one
    of `graph`'s nodes): what `node_times` takes."""
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    return [index.get(id(work[first]), -1) for first, _ in runs]


def node_times(graph: Graph, index: Sequence[int], device_ns: Sequence[tuple[int, int]], host_end_ns: int
               ) -> list[NodeTime]:
    """One NodeTime per node from device-clock (start, end) pairs of runs of its work (`index[i]`: the graph index
    of pair i's node; -1: none, not reported): its first start to its last end, moved onto the host clock
    (`align_device_times`), in the order of the nodes' first runs."""
    spans: dict[int, tuple[int, int]] = {}
    for i, (s, e) in zip(index, device_ns, strict=True):
        if i >= 0:
            s0, e0 = spans.get(i, (s, e))
            spans[i] = (min(s0, s), max(e0, e))
    pairs = align_device_times(list(spans.values()), host_end_ns)
    return [NodeTime(graph.nodes[i], i, s, e) for i, (s, e) in zip(spans, pairs, strict=True)]
