"""Benchmark of the cpu / blas backends against numpy and, when `ggml-python` is installed, ggml's own CPU
backend, in one process with one thread count. Prints JSON.

    python plugins/cpu/benchmarks/bench.py [--threads N] [--quick] [--only gemm|matvec|prompt|replay ...]
                                           [--rounds R]
                                           [--types f16,q4_0,...]

Cases: F32 GEMM 1024^3 (numpy, blas, cpu); mat-vec (n=1) and prompt-style (n=128) MUL_MAT of F16, Q4_0, Q4_1,
Q8_0, Q4_K, Q6_K weights [k, m] for k in 576..4096 (--types to choose); Python overhead of replaying a 1,000-node graph;
`stream` (only when asked: --only stream): a decode step's mat-vec over repacked weights (cpu_repack, the layout a
model's weights take), from memory (--stream-mb of one type) against the read bandwidth probed just before each timing
(`read_fraction`: what issue 38's decode goal counts), and from the caches (2.4-4.5 MB, the kernel's own ceiling):
which of the two sets a type's decode speed.
Ratios are speedups (other time / pyggml time): >= 1 means pyggml is at least as fast; with --rounds R the
quantised cases report the median of R alternating rounds (a shared machine's load drifts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=int(os.environ.get("PYGGML_CPU_THREADS", os.cpu_count() or 1)))
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    p.add_argument("--rows", type=int, default=2048, help="weight rows m of the quantised matmuls")
    p.add_argument("--only", choices=["gemm", "matvec", "prompt", "replay", "stream"], action="append",
                   help="run only these cases (repeatable; default all)")
    p.add_argument("--types", default="f16,q4_0,q4_1,q8_0,q4_K,q6_K",
                   help="comma-separated weight types of the mat-vec and prompt cases")
    p.add_argument("--stream-mb", type=int, default=512, help="stream case: MB of weights a mat-vec reads")
    p.add_argument("--rounds", type=int, default=1,
                   help="quantised cases: time pyggml and ggml alternately this many rounds, report medians")
    return p.parse_args()


ARGS = _args()
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)  # numpy's BLAS gets the same thread count, set before numpy loads

import numpy as np  # noqa: E402

import pyggml.ops as O  # noqa: E402
from pyggml import quants  # noqa: E402
from pyggml.backend.registry import get_device, get_registry  # noqa: E402
from pyggml.backend.sysinfo import cpu_model  # noqa: E402
from pyggml.context import Context  # noqa: E402
from pyggml.graph import build_graph  # noqa: E402
from pyggml.types import GGMLType, from_f32, parse_type  # noqa: E402
from pyggml_testing.graphs import scale_chain  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggml_ref  # noqa: E402

QTYPES = [parse_type(name) for name in ARGS.types.split(",")]


def timeit(fn: Callable[[], object], repeat: int, min_time: float = 0.2) -> float:
    """Best seconds of one call (after a warm-up) over at least `repeat` calls and `min_time` seconds (the
    minimum: the machine may be shared, and interference only ever adds time)."""
    fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < repeat or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) > 2000:
            break
    return float(np.min(times))


def pyggml_matmul(backend: Any, wtype: GGMLType, wraw: np.ndarray | None, wf: np.ndarray, x: np.ndarray
                  ) -> Callable[[], object]:
    m, k = wf.shape
    n = x.shape[0]
    ctx = Context(wf.nbytes * 2 + x.nbytes * 2 + m * n * 4 + (8 << 20))
    w = ctx.new_tensor(wtype, k, m)
    if wraw is not None:
        assert w.buffer is not None
        w.buffer.set_tensor(w, wraw)
    else:
        w.set(wf)
    xt = ctx.new_tensor("f32", k, n)
    xt.set(x)
    g = build_graph(O.mul_mat(w, xt))
    return lambda: backend.graph_compute(g)


def gemm_case(cpu: Any, blas: Any, reps: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    t_np = timeit(lambda: b @ a.T, reps)
    out: dict[str, Any] = {"case": "gemm_f32_1024", "numpy_ms": t_np * 1e3}
    if blas is not None:
        t_blas = timeit(pyggml_matmul(blas, GGMLType.F32, None, a, b), reps)
        out |= {"blas_ms": t_blas * 1e3, "blas_vs_numpy": t_np / t_blas}
    t_cpu = timeit(pyggml_matmul(cpu, GGMLType.F32, None, a, b), max(2, reps // 3))
    out |= {"cpu_ms": t_cpu * 1e3, "cpu_vs_numpy": t_np / t_cpu}
    return out


def quant_case(cpu: Any, ggml: ggml_ref.GGML | None, t: GGMLType, k: int, n: int, reps: int) -> dict[str, Any]:
    bs = t.traits.blck_size
    k = -(-k // bs) * bs  # K-quants need whole 256-blocks: 576 becomes 768
    rng = np.random.default_rng(k + n)
    wf = rng.standard_normal((ARGS.rows, k)).astype(np.float32)
    raw = np.ascontiguousarray(from_f32(wf, t)).view(np.uint8) if t.traits.blck_size == 1 else quants.quantize(wf, t)
    x = rng.standard_normal((n, k)).astype(np.float32)
    ours = pyggml_matmul(cpu, t, raw, wf, x)
    theirs = ggml.mul_mat(int(t), raw, ARGS.rows, k, x) if ggml is not None else None
    t_cpus, t_ggmls = [], []
    for _ in range(max(1, ARGS.rounds)):  # alternate, so that the machine's load changes hit both alike
        t_cpus.append(timeit(ours, reps))
        if theirs is not None:
            t_ggmls.append(timeit(theirs, reps))
    t_cpu = float(np.median(t_cpus))
    out: dict[str, Any] = {"case": f"mul_mat_{t}_k{k}_m{ARGS.rows}_n{n}", "cpu_ms": t_cpu * 1e3,
                           "cpu_gflops": 2 * ARGS.rows * k * n / t_cpu / 1e9}
    if t_ggmls:
        ratio = float(np.median([g / c for g, c in zip(t_ggmls, t_cpus, strict=True)]))
        out |= {"ggml_ms": float(np.median(t_ggmls)) * 1e3, "cpu_vs_ggml": ratio}
    return out


def stream_case(cpu: Any, t: GGMLType, reps: int) -> dict[str, Any]:
    """One 4096 x 1024 matrix of t (C-quantised random values) repeated down the rows of a repacked weight: the
    mat-vec's read rate from memory, each timing set against a bandwidth probe taken just before it (this machine's
    bandwidth may change from one minute to the next), and from the caches (the first 1024 rows alone)."""
    from pyggml.alloc import GraphAllocator, alloc_ctx_tensors
    from pyggml_cpu import native

    dev = get_device("cpu")
    (repack,) = dev.extra_buffer_types()
    k, m = 4096, 1024
    if not repack.takes_weight(t, (k, m)):
        return {"case": f"stream_{t}", "skipped": f"{repack.name} does not hold {t} at this kernel level"}
    rng = np.random.default_rng(0)
    block = native.quantize(rng.standard_normal((m, k)).astype(np.float32), t)
    copies = max(1, (ARGS.stream_mb << 20) // block.nbytes)
    ctx = Context(no_alloc=True)
    big, small = ctx.new_tensor(t, k, m * copies), ctx.new_tensor(t, k, m)
    wbuf = alloc_ctx_tensors(ctx, repack)
    assert wbuf is not None
    for i in range(copies):
        wbuf.set_tensor(big, block, i * block.nbytes)
    wbuf.set_tensor(small, block)
    xctx = Context(no_alloc=True)
    x = xctx.new_tensor(GGMLType.F32, k, 1)
    graphs = {name: build_graph(O.mul_mat(w, x)) for name, w in (("memory", big), ("cache", small))}
    for g in graphs.values():
        GraphAllocator(dev.buffer_type()).alloc_graph(g)
    x.set(rng.standard_normal((1, k)).astype(np.float32))
    rates, fractions = [], []
    for _ in range(reps):
        probe = native.read_bandwidth(ARGS.threads, reps=3)
        rate = block.nbytes * copies / timeit(lambda: cpu.graph_compute(graphs["memory"]), 3, 0.1)
        rates.append(rate / 1e9)
        fractions.append(rate / probe)
    cached = block.nbytes / timeit(lambda: cpu.graph_compute(graphs["cache"]), 50)
    wbuf.free()
    best = int(np.argmax(fractions))
    return {"case": f"stream_{t}_{block.nbytes * copies >> 20}MB", "memory_gb_s": [round(r, 1) for r in rates],
            "read_fraction": [round(f, 3) for f in fractions], "read_fraction_best": round(fractions[best], 3),
            "cache_gb_s": round(cached / 1e9, 1)}


def replay_case(cpu: Any) -> dict[str, Any]:
    g = scale_chain(1000)
    total = timeit(lambda: cpu.graph_compute(g), 50)
    ex = cpu.executor
    lookup = timeit(lambda: ex.plans.get(g), 50)
    plan = ex.plans.get(g)
    c_only = timeit(lambda: ex.pool.run(plan.ptr, len(plan.names)), 50)
    return {"case": "replay_1000_nodes", "total_ms": total * 1e3, "c_ms": c_only * 1e3,
            "python_overhead_ms": max(total - c_only, lookup) * 1e3}


def main() -> None:
    from pyggml_cpu import native

    cpu = get_device("cpu").init_backend(f"n_threads={ARGS.threads}")
    blas_devs = get_registry("blas").devices()
    blas = blas_devs[0].init_backend() if blas_devs else None
    if blas is not None:
        get_registry("blas").get_extension("set_n_threads")(blas, ARGS.threads)  # type: ignore[operator]
    ggml = ggml_ref.load(ARGS.threads)
    reps = 3 if ARGS.quick else 10
    ks = [576, 4096] if ARGS.quick else [576, 1024, 2048, 4096]
    only = set(ARGS.only or ["gemm", "matvec", "prompt", "replay"])
    results = [gemm_case(cpu, blas, reps)] if "gemm" in only else []
    for n, name in ((1, "matvec"), (128, "prompt")):
        if name in only:
            for t in QTYPES:
                for k in ks:
                    results.append(quant_case(cpu, ggml, t, k, n, reps if n == 1 else max(3, reps // 3)))
    if "replay" in only:
        results.append(replay_case(cpu))
    if "stream" in only:
        results += [stream_case(cpu, t, reps) for t in QTYPES]
    info = {"threads": ARGS.threads, "kernels": native.simd_level(),
            "features": [f for f, on in native.cpu_features().items() if on],
            "ggml": ggml.version if ggml is not None else None, "numpy": np.__version__,
            "cpu": cpu_model()}
    print(json.dumps({"info": info, "results": results}, indent=1))


if __name__ == "__main__":
    main()
