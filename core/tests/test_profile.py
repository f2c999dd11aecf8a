"""pyggml.profile: per-node times from the backends and the scheduler's splits, copies and waits in one Chrome trace
(checked against its schema), the summary by op, the whole-graph fallback's named warning, and nothing recorded
(nor any profiled compute) while no profile is active."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.backend import hub
from pyggml.backend.protocol import Backend, Device
from pyggml.backend.sched import Scheduler
from pyggml.errors import PyGGMLError
from pyggml.graph import Graph
from pyggml.profile import (
    SCHEDULER,
    TRACE_SCHEMA,
    Profile,
    ProfileWarning,
    active_sink,
    check_trace,
    node_cost,
    trace_lanes,
)
from pyggml.tensor import Tensor
from pyggml_testing.devices import fake_device, numpy_backend
from pyggml_testing.sched import inp, weight


def _layers(bufts: list[Any], d: int = 32, rows: int = 4) -> tuple[Tensor, Tensor, Graph]:
    """relu(w_i y) for one layer per buffer type: each layer's weight pins it to that buffer type's backend."""
    x = inp(d, rows)
    y = x
    for i, buft in enumerate(bufts):
        w = weight(buft, d, d, name=f"w{i}")
        w.set(np.full(d * d, 1.0 / d, dtype=np.float32))
        y = ops.relu(ops.mul_mat(w, y)).set_name(f"l{i}")
    y.set_output()
    return x, y, gg.build_graph(y)


def _device(name: str) -> Device:
    try:
        return hub().device(name)
    except PyGGMLError as e:
        pytest.skip(f"no {name} device here: {e}")


def _check_schema(trace: dict[str, Any]) -> None:
    check_trace(trace)
    try:
        import jsonschema
    except ImportError:
        return
    jsonschema.validate(trace, TRACE_SCHEMA)


def _three_backends(gpu_name: str) -> list[Backend]:
    gpu = next((d for d in hub().devices() if d.name == gpu_name), None)
    if gpu is None:
        pytest.skip(f"no {gpu_name} here")
    cpu = _device("cpu").init_backend()
    cpu.set_n_threads(2)  # type: ignore[attr-defined]
    return [gpu.init_backend(), cpu, numpy_backend()]


@pytest.mark.parametrize("gpu_name", ["OpenCL0", "Vulkan0"])
def test_three_backend_layer_split_trace(tmp_path: Path, gpu_name: str) -> None:
    """The gpu's split is timed per node (OpenCL event profiling, Vulkan timestamp queries): no whole-graph lane."""
    backends = _three_backends(gpu_name)
    x, y, g = _layers([b.device.buffer_type() for b in backends])
    s = Scheduler(backends)
    for t in (y, y.src[0]):  # the last layer on numpy (the cpu backend, first in priority, reads its weight too)
        assert t is not None
        s.set_tensor_backend(t, backends[2])
    s.alloc_graph(g)
    assert s.n_splits == 3
    names = {b.name: {n.name for n in g.nodes[sp.i_start:sp.i_end]} for b, sp in zip(backends, s.splits, strict=True)}
    x.set(np.ones(x.nelements(), dtype=np.float32))
    with Profile() as prof:
        s.graph_compute(g)
    np.testing.assert_allclose(y.numpy(), np.ones((4, 32)), rtol=1e-5)
    trace = json.loads(prof.write_trace(tmp_path / "trace.json").read_text())
    _check_schema(trace)
    lanes = trace_lanes(trace)
    gpu, cpu, ref = (b.name for b in backends)
    assert set(lanes) == {gpu, cpu, ref, SCHEDULER}
    assert {"splits"} <= set(lanes[SCHEDULER])
    assert {f"thread {t}" for t in range(2)} <= set(lanes[cpu])  # one lane per pool thread
    assert lanes[cpu]["thread 0"] == lanes[cpu]["thread 1"] == 2  # MUL_MAT and UNARY on each thread
    assert lanes[ref]["thread 0"] == 2
    assert sum(lanes[gpu].get(k, 0) for k in lanes[gpu] if k.startswith("queue")) >= 2
    assert "graph" not in lanes[gpu]
    for b in backends:  # each backend's node events name exactly its split's nodes, by op and tensor name
        got = {e["args"]["tensor"] for e in trace["traceEvents"] if e.get("cat") == "node"
               and e["pid"] == _pid(trace, b.name)}
        assert got == names[b.name]
    flows = [e for e in trace["traceEvents"] if e["ph"] in ("s", "f")]
    assert flows and {e["ph"] for e in flows} == {"s", "f"}  # the copy into the gpu's split (and back out of it)
    table = prof.summary()
    assert {r.op for r in table.rows} == {"MUL_MAT", "UNARY"}
    assert sum(r.count for r in table.rows) == 6
    mm = next(r for r in table.rows if r.op == "MUL_MAT")
    assert mm.flops == 3 * 2 * 32 * 32 * 4 and mm.rate.endswith("GFLOP/s")
    assert "| MUL_MAT | 3 |" in table.text()


def _pid(trace: dict[str, Any], process: str) -> int:
    return next(e["pid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"
                and e["args"]["name"] == process)


def test_backend_that_cannot_time_warns_and_reports_whole_graphs() -> None:
    dev = fake_device("slowpoke")
    b = dev.init_backend()
    cpu = numpy_backend()
    x, _, g = _layers([dev.buffer_type(), cpu.device.buffer_type()])
    s = Scheduler([b, cpu])
    s.alloc_graph(g)
    x.set(np.ones(x.nelements(), dtype=np.float32))
    with Profile() as prof, pytest.warns(ProfileWarning, match="'slowpoke' cannot time its nodes"):
        s.graph_compute(g)
    assert prof.untimed == {"slowpoke"}
    lanes = trace_lanes(prof.trace())
    assert "graph" in lanes["slowpoke"] and lanes["numpy"]["thread 0"] == 2
    assert "(whole graph)" in {r.op for r in prof.summary().rows}


def test_a_profile_that_saw_nothing_warns() -> None:
    with pytest.warns(ProfileWarning, match="nothing was recorded"):
        trace = Profile().trace()
    check_trace(trace)


def test_off_records_nothing_and_never_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = numpy_backend()
    x, y, g = _layers([ref.device.buffer_type()])
    s = Scheduler([ref])
    s.alloc_graph(g)
    called: list[str] = []
    monkeypatch.setattr(type(ref), "compute_profiled", lambda *a: called.append("profiled"))
    prof = Profile()  # made, never entered: not active
    x.set(np.ones(x.nelements(), dtype=np.float32))
    s.graph_compute(g)
    assert active_sink() is None and called == [] and prof.events == []
    np.testing.assert_allclose(y.numpy(), np.ones((4, 32)), rtol=1e-6)


def test_profile_compute_without_scheduler_and_node_cost() -> None:
    ref = numpy_backend()
    x, y, g = _layers([ref.device.buffer_type()])
    from pyggml.alloc import GraphAllocator

    GraphAllocator(ref.device.buffer_type()).alloc_graph(g)
    x.set(np.ones(x.nelements(), dtype=np.float32))
    with Profile() as prof:
        prof.compute(ref, g)
    assert {e.op for e in prof.node_events()} == {"MUL_MAT", "UNARY"}
    mm = next(n for n in g.nodes if n.op.name == "MUL_MAT")
    assert node_cost(mm).flops == 2 * 32 * 32 * 4
    assert node_cost(y).nbytes == 2 * y.nbytes()


def test_cpu_stamps_are_per_thread_and_inside_the_compute() -> None:
    cpu = _device("cpu").init_backend()
    cpu.set_n_threads(2)  # type: ignore[attr-defined]
    x, _, g = _layers([cpu.device.buffer_type()] * 2)
    s = Scheduler([cpu])
    s.alloc_graph(g)
    x.set(np.ones(x.nelements(), dtype=np.float32))
    with Profile() as prof:
        s.graph_compute(g)
    ev = prof.node_events()
    assert len(ev) == 4 * 2 and {e.thread for e in ev} == {"thread 0", "thread 1"}
    split = next(e for e in prof.events if e.category == "split")
    assert all(split.start_ns <= e.start_ns <= e.end_ns <= split.end_ns for e in ev)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.set(np.ones(x.nelements(), dtype=np.float32))
        s.graph_compute(g)  # off again: no warning, nothing added
    assert len(prof.node_events()) == 8


WORKLOAD = '''
import numpy as np
import pyggml as gg
from pyggml import ops
from pyggml.backend.sched import Scheduler
from pyggml_testing.devices import numpy_backend
from pyggml_testing.sched import inp


def run():
    x = inp(8, 2)
    y = ops.relu(ops.scale(x, 2.0)).set_name("y").set_output()
    g = gg.build_graph(y)
    s = Scheduler([numpy_backend()])
    s.alloc_graph(g)
    x.set(np.ones(16, dtype=np.float32))
    s.graph_compute(g)
'''


def test_pyggml_profile_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pyggml.cli import main

    (tmp_path / "prof_workload.py").write_text(WORKLOAD)
    out = tmp_path / "t.json"
    assert main(["profile", "prof_workload:run", "-o", str(out), "--dir", str(tmp_path)]) == 0
    trace = json.loads(out.read_text())
    check_trace(trace)
    assert trace_lanes(trace)["numpy"] == {"thread 0": 2}
    text = capsys.readouterr()
    assert "| SCALE | 1 |" in text.out and "| UNARY | 1 |" in text.out and "2 node events" in text.err
    assert main(["profile", "no_such_module_here:run"]) == 2
