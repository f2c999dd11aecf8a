"""Offline placement: the blocks the liveness pass produced, placed again once every lifetime is known.

ggml places each tensor the moment the pass reaches it (online best fit), so a small tensor can sit in the
spot that a larger, later one would have needed. Once the pass is over, every block's lifetime (the ticks at
which it was taken and given back) is known and independent of where it lies, so the blocks can be placed
again, largest first, each in the smallest gap (or at the lowest end) among the already placed blocks whose
lifetimes overlap its own ("greedy by size", as in TFLite's arena planner). The liveness decisions (frees,
in-place reuse) are untouched; only offsets change. A repacked allocator is used only when it is smaller than
the online plan and fits one buffer of the buffer type.

No placement of the blocks can be smaller than the most bytes live at one tick (`lower_bound`): a plan that
reaches it is not repacked, and a candidate whose bound is not below the best plan so far is not packed at all.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pyggml.alloc.plan import NEVER, Blocks, MemoryPlan

_FEW = 48
"""Up to this many overlapping blocks, the gaps are searched in Python (cheaper than numpy's call overhead)."""


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
    placed = total = 0
    for b in order:
        size = sizes[b]
        if size == 0:
            continue
        start, end = starts[b], ends[b]
        live = np.flatnonzero((p_start[:placed] < end) & (p_end[:placed] > start))
        if live.size == 0:
            at = 0
        elif live.size <= _FEW:
            at = _best_gap(sorted(zip(p_lo[live].tolist(), p_hi[live].tolist(), strict=True)), size)
        else:
            at = _best_gap_np(p_lo[live], p_hi[live], size)
        p_start[placed], p_end[placed], p_lo[placed], p_hi[placed] = start, end, at, at + size
        placed += 1
        offsets[b] = at
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


def _best_gap_np(lo: np.ndarray, hi: np.ndarray, size: int) -> int:
    """_best_gap over unsorted ranges given as arrays (the same choice: the first of the smallest gaps)."""
    order = lo.argsort(kind="stable")
    reach = np.maximum.accumulate(hi[order])
    before = np.empty_like(reach)               # where the gap below each range begins
    before[0] = 0
    before[1:] = reach[:-1]
    gaps = lo[order] - before
    fits = np.flatnonzero(gaps >= size)
    return int(before[fits[gaps[fits].argmin()]]) if fits.size else int(reach[-1])


def _members(blocks: Blocks, slot_of: Sequence[int], n_slots: int) -> list[list[int]]:
    per_slot: list[list[int]] = [[] for _ in range(n_slots)]
    for b, bid in enumerate(blocks.buffer_id):
        per_slot[slot_of[bid]].append(b)
    return per_slot


def lower_bound(blocks: Blocks, slot_of: Sequence[int], n_slots: int) -> list[int]:
    """Per allocator: the most bytes of its blocks live at one tick (every placement needs at least this)."""
    out = []
    for members in _members(blocks, slot_of, n_slots):
        if not members:
            out.append(0)
            continue
        size = np.array([blocks.size[b] for b in members], dtype=np.int64)
        start = np.array([blocks.start[b] for b in members], dtype=np.int64)
        end = np.array([blocks.end[b] for b in members], dtype=np.int64)
        freed = end != NEVER
        ticks = np.concatenate((start, end[freed]))
        delta = np.concatenate((size, -size[freed]))
        out.append(int(np.cumsum(delta[np.argsort(ticks, kind="stable")]).max()))
    return out


def repack(plan: MemoryPlan, slot_of: Sequence[int], n_slots: int, max_chunk: Sequence[int],
           chunk_sizes: list[list[int]], bound: Sequence[int] | None = None) -> None:
    """Repack each allocator's blocks (slot_of[buffer id] -> allocator index) in place in `plan` and
    `chunk_sizes`, where the packed size is smaller than the online plan and fits max_chunk of that allocator.
    Allocators whose online plan already reaches `bound` are left as they are."""
    blocks = plan.blocks
    new_offset: dict[int, int] = {}
    for u, members in enumerate(_members(blocks, slot_of, n_slots)):
        online = sum(chunk_sizes[u])
        if not members or (bound is not None and online <= bound[u]):
            continue
        offs, total = pack([blocks.size[b] for b in members], [blocks.start[b] for b in members],
                           [blocks.end[b] for b in members])
        if total >= online or total > max_chunk[u]:
            continue
        chunk_sizes[u] = [total]
        new_offset.update(zip(members, offs, strict=True))
    if not new_offset:
        return
    for k, b in enumerate(plan.block):
        if b >= 0 and b in new_offset:
            plan.offset[k] = new_offset[b]
            plan.chunk[k] = 0
