"""Running scheduled graphs: mixed backends give the single-backend results, replays skip planning and
allocation, reserve sizes buffers once, the eval callback observes and stops, failures leave the scheduler usable,
pipeline-parallel runs equal serial runs, and real plugin backends take part where their devices exist."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend import hub
from pyggml.backend.protocol import Backend, BufferType, BufferUsage, DeviceType
from pyggml.backend.sched import Scheduler
from pyggml.errors import ComputeError, InputNotWrittenError, PyGGMLError
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_testing.compare import nmse
from pyggml_testing.devices import FakeDevice, fake_device, numpy_backend
from pyggml_testing.sched import Run, Shape, build_graph, make_model, run_single, set_inputs, weight


def mixed(**gpu_kw: Any) -> tuple[FakeDevice, Backend, Backend, Run, Scheduler]:
    """Both layers on a gpu that lacks ROPE and SOFT_MAX (see test_sched_splits for its 15 splits)."""
    dev = fake_device("gpu", exclude={Op.ROPE, Op.SOFT_MAX}, **gpu_kw)
    gpu, cpu = dev.init_backend(), numpy_backend()
    r = build_graph(make_model({"0": dev.buffer_type(), "1": dev.buffer_type()}, cpu.device.buffer_type()))
    return dev, gpu, cpu, r, Scheduler([gpu, cpu])


def _placements() -> dict[str, tuple[list[FakeDevice], dict[str, int]]]:
    """name -> (accelerators, group -> index of the accelerator holding it; others on the cpu)."""
    return {
        "all-on-gpu-missing-ops": ([fake_device("gpu", exclude={Op.ROPE, Op.SOFT_MAX})], {"0": 0, "1": 0}),
        "partial-offload": ([fake_device("gpu")], {"0": 0}),
        "two-gpus": ([fake_device("g0", exclude={Op.GLU}), fake_device("g1", ops={Op.MUL_MAT, Op.MUL, Op.ADD, Op.CPY})],
                     {"0": 0, "1": 1, "out": 1}),
        "igpu-reads-host": ([fake_device("igpu", memory="host", reads_host=True, exclude={Op.SOFT_MAX})], {"1": 0}),
        "async-gpu": ([fake_device("agpu", async_ops=True, exclude={Op.ROPE})], {"0": 0, "1": 0, "out": 0}),
        "two-async-gpus": ([fake_device("a0", async_ops=True, exclude={Op.SOFT_MAX}),
                            fake_device("a1", async_ops=True)], {"0": 0, "1": 1, "out": 1}),
    }


@pytest.mark.parametrize("name", sorted(_placements()))
def test_mixed_backends_match_one_backend(name: str) -> None:
    devs, groups = _placements()[name]
    cpu = numpy_backend()
    place: dict[str, BufferType] = {g: devs[i].buffer_type() for g, i in groups.items()}
    r = build_graph(make_model(place, cpu.device.buffer_type()))
    s = Scheduler([d.init_backend() for d in devs] + [cpu])
    s.alloc_graph(r.graph)
    set_inputs(r, seed=3)
    s.graph_compute(r.graph)
    assert nmse(r.logits.numpy(), run_single(seed=3)) < 1e-7
    assert s.n_splits > 1
    # host memory shared both ways needs no copies (only waits); private device memory does
    assert (s.n_split_inputs == 0) == (name == "igpu-reads-host")
    assert all(d.computed for d in devs)  # every accelerator really ran part of the graph
    if name == "two-async-gpus":          # device to device copies went through the streams
        assert getattr(s.backends[1], "n_async_copies", 0) > 0


def test_replay_does_no_pass_and_no_allocation() -> None:
    dev, _gpu, cpu, r, s = mixed()
    for seed in range(3):
        if seed == 0:
            s.alloc_graph(r.graph)
        set_inputs(r, seed)
        assert s.graph_compute(r.graph)
        assert nmse(r.logits.numpy(), run_single(seed)) < 1e-7
    assert (s.stats.plans, s.stats.allocs, s.stats.reserves, s.stats.computes) == (1, 1, 1, 3)
    s.alloc_graph(r.graph)             # alloc_graph on the planned graph: still nothing to do
    assert (s.stats.plans, s.stats.allocs) == (1, 1)
    r2 = build_graph(make_model({}, cpu.device.buffer_type()))  # another graph: planned, but fits the buffers
    s.alloc_graph(r2.graph)
    assert (s.stats.plans, s.stats.allocs, s.stats.reserves) == (2, 2, 2)  # (bufts per node changed: reserve)
    s.alloc_graph(r.graph)
    s.alloc_graph(build_graph(make_model({"0": dev.buffer_type(), "1": dev.buffer_type()},
                                         cpu.device.buffer_type())).graph)
    assert s.stats.reserves == 3       # same structure as the last one: placed without a reserve


def test_reserve_sizes_buffers_once() -> None:
    dev, gpu, cpu, _, s = mixed()
    m = make_model({"0": dev.buffer_type(), "1": dev.buffer_type()}, cpu.device.buffer_type(), seed=1)
    s.reserve(build_graph(m, n_tokens=8).graph)
    sizes = (s.buffer_size(gpu), s.buffer_size(cpu))
    assert sizes[0] > 0 and sizes[1] > 0
    assert s.n_splits == 0 and s.plan is None          # reserve forgets the measured graph
    r = build_graph(m, n_tokens=5)
    s.alloc_graph(r.graph)
    assert s.stats.reserves == 1                       # the smaller graph fits the reserved buffers
    assert (s.buffer_size(gpu), s.buffer_size(cpu)) == sizes
    set_inputs(r, 2)
    s.graph_compute(r.graph)
    assert nmse(r.logits.numpy(), run_single(2)) < 1e-7


def _observed(s: Scheduler, r: Run, stop_at: str | None = None) -> tuple[bool, dict[str, np.ndarray[Any, Any]]]:
    seen: dict[str, np.ndarray[Any, Any]] = {}

    def cb(t: Tensor, ask: bool) -> bool:
        wanted = t.name.startswith(("attn_norm-", "kq_soft_max-"))
        if ask:
            return wanted
        seen[t.name] = t.numpy()
        return t.name != stop_at

    s.set_eval_callback(cb)
    return s.graph_compute(r.graph), seen


def test_eval_callback_observes_and_stops() -> None:
    dev, _gpu, _cpu, r, s = mixed()
    single = numpy_backend()
    r1 = build_graph(make_model({}, single.device.buffer_type()))
    s1 = Scheduler([single])
    s1.alloc_graph(r1.graph)
    set_inputs(r1)
    _, want = _observed(s1, r1)
    assert sorted(want) == ["attn_norm-0", "attn_norm-1", "kq_soft_max-0", "kq_soft_max-1"]
    s.alloc_graph(r.graph)
    set_inputs(r)
    done, got = _observed(s, r)
    assert done and sorted(got) == sorted(want)
    for k in want:
        assert nmse(got[k], want[k]) < 1e-7, k
    dev.computed.clear()
    set_inputs(r)                             # (input memory is reused once its last reader ran)
    done, got = _observed(s, r, stop_at="kq_soft_max-0")
    assert not done and sorted(got) == ["attn_norm-0", "kq_soft_max-0"]
    assert "ffn_inp-0" not in dev.computed    # nothing after the stop ran
    s.set_eval_callback(None)
    set_inputs(r)
    assert s.graph_compute(r.graph)
    assert nmse(r.logits.numpy(), run_single()) < 1e-7


@pytest.mark.parametrize("async_ops", [False, True])
def test_compute_failure_leaves_scheduler_usable(async_ops: bool) -> None:
    dev, _gpu, _cpu, r, s = mixed(async_ops=async_ops)
    s.alloc_graph(r.graph)
    set_inputs(r)
    dev.fail_on = "ffn_inp-0"
    with pytest.raises(ComputeError, match="ffn_inp-0"):
        s.graph_compute(r.graph)
    dev.fail_on = None
    set_inputs(r)
    assert s.graph_compute(r.graph)            # the same plan runs again
    assert nmse(r.logits.numpy(), run_single()) < 1e-7
    dev.fail_on = "ffn_inp-1"
    set_inputs(r)
    with pytest.raises(ComputeError, match="ffn_inp-1"):
        s.graph_compute(r.graph)
    dev.fail_on = None
    s.reset()                                   # and after a reset the graph is planned afresh
    s.alloc_graph(r.graph)
    set_inputs(r, 4)
    assert s.graph_compute(r.graph)
    assert nmse(r.logits.numpy(), run_single(4)) < 1e-7


def test_split_failure_names_the_split() -> None:
    dev, _gpu, _cpu, r, s = mixed()
    dev.fail_on = "ffn_inp-0"
    s.alloc_graph(r.graph)
    set_inputs(r)
    with pytest.raises(ComputeError, match=r"split 7 of 15 on backend 'gpu'.*injected failure at node 'ffn_inp-0'"):
        s.graph_compute(r.graph)


# ---- pipeline parallelism -----------------------------------------------------------------------------------


def _pipeline_graphs(k: int, two: bool = False) -> tuple[list[FakeDevice], Scheduler, list[tuple[Run, Tensor]]]:
    """Layer 0 on the cpu, layer 1 and the output on an asynchronous gpu (one gpu split per graph); with `two`,
    layer 0 on a second asynchronous gpu. Each graph copies its logits into an output tensor of its own in gpu
    memory (as llama.cpp's output buffer)."""
    last = fake_device("agpu", async_ops=True)
    devs = [fake_device("a0", async_ops=True), last] if two else [last]
    cpu = numpy_backend()
    place = {"1": last.buffer_type(), "out": last.buffer_type()} | ({"0": devs[0].buffer_type()} if two else {})
    m = make_model(place, cpu.device.buffer_type())
    outs = gg.Context(no_alloc=True)
    graphs = []
    for i in range(k):
        r = build_graph(m)
        out = outs.new_tensor(gg.F32, *r.logits.ne[:2], name=f"out_{i}")
        r.graph.build_forward_expand(ops.cpy(r.logits, out))
        graphs.append((r, out))
    alloc_ctx_tensors(outs, last.buffer_type(), BufferUsage.ANY)
    return devs, Scheduler([d.init_backend() for d in devs] + [cpu], parallel=True), graphs


def _submit(s: Scheduler, graphs: list[tuple[Run, Tensor]]) -> None:
    for i, (r, _) in enumerate(graphs):
        s.alloc_graph(r.graph)
        set_inputs(r, seed=i)
        assert s.graph_compute_async(r.graph)


def test_pipeline_host_runs_ahead_of_the_device() -> None:
    """With the gpu stream held, the host prepares and submits n_copies graphs (cpu parts computed, inputs copied
    into distinct slots) without waiting; once released, every graph's output equals its serial run."""
    (dev,), s, graphs = _pipeline_graphs(4)
    gpu = s.backends[0]
    assert isinstance(gpu, gg.backend.Backend) and hasattr(gpu, "gate")
    gpu.gate.clear()
    _submit(s, graphs)
    assert s.n_splits == 2 and dev.computed == []      # 4 graphs submitted, the gpu has not started
    gpu.gate.set()
    s.synchronize()
    for i, (_, out) in enumerate(graphs):
        assert nmse(out.numpy(), run_single(seed=i)) < 1e-7, i


@pytest.mark.parametrize("two", [False, True])
def test_pipeline_parallel_equals_serial(two: bool) -> None:
    devs, s, graphs = _pipeline_graphs(7, two)
    for d in devs:
        d.delay = 0.02                                  # the gpus lag: slots are reused while they are busy
    _submit(s, graphs)
    s.synchronize()
    assert s.cur_copy == 6 % 4
    for i, (_, out) in enumerate(graphs):
        assert nmse(out.numpy(), run_single(seed=i)) < 1e-7, i


def test_synchronize_restarts_slots_when_nothing_is_allocated() -> None:
    _, s, graphs = _pipeline_graphs(2)
    _submit(s, graphs)
    s.synchronize()
    assert s.cur_copy == 1
    s.reset()
    s.synchronize()
    s.alloc_graph(graphs[0][0].graph)
    assert s.cur_copy == 0


# ---- real plugin backends -----------------------------------------------------------------------------------


def _plugin_device(name: str) -> Any:
    try:
        return hub().device(name)
    except PyGGMLError as e:
        pytest.skip(f"no {name} device here: {e}")


@pytest.mark.parametrize("name", ["OpenCL", "Vulkan"])
def test_accelerator_plugins_in_a_mixed_graph(name: str) -> None:
    """Weights of both layers on a real accelerator device; embeddings, output and whatever the plugin does not
    support run on numpy. Compared with the numpy-only run at the MUL_MAT threshold."""
    dev = _plugin_device(name)
    cpu = numpy_backend()
    r = build_graph(make_model({"0": dev.buffer_type(), "1": dev.buffer_type()}, cpu.device.buffer_type()))
    s = Scheduler([dev.init_backend(), cpu])
    s.alloc_graph(r.graph)
    set_inputs(r, 5)
    s.graph_compute(r.graph)
    assert nmse(r.logits.numpy(), run_single(5)) < 5e-4
    names = [s.backends[sp.backend_id].name for sp in s.splits]
    assert names[0] == "numpy" and names[-1] == "numpy" and dev.name in names
    assert all(a != b for a, b in itertools.pairwise(names))  # consecutive splits change backend


def test_cpu_plugin_as_the_fallback() -> None:
    cpu_dev = _plugin_device("CPU")
    if cpu_dev.type is not DeviceType.CPU:
        pytest.skip("the device named CPU is not a CPU device")
    gpu = fake_device("gpu", exclude={Op.ROPE, Op.SOFT_MAX})
    r = build_graph(make_model({"0": gpu.buffer_type(), "1": gpu.buffer_type()}, cpu_dev.buffer_type()))
    s = Scheduler([gpu.init_backend(), cpu_dev.init_backend()])
    s.alloc_graph(r.graph)
    set_inputs(r, 6)
    s.graph_compute(r.graph)
    assert s.n_splits == 15
    assert nmse(r.logits.numpy(), run_single(6)) < 5e-4


def test_bigger_model_on_two_backends() -> None:
    shape = Shape(n_layer=3, n_embd=64, n_head=8, n_head_kv=4, head_dim=8, n_ff=96, n_vocab=64)
    dev = fake_device("gpu", exclude={Op.SOFT_MAX})
    gpu, cpu = dev.init_backend(), numpy_backend()
    r = build_graph(make_model({"0": dev.buffer_type(), "2": dev.buffer_type()}, cpu.device.buffer_type(), shape),
                    n_tokens=7)
    s = Scheduler([gpu, cpu])
    s.alloc_graph(r.graph)
    set_inputs(r, 1, shape.n_vocab)
    s.graph_compute(r.graph)
    assert nmse(r.logits.numpy(), run_single(1, 7, shape)) < 1e-7


def test_weights_read_in_place_by_a_host_memory_device() -> None:
    """An integrated gpu that reads host memory needs no weight copies for host weights."""
    dev = fake_device("igpu", memory="host", reads_host=True, offload={Op.MUL_MAT})
    gpu, cpu = dev.init_backend(), numpy_backend()
    w = weight(cpu.device.buffer_type(), 4, 4)
    x = gg.Context(no_alloc=True).new_tensor(gg.F32, 4, 2, name="x").set_input()
    y = ops.mul_mat(w, x)
    s = Scheduler([gpu, cpu])
    g = gg.build_graph(y)
    s.alloc_graph(g)
    assert s.get_tensor_backend(y) is gpu and s.n_split_inputs == 0
    x.set(np.arange(8, dtype=np.float32))
    s.graph_compute(g)
    assert np.array_equal(y.numpy(), np.arange(8, dtype=np.float32).reshape(2, 4).sum(1, keepdims=True)
                          .repeat(4, 1))


# ---- graph inputs: written after placement and before every compute (docs/scheduler.md, "Graph inputs") ---------


def _two_input_graph(flag_output: bool = False) -> tuple[Tensor, Tensor, Tensor, gg.Graph]:
    """y = (x * 2 + k) * 3 with x and k leafs the scheduler places; x flagged INPUT, k not (both are inputs)."""
    ctx = gg.Context(no_alloc=True)
    x = ctx.new_tensor(gg.F32, 64, 4, name="x").set_input()
    k = ctx.new_tensor(gg.F32, 64, 4, name="k")
    if flag_output:
        x.set_output()
        k.set_output()
    y = ops.scale(ops.add(ops.scale(x, 2.0), k), 3.0).set_name("y").set_output()
    return x, k, y, gg.build_graph(y)


def _backends(kind: str) -> list[Backend]:
    if kind == "numpy":
        return [numpy_backend()]
    dev = fake_device("gpu", exclude={Op.ADD})  # ADD runs on the cpu fallback: the graph has several splits
    return [dev.init_backend(), numpy_backend()]


@pytest.mark.parametrize("kind", ["numpy", "gpu+numpy"])
def test_an_input_never_written_is_refused_naming_it(kind: str) -> None:
    """Never written: the compute would read whatever the compute buffer holds; refused before anything runs."""
    x, k, _, g = _two_input_graph()
    s = Scheduler(_backends(kind))
    s.alloc_graph(g)
    x.set(np.ones((4, 64), np.float32))
    with pytest.raises(InputNotWrittenError, match=r"reads 1 input\(s\) not written .*: 'k' f32 ne=\[64, 4, 1, 1\]"):
        s.graph_compute(g)
    assert s.stats.computes == 0
    k.set(np.zeros((4, 64), np.float32))
    assert s.graph_compute(g)                                  # the same plan runs once both are written


@pytest.mark.parametrize("kind", ["numpy", "gpu+numpy"])
def test_inputs_must_be_written_again_before_every_compute(kind: str) -> None:
    """A compute consumes its inputs (their memory goes to intermediates after the last reader), on every
    device alike: a second compute without writing them again is refused, not computed on stale memory."""
    x, k, y, g = _two_input_graph()
    s = Scheduler(_backends(kind))
    s.alloc_graph(g)
    xv = np.arange(256, dtype=np.float32).reshape(4, 64)
    for i in range(2):
        x.set(xv + i)
        k.set(np.full((4, 64), float(i), np.float32))
        s.graph_compute(g)
        np.testing.assert_array_equal(y.numpy(), ((xv + i) * 2 + i) * 3)
    with pytest.raises(InputNotWrittenError, match=r"2 input\(s\).*'x' f32.*'k' f32.*write every input"):
        s.graph_compute(g)
    x.set(xv)
    with pytest.raises(InputNotWrittenError, match=r"reads 1 input\(s\).*'k'"):
        s.graph_compute(g)


def test_inputs_marked_output_keep_their_values() -> None:
    """set_output() on an input keeps its memory apart from the intermediates: written once, it lasts."""
    x, k, y, g = _two_input_graph(flag_output=True)
    s = Scheduler([numpy_backend()])
    s.alloc_graph(g)
    x.set(np.ones((4, 64), np.float32))
    k.set(np.full((4, 64), 5.0, np.float32))
    for _ in range(3):
        s.graph_compute(g)
        np.testing.assert_array_equal(y.numpy(), np.full((4, 64), 21.0, np.float32))


def test_placing_another_graph_drops_what_was_written() -> None:
    """Another graph placed in the same compute buffers may overwrite the inputs: written before, refused after."""
    x, k, _, g = _two_input_graph(flag_output=True)
    s = Scheduler([numpy_backend()])
    s.alloc_graph(g)
    x.set(np.ones((4, 64), np.float32))
    k.set(np.ones((4, 64), np.float32))
    _, _, _, other = _two_input_graph()
    s.alloc_graph(other)
    with pytest.raises(InputNotWrittenError, match=r"'x'.*'k'"):
        s.graph_compute(g)                                      # planned and placed again: its inputs are lost


def test_weights_are_not_graph_inputs_and_a_view_writes_its_owner() -> None:
    """Tensors in buffers of their own (alloc_ctx_tensors) keep their values across computes; writing an input
    through a view of it counts as writing the input."""
    w = weight(numpy_backend().device.buffer_type(), 64, 4)  # ones, written once
    x = gg.Context(no_alloc=True).new_tensor(gg.F32, 256, name="x").set_input()
    flat = ops.reshape(x, 64, 4)
    y = ops.add(flat, w).set_output()
    g = gg.build_graph(y)
    s = Scheduler([numpy_backend()])
    s.alloc_graph(g)
    for i in range(2):
        flat.set(np.full((4, 64), float(i), np.float32))
        s.graph_compute(g)
        np.testing.assert_array_equal(y.numpy(), np.full((4, 64), i + 1.0, np.float32))
