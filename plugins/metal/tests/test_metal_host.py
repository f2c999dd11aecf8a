"""The host code (registry, buffers, plans, command buffers, events, errors) against the fake Metal driver of
conftest.py: what runs on a Mac through PyObjC, checked here without one."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.errors import AllocationError, ComputeError
from pyggml.graph import build_graph
from pyggml_metal.backend import PARAMS_ALIGN, MetalBackend
from pyggml_metal.registry import MetalRegistry
from pyggml_testing.on_device import place_graph


def _add_graph(dev, n: int = 1000):  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", n, 2, name="a")
    b = ctx.new_tensor("f32", n, 2, name="b")
    y = ops.scale(ops.add(a, b), 2.0)
    g = build_graph(y)
    buf = place_graph(g, dev.buffer_type())
    return a, b, y, g, buf


def test_registry_on_linux_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.delenv("PYGGML_METAL_SIM", raising=False)
    reg = MetalRegistry()
    assert list(reg.devices()) == []
    reason = reg.unavailable_reason()
    assert reason is not None and "Metal needs macOS" in reason and "PYGGML_METAL_SIM=1" in reason


def test_registry_lists_the_driver_devices(fake_driver, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    fake_driver.add("Fake AMD Radeon", unified_memory=False)
    devs = list(MetalRegistry().devices())
    assert [d.name for d in devs] == ["Metal0", "Metal1"]
    assert devs[0].description == "Fake Apple M2" and devs[0].details()["unified_memory"] == "True"
    assert devs[0].caps.buffer_from_host_ptr and devs[0].caps.events
    monkeypatch.setenv("PYGGML_METAL_DEVICES", "Radeon")
    assert [d.description for d in MetalRegistry().devices()] == ["Fake AMD Radeon"]
    monkeypatch.setenv("PYGGML_METAL_DEVICES", "Intel")
    reg = MetalRegistry()
    assert list(reg.devices()) == [] and "selects none" in str(reg.unavailable_reason())


def test_buffer_lifetime_and_accounting(fake_device) -> None:  # type: ignore[no-untyped-def]
    free0, total = fake_device.memory()
    buf = fake_device.buffer_type().alloc_buffer(4096)
    assert fake_device.memory()[0] == free0 - 4096 and total == 4 << 30
    buf.write(10, np.arange(5, dtype=np.uint8))
    assert list(buf.read(10, 5)) == [0, 1, 2, 3, 4]
    buf.free()
    assert fake_device.memory()[0] == free0
    assert "release 4096" in fake_device.driver_device.log
    with pytest.raises(AllocationError, match="freed"):
        buf.read(0, 4)
    buf.free()  # a second free does nothing
    with pytest.raises(AllocationError, match="maxBufferLength"):
        fake_device.buffer_type().alloc_buffer((1 << 30) + 1)


def test_buffer_from_host_ptr_wraps_pages_without_copy(fake_device) -> None:  # type: ignore[no-untyped-def]
    page = mmap.PAGESIZE
    m = mmap.mmap(-1, 4 * page)
    arr = np.frombuffer(m, dtype=np.uint8)
    buf = fake_device.buffer_from_host_ptr(arr, 1024)
    arr[7] = 42
    assert buf.read(7, 1)[0] == 42  # the same memory: no copy
    assert f"no-copy {4 * page}" in fake_device.driver_device.log
    with pytest.raises(AllocationError, match="page-aligned"):
        fake_device.buffer_from_host_ptr(arr[1:page + 1], 16)
    buf.free()
    del arr


def test_one_command_buffer_per_graph_with_bindings_by_layout(fake_device) -> None:  # type: ignore[no-untyped-def]
    a, b, _y, g, _buf = _add_graph(fake_device)
    be = fake_device.init_backend()
    be.graph_compute(g)
    drv = fake_device.driver_device
    assert len(drv.committed) == 1
    cb = drv.committed[0]
    kinds = [op[0] for op in cb.ops]
    assert kinds == ["dispatch", "dispatch"] and cb.waited
    names = [op[1].layout.name for op in cb.ops]
    assert names == ["binary", "unary"]
    plan = be.plans.get(g)
    assert plan.params is not None
    for k, op in enumerate(cb.ops):
        pipe, bindings, groups = op[1], op[2], op[3]
        lay = pipe.layout
        assert len(bindings) == lay.n_buffers and groups == (8, 1, 1)
        for index, _binding in lay.bindings:  # every Vulkan binding lands on a buffer: the graph's or the status
            assert bindings[index] is not None
        pbuf, off = bindings[lay.push_index]
        assert pbuf is plan.params.mem and off == k * PARAMS_ALIGN
    # the push constants are the GLSL rules' bytes: byte offsets of a, b, d first
    words = plan.params.read(0, 12).view(np.uint32)
    assert list(words) == [a.offset, b.offset, g.nodes[0].offset]


def test_plan_replayed_until_buffers_change(fake_device) -> None:  # type: ignore[no-untyped-def]
    _a, _b, _y, g, buf = _add_graph(fake_device)
    be = fake_device.init_backend()
    assert isinstance(be, MetalBackend)
    be.graph_compute(g)
    be.graph_compute(g)
    drv = fake_device.driver_device
    assert be.plans_built == 1 and be.replays == 2 and len(drv.committed) == 2
    assert fake_device._inflight == []  # synchronize forgets what it waited for
    assert [op[1:] for op in drv.committed[0].ops] == [op[1:] for op in drv.committed[1].ops]
    buf.free()
    with pytest.raises(AllocationError, match="freed"):
        be.graph_compute(g)


def test_failed_command_buffer_raises_and_backend_recovers(fake_device) -> None:  # type: ignore[no-untyped-def]
    _a, _b, _y, g, _buf = _add_graph(fake_device)
    be = fake_device.init_backend()
    fake_device.driver_device.fail_next = True
    with pytest.raises(ComputeError, match=r"Metal0: a command buffer failed: fake: GPU fault"):
        be.graph_compute(g)
    be.graph_compute(g)  # usable again


def test_status_word_names_the_node(fake_device) -> None:  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    rows = ctx.new_tensor("f32", 8, 4, name="rows")
    idx = ctx.new_tensor("i32", 3, name="idx")
    y = ops.get_rows(rows, idx)
    g = build_graph(y)
    place_graph(g, fake_device.buffer_type())
    be = fake_device.init_backend()

    def shader_reports(cb) -> None:  # type: ignore[no-untyped-def]
        code = be.status.code(g.nodes[-1], "a row index out of range")  # the code the rule put into f3
        be.status_buffer.mem.contents()[:4] = np.array([code], np.uint32).view(np.uint8)

    fake_device.driver_device.on_commit = shader_reports
    with pytest.raises(ComputeError, match=r"GET_ROWS.*out of range"):
        be.graph_compute(g)
    fake_device.driver_device.on_commit = None
    be.graph_compute(g)  # the word was cleared


def test_events_order_command_buffers(fake_device) -> None:  # type: ignore[no-untyped-def]
    _a, _b, _y, g, _buf = _add_graph(fake_device)
    be1, be2 = fake_device.init_backend(), fake_device.init_backend()
    ev = fake_device.event_new()
    be1.graph_compute_async(g)
    be1.event_record(ev)
    be2.event_wait(ev)
    be2.graph_compute_async(g)
    cbs = fake_device.driver_device.committed
    assert cbs[1].ops == [("signal", ev.driver_event, 1)]
    assert cbs[2].ops[0] == ("wait", ev.driver_event, 1) and cbs[2].ops[1][0] == "dispatch"
    ev.synchronize()
    be1.synchronize()
    be2.synchronize()


def test_host_access_waits_for_work_in_flight(fake_device) -> None:  # type: ignore[no-untyped-def]
    _a, _b, y, g, _buf = _add_graph(fake_device)
    be = fake_device.init_backend()
    be.graph_compute_async(g)
    cb = fake_device.driver_device.committed[-1]
    assert not cb.waited
    y.numpy()
    assert cb.waited
    be.synchronize()


def test_backend_params_refused(fake_device) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="takes no parameters"):
        fake_device.init_backend("threads=4")


def test_free_releases_the_scratch_buffer(fake_device) -> None:  # type: ignore[no-untyped-def]
    """The backend's scratch (1 MiB at least) stayed allocated, and counted in memory(), after free()."""
    free0 = fake_device.memory()[0]
    backend = MetalBackend(fake_device)
    backend.scratch_buffer(4096)
    backend.free()
    assert fake_device.memory()[0] == free0
