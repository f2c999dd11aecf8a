"""Profiles: per-node times from every backend and the scheduler's splits, copies and waits, in one timeline,
written as a Chrome/Perfetto trace and summarised by op type (docs/profiling.md).

A backend reports through `Backend.compute_profiled(graph, sink)`: per node where it can time them (cpu: C
timestamps per thread; OpenCL: event profiling; Vulkan: timestamp queries; CUDA: events; Metal: its own GPU
times; numpy: host clock), whole-graph times with a `ProfileWarning` where it cannot (the protocol's default).
"""

from pyggml.profile.collect import SCHEDULER, Profile, TraceEvent
from pyggml.profile.cost import NodeCost, node_cost
from pyggml.profile.sink import NodeTime, ProfileSink, ProfileWarning, active_sink, align_device_times, now_ns
from pyggml.profile.summary import OpRow, Summary, summarize
from pyggml.profile.trace import TRACE_SCHEMA, check_trace, chrome_trace, trace_lanes

__all__ = [
    "SCHEDULER", "TRACE_SCHEMA", "NodeCost", "NodeTime", "OpRow", "Profile", "ProfileSink", "ProfileWarning",
    "Summary", "TraceEvent", "active_sink", "align_device_times", "check_trace", "chrome_trace", "node_cost", "now_ns",
    "summarize", "trace_lanes",
]
