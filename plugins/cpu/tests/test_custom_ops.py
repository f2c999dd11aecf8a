"""Custom ops on the cpu backend: the graph is split around them, the callable's tasks get ggml's (ith, nth)
(nth = min(n_tasks, threads)), a raising callable fails with the node's name and the backend keeps working, and
a device backend (OpenCL when installed) hands them to cpu through the scheduler."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.backend import get_device
from pyggml.backend.custom_call import CustomOpError
from pyggml.errors import ComputeError, PyGGMLError
from pyggml_testing.custom_sched import run_custom_placement, times_three
from pyggml_testing.graphs import new_ctx, rand, tensor


def _cpu(n_threads: int) -> Any:
    be = get_device("cpu").init_backend()
    be.set_n_threads(n_threads)
    return be


def test_split_runs_c_nodes_around_python_ones() -> None:
    ctx = new_ctx()
    x = rand(6, 32, seed=1)
    a = tensor(ctx, x)
    seen: list[tuple[int, int, str]] = []

    def record(dst: Any, src: Any, ith: int, nth: int, ud: Any) -> None:
        seen.append((ith, nth, threading.current_thread().name))
        times_three(dst, src, ith, nth, ud)

    y = ops.map_custom1(ops.add(a, a), record, n_tasks=2)
    z = ops.scale(ops.map_custom1(y, times_three), 0.5)  # C, Python, Python, C
    be = _cpu(2)
    be.graph_compute(gg.build_graph(z))
    np.testing.assert_allclose(z.numpy(), x * 2 * 3 * 3 * 0.5, rtol=1e-6)
    assert sorted((i, n) for i, n, _ in seen) == [(0, 2), (1, 2)]
    be.graph_compute(gg.build_graph(z))  # the cached plan replays the same segments
    np.testing.assert_allclose(z.numpy(), x * 2 * 3 * 3 * 0.5, rtol=1e-6)


def test_raising_callable_names_the_node_and_backend_stays_usable() -> None:
    ctx = new_ctx()
    a = tensor(ctx, rand(4, 8, seed=2))

    def boom(dst: Any, src: Any, ith: int, nth: int, ud: Any) -> None:
        if ith == nth - 1:
            raise RuntimeError("bad row")
        dst[...] = src

    bad = ops.map_custom1(ops.neg(a), boom)
    bad.name = "exploding"
    be = _cpu(2)
    with pytest.raises(ComputeError, match=r"cpu: node 'exploding' \(MAP_CUSTOM1.*RuntimeError: bad row") as ei:
        be.graph_compute(gg.build_graph(bad))
    assert isinstance(ei.value.__cause__, CustomOpError)
    assert isinstance(ei.value.__cause__.__cause__, RuntimeError)
    good = ops.scale(ops.map_custom1(ops.neg(a), times_three), 2.0)
    be.graph_compute(gg.build_graph(good))
    np.testing.assert_allclose(good.numpy(), -a.numpy() * 6, rtol=1e-6)


def test_a_device_hands_custom_ops_to_cpu() -> None:
    try:
        dev = get_device("OpenCL0")
    except PyGGMLError:
        pytest.skip("no OpenCL device to be the scheduler's first backend")
    run_custom_placement(dev, get_device("cpu").init_backend())
