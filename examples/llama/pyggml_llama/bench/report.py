"""The rows of `pyggml-llama bench`: llama-bench's fields and its md / csv / json / jsonl printers.

The fields keep llama-bench's names, order and meanings (avg_ts is the mean over the repetitions of each one's
tokens / seconds, stddev_ts their sample standard deviation; json and jsonl add samples_ns and samples_ts). The
fields of llama.cpp settings that pyggml has no counterpart for (cpu_mask, cpu_strict, poll, n_cpu_moe, main_gpu,
no_kv_offload, tensor_buft_overrides, embeddings, no_op_offload, no_host) are left out rather than filled with
values that would mean nothing."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import TextIO

from pyggml_llama.bench.facts import DeviceFacts, ModelFacts
from pyggml_llama.bench.params import Instance
from pyggml_llama.bench.timing import mean_stddev


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


BUILD_COMMIT = f"pyggml-{_version('pyggml')}"
BUILD_NUMBER = 0


@dataclass(frozen=True)
class Result:
    instance: Instance
    model: ModelFacts
    devices: DeviceFacts
    cpu_info: str
    test_time: str
    samples_ns: list[int]

    @property
    def samples_ts(self) -> list[float]:
        n = self.instance.test.n_tokens
        return [n * 1e9 / ns for ns in self.samples_ns]

    def fields(self) -> dict[str, object]:
        i, s = self.instance, self.instance.setup
        avg_ns, std_ns = mean_stddev([float(x) for x in self.samples_ns])
        avg_ts, std_ts = mean_stddev(self.samples_ts)
        return {
            "build_commit": BUILD_COMMIT, "build_number": BUILD_NUMBER, "cpu_info": self.cpu_info,
            "gpu_info": self.devices.gpu_info, "backends": self.devices.backends, "model_filename": str(s.model),
            "model_type": self.model.model_type, "model_size": self.model.model_size,
            "model_n_params": self.model.model_n_params, "n_batch": i.n_batch, "n_ubatch": s.n_ubatch,
            "n_threads": s.n_threads, "type_k": s.kv_type, "type_v": s.kv_type,
            "n_gpu_layers": self.devices.n_gpu_layers, "split_mode": s.split_mode, "flash_attn": s.flash_attn,
            "devices": "/".join(s.devices), "tensor_split": "/".join(f"{x:.2f}" for x in s.tensor_split) or "0.00",
            "use_mmap": True, "repack": s.repack, "n_prompt": i.test.n_prompt, "n_gen": i.test.n_gen,
            "n_depth": i.test.n_depth, "test_time": self.test_time, "avg_ns": int(avg_ns), "stddev_ns": int(std_ns),
            "avg_ts": round(avg_ts, 6), "stddev_ts": round(std_ts, 6)}

    def with_samples(self) -> dict[str, object]:
        return {**self.fields(), "samples_ns": self.samples_ns, "samples_ts": [round(t, 6) for t in self.samples_ts]}


class Printer:
    """Writes the rows as the tests finish: header, one row per test, footer."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def header(self) -> None:
        pass

    def row(self, r: Result) -> None:
        raise NotImplementedError

    def footer(self) -> None:
        pass


class CsvPrinter(Printer):
    def __init__(self, out: TextIO) -> None:
        super().__init__(out)
        self.writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
        self.started = False

    def row(self, r: Result) -> None:
        f = r.fields()
        if not self.started:
            self.writer.writerow(f)
            self.started = True
        self.writer.writerow(int(v) if isinstance(v, bool) else f"{v:.6f}" if isinstance(v, float) else v
                             for v in f.values())


class JsonPrinter(Printer):
    def header(self) -> None:
        self.out.write("[")
        self.first = True

    def row(self, r: Result) -> None:
        body = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in r.with_samples().items())
        self.out.write(("\n" if self.first else ",\n") + "  {\n" + body + "\n  }")
        self.first = False
        self.out.flush()

    def footer(self) -> None:
        self.out.write("\n]\n")


class JsonlPrinter(Printer):
    def row(self, r: Result) -> None:
        self.out.write(json.dumps(r.with_samples()) + "\n")
        self.out.flush()


DISPLAY = {"n_threads": "threads", "split_mode": "sm", "flash_attn": "fa", "devices": "dev", "tensor_split": "ts"}
WIDTH = {"model": -30, "size": 10, "params": 10, "backend": -10, "n_threads": 7, "n_batch": 7, "n_ubatch": 8,
         "type_k": 6, "type_v": 6, "split_mode": 5, "flash_attn": 2, "devices": -12, "tensor_split": -12,
         "repack": 6, "test": 15, "t/s": 20}
"""llama-bench's column widths; negative: left-aligned."""


class MarkdownPrinter(Printer):
    def __init__(self, out: TextIO, optional: Sequence[str]) -> None:
        super().__init__(out)
        self.columns = ["model", "size", "params", "backend", "n_threads", *optional, "test", "t/s"]

    def _line(self, cells: Sequence[str]) -> None:
        self.out.write("|" + "".join(f" {c:{'<' if WIDTH[k] < 0 else '>'}{abs(WIDTH[k])}} |"
                                     for k, c in zip(self.columns, cells, strict=True)) + "\n")

    def header(self) -> None:
        self._line([DISPLAY.get(c, c) for c in self.columns])
        self.out.write("|" + "".join(f" {'-' * (abs(WIDTH[c]) - 1)}{':' if WIDTH[c] > 0 else '-'} |"
                                     for c in self.columns) + "\n")

    def row(self, r: Result) -> None:
        f = r.fields()
        size, params = r.model.model_size, r.model.model_n_params
        cells = {"model": r.model.model_type, "backend": r.devices.backends, "test": r.instance.test.name,
                 "size": f"{size / 2**20:.2f} MiB" if size < 2**30 else f"{size / 2**30:.2f} GiB",
                 "params": f"{params / 1e6:.2f} M" if params < 1e9 else f"{params / 1e9:.2f} B",
                 "t/s": f"{f['avg_ts']:.2f} ± {f['stddev_ts']:.2f}"}
        self._line([cells[c] if c in cells else str(int(v) if isinstance(v := f[c], bool) else v)
                    for c in self.columns])
        self.out.flush()

    def footer(self) -> None:
        self.out.write(f"\nbuild: {BUILD_COMMIT} ({BUILD_NUMBER})\n")


def make_printer(fmt: str, out: TextIO, optional: Sequence[str]) -> Printer:
    if fmt == "md":
        return MarkdownPrinter(out, optional)
    return {"csv": CsvPrinter, "json": JsonPrinter, "jsonl": JsonlPrinter}[fmt](out)
