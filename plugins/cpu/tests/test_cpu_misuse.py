"""The cpu backend under misuse (issue 19): one backend computed from two threads at once, thread counts beyond
the cores, use after free."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

from pyggml import ops
from pyggml.backend.protocol import Device
from pyggml.backend.registry import get_registry
from pyggml.context import Context
from pyggml.errors import ComputeError
from pyggml.graph import build_graph
from pyggml_cpu import native
from pyggml_testing.buffers import check_use_after_free


def test_two_threads_on_one_backend_neither_hang_nor_mix_up(cpu_device: Device) -> None:
    """Both threads used to spin forever in the C pool's barrier."""
    be = cpu_device.init_backend(f"n_threads={native.available_cores()}")
    results: list[bool] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(100):
            ctx = Context(mem_size=1 << 20)
            a, b = ctx.new_tensor("f32", 64, 32), ctx.new_tensor("f32", 64, 16)
            x = rng.standard_normal((32, 64)).astype(np.float32)
            y = rng.standard_normal((16, 64)).astype(np.float32)
            a.set(x)
            b.set(y)
            out = ops.mul_mat(a, b)
            be.graph_compute(build_graph(out))
            results.append(bool(np.allclose(out.numpy(), y @ x.T, atol=1e-3)))

    threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "computes from two threads hung"
    assert len(results) == 200 and all(results)
    be.free()


def test_threads_beyond_the_cores_are_capped_with_a_warning(cpu_device: Device,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    cores = native.available_cores()
    with caplog.at_level(logging.WARNING, logger="pyggml_cpu.native"):
        be = cpu_device.init_backend("n_threads=1000")
    assert be.n_threads == cores  # type: ignore[attr-defined]
    assert "1000 threads" in caplog.text and f"{cores} cores" in caplog.text
    caplog.clear()
    from pyggml.backend.extensions import SET_N_THREADS

    ext = get_registry("cpu").get_extension(SET_N_THREADS)
    assert callable(ext)
    with caplog.at_level(logging.WARNING, logger="pyggml_cpu.native"):
        ext(be, cores + 31)
    assert be.n_threads == cores and f"{cores + 31} threads" in caplog.text  # type: ignore[attr-defined]
    be.free()


def test_compute_after_free_raises(cpu_device: Device) -> None:
    be = cpu_device.init_backend("n_threads=1")
    ctx = Context(mem_size=1 << 16)
    a = ctx.new_tensor("f32", 8)
    a.set(np.ones(8, np.float32))
    g = build_graph(ops.scale(a, 2.0))
    be.free()
    with pytest.raises(ComputeError, match="freed"):
        be.graph_compute(g)


def test_buffer_freed_after_planning_is_refused(cpu_device: Device) -> None:
    """The plan of a graph holds raw addresses: a replay after its buffer was freed must not reach C."""
    be = cpu_device.init_backend("n_threads=1")
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", 1024)
    y = ops.scale(a, 2.0)
    g = build_graph(y)
    buf = cpu_device.buffer_type().alloc_buffer(8192)
    a.buffer, a.offset, y.buffer, y.offset = buf, 0, buf, 4096
    a.set(np.ones(1024, np.float32))
    be.graph_compute(g)
    check_use_after_free(be, g, y, buf)
    be.free()
