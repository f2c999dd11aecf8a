"""SET_ROWS with a repeated id: the last row wins (docs/op-semantics.md), whatever the thread count. The fuzz soak
(benchmarks/fuzz_soak.py) found the cpu backend flaky here: threads split the source rows, so two threads raced for
one destination row. They now split the destination rows. A race shows only sometimes: the graph is computed many
times with 2 and 4 threads, over several destination types."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import Device
from pyggml.context import Context
from pyggml.graph import build_graph


@pytest.mark.parametrize("n_threads", [2, 4])
@pytest.mark.parametrize("td", ["f32", "f16", "q8_0"])
def test_the_last_of_repeated_ids_wins(cpu_device: Device, n_threads: int, td: str) -> None:
    n, ne0 = 16, 64
    ids_val = np.array([3, 3, 5, 3, 0, 5, 5, 3, 1, 3, 5, 3, 0, 3, 5, 3], np.int32)
    rows_val = np.random.default_rng(0).uniform(-1, 1, (n, ne0)).astype(np.float32)
    ctx = Context(no_alloc=True)
    dst = ctx.new_tensor(td, ne0, 8, name="dst")
    rows, ids = ctx.new_tensor("f32", ne0, n, name="rows"), ctx.new_tensor("i32", n, name="ids")
    out = ops.set_rows(dst, rows, ids)
    g = build_graph(out)
    assert alloc_ctx_tensors(ctx, cpu_device.buffer_type()) is not None
    rows.set(rows_val)
    ids.set(ids_val)
    be = cpu_device.init_backend(f"n_threads={n_threads}")
    try:
        expected = None
        for _ in range(40):
            dst.set(np.zeros((8, ne0), np.float32))
            be.graph_compute(g)
            got = out.numpy()
            if expected is None:
                expected = got.copy()
                for i in (0, 1, 3, 5):
                    last = rows_val[np.flatnonzero(ids_val == i)[-1]]
                    assert np.allclose(got[i], last, atol=0.02), i  # q8_0: within its rounding
            assert np.array_equal(got, expected)
    finally:
        be.free()
