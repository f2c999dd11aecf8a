"""The options of `pyggml-llama bench`, named as llama-bench names them, and the tests they make.

Every test parameter takes a comma list and may be repeated (`-p 128,512` is `-p 128 -p 512`); integers also take
llama-bench's ranges `first-last`, `first-last+step` and `first-last*mult`. The tests are every combination, in
llama-bench's order: per model, setting and depth, the prompt tests (-p), then the decode tests (-n), then the
prompt + decode tests (-pg); a value 0 of -p or -n makes no test. `--backend` (a comma list of devices, several
joined by `/` for one layer split) takes the place of llama-bench's -ngl and -dev."""

from __future__ import annotations

import argparse
import itertools
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyggml_llama.bench.timing import BenchTest

KV_TYPES = ("f16", "f32", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1")
SPLIT_MODES = ("none", "layer", "tensor")
FORMATS = ("md", "csv", "json", "jsonl")
_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?:([+*])(\d+))?)?$")


def int_range(text: str) -> list[int]:
    """`512`, `128,512`, `1-4` (1 2 3 4), `0-4096+1024`, `1-16*2` (1 2 4 8 16), or several of them, comma-joined."""
    out: list[int] = []
    for part in text.split(","):
        m = _RANGE.match(part.strip())
        if m is None:
            raise argparse.ArgumentTypeError(f"{text!r}: {part!r} is not N, FIRST-LAST, FIRST-LAST+STEP or "
                                             "FIRST-LAST*MULT")
        first = int(m[1])
        last = int(m[2]) if m[2] else first
        op, step = m[3] or "+", int(m[4]) if m[4] else 1
        if last < first or (op == "+" and step < 1) or (op == "*" and (step < 2 or first < 1)):
            raise argparse.ArgumentTypeError(f"{text!r}: the range {part!r} does not advance")
        i = first
        while i <= last:
            out.append(i)
            i = i + step if op == "+" else i * step
    return out


def bool_list(text: str) -> list[bool]:
    """`0`, `1`, `on`, `off`, comma-joined."""
    words = {"0": False, "off": False, "false": False, "1": True, "on": True, "true": True}
    try:
        return [words[w.strip().lower()] for w in text.split(",")]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 or 1 (on, off)") from None


def choice_list(choices: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        out = [w.strip() for w in text.split(",")]
        bad = [w for w in out if w not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"{', '.join(bad)}: not one of {', '.join(choices)}")
        return out
    return parse


def pair(text: str) -> list[tuple[int, int]]:
    """-pg's `PP,TG`."""
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give PP,TG (two token counts)")
    return [(int(parts[0]), int(parts[1]))]


def device_list(text: str) -> list[tuple[str, ...]]:
    """`cpu,Vulkan0` (two settings), `OpenCL0/Vulkan0` (one setting: the layers split over both)."""
    out = [tuple(d.strip() for d in combo.split("/")) for combo in text.split(",")]
    if any(not all(combo) for combo in out):
        raise argparse.ArgumentTypeError(f"{text!r}: a device name is empty")
    return out


def split_list(text: str) -> list[tuple[float, ...]]:
    """-ts: `3/1` (one setting), `3/1,1/1` (two)."""
    try:
        return [tuple(float(x) for x in combo.split("/")) for combo in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give proportions such as 3/1") from None


def default_threads() -> int:
    """pyggml's cpu backend's own default: the CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass(frozen=True)
class Setup:
    """What a Session is made of: consecutive tests with the same setup share one (llama-bench keeps its model
    while these do not change)."""

    model: Path
    devices: tuple[str, ...]
    split_mode: str
    tensor_split: tuple[float, ...]
    kv_type: str
    flash_attn: bool
    n_ubatch: int
    n_threads: int
    repack: bool


@dataclass(frozen=True)
class Instance:
    setup: Setup
    n_batch: int
    test: BenchTest


@dataclass(frozen=True)
class Options:
    """The parsed options, each list with its default filled in."""

    models: list[Path]
    n_prompt: list[int]
    n_gen: list[int]
    n_pg: list[tuple[int, int]]
    n_depth: list[int]
    n_batch: list[int]
    n_ubatch: list[int]
    kv_type: list[str]
    n_threads: list[int]
    flash_attn: list[bool]
    split_mode: list[str]
    tensor_split: list[tuple[float, ...]]
    devices: list[tuple[str, ...]]
    repack: bool
    devices_given: bool

    def instances(self) -> list[Instance]:
        out: list[Instance] = []
        for model, sm, devs, ts, nb, nub, kv, fa, nt, nd in itertools.product(
                self.models, self.split_mode, self.devices, self.tensor_split, self.n_batch, self.n_ubatch,
                self.kv_type, self.flash_attn, self.n_threads, self.n_depth):
            setup = Setup(model, devs, sm, ts, kv, fa, nub, nt, self.repack)
            tests = ([BenchTest(p, 0, nd) for p in self.n_prompt if p] + [BenchTest(0, n, nd) for n in self.n_gen if n]
                     + [BenchTest(p, n, nd) for p, n in self.n_pg if p or n])
            out += [Instance(setup, nb, t) for t in tests]
        return out

    def shown_columns(self) -> list[str]:
        """The markdown table's optional columns: the settings given several values or one not the default
        (llama-bench's rule), in llama-bench's order."""
        shown = {"n_batch": self.n_batch != [2048], "n_ubatch": self.n_ubatch != [512],
                 "type_k": self.kv_type != ["f16"], "type_v": self.kv_type != ["f16"],
                 "split_mode": self.split_mode != ["layer"], "flash_attn": self.flash_attn != [False],
                 "devices": self.devices_given, "tensor_split": self.tensor_split != [()], "repack": not self.repack}
        return [name for name, show in shown.items() if show]
