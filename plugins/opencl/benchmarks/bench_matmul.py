"""Mat-vec and prompt-style MUL_MAT on OpenCL devices next to the CPU plugin, in the same run; prints JSON.

    python plugins/opencl/benchmarks/bench_matmul.py [--k 2048] [--m 2048] [--prompt 64] [--seconds 1.0]
        [--types f32,f16,q4_0,q4_1,q8_0] [--devices OpenCL0,cpu]

Each case builds one graph (weights [k, m] of the type, activations f32 [k, n]), places it in the device's
buffer type, runs it once to compile and warm up, then repeats graph_compute (synchronised) for about
--seconds. Reports seconds per run and GFLOP/s (2 * m * n * k per run). A device that is not installed is
reported with the reason instead of numbers.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from typing import Any

from pyggml.backend.protocol import Device
from pyggml.backend.registry import hub
from pyggml.types import parse_type
from pyggml_testing.graphs import mul_mat_graph, set_normal
from pyggml_testing.on_device import place


def bench(dev: Device, wtype: str, k: int, m: int, n: int, seconds: float) -> dict[str, Any]:
    ctx, g, inputs = mul_mat_graph(parse_type(wtype), k, m, n)
    place(ctx, dev.buffer_type())
    set_normal(inputs)
    be = dev.init_backend()
    t0 = time.perf_counter()
    be.graph_compute(g)
    first = time.perf_counter() - t0
    runs = 0
    t0 = time.perf_counter()
    while True:
        be.graph_compute(g)
        runs += 1
        el = time.perf_counter() - t0
        if el >= seconds:
            break
    per = el / runs
    return {"device": dev.name, "type": wtype, "k": k, "m": m, "n": n, "first_run_s": round(first, 4),
            "runs": runs, "s_per_run": per, "gflops": 2.0 * m * n * k / per / 1e9}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--m", type=int, default=2048)
    ap.add_argument("--prompt", type=int, default=64, help="columns of the prompt-style case")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--types", default="f32,f16,q4_0,q4_1,q8_0")
    ap.add_argument("--devices", default="OpenCL0,cpu")
    a = ap.parse_args()
    results: list[dict[str, Any]] = []
    unavailable: dict[str, str] = {}
    for name in a.devices.split(","):
        try:
            dev = hub().device(name)
        except Exception as e:
            unavailable[name] = f"{type(e).__name__}: {e}"
            continue
        for t in a.types.split(","):
            for n in (1, a.prompt):
                results.append({"case": "mat_vec" if n == 1 else "prompt", **bench(dev, t, a.k, a.m, n, a.seconds)})
    print(json.dumps({"benchmark": "mul_mat", "host": platform.processor() or platform.machine(),
                      "results": results, "unavailable": unavailable}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
