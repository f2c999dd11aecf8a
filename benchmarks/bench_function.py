"""`pyggml.function` against the hand-written scheduler loop: the per-call cost of the short path.

The network is docs/library.md's MLP, softmax(relu(x @ W1) @ W2) with x of (batch, 64), W1 (64, hidden), W2
(hidden, 10). The short path is `gg.function(lambda x, w1, w2: ..., weights=...)` called with a numpy array; the
long form is the same graph written by hand as docs/library.md's loop: weights stored in ggml's layout (W.T) in a
buffer of the device, a Scheduler over the device (and the CPU fallback), `alloc_graph` once, then per call
`x.set(X)`, `sched.graph_compute(graph)`, `y.numpy()`. Both graphs have the same nodes (the function stores the
weights transposed itself), so the difference is the function's own Python per call: argument conversion, the
signature lookup and the plan's bookkeeping.

Each round makes `--calls` calls of each, in turns (function then hand, hand then function, ...: a change of the
machine's load hits both alike), `--rounds` rounds; the figures are per call, wall time, median and min over the
rounds. On a shared machine the compute's own noise
(tens of microseconds) hides a difference of a few, so the overhead is also measured where compute costs nothing:
on a dry CPU-type test device (pyggml_testing's fake device: no kernels, host memory, so writing the input and
reading the output still copy), `dry_overhead_us` = function - hand per call there. Per device, `overhead_pct` is
that dry overhead over the hand-written loop's median per call on the device, and `direct_overhead_pct` the
(noisy) difference of the two medians measured on the device. Prints JSON with the CPU model.

    python benchmarks/bench_function.py [--devices cpu numpy OpenCL0 Vulkan0] [--shapes 32x64 256x256]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import Backend, DeviceType
from pyggml.backend.sched import Scheduler, backends_for
from pyggml.backend.sysinfo import cpu_model
from pyggml.errors import PyGGMLError
from pyggml_testing.devices import fake_device

N_IN, N_OUT = 64, 10


def mlp(x: gg.Tensor, w1: gg.Tensor, w2: gg.Tensor) -> gg.Tensor:
    return ops.soft_max(ops.relu(x @ w1) @ w2)


def hand_written(device: str | Backend, w1: npt.NDArray[np.float32], w2: npt.NDArray[np.float32],
                 batch: int) -> Callable[[npt.NDArray[np.float32]], npt.NDArray[Any]]:
    """docs/library.md's loop: weights in ggml's layout on the device, one graph placed once."""
    sched = Scheduler(backends_for(device))
    weights = gg.Context(no_alloc=True)
    w1t = weights.new_tensor(gg.F32, N_IN, w1.shape[1], name="w1.T")
    w2t = weights.new_tensor(gg.F32, w2.shape[0], N_OUT, name="w2.T")
    alloc_ctx_tensors(weights, sched.buffer_type(0))
    w1t.set(w1.T)
    w2t.set(w2.T)
    ctx = gg.Context(no_alloc=True)
    x = ctx.new_tensor(gg.F32, N_IN, batch, name="x").set_input()
    y = ops.soft_max(ops.mul_mat(w2t, ops.relu(ops.mul_mat(w1t, x)))).set_output()
    graph = gg.build_graph(y)
    sched.alloc_graph(graph)

    def call(xs: npt.NDArray[np.float32]) -> npt.NDArray[Any]:
        x.set(xs)
        sched.graph_compute(graph)
        return y.numpy()

    return call


Call = Callable[[npt.NDArray[np.float32]], object]


def paired_us(a: Call, b: Call, xs: npt.NDArray[np.float32], calls: int) -> tuple[float, float]:
    """Mean microseconds per call of `a` and of `b`, called in turns (a b, b a, ...) so that a change of the
    machine's load hits both alike."""
    ta = tb = 0.0
    clock = time.perf_counter
    for i in range(calls):
        first, second = (a, b) if i % 2 == 0 else (b, a)
        t0 = clock()
        first(xs)
        t1 = clock()
        second(xs)
        t2 = clock()
        da, db = (t1 - t0, t2 - t1) if i % 2 == 0 else (t2 - t1, t1 - t0)
        ta += da
        tb += db
    return ta / calls * 1e6, tb / calls * 1e6


def timings(device: str | Backend, batch: int, hidden: int, calls: int, rounds: int
            ) -> tuple[gg.Function, dict[str, list[float]]]:
    """Per-call microseconds of the function and of the hand-written loop, one figure per round each."""
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((N_IN, hidden)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((hidden, N_OUT)) * 0.1).astype(np.float32)
    xs = rng.standard_normal((batch, N_IN)).astype(np.float32)
    short = gg.function(mlp, weights={"w1": w1, "w2": w2}, device=device)
    long = hand_written(device, w1, w2, batch)
    np.testing.assert_allclose(short(xs), long(xs), rtol=1e-5, atol=1e-6)  # also the warm-up: plans, kernels
    for _ in range(3):
        short(xs)
        long(xs)
    times: dict[str, list[float]] = {"function": [], "hand": []}
    for _ in range(rounds):
        f_us, h_us = paired_us(short, long, xs, calls)
        times["function"].append(f_us)
        times["hand"].append(h_us)
    return short, times


def dry_overhead_us(batch: int, hidden: int, calls: int, rounds: int) -> float:
    """function - hand per call, medians, on a device whose compute costs nothing."""
    dev = fake_device("dry", dev_type=DeviceType.CPU, memory="host")
    dev.dry = True
    _, times = timings(dev.init_backend(), batch, hidden, calls, rounds)
    return statistics.median(times["function"]) - statistics.median(times["hand"])


def bench(device: str, batch: int, hidden: int, calls: int, rounds: int, dry_us: float) -> dict[str, object]:
    short, times = timings(device, batch, hidden, calls, rounds)
    med = {k: statistics.median(v) for k, v in times.items()}
    plan = short.plans[0]
    return {"device": short.device.name, "batch": batch, "hidden": hidden, "nodes": plan.graph.n_nodes,
            "splits": plan.sched.n_splits,
            "function_us_median": round(med["function"], 2), "function_us_min": round(min(times["function"]), 2),
            "hand_us_median": round(med["hand"], 2), "hand_us_min": round(min(times["hand"]), 2),
            "overhead_pct": round(100 * dry_us / med["hand"], 2),
            "direct_overhead_pct": round(100 * (med["function"] - med["hand"]) / med["hand"], 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", nargs="+", default=["cpu", "numpy", "OpenCL0", "Vulkan0"])
    ap.add_argument("--shapes", nargs="+", default=["32x64", "256x256"], help="BATCHxHIDDEN")
    ap.add_argument("--calls", type=int, default=200, help="calls per timed round")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    results: list[dict[str, object]] = []
    dry: dict[str, float] = {}
    for shape in args.shapes:
        batch, hidden = (int(v) for v in shape.split("x"))
        dry[shape] = dry_overhead_us(batch, hidden, 10 * args.calls, args.rounds)
        for dev in args.devices:
            try:
                results.append(bench(dev, batch, hidden, args.calls, args.rounds, dry[shape]))
            except PyGGMLError as e:  # a device this machine does not have
                results.append({"device": dev, "batch": batch, "hidden": hidden, "error": str(e)})
    print(json.dumps({"benchmark": "bench_function", "cpu": cpu_model(), "python": sys.version.split()[0],
                      "numpy": np.__version__, "calls": args.calls, "rounds": args.rounds,
                      "dry_overhead_us": {k: round(v, 2) for k, v in dry.items()}, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
