"""Time to first token and peak memory: pyggml (cpu, repacked weights) with the weight cache cold (empty: the load
converts and writes it), warm (the load maps it) and off (PYGGML_REPACK_CACHE=0: converted in memory, as before
the cache), against llama.cpp built for this machine (llama-cpp-python with GGML_NATIVE=ON, mmap on, as its users
run it). Issue 38's goal: time to first token and peak RSS no worse than llama.cpp's.

    python benchmarks/bench_ttft.py [--shape qwen2-0.5b --shape llama-1.1b] [--type q4_k_m] [--model GGUF]
                                    [--rounds 3] [--threads 2] [--llama-dir DIR]

(default: the Qwen2.5-0.5B shape as Q4_K_M and the TinyLlama-1.1B shape as Q5_K_M, benchmarks/llama_shapes.py)

A sample is one fresh process: import (timed apart), load the model (n_ctx 512, n_batch 512, the threads given),
then evaluate a 5-token prompt (BOS first where the model adds one) up to its logits; the `_text` variants (weight
cache warm) tokenize a sentence instead, in the timed span, so the tokenizer's construction counts on both sides
(pyggml builds its BPE on first encode; llama.cpp builds its vocabulary in the load). Time to first token = load +
prompt, wall clock (process CPU time beside it). Peak memory: VmHWM of /proc/self/status at the end (file pages
mapped count as much as anonymous ones; RssAnon and RssFile show the split). The model file and the warm cache's
entry are read once before the rounds (warm page cache); each round runs every variant once, in turn, and the best
round of each is kept (the machine may be shared: a burst of load hits every variant alike). One JSON object: the
CPU, the load average, llama.cpp's build, per model and variant the best and median TTFT, every sample, the peak
memory of the best sample and the first token each variant chose (random-weight models: near ties may part
pyggml's from llama.cpp's).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from llama_shapes import FTYPES, SHAPES, model  # noqa: E402

N_CTX = 512
N_BATCH = 512
PROMPT = [100, 200, 300, 400]
DEFAULT_MODELS = [("qwen2-0.5b", "q4_k_m"), ("llama-1.1b", "q5_k_m")]
TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the forest."
VARIANTS = ("pyggml_cold", "pyggml_warm", "pyggml_off", "llama_cpp", "pyggml_warm_text", "llama_cpp_text")
"""`_text`: the prompt is TEXT, tokenized in the timed span (the model's tokenizer on either side, BOS as it adds)."""


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            key, _, val = line.partition(":")
            if key in ("VmHWM", "RssAnon", "RssFile"):
                out[key.lower() + "_kb"] = int(val.split()[0])
    return out


def child(kind: str, path: Path, threads: int, llama_dir: str, tokens: list[int]) -> dict[str, Any]:
    """One sample, in this (fresh) process."""
    t0 = time.perf_counter()
    text = kind.endswith("_text")
    if kind.startswith("llama_cpp"):
        sys.path.insert(0, llama_dir)
        from llama_cpp import Llama
    else:
        from pyggml_llama.session import Session
    t1, c1 = time.perf_counter(), time.process_time()
    if kind.startswith("llama_cpp"):
        llm = Llama(model_path=str(path), n_ctx=N_CTX, n_batch=N_BATCH, n_threads=threads, n_threads_batch=threads,
                    verbose=False)
        t2 = time.perf_counter()
        if text:
            tokens = llm.tokenize(TEXT.encode())
        llm.eval(tokens)
        import numpy as np

        first = int(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).argmax())
    else:
        s = Session(path, ["cpu"], n_ctx=N_CTX, n_batch=N_BATCH, n_threads=threads)
        t2 = time.perf_counter()
        if text:
            tokens = s.tokenizer.encode(TEXT)
        first = int(s.eval(tokens)[-1].argmax())
    t3, c3 = time.perf_counter(), time.process_time()
    return {"import_s": t1 - t0, "load_s": t2 - t1, "prompt_s": t3 - t2, "ttft_s": t3 - t1, "ttft_cpu_s": c3 - c1,
            "first_token": first, "prompt_tokens": len(tokens), **_status()}


def prompt(path: Path) -> list[int]:
    """The 5 prompt tokens: BOS first where the model adds one."""
    from pyggml.gguf import GGUFFile
    from pyggml_llama.bench.timing import prompt_bos
    from pyggml_llama.tokenizer import Tokenizer

    bos = prompt_bos(Tokenizer(GGUFFile(path)))
    return (([bos] if bos is not None else []) + PROMPT + [500])[:5]


def sample(kind: str, path: Path, threads: int, llama_dir: Path, cache_dir: Path) -> dict[str, Any]:
    env = {**os.environ, "PYGGML_CACHE_DIR": str(cache_dir), "PYGGML_CPU_THREADS": str(threads)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed packages run: modules imported during a load are compiled
    if kind == "pyggml_off":
        env["PYGGML_REPACK_CACHE"] = "0"
    cmd = [sys.executable, __file__, "--child", kind, "--model", str(path), "--threads", str(threads),
           "--llama-dir", str(llama_dir), "--tokens", ",".join(map(str, prompt(path)))]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{kind} on {path.name} failed:\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def read_through(path: Path) -> None:
    """Bring a file into the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def bench_model(path: Path, rounds: int, threads: int, llama_dir: Path, work: Path) -> dict[str, Any]:
    warm = work / "warm"
    read_through(path)
    sample("pyggml_cold", path, threads, llama_dir, warm)  # writes the warm variant's entry
    for f in (warm / "weights").glob("*.pgw"):
        read_through(f)
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for v in VARIANTS:
            cold = work / "cold"
            shutil.rmtree(cold, ignore_errors=True)
            runs[v].append(sample(v, path, threads, llama_dir, cold if v == "pyggml_cold" else warm))
    n_text = {v: {r["prompt_tokens"] for r in runs[v]} for v in ("pyggml_warm_text", "llama_cpp_text")}
    shutil.rmtree(work / "cold", ignore_errors=True)
    out: dict[str, Any] = {"model": path.name, "bytes": path.stat().st_size}
    for v, rs in runs.items():
        best = min(rs, key=lambda r: r["ttft_s"])
        out[v] = {"ttft_s_best": round(best["ttft_s"], 3),
                  "ttft_s_median": round(statistics.median(r["ttft_s"] for r in rs), 3),
                  "load_s_best": round(min(r["load_s"] for r in rs), 3),
                  "peak_rss_mb": round(best["vmhwm_kb"] / 1024, 1),
                  "rss_anon_mb": round(best["rssanon_kb"] / 1024, 1),
                  "rss_file_mb": round(best["rssfile_kb"] / 1024, 1),
                  "samples": [{k: round(x, 3) if isinstance(x, float) else x for k, x in r.items()} for r in rs]}
    out["first_tokens"] = {v: sorted({r["first_token"] for r in runs[v]}) for v in VARIANTS}
    out["text_prompt_tokens"] = {v: sorted(n) for v, n in n_text.items()}
    for v in ("pyggml_cold", "pyggml_warm", "pyggml_off", "pyggml_warm_text"):
        anchor = "llama_cpp_text" if v.endswith("_text") else "llama_cpp"
        out[f"{v}_ttft_vs_llama_cpp"] = round(out[v]["ttft_s_best"] / out[anchor]["ttft_s_best"], 2)
        out[f"{v}_rss_vs_llama_cpp"] = round(out[v]["peak_rss_mb"] / out[anchor]["peak_rss_mb"], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES))
    ap.add_argument("--type", action="append", choices=sorted(FTYPES))
    ap.add_argument("--model", type=Path, action="append", help="a GGUF file (instead of --shape / --type)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llama-dir", type=Path, default=None)
    ap.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    ap.add_argument("--tokens", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        toks = [int(t) for t in a.tokens.split(",")]
        print(json.dumps(child(a.child, a.model[0], a.threads, str(a.llama_dir), toks)))
        return
    from pyggml.backend.sysinfo import cpu_model
    from pyggml_testing.llama_cpp_ref import build_native_llama

    llama_dir = a.llama_dir or build_native_llama()
    stamp = llama_dir / "built-for.txt"
    if a.model:
        paths = a.model
    elif a.shape or a.type:
        paths = [model(s, t) for s in a.shape or ["qwen2-0.5b", "llama-1.1b"] for t in a.type or ["q4_k_m"]]
    else:
        paths = [model(s, t) for s, t in DEFAULT_MODELS]
    report: dict[str, Any] = {
        "cpu": cpu_model(), "threads": a.threads, "rounds": a.rounds, "n_ctx": N_CTX, "n_batch": N_BATCH,
        "prompt_tokens": 5, "load_average_before": os.getloadavg(),
        "llama_cpp": {"dir": str(llama_dir),
                      "cmake_args": stamp.read_text(encoding="utf-8").splitlines()[-1] if stamp.is_file() else "?"},
        "models": []}
    with tempfile.TemporaryDirectory(prefix="bench-ttft-") as tmp:
        for p in paths:
            report["models"].append(bench_model(p, a.rounds, a.threads, llama_dir, Path(tmp)))
            shutil.rmtree(Path(tmp) / "warm", ignore_errors=True)
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
