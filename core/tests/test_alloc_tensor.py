"""The dynamic tensor allocator: best fit, merging of freed blocks, the last-block reuse rule, chunks."""

from __future__ import annotations

import pytest

from pyggml.alloc import MAX_CHUNKS, TensorAllocator
from pyggml.errors import AllocationError

BIG = 1 << 40


def test_sizes_are_aligned_and_carved_from_the_front() -> None:
    ta = TensorAllocator(16, BIG)
    assert ta.alloc(1) == (0, 0)
    assert ta.alloc(17) == (0, 16)
    assert ta.alloc(16) == (0, 48)
    assert ta.chunk_sizes() == [64]
    assert ta.free_blocks(0) == [(64, BIG - 64)]


def test_best_fit_takes_the_smallest_hole_that_fits() -> None:
    ta = TensorAllocator(16, BIG)
    offs = [ta.alloc(s)[1] for s in (64, 48, 32, 160, 16)]
    assert offs == [0, 64, 112, 144, 304]
    ta.free(0, 64, 48)
    ta.free(0, 144, 160)
    assert ta.free_blocks(0)[:2] == [(64, 48), (144, 160)]
    assert ta.alloc(32) == (0, 64)       # the 48-byte hole, not the 160-byte one
    assert ta.alloc(128) == (0, 144)     # only the 160-byte hole fits
    assert ta.chunk_sizes() == [320]     # no growth


def test_best_fit_ties_go_to_the_later_block() -> None:
    ta = TensorAllocator(16, BIG)
    for _ in range(4):
        ta.alloc(32)
    ta.free(0, 0, 32)
    ta.free(0, 64, 32)
    assert ta.alloc(32) == (0, 64)


def test_the_last_block_is_used_only_when_no_hole_fits() -> None:
    ta = TensorAllocator(16, BIG)
    ta.alloc(32)
    ta.alloc(32)
    ta.free(0, 0, 32)
    assert ta.alloc(48) == (0, 64)       # the 32-byte hole is too small: grow at the end
    assert ta.chunk_sizes() == [112]


def test_free_merges_with_both_neighbours() -> None:
    ta = TensorAllocator(16, BIG)
    for _ in range(3):
        ta.alloc(32)
    ta.free(0, 0, 32)
    ta.free(0, 64, 32)                   # merges with the tail block
    assert ta.free_blocks(0) == [(0, 32), (64, BIG - 64)]
    ta.free(0, 32, 32)                   # joins the block before and the block after
    assert ta.free_blocks(0) == [(0, BIG)]
    assert ta.chunk_sizes() == [96]      # frees never lower the high-water mark


def test_free_inserts_in_offset_order_and_grows_past_256_blocks() -> None:
    ta = TensorAllocator(16, BIG)
    n = 600
    for _ in range(n):
        ta.alloc(16)
    for i in range(n - 2, -1, -2):       # every other block, back to front: no merges
        ta.free(0, i * 16, 16)
    blocks = ta.free_blocks(0)
    assert len(blocks) == n // 2 + 1     # ggml aborts past 256 free blocks; pyggml keeps going
    assert [o for o, _ in blocks] == sorted(o for o, _ in blocks)


def test_double_free_is_an_error() -> None:
    ta = TensorAllocator(16, BIG)
    ta.alloc(64)
    ta.alloc(64)
    ta.free(0, 0, 64)
    with pytest.raises(AllocationError, match="overlaps the free block"):
        ta.free(0, 16, 32)


def test_reuse_rule_prefers_committed_space_then_least_growth() -> None:
    ta = TensorAllocator(16, 512)
    assert ta.alloc(400) == (0, 0)       # chunk 0: last block [400, 512), high-water 400
    assert ta.alloc(304) == (1, 0)       # too big for chunk 0's last block: chunk 1, high-water 304
    ta.free(1, 240, 64)                  # chunk 1: last block [240, 512)
    # both last blocks fit 96 bytes: chunk 0 would grow by 96, chunk 1 only by 32 (least growth wins)
    assert ta.alloc(96) == (1, 240)
    assert ta.chunk_sizes() == [400, 336]
    ta.free(1, 240, 96)                  # chunk 1: last block [240, 512) under a high-water mark of 336
    # 32 bytes: chunk 0 would grow by 32, chunk 1 fits inside committed space (reuse 64 >= 0): chunk 1
    assert ta.alloc(32) == (1, 240)
    ta.free(1, 240, 32)
    ta.free(0, 352, 48)                  # chunk 0: last block [352, 512) under its high-water mark of 400
    # both fit inside committed space: chunk 0 leaves 16 bytes unused, chunk 1 64: the smaller leftover wins
    assert ta.alloc(32) == (0, 352)
    assert ta.chunk_sizes() == [400, 336]


def test_new_chunk_when_max_size_is_reached_and_limits() -> None:
    ta = TensorAllocator(32, 128, name="small")
    assert ta.alloc(96) == (0, 0)
    assert ta.alloc(64) == (1, 0)
    assert ta.alloc(32) == (0, 96)
    assert ta.n_chunks == 2
    with pytest.raises(AllocationError, match=r"needs 160 bytes, more than the maximum buffer size 128.*'small'"):
        ta.alloc(129)
    for _ in range(MAX_CHUNKS - 2):
        ta.alloc(128)
    with pytest.raises(AllocationError, match=f"all {MAX_CHUNKS} buffers"):
        ta.alloc(128)


def test_zero_size_and_reset() -> None:
    ta = TensorAllocator(16, BIG)
    assert ta.alloc(0) == (0, 0)
    ta.free(0, 0, 0)
    assert ta.chunk_sizes() == [0]
    ta.alloc(48)
    ta.reset()
    assert ta.chunk_sizes() == []
    with pytest.raises(AllocationError, match="power of two"):
        TensorAllocator(24, BIG)


def test_by_size_packing_puts_large_blocks_first_and_fills_gaps() -> None:
    from pyggml.alloc.by_size import pack

    # sizes, [start, end) ticks: 1 overlaps 0 and 2, 0 and 2 do not meet, 3 overlaps nothing
    offsets, total = pack([64, 32, 64, 128], [0, 1, 4, 10], [4, 8, 9, 12])
    assert total == 128
    assert offsets[3] == 0                       # the largest first, at 0
    assert offsets[0] == 0 and offsets[2] == 0   # 0 and 2 never meet: same place
    assert offsets[1] == 64                      # above the 64-byte blocks it meets
    assert pack([], [], []) == ([], 0)
    assert pack([0, 32], [0, 0], [1, 1]) == ([0, 0], 32)
