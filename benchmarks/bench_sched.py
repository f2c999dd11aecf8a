"""Scheduler benchmark: planning (passes 1-5) + allocation of a ~1,000-node llama graph, and the cost of replaying
an unchanged graph. Prints JSON.

    python benchmarks/bench_sched.py [--layers 33] [--tokens 32] [--past 96] [--repeat 30]

The graph is the llama example's own (pyggml_llama.synthetic: SmolLM2-135M shapes, metadata-only F16 weights,
mul_mat + soft_max attention; 30 layers give 934 nodes, the default 33 layers 1,027). Backends are the
scheduler's test devices in dry mode (no kernels), so the figures are the scheduler's and the allocator's own work:

- partial-offload: the first half of the layers on a 'gpu' with private memory, the rest on the 'cpu';
- gpu-missing-rope: every layer on a gpu that cannot run ROPE (two cpu round trips per layer);
- pipeline: as partial-offload with 4 pipeline copies (parallel=True).

Per scenario: cold (first plan with reserve), split_graph and alloc of a freshly built graph of the same shape
(what a per-token rebuild costs), and replay of the same graph object (alloc_graph + graph_compute), with the
counters of plans / reserves / allocations made during the replays (all zero when replay does no pass and no
allocation). Times in ms: median and min over --repeat runs (this machine is shared: medians are the figure).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from pyggml.alloc.weights import plan_ranges
from pyggml.backend.protocol import BufferType, BufferUsage, DeviceType
from pyggml.backend.sched import Scheduler
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_llama.model import BuiltGraph
from pyggml_llama.synthetic import SMOLLM2_135M, SyntheticLlama, synthetic_llama
from pyggml_testing.devices import FakeDevice, fake_device

BUDGET_MS = 20.0


def place(tensors: list[Tensor], buft: BufferType) -> None:
    """Weights (and KV caches) into WEIGHTS buffers of `buft` (memory is untouched: the devices run dry)."""
    for items, size in plan_ranges(tensors, buft):
        buf = buft.alloc_buffer(size)
        buf.usage = BufferUsage.WEIGHTS
        for t, offset in items:
            t.buffer, t.offset = buf, offset


def layer_of(t: Tensor) -> int:
    """blk.N.* weights and cache_k_lN / cache_v_lN caches belong to layer N; the rest (embeddings, output) to none."""
    parts = t.name.split(".")
    if parts[0] == "blk":
        return int(parts[1])
    return int(t.name.rsplit("_l", 1)[1]) if t.name.startswith("cache_") else -1


def timed(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return {"median": round(statistics.median(ts), 3), "min": round(min(ts), 3)}


def scenario(name: str, llama: SyntheticLlama, gpu: FakeDevice, cpu: FakeDevice, args: argparse.Namespace,
             parallel: bool = False) -> dict[str, Any]:
    s = Scheduler([gpu.init_backend(), cpu.init_backend()], graph_size=8192, parallel=parallel)

    def build() -> BuiltGraph:
        return llama.graph(args.tokens, args.past)

    g = build()
    t0 = time.perf_counter()
    s.alloc_graph(g.graph)
    cold = (time.perf_counter() - t0) * 1e3
    fresh = [build() for _ in range(args.repeat)]
    split_ms, alloc_ms, both_ms = [], [], []
    for f in fresh:
        t0 = time.perf_counter()
        plan = s.split_graph(f.graph)
        t1 = time.perf_counter()
        s._alloc(plan)
        t2 = time.perf_counter()
        split_ms.append((t1 - t0) * 1e3)
        alloc_ms.append((t2 - t1) * 1e3)
        both_ms.append((t2 - t0) * 1e3)
    last = fresh[-1].graph
    before = asdict(s.stats)

    inputs = [t for t in last.leafs if t.view_src is None]

    def replay() -> None:  # the scheduler's own cost: the inputs count as written, their bytes are not timed
        s.alloc_graph(last)
        for t in inputs:
            t.mark_written()
        s.graph_compute(last)

    replay_ms = timed(replay, args.repeat)
    after = asdict(s.stats)
    both = {"median": round(statistics.median(both_ms), 3), "min": round(min(both_ms), 3)}
    return {
        "scenario": name,
        "n_nodes": g.graph.n_nodes,
        "n_leafs": g.graph.n_leafs,
        "n_splits": s.n_splits,
        "n_split_inputs": s.n_split_inputs,
        "n_copies": s.n_copies,
        "cold_plan_reserve_alloc_ms": round(cold, 3),
        "split_graph_ms": {"median": round(statistics.median(split_ms), 3), "min": round(min(split_ms), 3)},
        "alloc_ms": {"median": round(statistics.median(alloc_ms), 3), "min": round(min(alloc_ms), 3)},
        "split_plus_alloc_ms": both,
        "under_budget": both["median"] < BUDGET_MS,
        "replay_ms": replay_ms,
        "during_replays": {k: after[k] - before[k] for k in ("plans", "reserves", "allocs", "computes")},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=33)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--past", type=int, default=96)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    shape = replace(SMOLLM2_135M, n_layer=args.layers)
    results = []
    for name, exclude, split_layer, parallel in (("partial-offload", set(), args.layers // 2, False),
                                                 ("gpu-missing-rope", {Op.ROPE}, args.layers, False),
                                                 ("pipeline", set(), args.layers // 2, True)):
        gpu = fake_device("gpu", exclude=exclude)
        cpu = fake_device("cpu", dev_type=DeviceType.CPU, memory="host")
        gpu.dry = cpu.dry = True
        llama = synthetic_llama(shape, wtype=GGMLType.F16, embd_type=GGMLType.F16)
        tensors = list(llama.ctx)
        place([t for t in tensors if 0 <= layer_of(t) < split_layer], gpu.buffer_type())
        place([t for t in tensors if not 0 <= layer_of(t) < split_layer], cpu.buffer_type())
        results.append(scenario(name, llama, gpu, cpu, args, parallel))
    print(json.dumps({"benchmark": "scheduler", "budget_ms": BUDGET_MS,
                      "shape": {**asdict(shape), "n_tokens": args.tokens, "n_past": args.past},
                      "results": results}, indent=2))


if __name__ == "__main__":
    main()
