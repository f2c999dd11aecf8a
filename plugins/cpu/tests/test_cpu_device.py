"""The plugin, registries, device facts, threads, host and mapped buffers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.extensions import CPU_FEATURES, SET_N_THREADS
from pyggml.backend.protocol import Backend, Device, DeviceType
from pyggml.backend.registry import get_registry
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml_cpu import native


def test_importing_the_plugin_loads_no_kernels() -> None:
    code = ("import sys, pyggml_cpu.plugin as p; regs = p.pyggml_backend_registries(); "
            "assert 'pyggml_cpu._pgc' not in sys.modules, 'kernels loaded'; print([r.name for r in regs])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['cpu', 'blas']"


def test_device_reports_features(cpu_device: Device) -> None:
    assert cpu_device.type is DeviceType.CPU
    props = cpu_device.props()
    assert "features" in props.details and "kernels" in props.details
    feats = get_registry("cpu").get_extension(CPU_FEATURES)
    assert callable(feats)
    f = feats()
    assert isinstance(f, dict) and set(f) >= {"avx2", "fma", "f16c", "neon"}


def test_set_n_threads_extension(cpu_device: Device) -> None:
    be = cpu_device.init_backend()
    ext = get_registry("cpu").get_extension(SET_N_THREADS)
    assert callable(ext)
    n = min(3, native.available_cores())  # more than the cores is capped (test_cpu_misuse)
    ext(be, n)
    assert be.n_threads == n  # type: ignore[attr-defined]
    ctx = Context(4 << 20)
    a = ctx.new_tensor("f32", 100, 7)
    a.set(np.arange(700, dtype=np.float32))
    out = O.scale(a, 0.5)
    be.graph_compute(build_graph(out))
    np.testing.assert_array_equal(out.numpy().ravel(), np.arange(700, dtype=np.float32) * 0.5)
    be.free()


def test_thread_count_from_environment() -> None:
    code = "from pyggml.backend.registry import get_device; print(get_device('cpu').init_backend().n_threads)"
    env = {**os.environ, "PYGGML_CPU_THREADS": "3"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == str(min(3, native.available_cores()))


def test_portable_kernels_forced_by_environment() -> None:
    code = "from pyggml_cpu import native; print(native.simd_level())"
    env = {**os.environ, "PYGGML_CPU_PORTABLE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "portable"


def test_host_buffer_is_aligned_and_zero_copy(cpu_device: Device) -> None:
    buf = cpu_device.buffer_type().alloc_buffer(1000)
    arr = buf.host_array()
    assert arr is not None and arr.ctypes.data % cpu_device.buffer_type().alignment == 0
    arr[:4] = 7
    assert (buf.read(0, 4) == 7).all()


def test_mapped_file_buffer(cpu_device: Device, cpu_backend: Backend, tmp_path: Path) -> None:
    """Weights read straight from a file mapping (copy-on-write: the file is never written)."""
    w = np.arange(64 * 4, dtype=np.float32).reshape(4, 64) / 100
    path = tmp_path / "weights.bin"
    path.write_bytes(b"\0" * 32 + w.tobytes())
    buf = cpu_device.map_file(str(path), offset=32)  # type: ignore[attr-defined]
    mem = Context(1 << 20)
    wt = mem.new_tensor("f32", 64, 4)
    wt.buffer, wt.offset = buf, 0
    x = mem.new_tensor("f32", 64, 2)
    x.set(np.ones((2, 64), np.float32))
    out = O.mul_mat(wt, x)
    cpu_backend.graph_compute(build_graph(out))
    np.testing.assert_allclose(out.numpy(), np.ones((2, 64), np.float32) @ w.T, rtol=1e-5)
    buf.array[:4] = 0  # private mapping: the file keeps its bytes
    assert path.read_bytes()[32:36] == w.tobytes()[:4]


def test_bad_thread_params(cpu_device: Device) -> None:
    from pyggml.errors import PyGGMLError

    with pytest.raises(PyGGMLError, match="thread count"):
        cpu_device.init_backend("n_threads=many")


def test_compute_releases_the_gil(cpu_backend: Backend) -> None:
    """Python threads keep running while a graph computes in C."""
    import threading

    ctx = Context(64 << 20)
    w = ctx.new_tensor("f32", 1024, 1024)
    x = ctx.new_tensor("f32", 1024, 256)
    w.set(np.ones((1024, 1024), np.float32))
    x.set(np.ones((256, 1024), np.float32))
    g = build_graph(O.mul_mat(w, x))
    cpu_backend.graph_compute(g)
    done = threading.Event()

    def work() -> None:
        for _ in range(3):
            cpu_backend.graph_compute(g)
        done.set()

    t = threading.Thread(target=work)
    spins = 0
    t.start()
    while not done.is_set():
        spins += 1
    t.join()
    assert spins > 1000, f"the main thread ran only {spins} loop iterations during the compute"


def test_read_bandwidth_streams_a_callers_buffer() -> None:
    buf = np.ones(8 << 20, dtype=np.uint8)
    assert native.read_bandwidth(2, reps=1, buffer=buf) > 0  # the caller's 8 MiB, not a new gigabyte
    assert native.read_bandwidth(1, size=4 << 20, reps=2) > 0
    with pytest.raises(ValueError, match="C-contiguous"):
        native.read_bandwidth(1, buffer=np.ones((64, 64), dtype=np.uint8)[:, ::2])
    with pytest.raises(ValueError, match="bad arguments"):
        native.read_bandwidth(0, buffer=buf)
