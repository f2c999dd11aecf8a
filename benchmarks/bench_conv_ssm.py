"""The cpu plugin against ggml's CPU backend (libggml-cpu of `make llama-cpp-ref`, llama.cpp 0.3.36, through
ctypes) on the vision / state-space ops of issue 21, in one process with one thread count: each case builds the same
op in both, checks they agree, warms both up, then times them alternately and reports the best of N (a shared
machine's load drifts; the best run is the one least disturbed). Prints JSON; `speedup` is ggml time / pyggml time
(>= 1.0 means the cpu plugin is at least as fast, the issue's goal).

    python benchmarks/bench_conv_ssm.py [--threads N] [--repeat N] [--only conv2d ...]

Cases (CASES below; add one with a function taking the parsed args and returning its JSON object):
  conv2d   CONV_2D (ggml_conv_2d_direct) of a 3x3 kernel, 64 -> 64 channels, on a 64x64 input, padding 1, F32
           (and F16 kernels with --f16).
  ssm_scan SSM_SCAN (ggml_ssm_scan) on Mamba-130M's layer (d_inner 1536, d_state 16, 128 tokens) and on
           test-backend-ops' Mamba-2 prefill perf shape (d_state 128, head_dim 64, 48 heads, 512 tokens).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.backend.registry import get_device
from pyggml.backend.sysinfo import cpu_model
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_testing.ggml_ctypes import GgmlCtx, Make, nmse, pyggml_graph, pyggml_result
from pyggml_testing.llama_cpp_ref import GgmlMissing, open_ggml_cpu

Result = dict[str, Any]
MEM = 256 << 20
"""Bytes of the pyggml context a case builds its op in."""


def best_of(fn: Callable[[], None], repeat: int, warmup: int = 2) -> float:
    """Seconds of fn's fastest run of `repeat`, after `warmup` untimed runs."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def alternate(ours: Callable[[], None], theirs: Callable[[], None], repeat: int, rounds: int = 3
              ) -> tuple[float, float]:
    """Best times of both, timed in alternating rounds so that a load change hits both alike."""
    a = b = float("inf")
    for _ in range(rounds):
        a = min(a, best_of(ours, repeat))
        b = min(b, best_of(theirs, repeat))
    return a, b


def _ggml() -> Any:
    """ggml's CPU library, or None with a message."""
    try:
        return open_ggml_cpu()
    except GgmlMissing as e:
        print(e, file=sys.stderr)
        return None


def conv2d(args: argparse.Namespace, backend: Backend, cpu: Any) -> list[Result]:
    """CONV_2D 3x3, 64x64x64 -> 64 channels, stride 1, padding 1 (FLOPs: 2 * OW*OH*OC*IC*9)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 64, 64, 64)).astype(np.float32)  # [N, C, H, W]
    k = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)  # [OC, IC, KH, KW]
    prm = (1, 1, 1, 1, 1, 1)
    flops = 2.0 * 64 * 64 * 64 * 64 * 9
    out: list[Result] = []
    for tk in (GGMLType.F32, GGMLType.F16) if args.f16 else (GGMLType.F32,):
        graph, (node,) = pyggml_graph(lambda mk, tk=tk: O.conv_2d_direct(mk(k, tk), mk(x, GGMLType.F32), *prm),
                                      MEM)
        gg = GgmlCtx(cpu)
        try:
            g_out = gg.call("ggml_conv_2d_direct", gg.tensor(k, tk), gg.tensor(x, GGMLType.F32), *prm)
            run = gg.planned(gg.graph(g_out), args.threads)
            backend.graph_compute(graph)
            run.compute()
            ours_v = pyggml_result(node)
            err = nmse(ours_v, gg.read(g_out, ours_v.shape, GGMLType.F32))
            t_ours, t_ggml = alternate(lambda graph=graph: backend.graph_compute(graph), run.compute, args.repeat)
        finally:
            gg.close()
        out.append({"case": "conv2d", "op": "CONV_2D", "kernel_type": str(tk), "input": [64, 64, 64, 1],
                    "kernel": [3, 3, 64, 64], "stride": 1, "padding": 1, "nmse_vs_ggml": err,
                    "pyggml_ms": round(t_ours * 1e3, 3), "ggml_ms": round(t_ggml * 1e3, 3),
                    "pyggml_gflops": round(flops / t_ours / 1e9, 1), "ggml_gflops": round(flops / t_ggml / 1e9, 1),
                    "speedup": round(t_ggml / t_ours, 3), "goal": 1.0})
    return out


SSM_SHAPES = {"mamba1-130m": (16, 1, 1536, 1, 128, 1), "mamba2-ggml-perf": (128, 64, 48, 1, 512, 1)}
"""SSM_SCAN shapes (d_state, head_dim, n_head, n_group, tokens, sequences): Mamba-130M's layer (d_inner 1536 as
1536 heads of one channel, d_state 16) on a 128-token prompt, and test-backend-ops' Mamba-2 prefill perf case."""


def ssm_scan(args: argparse.Namespace, backend: Backend, cpu: Any) -> list[Result]:
    """SSM_SCAN (ggml_ssm_scan, K = 1) on each of SSM_SHAPES; inputs as test-backend-ops draws them."""
    rng = np.random.default_rng(0)
    out: list[Result] = []
    for name, (d_state, head_dim, n_head, n_group, nt, ns) in SSM_SHAPES.items():
        def u(*shape: int, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
            return rng.uniform(lo, hi, shape).astype(np.float32)

        srcs = (u(ns, n_head, head_dim, d_state), u(ns, nt, n_head, head_dim), u(ns, nt, n_head),
                u(n_head, 1 if head_dim > 1 else d_state, lo=-1.0, hi=-0.5), u(ns, nt, n_group, d_state),
                u(ns, nt, n_group, d_state))
        ids = np.arange(ns, dtype=np.int32)
        f32 = GGMLType.F32
        def build(mk: Make, srcs: tuple[np.ndarray, ...] = srcs,
                  ids: np.ndarray = ids) -> Tensor:
            s, x, dt, a, b, c = (mk(v, GGMLType.F32) for v in srcs)
            return O.ssm_scan(s, x, dt, a, b, c, mk(ids, GGMLType.I32))

        graph, (node,) = pyggml_graph(build, MEM)
        gg = GgmlCtx(cpu)
        try:
            g_out = gg.call("ggml_ssm_scan", *(gg.tensor(x, f32) for x in srcs), gg.tensor(ids, GGMLType.I32),
                            ctypes.c_int64(1))
            run = gg.planned(gg.graph(g_out), args.threads)
            backend.graph_compute(graph)
            run.compute()
            ours_v = pyggml_result(node)
            err = nmse(ours_v, gg.read(g_out, ours_v.shape, f32))
            t_ours, t_ggml = alternate(lambda graph=graph: backend.graph_compute(graph), run.compute, args.repeat)
        finally:
            gg.close()
        out.append({"case": "ssm_scan", "op": "SSM_SCAN", "shape": name, "d_state": d_state, "head_dim": head_dim,
                    "n_head": n_head, "n_group": n_group, "n_seq_tokens": nt, "n_seqs": ns, "nmse_vs_ggml": err,
                    "pyggml_ms": round(t_ours * 1e3, 3), "ggml_ms": round(t_ggml * 1e3, 3),
                    "speedup": round(t_ggml / t_ours, 3), "goal": 1.0})
    return out


CASES: dict[str, Callable[[argparse.Namespace, Backend, Any], list[Result]]] = {"conv2d": conv2d,
                                                                                "ssm_scan": ssm_scan}
"""Benchmark cases by name: each gets the args, the pyggml cpu backend and ggml's CPU library."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=int(os.environ.get("PYGGML_CPU_THREADS", os.cpu_count() or 1)))
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per round (3 alternating rounds)")
    ap.add_argument("--only", choices=sorted(CASES), action="append", help="run only these cases (repeatable)")
    ap.add_argument("--f16", action="store_true", help="also time F16 kernels where a case has them")
    args = ap.parse_args()
    cpu = _ggml()
    if cpu is None:
        return 1
    backend = get_device("cpu").init_backend(f"n_threads={args.threads}")
    results: list[Result] = []
    for name in args.only or list(CASES):
        results.extend(CASES[name](args, backend, cpu))
    print(json.dumps({"benchmark": "bench_conv_ssm", "cpu": cpu_model(), "threads": args.threads,
                      "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
