"""MUL_MAT on a CUDA device (mat-vec and prompt-sized), FLASH_ATTN_EXT and SOFT_MAX; prints JSON.

    python plugins/cuda/benchmarks/bench_cuda.py [--device CUDA0] [--k 4096] [--m 4096] [--prompt 512]
        [--types f32,f16,q4_0,q4_1,q5_0,q8_0] [--reps 50]

Each case builds one graph, places it in the device's buffer type and runs it once (kernels compile or load from
the cache, the plan is built) and once more (captured into a CUDA graph). Then `reps` runs are timed two ways:
`s_per_run` waits for each run (host overhead included) and `s_per_run_pipelined` queues all runs and waits once
(device throughput; each run is one cuGraphLaunch). GFLOP/s counts 2*m*n*k per MUL_MAT; GB/s counts the weight
bytes read once per run. Without a device the JSON says why, and the exit status is 0.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pyggml import ops
from pyggml.backend.protocol import Backend, Device
from pyggml.backend.registry import hub
from pyggml.context import Context, init_view
from pyggml.graph import Graph, build_graph
from pyggml.tensor import Tensor
from pyggml.types import GGMLType, parse_type


def place_and_fill(ctx: Context, dev: Device) -> None:
    owners = [t for t in ctx if t.view_src is None]
    size = sum((t.nbytes() + 255) // 256 * 256 for t in owners)
    buf = dev.buffer_type().alloc_buffer(size)
    off = 0
    rng = np.random.default_rng(0)
    for t in owners:
        t.buffer, t.offset = buf, off
        off += (t.nbytes() + 255) // 256 * 256
    for t in ctx:
        if t.view_src is not None:
            init_view(t)
    for t in owners:
        if t.op.name == "NONE":
            t.set(rng.standard_normal(t.nelements()).astype(np.float32) * 0.1)


def timed(be: Backend, g: Graph, reps: int) -> dict[str, float]:
    t0 = time.perf_counter()
    be.graph_compute(g)
    first = time.perf_counter() - t0
    be.graph_compute(g)  # captured
    t0 = time.perf_counter()
    for _ in range(reps):
        be.graph_compute(g)
    sync = (time.perf_counter() - t0) / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        be.graph_compute_async(g)
    be.synchronize()
    pipe = (time.perf_counter() - t0) / reps
    return {"first_run_s": round(first, 4), "s_per_run": sync, "s_per_run_pipelined": pipe}


def case(dev: Device, build: Callable[[Context], Tensor], reps: int) -> dict[str, float]:
    ctx = Context(no_alloc=True)
    g = build_graph(build(ctx))
    place_and_fill(ctx, dev)
    return timed(dev.init_backend(), g, reps)


def mul_mat(dev: Device, wtype: str, k: int, m: int, n: int, reps: int) -> dict[str, Any]:
    wt = parse_type(wtype)

    def build(ctx: Context) -> Tensor:
        return ops.mul_mat(ctx.new_tensor(wt, k, m), ctx.new_tensor(GGMLType.F32, k, n))

    r = case(dev, build, reps)
    wbytes = m * k // wt.traits.blck_size * wt.traits.type_size
    best = r["s_per_run_pipelined"]
    return {"op": "MUL_MAT", "type": wtype, "k": k, "m": m, "n": n, **r,
            "gflops": 2.0 * m * n * k / best / 1e9, "weight_gbps": wbytes / best / 1e9}


def flash_attn(dev: Device, d: int, n_kv: int, n_q: int, heads: int, reps: int) -> dict[str, Any]:
    def build(ctx: Context) -> Tensor:
        q = ctx.new_tensor(GGMLType.F32, d, n_q, heads)
        k = ctx.new_tensor(GGMLType.F16, d, n_kv, heads)
        v = ctx.new_tensor(GGMLType.F16, d, n_kv, heads)
        return ops.flash_attn_ext(q, k, v, None, scale=d ** -0.5)

    r = case(dev, build, reps)
    return {"op": "FLASH_ATTN_EXT", "d": d, "n_kv": n_kv, "n_q": n_q, "heads": heads, **r,
            "gflops": 4.0 * d * n_kv * n_q * heads / r["s_per_run_pipelined"] / 1e9}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="CUDA0")
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--types", default="f32,f16,q4_0,q4_1,q5_0,q8_0")
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args()
    out: dict[str, Any] = {"benchmark": "cuda", "device": a.device}
    try:
        dev = hub().device(a.device)
    except Exception as e:
        out["unavailable"] = f"{type(e).__name__}: {e}"
        out["cuda_reason"] = hub().registry("CUDA").unavailable_reason()
        print(json.dumps(out, indent=1))
        return 0
    out["description"] = dev.description
    results: list[dict[str, Any]] = []
    for t in a.types.split(","):
        for n in (1, a.prompt):
            results.append(mul_mat(dev, t.strip(), a.k, a.m, n, a.reps))
    for n_q in (1, a.prompt):
        results.append(flash_attn(dev, 128, 4096, n_q, 32, a.reps))
    out["results"] = results
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
