"""Backend: plans built once and replayed, clear refusals, events and copies between two devices, program cache."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.errors import UnsupportedOpError
from pyggml.graph import build_graph
from pyggml.types import GGMLType as T
from pyggml_testing.on_device import place


def test_plan_is_built_once_and_replayed(dev) -> None:  # type: ignore[no-untyped-def]
    be = dev.init_backend()
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(T.F32, 32, 4)
    w = ctx.new_tensor(T.F16, 32, 8)
    y = ops.rms_norm(ops.mul_mat(w, a))
    g = build_graph(y)
    place(ctx, dev.buffer_type())
    w.set(np.ones((8, 32)))
    for k in range(3):
        a.set(np.full((4, 32), k + 1.0))
        be.graph_compute(g)
        assert np.allclose(y.numpy(), 1.0, atol=1e-5)
    assert be.plans_built == 1
    # a graph whose tensors moved gets a new plan
    y.buffer = None
    place(ctx, dev.buffer_type(), [y])
    be.graph_compute(g)
    assert be.plans_built == 2
    assert np.allclose(y.numpy(), 1.0, atol=1e-5)


def test_unsupported_op_is_declared_and_refused(dev) -> None:  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    y = ops.mul_mat(ctx.new_tensor(T.IQ2_XXS, 256, 4), ctx.new_tensor(T.F32, 256, 2))
    assert not dev.supports_op(y)
    g = build_graph(y)
    place(ctx, dev.buffer_type())
    with pytest.raises(UnsupportedOpError, match="MUL_MAT"):
        dev.init_backend().graph_compute(g)


def test_two_devices_with_events(dev, dev2) -> None:  # type: ignore[no-untyped-def]
    be0, be1 = dev.init_backend(), dev2.init_backend()
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(T.F32, 1000, 20)
    y0 = ops.scale(ops.sqr(a), 2.0)
    g0 = build_graph(y0)
    place(ctx, dev.buffer_type())
    ctx1 = Context(no_alloc=True)
    x1 = ctx1.new_tensor(T.F32, 1000, 20)
    y1 = ops.add(x1, x1)
    g1 = build_graph(y1)
    place(ctx1, dev2.buffer_type())
    v = np.random.default_rng(0).standard_normal((20, 1000)).astype(np.float32)
    a.set(v)
    ev = dev.event_new()
    be0.graph_compute_async(g0)
    be0.event_record(ev)
    be1.event_wait(ev)
    assert be1.cpy_tensor_async(be0, y0, x1)
    be1.graph_compute_async(g1)
    be1.synchronize()
    assert np.allclose(y1.numpy(), 4 * v * v, rtol=1e-6)


def test_build_failure_shows_source_and_log(dev) -> None:  # type: ignore[no-untyped-def]
    from pyggml_dialect.source import ProgramSpec
    from pyggml_opencl.programs import KernelBuildError

    spec = ProgramSpec.of("elementwise.cl", T0="no_such_type", T1="f32", TD="f32", RAWCOPY=0)
    with pytest.raises(KernelBuildError) as e:
        dev.programs.program(spec)
    msg = str(e.value)
    assert "generated source" in msg and "compiler log" in msg and "load_no_such_type" in msg


def test_programs_are_cached_on_disk(dev, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pyggml_dialect.source import ProgramSpec
    from pyggml_opencl.options import OpenCLOptions
    from pyggml_opencl.programs import ProgramCache

    folder = OpenCLOptions.from_env({"PYGGML_CACHE_DIR": str(tmp_path)}).cache_dir  # read once, passed down
    assert folder == tmp_path / "opencl"
    spec = ProgramSpec.of("layout.cl", T0="f32", T1="f32")
    first = ProgramCache(dev.ctx, dev.cl_device, "t", cache_dir=folder)
    first.program(spec)
    assert first.builds == 1 and len(list(folder.glob("*.bin"))) == 1
    second = ProgramCache(dev.ctx, dev.cl_device, "t", cache_dir=folder)
    second.kernel(spec, "k_arange")
    assert second.builds == 0
    third = ProgramCache(dev.ctx, dev.cl_device, "t")  # no folder: no disk cache
    third.program(spec)
    assert third.builds == 1


def test_out_of_range_row_id_raises_and_backend_stays_usable(dev) -> None:  # type: ignore[no-untyped-def]
    from pyggml.errors import ComputeError

    be = dev.init_backend()
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(T.F32, 4, 3)
    ids = ctx.new_tensor(T.I32, 2)
    y = ops.get_rows(a, ids)
    g = build_graph(y)
    place(ctx, dev.buffer_type())
    a.set(np.arange(12, dtype=np.float32))
    ids.set(np.array([1, 7], dtype=np.int32))
    with pytest.raises(ComputeError, match=r"GET_ROWS.*row id outside 0\.\.2"):
        be.graph_compute(g)
    ids.set(np.array([2, 0], dtype=np.int32))
    be.graph_compute(g)
    assert np.array_equal(y.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4)[[2, 0]])
