"""On a real GPU (skipped elsewhere, with the reason): kernels against the numpy reference, CUDA graph replay,
allocation errors, copies between devices. `gpu_check.sh` runs these together with the whole conformance suite."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.errors import AllocationError
from pyggml.types import GGMLType
from pyggml_testing.devices import devices_or_skip

T = GGMLType


@pytest.fixture(scope="module")
def devices():  # type: ignore[no-untyped-def]
    from pyggml_cuda.registry import CudaRegistry

    return devices_or_skip(CudaRegistry(), "no CUDA device")


def _compare(dev, build, name: str = "case") -> None:  # type: ignore[no-untyped-def]
    from pyggml.ops.base import Op
    from pyggml_conformance.case import Case
    from pyggml_conformance.runner import REFERENCE, Status, Target, compare_case, open_target

    (r,) = compare_case(Case(Op.MUL_MAT, name, build), [Target(dev.name, dev)], open_target(REFERENCE))
    assert r.status is Status.PASS, r.error


@pytest.mark.parametrize("wt", [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.IQ4_NL, T.F16, T.Q2_K, T.Q3_K, T.Q4_K,
                                T.Q5_K, T.Q6_K])
@pytest.mark.parametrize("n", [1, 8, 9, 200])
def test_mul_mat_on_the_gpu(devices, wt: GGMLType, n: int) -> None:  # type: ignore[no-untyped-def]
    """dp4a (32-element blocks, Q4_K, Q5_K) or tensor cores (at 200 columns: 8-bit or F16 WMMA fragments, which
    PoCL's portable form cannot show) against the numpy reference."""
    def build(b):  # type: ignore[no-untyped-def]
        return ops.mul_mat(b.input(wt, [512, 300, 2, 1]), b.input(T.F32, [512, n, 2, 1]))

    _compare(devices[0], build, f"{wt} n={n}")


def test_captured_graph_replays_the_same_numbers(devices) -> None:  # type: ignore[no-untyped-def]
    from pyggml.context import Context
    from pyggml.graph import build_graph

    dev = devices[0]
    ctx = Context(no_alloc=True)
    w = ctx.new_tensor(T.F32, 256, 64, name="w")
    x = ctx.new_tensor(T.F32, 256, 4, name="x")
    y = ops.soft_max(ops.mul_mat(w, x))
    g = build_graph(y)
    buft = dev.buffer_type()
    buf = buft.alloc_buffer(3 * 1 << 20)
    off = 0
    for t in (w, x, *g.nodes):  # y and the MUL_MAT before it
        t.buffer, t.offset = buf, off
        off += (t.nbytes() + 255) // 256 * 256
    rng = np.random.default_rng(0)
    for t in (w, x):
        buf.set_tensor(t, rng.standard_normal(t.nelements()).astype(np.float32).view(np.uint8))
    be = dev.init_backend()
    outs = []
    for _ in range(3):
        be.graph_compute(g)
        outs.append(buf.get_tensor(y).copy())
    assert be.captures == 1 and be.graph_launches == 2
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])


def test_profiled_compute_times_each_node_with_events(devices) -> None:  # type: ignore[no-untyped-def]
    """Issue 35: CUDA events around each node's launches, the graphs bypassed: one event per computing node, in
    graph order on the host clock, no whole-graph fallback, the results right, nothing captured."""
    from pyggml_testing.profiling import check_node_profile

    be = devices[0].init_backend()
    events = check_node_profile(be)
    assert any(e.end_ns > e.start_ns for e in events)  # a real GPU's events measure something
    assert be.captures == 0 and be.graph_launches == 0


def test_out_of_memory_is_an_allocation_error(devices) -> None:  # type: ignore[no-untyped-def]
    dev = devices[0]
    free, total = dev.memory()
    want = min(total, free + (total - free) // 2 + 1)
    with pytest.raises(AllocationError, match=f"{dev.name} .*cannot allocate a buffer of {want} bytes"):
        dev.buffer_type().alloc_buffer(want)
    dev.buffer_type().alloc_buffer(1 << 20).free()  # still usable


def test_copy_between_two_gpus(devices) -> None:  # type: ignore[no-untyped-def]
    if len(devices) < 2:
        pytest.skip("one GPU: nothing to copy between")
    a = devices[0].buffer_type().alloc_buffer(1 << 20)
    b = devices[1].buffer_type().alloc_buffer(1 << 20)
    data = np.arange(1 << 20, dtype=np.uint64).astype(np.uint8)
    a.write(0, data)
    assert b.copy_from(a, 0, 0, 1 << 20)
    assert np.array_equal(b.read(0, 1 << 20), data)
