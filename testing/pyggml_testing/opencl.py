"""Helpers of the OpenCL tests (and of tests elsewhere that run on OpenCL devices): place a context's tensors in one
buffer, run a graph on a device with random inputs, and find enough OpenCL devices (PoCL makes as many as
POCL_DEVICES names, read once per process: `pocl_rerun_test` reruns a test file in a child that asks for
more)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from pyggml.backend.protocol import Backend, Buffer, BufferType, Device
from pyggml.context import Context, init_view
from pyggml.errors import PyGGMLError
from pyggml.graph import Graph, build_graph
from pyggml.tensor import Tensor, TensorFlag
from pyggml.types import GGMLType


def place(ctx: Context, buft: BufferType, tensors: Iterable[Tensor] | None = None) -> Buffer:
    """Allocate every data owner of `ctx` (or the given tensors) linearly in one new buffer of `buft`."""
    owners = [t for t in (tensors if tensors is not None else ctx) if t.view_src is None and t.buffer is None]
    align = buft.alignment
    offs: list[int] = []
    size = 0
    for t in owners:
        offs.append(size)
        size += (buft.alloc_size(t) + align - 1) // align * align
    buf = buft.alloc_buffer(size)
    for t, o in zip(owners, offs, strict=True):
        t.buffer = buf
        t.offset = o
    for t in ctx:
        if t.view_src is not None and t.buffer is None and t.view_src.buffer is not None:
            init_view(t)
    return buf


def run(backend: Backend, *outs: Tensor) -> Graph:
    g = build_graph(*outs)
    backend.graph_compute(g)
    return g


# ---- running one graph on the numpy reference and on an OpenCL device -------------------------------------

BuildFn = Callable[[Context], list[Tensor]]


def fill(t: Tensor, rng: np.random.Generator) -> None:
    """Inputs by name: 'ids<N>' integers in [0, N); 'mask' zeros with some -inf; anything else N(0, 1)."""
    n = t.nelements()
    if t.name.startswith("ids"):
        hi = int(t.name[3:].split(":")[0])
        t.set(rng.integers(0, hi, size=n).astype(np.int64 if t.type == GGMLType.I64 else np.int32))
    elif t.name.startswith("mask"):
        t.set(np.where(rng.random(n) < 0.2, -np.inf, rng.standard_normal(n) * 0.1).astype(np.float32))
    elif t.type in (GGMLType.I32, GGMLType.I16, GGMLType.I8):
        t.set(rng.integers(-50, 50, size=n).astype(t.type.traits.np_dtype))
    else:
        t.set(rng.standard_normal(n).astype(np.float32))


def run_on(device: Device, build: BuildFn, seed: int = 0) -> list[npt.NDArray[Any]]:
    ctx = Context(no_alloc=True)
    outs = build(ctx)
    g = build_graph(*outs)
    place(ctx, device.buffer_type())
    rng = np.random.default_rng(seed)
    for leaf in [*g.leafs, *(n for n in g.nodes if n.flags & TensorFlag.PARAM)]:  # parameters are graph nodes
        fill(leaf, rng)
    device.init_backend().graph_compute(g)
    return [o.numpy().astype(np.float64) for o in outs]


# ---- enough OpenCL devices ---------------------------------------------------------------------------------------

CHILD = "PYGGML_OPENCL_CHILD"
"""Set in the child process of `run_with_pocl_devices` (its tests must not start another)."""


def opencl_devices() -> list[Device]:
    """Every OpenCL device of this process (none without the plugin or an ICD)."""
    from pyggml.backend.registry import devices

    try:
        return [d for d in devices() if d.name.startswith("OpenCL")]
    except PyGGMLError:
        return []


def need(devs: list[Device], n: int) -> list[Device]:
    """The first n of `devs`, or a skip saying how many there are."""
    if len(devs) < n:
        pytest.skip(f"{len(devs)} OpenCL devices here; the test needs {n}")
    return devs[:n]


def in_child() -> bool:
    return bool(os.environ.get(CHILD))


def run_with_pocl_devices(test_file: str, n: int, devs: list[Device]) -> None:
    """Run `test_file`'s tests in a child process whose PoCL makes `n` CPU devices, and fail with the child's output
    if any fails. Skips when this process has no OpenCL device at all (no plugin or no ICD)."""
    if not devs:
        pytest.skip("no OpenCL device (the opencl plugin or an ICD is missing)")
    env = dict(os.environ, POCL_DEVICES=" ".join(["pthread"] * n), **{CHILD: "1"})
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", test_file],
                       env=env, capture_output=True, text=True, timeout=900, cwd=os.path.dirname(test_file))
    tail = (r.stdout + r.stderr)[-3000:]
    assert r.returncode == 0, tail
    assert " passed" in r.stdout and " failed" not in r.stdout, tail


def pocl_rerun_test(test_file: str, n: int, devs: list[Device]) -> Callable[[], None]:
    """The test a module that needs n OpenCL devices binds to a test_ name: PoCL reads POCL_DEVICES once per
    process, so when this process sees fewer than n devices it reruns `test_file` in a child process that asks PoCL
    for n (`run_with_pocl_devices`); it is skipped where the devices are here already, or in that child."""

    @pytest.mark.skipif(len(devs) >= n or in_child(), reason="the OpenCL devices are here already")
    def test() -> None:
        run_with_pocl_devices(test_file, n, devs)

    return test
