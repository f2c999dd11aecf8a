"""Identity that lasts: serials that are never reused, and the placement clock.

`id()` names an object only while it lives; a newcomer may get a dead object's id. Caches that outlive one call
(plans per graph, allreduce graphs per tensor) key on serials instead: every `Tensor` and `Buffer` takes one from
`new_serial()` when it is made (a process-wide counter, never reused), as every `Graph` has its `uid`.

`PLACEMENT` is the placement clock: it advances whenever any tensor's buffer, offset or sources change (the
`Tensor.buffer`, `Tensor.offset` and `Tensor.src` setters: the allocators, the scheduler's rewiring of sources to
its copies, a weights loader, a test placing a tensor by hand) and whenever a graph's node list is replaced. A
plan stamped with the clock's reading and its graph's `version` and node count is valid, without looking at a
tensor, while all three still read the same (`pyggml.backend.plan_cache`).
"""

from __future__ import annotations

import itertools

_serials = itertools.count(1)


def new_serial() -> int:
    """A serial no object was given before in this process (>= 1; 0 may stand for "none")."""
    return next(_serials)


class PlacementClock:
    """A counter that `advance()` moves to a value it never had before; `now` reads it.

    Each advance takes a fresh value from `itertools.count` (atomic in CPython) and stores it, so two threads that
    advance at once never both leave a value a reader stamped before: a stamp equals `now` only until the next
    advance on any thread. Advance after the change it announces, read `now` before looking at what it guards."""

    __slots__ = ("_ticks", "now")

    def __init__(self) -> None:
        self._ticks = itertools.count(1)
        self.now = 0

    def advance(self) -> None:
        self.now = next(self._ticks)


PLACEMENT = PlacementClock()
"""The process's placement clock (see the module docstring)."""
