"""Output formats: console, json, jsonl, csv, markdown.

The console shows a progress bar on a terminal; elsewhere (CI logs) it prints failures, a progress line every
twentieth of the run and the summary, or one line per case with `every_case`. jsonl/csv always carry every case.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TextIO

import pyggml
from pyggml_conformance import __version__
from pyggml_conformance.case import Case
from pyggml_conformance.runner import CaseResult, Status, Target

FORMATS = ("console", "json", "jsonl", "csv", "markdown")
FIELDS = ("name", "op", "params", "backend", "device", "status", "nmse", "threshold", "error", "time_us", "gflops",
          "gbps", "runs", "pyggml_version")


@dataclass
class RunInfo:
    mode: str
    targets: list[Target]
    n_cases: int
    every_case: bool = False
    devices: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, str] = field(default_factory=dict)
    """Per backend name, what is wrong with it beyond its results (it refuses view ops: `viewops`)."""

    def __post_init__(self) -> None:
        self.devices = {t.name: t.description for t in self.targets}


class Reporter:
    """Receives results as they come; `finish` writes what is left (summaries, whole documents)."""

    def __init__(self, out: TextIO, info: RunInfo) -> None:
        self.out = out
        self.info = info
        self.results: list[CaseResult] = []

    def add(self, r: CaseResult) -> None:
        self.results.append(r)

    def finish(self) -> None:
        pass

    def record(self, r: CaseResult) -> dict[str, Any]:
        d = r.to_dict()
        d["device"] = self.info.devices.get(r.backend, "")
        d["pyggml_version"] = pyggml.__version__
        return {k: d.get(k) for k in FIELDS}

    def counts(self) -> dict[str, Counter[str]]:
        per: dict[str, Counter[str]] = {t.name: Counter() for t in self.info.targets}
        for r in self.results:
            per.setdefault(r.backend, Counter())[r.status.value] += 1
        return per


def _measure(r: CaseResult) -> str:
    if r.status is Status.PASS and r.time_us is not None and r.runs:
        rate = f"{r.gflops:.2f} GFLOP/s" if r.gflops is not None else f"{(r.gbps or 0):.2f} GB/s"
        return f"{r.time_us:10.2f} us/run  {rate}  ({r.runs} runs)"
    if r.nmse is not None and r.status in (Status.PASS, Status.FAIL):
        return f"nmse={r.nmse:.3g}"
    return ""


class ConsoleReporter(Reporter):
    def __init__(self, out: TextIO, info: RunInfo) -> None:
        super().__init__(out, info)
        self.tty = out.isatty()
        self.total = info.n_cases * max(len(info.targets), 1) if info.mode != "list" else 0
        self._progress_every = max(self.total // 20, 1)
        self._n_failed = 0
        self._bar_shown = False

    def add(self, r: CaseResult) -> None:
        super().add(r)
        self._n_failed += r.status is Status.FAIL
        line = f"  [{r.backend}] {r.name}: {r.status.value.upper()}"
        extra = _measure(r)
        if extra:
            line += f"  {extra}"
        if r.error and r.status is not Status.SUPPORTED and (r.status is not Status.UNSUPPORTED or not self.tty):
            line += f"  ({r.error})"
        if not self.tty:
            if self.info.every_case or r.status is Status.FAIL or self.info.mode == "perf":
                print(line, file=self.out)
            elif len(self.results) % self._progress_every == 0:
                print(f"  ... {len(self.results)}/{self.total} cases, {self._n_failed} failed", file=self.out)
            return
        if r.status is Status.FAIL or self.info.mode == "perf":
            self._clear()
            print(line, file=self.out)
        self._bar(r.name)

    def _bar(self, current: str) -> None:
        done = len(self.results)
        width = 30
        filled = width * done // max(self.total, 1)
        text = f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} fail={self._n_failed} {current[:60]}"
        self.out.write(text.ljust(120)[:120])
        self.out.flush()
        self._bar_shown = True

    def _clear(self) -> None:
        if self._bar_shown:
            self.out.write("\r" + " " * 120 + "\r")
            self._bar_shown = False

    def finish(self) -> None:
        self._clear()
        out = self.out
        if self.info.mode == "list":
            return
        for name, c in self.counts().items():
            desc = self.info.devices.get(name, "")
            print(f"\nBackend {name}: {desc}", file=out)
            if name in self.info.warnings:
                print(f"  WARNING: {self.info.warnings[name]}", file=out)
            if self.info.mode == "support":
                n = c["supported"] + c["unsupported"]
                print(f"  {c['supported']}/{n} cases supported", file=out)
                continue
            ran = c["pass"] + c["fail"]
            print(f"  {c['pass']}/{ran} cases passed ({c['unsupported']} unsupported, {c['skip']} skipped)",
                  file=out)
            failed = [r.name for r in self.results if r.backend == name and r.status is Status.FAIL]
            if failed:
                print(f"  Failing cases ({len(failed)}):", file=out)
                for f in failed:
                    print(f"    {f}", file=out)
        fails = sum(c["fail"] for c in self.counts().values())
        warned = f" ({len(self.info.warnings)} backend(s) with warnings, see above)" if self.info.warnings else ""
        print(f"\n{'FAIL' if fails else 'OK'}{warned}", file=out)


class JsonReporter(Reporter):
    def finish(self) -> None:
        doc = {
            "pyggml_version": pyggml.__version__,
            "conformance_version": __version__,
            "mode": self.info.mode,
            "devices": [{"backend": k, "description": v} for k, v in self.info.devices.items()],
            "results": [self.record(r) for r in self.results],
            "summary": {k: dict(v) for k, v in self.counts().items()},
            "warnings": self.info.warnings,
        }
        json.dump(doc, self.out, indent=1)
        self.out.write("\n")


class JsonlReporter(Reporter):
    def add(self, r: CaseResult) -> None:
        super().add(r)
        self.out.write(json.dumps(self.record(r)) + "\n")
        self.out.flush()


class CsvReporter(Reporter):
    def __init__(self, out: TextIO, info: RunInfo) -> None:
        super().__init__(out, info)
        self.writer = csv.DictWriter(out, fieldnames=list(FIELDS))
        self.writer.writeheader()

    def add(self, r: CaseResult) -> None:
        super().add(r)
        self.writer.writerow(self.record(r))


class MarkdownReporter(Reporter):
    def finish(self) -> None:
        out = self.out
        if self.info.mode == "support":
            from pyggml_conformance.support import build_matrix, render

            out.write(render(build_matrix(self.results, self.info.targets)))
            return
        print(f"# pyggml conformance: {self.info.mode}\n", file=out)
        print(f"pyggml {pyggml.__version__}, pyggml-conformance {__version__}\n", file=out)
        print("| backend | device | pass | fail | unsupported | skip |", file=out)
        print("| --- | --- | --- | --- | --- | --- |", file=out)
        for name, c in self.counts().items():
            print(f"| {name} | {self.info.devices.get(name, '')} | {c['pass']} | {c['fail']} | "
                  f"{c['unsupported']} | {c['skip']} |", file=out)
        shown = [r for r in self.results if r.status is Status.FAIL or self.info.mode == "perf"]
        if shown:
            print("\n| backend | case | status | measure | error |", file=out)
            print("| --- | --- | --- | --- | --- |", file=out)
            for r in shown:
                err = (r.error or "").replace("|", "\\|")
                print(f"| {r.backend} | `{r.name}` | {r.status.value} | {_measure(r)} | {err} |", file=out)


REPORTERS: dict[str, type[Reporter]] = {
    "console": ConsoleReporter,
    "json": JsonReporter,
    "jsonl": JsonlReporter,
    "csv": CsvReporter,
    "markdown": MarkdownReporter,
}


def make_reporter(fmt: str, info: RunInfo, out: TextIO | None = None) -> Reporter:
    return REPORTERS[fmt](out if out is not None else sys.stdout, info)


def write_list(cases: list[Case], fmt: str, out: TextIO | None = None) -> None:
    """List mode: the selected cases' names."""
    out = out if out is not None else sys.stdout
    rows = [{"name": c.name, "op": c.op.name, "params": c.params, "source": c.source} for c in cases]
    if fmt == "json":
        json.dump(rows, out, indent=1)
        out.write("\n")
    elif fmt == "jsonl":
        for row in rows:
            out.write(json.dumps(row) + "\n")
    elif fmt == "csv":
        w = csv.DictWriter(out, fieldnames=["name", "op", "params", "source"])
        w.writeheader()
        w.writerows(rows)
    elif fmt == "markdown":
        out.write(f"# pyggml conformance cases ({len(rows)})\n\n")
        out.writelines(f"- `{row['name']}`\n" for row in rows)
    else:
        out.writelines(f"{row['name']}\n" for row in rows)
        if out.isatty():
            out.write(f"{len(rows)} cases\n")
