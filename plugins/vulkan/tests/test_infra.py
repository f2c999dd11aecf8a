"""Registry, memory, pipelines, recording/replay, events, errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.errors import AllocationError
from pyggml.graph import build_graph
from pyggml_testing.on_device import compare, place_graph, rand


def test_plugin_import_loads_no_vulkan():
    code = ("import sys, pyggml_vulkan.plugin as p; regs = p.pyggml_backend_registries(); "
            "assert 'vulkan' not in sys.modules, 'vulkan imported'; print(regs[0].name)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "Vulkan"


def test_entry_point_registered():
    from importlib.metadata import entry_points

    eps = {e.name: e.value for e in entry_points(group="pyggml.backends")}
    assert eps.get("vulkan") == "pyggml_vulkan.plugin"


def test_device_props(device):
    d = device.details()
    assert device.name == "Vulkan0"
    assert int(d["max_storage_buffer_range"]) > 0 and int(d["subgroup_size"]) > 0
    assert d["fp16_storage"] == "True" and d["int8_storage"] == "True"
    if device.info.is_cpu:
        assert d["emulated"] == "cpu" and "CPU-emulated" in device.description
    _free, total = device.memory()
    assert total > 0
    assert device.buffer_type().max_size <= device.info.max_storage_buffer_range


def test_device_filter(monkeypatch):
    from pyggml_vulkan.registry import VulkanRegistry

    monkeypatch.setenv("PYGGML_VULKAN_DEVICES", "no-such-gpu")
    reg = VulkanRegistry()
    assert list(reg.devices()) == []
    assert "PYGGML_VULKAN_DEVICES" in (reg.unavailable_reason() or "")
    monkeypatch.setenv("PYGGML_VULKAN_DEVICES", "0")
    assert len(VulkanRegistry().devices()) == 1


@pytest.mark.parametrize("staging", [False, True])
def test_buffer_io(device, staged_device, staging):
    if staging:
        device = staged_device
    buf = device.buffer_type().alloc_buffer(1000)
    assert buf.mapped is (not staging and device.info.unified_memory)
    data = np.arange(1000, dtype=np.uint32).astype(np.uint8)
    buf.write(0, data)
    assert np.array_equal(buf.read(0, 1000), data)
    buf.fill(8, 16, 7)
    buf.fill(3, 2, 9)
    got = buf.read(0, 30)
    assert list(got[8:24]) == [7] * 16 and list(got[3:5]) == [9, 9] and got[5] == data[5]
    other = device.buffer_type().alloc_buffer(64)
    assert other.copy_from(buf, 100, 4, 32)
    assert np.array_equal(other.read(4, 32), data[100:132])
    with pytest.raises(AllocationError, match="outside the buffer"):
        buf.read(990, 20)
    buf.free()
    other.free()


def test_allocation_beyond_limit(device):
    buft = device.buffer_type()
    with pytest.raises(AllocationError, match="maxStorageBufferRange"):
        buft.alloc_buffer(buft.max_size + 1)


def test_replay_reuses_the_command_buffer(device):
    be = device.init_backend()
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", 300, 4, name="a")
    b = ctx.new_tensor("f32", 300, 4, name="b")
    out = ops.rms_norm(ops.mul(ops.add(a, b), b))
    g = build_graph(out)
    place_graph(g, device.buffer_type())
    for i in range(3):
        x, y = rand(4, 300, seed=i), rand(4, 300, seed=10 + i)
        a.set(x)
        b.set(y)
        be.graph_compute(g)
        z = (x + y) * y
        ref = z / np.sqrt((z.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6)
        assert np.allclose(out.numpy(), ref, rtol=1e-4, atol=1e-5)
    assert be.plans_built == 1 and be.stats.computes == 3  # recorded once, replayed twice
    assert be.last_plan is not None and (be.last_plan.n_dispatches, be.last_plan.n_barriers) == (3, 2)
    be.replay_enabled = False
    be.graph_compute(g)
    assert be.plans_built == 2
    be.free()


def test_events_order_two_streams(device):
    be1, be2 = device.init_backend(), device.init_backend()
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", 64, name="a")
    x = ops.scale(a, 2.0)
    y = ops.add(x, x)
    g1, g2 = build_graph(x), build_graph(y)
    place_graph(g2, device.buffer_type())
    a.set(np.ones(64, np.float32))
    ev = device.event_new()
    be1.graph_compute_async(g1)
    be1.event_record(ev)
    be2.event_wait(ev)
    from pyggml.graph import Graph

    only_y = Graph()
    only_y.nodes.append(y)
    be2.graph_compute_async(only_y)
    be2.synchronize()
    ev.synchronize()
    assert np.allclose(y.numpy(), 4.0)


def test_shader_build_error_shows_glsl_and_compiler(tmp_path):
    from pyggml_vulkan.shaderc import ShaderBuildError, compile_file

    src = tmp_path / "bad.comp"
    src.write_text("#version 450\nlayout(local_size_x = 1) in;\nvoid main() {\n    float x = undefined_thing;\n}\n")
    with pytest.raises(ShaderBuildError) as e:
        compile_file(src, tmp_path / "bad.spv")
    msg = str(e.value)
    assert "undefined_thing" in msg and "ERROR" in msg and "bad.comp" in msg


def test_pipelines_are_cached(device, backend):
    def build(ctx):
        a = ctx.new_tensor("f32", 32, name="a")
        return [a], ops.sqr(a)

    compare(build, backend, {"a": rand(32)})
    n = len(backend.ctx.pipelines)
    compare(build, backend, {"a": rand(32)})
    assert len(backend.ctx.pipelines) == n


def test_device_lost_raises_and_backend_is_recreated(device, monkeypatch):
    from pyggml_vulkan import vk
    from pyggml_vulkan.vk import DeviceLostError

    be = device.init_backend()
    old = be.ctx
    # the driver's answer is simulated: vkQueueSubmit returning VK_ERROR_DEVICE_LOST
    monkeypatch.setattr(old, "submit", lambda *a: old.check(vk.C.VK_ERROR_DEVICE_LOST, "vkQueueSubmit (graph)"))
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", 8, name="a")
    g = build_graph(ops.neg(a))
    place_graph(g, device.buffer_type())
    with pytest.raises(DeviceLostError, match="lost"):
        be.graph_compute(g)
    monkeypatch.undo()
    assert old.lost
    with pytest.raises(DeviceLostError):
        be.graph_compute(g)
    fresh = device.init_backend()
    assert fresh.ctx is not old and not fresh.ctx.lost
    ctx2 = Context(no_alloc=True)
    b = ctx2.new_tensor("f32", 8, name="b")
    out = ops.neg(b)
    g2 = build_graph(out)
    place_graph(g2, device.buffer_type())
    b.set(np.arange(8, dtype=np.float32))
    fresh.graph_compute(g2)
    assert np.array_equal(out.numpy(), -np.arange(8, dtype=np.float32))


@pytest.mark.parametrize("tpr", ["1", "32"])
@pytest.mark.parametrize("atype", ["f16", "q4_1", "q6_K"])
def test_mul_mat_threads_per_row(backend, tpr, atype):
    backend = backend.device.init_backend(f"tpr={tpr}")
    assert backend.options.tpr == int(tpr)

    def build(ctx):
        a = ctx.new_tensor(atype, 512, 70, name="a")
        b = ctx.new_tensor("f32", 512, 9, name="b")
        return [a, b], ops.mul_mat(a, b)

    compare(build, backend, {"a": rand(70, 512), "b": rand(9, 512, seed=1)}, tol=5e-4)
