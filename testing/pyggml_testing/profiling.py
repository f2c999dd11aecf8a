"""The per-node profile check the device plugins' tests share (Vulkan, CUDA, Metal): a small graph with a view in
it, computed under `pyggml.profile.Profile` twice (recorded, then replayed), must come back as one node event per
computing node of each compute, in graph order, named by op, on the backend's `queue 0` lane, without a
ProfileWarning (no fallback to whole-graph times), its results right, and its trace valid."""

from __future__ import annotations

import itertools
import warnings

import numpy as np

from pyggml import ops
from pyggml.backend.protocol import Backend
from pyggml.context import Context
from pyggml.graph import Graph, build_graph
from pyggml.ops.base import VIEW_OPS
from pyggml.profile import Profile, ProfileWarning, TraceEvent, check_trace, trace_lanes
from pyggml_testing.on_device import place_graph

COMPUTES = 2


def profile_graph() -> tuple[Graph, dict[str, np.ndarray], np.ndarray]:
    """relu(a b) + 1, reshaped, scaled by 2: MUL_MAT, UNARY, ADD (or a scalar op), RESHAPE (a view), SCALE."""
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", 64, 32, name="a")
    b = ctx.new_tensor("f32", 64, 16, name="b")
    y = ops.relu(ops.mul_mat(a, b)).set_name("y")
    z = ops.scale(ops.reshape(y, 16, 32), 2.0).set_name("z")
    z.set_output()
    rng = np.random.default_rng(0)
    data = {"a": rng.standard_normal((32, 64)).astype(np.float32),
            "b": rng.standard_normal((16, 64)).astype(np.float32)}
    want = 2.0 * np.maximum(data["b"] @ data["a"].T, 0).reshape(32, 16)
    return build_graph(z), data, want


def check_node_profile(backend: Backend, ordered: bool = True, results: bool = True) -> list[TraceEvent]:
    """Profile `profile_graph` on `backend`; `ordered`: each node starts no earlier than the one before ended (a
    device whose clock is real); `results`: check the graph's output (not on a fake driver, which runs no
    kernel). Returns the node events."""
    g, data, want = profile_graph()
    place_graph(g, backend.device.buffer_type())
    byname = {t.name: t for t in g.leafs + g.nodes}
    for k, v in data.items():
        byname[k].set(v)
    computing = [(i, n) for i, n in enumerate(g.nodes) if n.op not in VIEW_OPS]
    assert len(computing) < len(g.nodes), "the graph should hold a view (no kernel, not reported)"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProfileWarning)
        with Profile() as prof:
            for _ in range(COMPUTES):
                prof.compute(backend, g)
        trace = prof.trace()
    if results:
        np.testing.assert_allclose(g.nodes[-1].numpy().reshape(want.shape), want, rtol=1e-4, atol=1e-4)
    events = prof.node_events()
    assert not prof.untimed and all(e.category == "node" for e in prof.events)
    assert [(e.args["index"], e.op) for e in events] == [(i, n.op.name) for i, n in computing] * COMPUTES
    assert {e.process for e in events} == {backend.name} and {e.thread for e in events} == {"queue 0"}
    for e in events:
        assert 0 < e.start_ns <= e.end_ns
    if ordered:
        for run in (events[:len(computing)], events[len(computing):]):
            for before, after in itertools.pairwise(run):
                assert before.end_ns <= after.start_ns, (before, after)
    check_trace(trace)
    assert trace_lanes(trace)[backend.name] == {"queue 0": COMPUTES * len(computing)}
    return events
