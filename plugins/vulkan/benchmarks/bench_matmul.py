"""Mat-vec (decode) and prompt-style matmul on Vulkan0 next to the CPU plugin; prints JSON.

    python benchmarks/bench_matmul.py [--repeat 5] [--types q4_0,q4_1,q8_0,f16,f32]

Each case is one MUL_MAT graph a [k, m] x b [k, n] placed on the device, computed once to warm up (pipelines,
recording) and then timed over `repeat` replays (wall time of graph_compute, synchronised).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

from pyggml.backend.registry import get_device
from pyggml_testing.graphs import mul_mat_graph, set_normal
from pyggml_testing.on_device import place_graph

SHAPES = {"mat_vec": (4096, 4096, 1), "prompt_32": (4096, 4096, 32), "lm_head_vec": (576, 49152, 1)}


def bench(device_name: str, atype: str, k: int, m: int, n: int, repeat: int) -> dict[str, float]:
    dev = get_device(device_name)
    be = dev.init_backend()
    _ctx, g, inputs = mul_mat_graph(atype, k, m, n)
    place_graph(g, dev.buffer_type())
    set_normal(inputs)
    be.graph_compute(g)
    t0 = time.perf_counter()
    for _ in range(repeat):
        be.graph_compute(g)
    dt = (time.perf_counter() - t0) / repeat
    return {"ms": round(dt * 1e3, 3), "gflops": round(2 * k * m * n / dt / 1e9, 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--types", default="q4_0,q4_1,q8_0,f16")
    ap.add_argument("--devices", default="Vulkan0,CPU")
    args = ap.parse_args()
    results = []
    for name, (k, m, n) in SHAPES.items():
        for t in args.types.split(","):
            row: dict[str, object] = {"case": name, "type": t, "k": k, "m": m, "n": n}
            for d in args.devices.split(","):
                row[d] = bench(d, t, k, m, n, args.repeat)
            results.append(row)
            print(json.dumps(row), file=sys.stderr)
    vk = get_device("Vulkan0")
    print(json.dumps({"bench": "mul_mat", "machine": platform.processor() or platform.machine(),
                      "vulkan_device": vk.description, "results": results}, indent=1))


if __name__ == "__main__":
    main()
