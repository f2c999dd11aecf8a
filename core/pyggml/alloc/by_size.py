"""The "by_size" placement: an offline repacking of the blocks the liveness pass produced.

ggml places each tensor the moment the pass reaches it (online best fit), so a small tensor can sit in the
spot that a larger, later one would have needed. Once the pass is over, every block's lifetime (the ticks at
which it was taken and given back) is known and independent of where it lies, so the blocks can be placed
again, largest first, each in the smallest gap (or at the lowest end) among the already placed blocks whose
lifetimes overlap its own ("greedy by size", as in TFLite's arena planner). The liveness decisions (frees,
in-place reuse) are untouched; only offsets change. The result is used only when it is smaller than the online
plan and fits one buffer of the buffer type.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pyggml.alloc.plan import Plan


def pack(sizes: Sequence[int], starts: Sequence[int], ends: Sequence[int]) -> tuple[list[int], int]:
    """Offsets for blocks [start, end) x size such that blocks overlapping in time never overlap in memory;
    returns (offsets, total size)."""
    n = len(sizes)
    offsets = [0] * n
    order = sorted(range(n), key=lambda b: (-sizes[b], starts[b]))
    p_start = np.empty(n, dtype=np.int64)
    p_end = np.empty(n, dtype=np.int64)
    p_lo = np.empty(n, dtype=np.int64)
    p_hi = np.empty(n, dtype=np.int64)
    placed = 0
    total = 0
    for b in order:
        size = sizes[b]
        if size == 0:
            continue
        live = np.nonzero((p_start[:placed] < ends[b]) & (p_end[:placed] > starts[b]))[0]
        at = _best_gap(sorted(zip(p_lo[live].tolist(), p_hi[live].tolist(), strict=True)), size)
        offsets[b] = at
        p_start[placed], p_end[placed], p_lo[placed], p_hi[placed] = starts[b], ends[b], at, at + size
        placed += 1
        total = max(total, at + size)
    return offsets, total


def _best_gap(ranges: list[tuple[int, int]], size: int) -> int:
    """Where the smallest gap of at least `size` bytes between the occupied ranges (sorted by start) begins,
    else the end of the last range."""
    reach = 0
    best_at, best_gap = -1, -1
    for lo, hi in ranges:
        gap = lo - reach
        if gap >= size and (best_gap < 0 or gap < best_gap):
            best_at, best_gap = reach, gap
        reach = max(reach, hi)
    return reach if best_at < 0 else best_at


def repack(plan: Plan, slot_of: Sequence[int], n_slots: int, max_chunk: Sequence[int],
           chunk_sizes: list[list[int]]) -> None:
    """Repack each allocator's blocks (slot_of[buffer id] -> allocator index) in place in `plan` and
    `chunk_sizes`, where the packed size is smaller than the online plan and fits max_chunk of that allocator."""
    blocks = plan.blocks
    per_slot: list[list[int]] = [[] for _ in range(n_slots)]
    for b, bid in enumerate(blocks.buffer_id):
        per_slot[slot_of[bid]].append(b)
    new_offset: dict[int, int] = {}
    for u, members in enumerate(per_slot):
        if not members:
            continue
        offs, total = pack([blocks.size[b] for b in members], [blocks.start[b] for b in members],
                           [blocks.end[b] for b in members])
        if total >= sum(chunk_sizes[u]) or total > max_chunk[u]:
            continue
        chunk_sizes[u] = [total]
        new_offset.update(zip(members, offs, strict=True))
    if not new_offset:
        return
    for k, b in enumerate(plan.block):
        if b >= 0 and b in new_offset:
            plan.offset[k] = new_offset[b]
            plan.chunk[k] = 0
