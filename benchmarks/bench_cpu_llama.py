"""pyggml's cpu backend against llama.cpp built for this machine, on models of the shapes users run in the
quantisations they download (benchmarks/llama_shapes.py: made by llama.cpp's own quantiser, cached), row by row:
prompt and decode at depth 0 and at a long context, with 1 and 2 threads. Each row is one run of
examples/llama/bench_llama.py (both libraries in one process, alternating rounds, best of --repeat), in its own
process, printed as one JSON line as soon as it is measured (CPU model, the read bandwidth probed after each round,
bytes a decode step reads, decode_bw_fraction against the probe of the best decode's round, load times and the
pp / tg ratios).

    python benchmarks/bench_cpu_llama.py [--shape qwen2-0.5b ...] [--type q4_k_m ...] [--threads 1 --threads 2]
                                         [--depth 0 --depth 4096] [--pp 512] [--tg 128] [--repeat 3]
                                         [--flash-attn] [--kv-type q8_0]

The defaults are issue 38's table (all shapes but llama-8b, the five types, 1 and 2 threads, depth 0 and 4096,
pp 512, tg 128, best of 3): hours on 2 cores. A shorter pass: --pp 128 --tg 64 --repeat 2 --depth 0.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from llama_shapes import FTYPES, SHAPES, model  # noqa: E402

BENCH = HERE.parent / "examples" / "llama" / "bench_llama.py"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES))
    ap.add_argument("--type", action="append", choices=sorted(FTYPES))
    ap.add_argument("--threads", action="append", type=int)
    ap.add_argument("--depth", action="append", type=int)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--flash-attn", action="store_true", help="both sides attend with FLASH_ATTN_EXT (llama.cpp -fa 1)")
    ap.add_argument("--kv-type", default="f16",
                    help="both sides' KV cache type: f16, q8_0, q4_0, q4_1, q5_0, q5_1 (llama-bench -ctk / -ctv)")
    a = ap.parse_args()
    for shape in a.shape or [k for k in SHAPES if k != "llama-8b"]:
        for qtype in a.type or list(FTYPES):
            path = model(shape, qtype)
            for depth in a.depth or [0, 4096]:
                for threads in a.threads or [1, 2]:
                    cmd = [sys.executable, str(BENCH), "--model", str(path), "--threads", str(threads), "--pp",
                           str(a.pp), "--tg", str(a.tg), "--depth", str(depth), "--repeat", str(a.repeat)]
                    cmd += ["--flash-attn"] * a.flash_attn + ["--kv-type", a.kv_type]
                    done = subprocess.run(cmd, capture_output=True, text=True)
                    if done.returncode:
                        row = {"shape": shape, "type": qtype, "threads": threads, "depth": depth,
                               "error": done.stderr.strip().splitlines()[-1:]}
                    else:
                        row = {"shape": shape, "type": qtype, **json.loads(done.stdout)}
                    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
