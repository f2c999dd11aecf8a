"""Prompt processing (pp) and decode (tg) speed of pyggml next to llama.cpp on the same GGUF, same threads.

    python examples/llama/bench_llama.py [--backend cpu] [--threads 2] [--pp 128] [--tg 128]

Prints one JSON object. llama.cpp is measured through llama-cpp-python when it is importable.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from pyggml_llama.session import Session, default_model_path


def bench_pyggml(backends: list[str], threads: int, pp: int, tg: int) -> dict[str, Any]:
    s = Session(None, backends, n_ctx=pp + tg + 8, n_batch=pp, n_threads=threads)
    rng = np.random.default_rng(0)
    prompt = [int(x) for x in rng.integers(100, 40000, pp)]
    s.eval(prompt[:8])  # warm-up: plans, caches, threads
    s.reset()
    t0 = time.perf_counter()
    logits = s.eval(prompt)[-1]
    t_pp = time.perf_counter() - t0
    tok = int(np.argmax(logits))
    t0 = time.perf_counter()
    for _ in range(tg):
        tok = int(np.argmax(s.eval([tok])[-1]))
    t_tg = time.perf_counter() - t0
    return {"pp_tok_s": round(pp / t_pp, 2), "tg_tok_s": round(tg / t_tg, 2), "backends": s.stats.backends,
            "graph_builds": s.stats.graph_builds, "graph_reuses": s.stats.graph_reuses}


def bench_llama_cpp(threads: int, pp: int, tg: int) -> dict[str, Any] | None:
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    llm = Llama(model_path=str(default_model_path()), n_ctx=pp + tg + 8, n_batch=pp, n_threads=threads,
                n_threads_batch=threads, verbose=False)
    rng = np.random.default_rng(0)
    prompt = [int(x) for x in rng.integers(100, 40000, pp)]
    llm.eval(prompt[:8])
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt)
    t_pp = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(tg):
        llm.eval([int(prompt[i % pp])])
    t_tg = time.perf_counter() - t0
    import llama_cpp

    return {"pp_tok_s": round(pp / t_pp, 2), "tg_tok_s": round(tg / t_tg, 2), "version": llama_cpp.__version__}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", action="append")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=128)
    a = ap.parse_args()
    ours = bench_pyggml(a.backend or ["cpu"], a.threads, a.pp, a.tg)
    peer = bench_llama_cpp(a.threads, a.pp, a.tg)
    out: dict[str, Any] = {"model": default_model_path().name, "threads": a.threads, "pp": a.pp, "tg": a.tg,
                           "pyggml": ours, "llama_cpp": peer}
    if peer:
        out["ratio"] = {"pp": round(ours["pp_tok_s"] / peer["pp_tok_s"], 3),
                        "tg": round(ours["tg_tok_s"] / peer["tg_tok_s"], 3), "target_pp": 0.7, "target_tg": 0.8}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
