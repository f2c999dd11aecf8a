"""The cpu backend under misuse (issues 19 and 33): one backend computed from two threads at once, thread counts
beyond the cores, use after free, a buffer freed from another thread while a compute runs on it."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

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


FREE_DURING_COMPUTE = textwrap.dedent("""
    import threading, time
    import numpy as np
    from pyggml import ops
    from pyggml.alloc import GraphAllocator, alloc_ctx_tensors
    from pyggml.backend.registry import get_device
    from pyggml.context import Context
    from pyggml.errors import AllocationError
    from pyggml.graph import build_graph

    dev = get_device("cpu")
    be = dev.init_backend("n_threads=2")
    rng = np.random.default_rng(0)
    for round in range(3):
        ctx = Context(no_alloc=True)
        y = x = ctx.new_tensor("f32", 256, 256)
        ws = [ctx.new_tensor("f32", 256, 256) for _ in range(8)]
        buf = alloc_ctx_tensors(ctx, dev.buffer_type())
        for t in (x, *ws):
            t.set(rng.standard_normal((256, 256)).astype(np.float32) * 0.05)
        for w in ws:
            y = ops.mul_mat(w, y)
        g = build_graph(y)
        GraphAllocator(dev.buffer_type()).alloc_graph(g)
        errors, computes = [], []

        def work():
            try:
                while True:
                    be.graph_compute(g)
                    computes.append(1)
            except AllocationError as e:
                errors.append(str(e))

        t = threading.Thread(target=work)
        t.start()
        time.sleep(0.05)
        buf.free()
        t.join(60)
        assert not t.is_alive(), "the compute thread hangs"
        assert computes and len(errors) == 1, (len(computes), errors)
        print("refused:", errors[0])
    be.free()
    print("done")
""")


def test_buffer_freed_from_another_thread_during_compute_waits_then_refuses() -> None:
    """Issue 33: `buf.free()` while another thread's graph_compute ran on it (8 chained 256x256 MUL_MATs in a loop)
    dropped the memory under the C kernels: SIGSEGV. The free now waits for the running compute, and the next
    compute raises AllocationError naming a tensor in the freed buffer. In a subprocess: a regression kills it."""
    r = subprocess.run([sys.executable, "-c", FREE_DURING_COMPUTE], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    assert r.stdout.count("refused: cpu: node ") == 3 and "done" in r.stdout, r.stdout
    assert "which was freed (buffer used after free)" in r.stdout


TRUNCATED_MAP = textwrap.dedent("""
    import os, sys
    import numpy as np
    from pyggml import ops
    from pyggml.backend.registry import get_device
    from pyggml.context import Context
    from pyggml.errors import AllocationError
    from pyggml.graph import build_graph

    path = sys.argv[1]
    w = np.ones((64, 1024), np.float32)
    with open(path, "wb") as f:
        f.write(w.tobytes())
    dev = get_device("cpu")
    be = dev.init_backend("n_threads=1")
    buf = dev.map_file(path)
    ctx = Context(1 << 20)
    wt = ctx.new_tensor("f32", 1024, 64)
    wt.buffer, wt.offset = buf, 0
    x = ctx.new_tensor("f32", 1024, 1)
    x.set(np.ones((1, 1024), np.float32))
    g = build_graph(ops.mul_mat(wt, x))
    be.graph_compute(g)
    os.truncate(path, 4096)  # as another process rewriting the file would
    for use in (lambda: be.graph_compute(g), wt.numpy):
        try:
            use()
        except AllocationError as e:
            print("refused:", e)
""")


def test_compute_over_a_mapped_file_truncated_since_raises(tmp_path: Path) -> None:
    """Issue 33: a file mapped by `map_file` and then truncated: reading its mapping past the new end raises SIGBUS.
    The buffer keeps the file open and checks its size before each compute and read (one fstat)."""
    path = tmp_path / "weights.bin"
    r = subprocess.run([sys.executable, "-c", TRUNCATED_MAP, str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    assert r.stdout.count("refused: ") == 2, r.stdout
    assert r.stdout.count(f"{path}: the file is now 4096 bytes, shorter than the 262144 bytes mapped") == 2, r.stdout
