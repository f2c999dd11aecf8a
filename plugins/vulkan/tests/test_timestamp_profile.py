"""Per-node profiles on Vulkan (issue 35): timestamp queries around each node's dispatches, read after the compute and
moved onto the host clock; the normal recordings write no query."""

from __future__ import annotations

import dataclasses

import pytest

from pyggml.profile import Profile, ProfileWarning
from pyggml_testing.on_device import place_graph
from pyggml_testing.profiling import check_node_profile, profile_graph


def test_profiled_compute_times_each_node(backend) -> None:  # type: ignore[no-untyped-def]
    assert backend.ctx.info.can_timestamp
    check_node_profile(backend)


def test_normal_compute_writes_no_query(backend) -> None:  # type: ignore[no-untyped-def]
    g, _, _ = profile_graph()
    place_graph(g, backend.device.buffer_type())
    backend.graph_compute(g)
    assert backend.last_plan.query_pool is None and not backend.last_plan.runs


def test_a_queue_without_timestamps_falls_back_to_whole_graph_times(backend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(backend.ctx, "info", dataclasses.replace(backend.ctx.info, timestamp_valid_bits=0))
    g, _, _ = profile_graph()
    place_graph(g, backend.device.buffer_type())
    with pytest.warns(ProfileWarning, match=f"backend '{backend.name}' cannot time its nodes"), Profile() as prof:
        prof.compute(backend, g)
    assert not prof.node_events() and [e.op for e in prof.events] == ["(whole graph)"]
