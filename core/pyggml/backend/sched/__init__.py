"""The scheduler: one graph across several backends (ggml_backend_sched). See docs/scheduler.md.

Modules: `table` (backends, buffer types, capability caches), `passes` (passes 1-4: a backend per tensor),
`splits` (pass 5: splits, input copies, the allocation graph), `compute` (running splits with copies and events),
`debug` (text, DOT and SVG views of a plan), `stats` (`SchedStats`: counters of plans, allocations, computes and
copies), `backends` (`backends_for(device)`: a device's backend and the CPU fallback), `scheduler` (the
`Scheduler` API). The fake devices the tests use are
`pyggml_testing.devices` (the pyggml-testing distribution, outside the runtime).
"""

from pyggml.backend.sched.backends import DeviceChoice, backends_for
from pyggml.backend.sched.compute import EvalCallback
from pyggml.backend.sched.scheduler import Scheduler
from pyggml.backend.sched.splits import Split, SplitPlan
from pyggml.backend.sched.stats import SchedStats
from pyggml.backend.sched.table import MAX_BACKENDS, MAX_COPIES, SchedulerConfigError

__all__ = [
           "MAX_BACKENDS",
           "MAX_COPIES",
           "DeviceChoice",
           "EvalCallback",
           "SchedStats",
           "Scheduler",
           "SchedulerConfigError",
           "Split",
           "SplitPlan",
           "backends_for",
]
