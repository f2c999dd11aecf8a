"""Prompt processing (pp) and decode (tg) speed of pyggml next to llama.cpp on the same GGUF, same threads.

    python examples/llama/bench_llama.py [--backend cpu] [--threads 2] [--pp 128] [--tg 128] [--repeat 3]
                                         [--cpu-simd-level 1]

Prints one JSON object. llama.cpp is measured through llama-cpp-python when it is importable. Both run in this
process; each round measures pyggml then llama.cpp, and the best round of each is kept, so that a burst of load
from other processes on a shared machine hits both sides alike. The load average is reported with the figures.
--cpu-simd-level caps pyggml's cpu kernels (1: AVX2, as a generic llama.cpp x86-64 build) for a like-for-like
comparison; by default they use the best level of the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pyggml_llama.session import Session, default_model_path


def random_prompt(pp: int) -> list[int]:
    return [int(x) for x in np.random.default_rng(0).integers(100, 40000, pp)]


Round = Callable[[], tuple[float, float]]
"""One measurement: (pp tok/s, tg tok/s)."""


def pyggml_round(backends: list[str], threads: int, pp: int, tg: int) -> tuple[Round, dict[str, Any]]:
    s = Session(None, backends, n_ctx=pp + tg + 8, n_batch=pp, n_threads=threads)
    prompt = random_prompt(pp)
    s.eval(prompt)  # warm-up: plans, caches, threads, and the graphs of both shapes
    s.eval([1])
    info: dict[str, Any] = {"backends": s.stats.backends}

    def run() -> tuple[float, float]:
        s.reset()
        t0 = time.perf_counter()
        logits = s.eval(prompt)[-1]
        t_pp = time.perf_counter() - t0
        tok = int(np.argmax(logits))
        t0 = time.perf_counter()
        for _ in range(tg):
            tok = int(np.argmax(s.eval([tok])[-1]))
        t_tg = time.perf_counter() - t0
        info.update(graph_builds=s.stats.graph_builds, graph_reuses=s.stats.graph_reuses)
        return pp / t_pp, tg / t_tg

    return run, info


def llama_cpp_round(threads: int, pp: int, tg: int) -> tuple[Round, dict[str, Any]] | None:
    try:
        import llama_cpp
        from llama_cpp import Llama
    except ImportError:
        return None
    llm = Llama(model_path=str(default_model_path()), n_ctx=pp + tg + 8, n_batch=pp, n_threads=threads,
                n_threads_batch=threads, verbose=False)
    prompt = random_prompt(pp)
    llm.eval(prompt)
    llm.reset()

    def last_logits() -> np.ndarray:  # without logits_all llama-cpp-python keeps no copy: read the context's row
        return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))

    def run() -> tuple[float, float]:
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        t_pp = time.perf_counter() - t0
        tok = int(np.argmax(last_logits()))
        t0 = time.perf_counter()
        for _ in range(tg):
            llm.eval([tok])
            tok = int(np.argmax(last_logits()))
        t_tg = time.perf_counter() - t0
        return pp / t_pp, tg / t_tg

    return run, {"version": llama_cpp.__version__}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", action="append")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the best of each side is reported")
    ap.add_argument("--cpu-simd-level", type=int, default=-1, help="pyggml cpu kernel level (-1: best)")
    a = ap.parse_args()
    try:
        from pyggml_cpu import native
    except ImportError:  # no cpu plugin: nothing to cap
        simd = None
    else:
        simd = native.set_simd_level(a.cpu_simd_level)
    sides: dict[str, tuple[Round, dict[str, Any]]] = {"pyggml": pyggml_round(a.backend or ["cpu"], a.threads,
                                                                              a.pp, a.tg)}
    peer = llama_cpp_round(a.threads, a.pp, a.tg)
    if peer:
        sides["llama_cpp"] = peer
    best = {name: [0.0, 0.0] for name in sides}
    for _ in range(max(1, a.repeat)):
        for name, (run, _info) in sides.items():
            pp, tg = run()
            best[name] = [max(best[name][0], pp), max(best[name][1], tg)]
    out: dict[str, Any] = {"model": default_model_path().name, "threads": a.threads, "pp": a.pp, "tg": a.tg,
                           "repeat": a.repeat, "loadavg_1m": round(os.getloadavg()[0], 2), "pyggml_cpu_simd": simd}
    for name, (_run, info) in sides.items():
        out[name] = {"pp_tok_s": round(best[name][0], 2), "tg_tok_s": round(best[name][1], 2), **info}
    if peer:
        out["ratio"] = {"pp": round(best["pyggml"][0] / best["llama_cpp"][0], 3),
                        "tg": round(best["pyggml"][1] / best["llama_cpp"][1], 3), "target_pp": 0.7, "target_tg": 0.8}
    else:
        out["llama_cpp"] = None
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
