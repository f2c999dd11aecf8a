"""The meta backend: one stream per device; a graph runs as subgraphs on every device with allreduces between.

Plans (plan.py) are kept per graph and reused while the graph's nodes, placements and srcs stay the same, so a
replayed graph costs only the per-device computes and the allreduces.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyggml.backend.meta import transfer
from pyggml.backend.meta.allreduce import ButterflyAllreduce, Communicator, make_communicator
from pyggml.backend.meta.device import MetaDevice
from pyggml.backend.meta.plan import MetaPlan, Subgraph, build_plan
from pyggml.backend.plan_cache import PlannedBackend, PlanStats
from pyggml.backend.protocol import BackendParams
from pyggml.errors import ComputeError, PyGGMLError
from pyggml.graph import Graph
from pyggml.tensor import Tensor

log = logging.getLogger(__name__)


@dataclass
class MetaStats(PlanStats):
    allreduces: int = 0
    """Allreduces run in total (those of the last graph: `last_plan.n_allreduce`)."""
    fallbacks: int = 0
    """Allreduces the communicator declined, done by the butterfly fallback."""


class MetaBackend(PlannedBackend[MetaPlan]):
    """Plans (states, simple tensors, subgraphs) are built when a graph is new or moved, and checked then: every
    state and every device's support of its slices, before anything runs. A replayed graph plans nothing."""

    device: MetaDevice
    stats: MetaStats

    def __init__(self, device: MetaDevice, params: BackendParams = None,
                 comm: Communicator | str | None = None) -> None:
        """`params`: given to every device's `init_backend`; `comm`: the allreduce (None: the device's
        `MetaOptions.allreduce`, PYGGML_META_ALLREDUCE)."""
        super().__init__(device, self._build_plan)
        self.backends = [d.init_backend(params) for d in device.devices]
        self.comm = make_communicator(device.options().allreduce if comm is None else comm, self.backends)
        self.fallback = self.comm if isinstance(self.comm, ButterflyAllreduce) else ButterflyAllreduce(self.backends)
        self.stats = MetaStats()

    @property
    def name(self) -> str:
        return self.device.name

    def _build_plan(self, graph: Graph) -> MetaPlan:
        p = build_plan(self.device.table, graph, self.backends)
        log.debug("meta plan of graph %d: %d subgraphs, %d allreduces", graph.uid, len(p.subgraphs), p.n_allreduce)
        return p

    def set_comm(self, comm: Communicator | str | None) -> None:
        """Reduce through another communicator from now on (auto, inprocess, butterfly or an instance; None: the
        device's `MetaOptions.allreduce`)."""
        self.comm = make_communicator(self.device.options().allreduce if comm is None else comm, self.backends)

    def replay(self, plan: MetaPlan) -> None:
        for k, sub in enumerate(plan.subgraphs):
            for b, g in zip(self.backends, sub.graphs, strict=True):
                try:
                    b.graph_compute_async(g)
                except PyGGMLError as e:
                    raise ComputeError(f"{self.name}: subgraph {k} of {len(plan.subgraphs)} on '{b.name}': {e}"
                                       ) from e
            if sub.reduce is not None:
                self._allreduce(sub)
        self.stats.allreduces += plan.n_allreduce

    def _allreduce(self, sub: Subgraph) -> None:
        tensors = sub.reduce
        assert tensors is not None
        for j in sub.zero:
            self.backends[j].synchronize()
        transfer.zero_simple([tensors[j] for j in sub.zero])
        if not self.comm.allreduce(tensors):
            self.stats.fallbacks += 1
            self.fallback.allreduce(tensors)

    def synchronize(self) -> None:
        for b in self.backends:
            b.synchronize()

    def simple_tensors(self, t: Tensor) -> list[Tensor]:
        return self.device.table.simple(t)

    def release_resources(self) -> None:
        self.comm.close()
        if self.fallback is not self.comm:
            self.fallback.close()
        for b in self.backends:
            b.free()
        super().release_resources()
