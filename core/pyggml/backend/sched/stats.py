"""SchedStats: what the scheduler did, counted, so a caller can see that replays skip the expensive steps and
how much each compute copies between backends."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SchedStats:
    """Counters since the scheduler was made (`sched.stats`); `last_*` describe the latest graph_compute."""

    plans: int = 0
    """split_graph runs (passes 1-5)."""
    reserves: int = 0
    """graph allocator reserves (liveness analysis, buffer sizing)."""
    allocs: int = 0
    """graph allocator alloc_graph calls (placing every tensor)."""
    computes: int = 0
    """graph_compute / graph_compute_async calls that ran (or began to run) splits."""
    copies: int = 0
    """Split inputs copied from one backend's memory to another's, over all computes (a tensor read by splits on
    two other backends counts twice; one read again by a later split on the same backend, once)."""
    copy_bytes: int = 0
    """Bytes of those copies."""
    last_copies: int = 0
    """Split inputs the latest compute copied (fewer than the plan's `n_split_inputs` when the eval callback
    stopped it early)."""
    last_copy_bytes: int = 0
    """Bytes the latest compute copied."""

    def count_copies(self, n: int, nbytes: int) -> None:
        """Add one split's copies to the totals and to the latest compute's."""
        self.copies += n
        self.copy_bytes += nbytes
        self.last_copies += n
        self.last_copy_bytes += nbytes

    def begin_compute(self) -> None:
        self.computes += 1
        self.last_copies = 0
        self.last_copy_bytes = 0
