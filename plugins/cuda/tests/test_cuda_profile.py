"""Per-node profiles on CUDA (issue 35) over the fake driver: a CUDA event before and after each node's launches, the
launches run directly even where the plan was captured into a CUDA graph (a graph's launch cannot be timed per node).
The fake events' times are the driver's call count: the structure and order are checked, not durations."""

from __future__ import annotations

from pyggml.ops.base import VIEW_OPS
from pyggml.profile import Profile
from pyggml_cuda_testing import needs_nvcc
from pyggml_cuda_testing.fakedriver import State
from pyggml_testing.on_device import place_graph
from pyggml_testing.profiling import check_node_profile, profile_graph

pytestmark = needs_nvcc


def test_profiled_compute_reports_each_node_in_order(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    be = fake_devices[0].init_backend()
    check_node_profile(be, results=False)
    assert be.captures == 0 and not any(la.via_graph for la in gpu_state.launches)


def test_profiling_bypasses_the_captured_graph(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    be = fake_devices[0].init_backend()
    g, _, _ = profile_graph()
    place_graph(g, be.device.buffer_type())
    be.graph_compute(g)
    be.graph_compute(g)  # captured into a CUDA graph and launched as one
    assert (be.captures, be.graph_launches) == (1, 1)
    n, ncalls = len(gpu_state.launches), len(gpu_state.calls)
    with Profile() as prof:
        prof.compute(be, g)
    direct = gpu_state.launches[n:]
    assert direct and not any(la.via_graph for la in direct) and be.graph_launches == 1
    computing = [nd for nd in g.nodes if nd.op not in VIEW_OPS]
    records = [c for c in gpu_state.calls[ncalls:] if c[0] == "event_record"]
    assert len(records) == 2 * len(computing) and {c[2] for c in records} == {be.stream.handle}
    assert [e.op for e in prof.node_events()] == [nd.op.name for nd in computing]
    be.graph_compute(g)  # afterwards the captured graph replays as before
    assert be.graph_launches == 2
