"""The summary of a profile by op type: how many nodes ran, their total time, their share of the timed compute,
and a rate where the op's size says one: GFLOP/s for ops whose cost is arithmetic (`cost.py`), GB/s for the rest.
A node run by several threads counts once, for the span from its first thread's start to its last thread's end;
a backend that timed only whole graphs gives one "(whole graph)" row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyggml.profile.collect import TraceEvent


@dataclass(frozen=True, slots=True)
class OpRow:
    op: str
    count: int
    total_ns: int
    share: float
    """Of the total of all rows (0..1)."""
    flops: int
    nbytes: int

    @property
    def total_ms(self) -> float:
        return self.total_ns / 1e6

    @property
    def rate(self) -> str:
        """"12.3 GFLOP/s", "4.5 GB/s", or "" (no time, or a whole-graph row)."""
        if self.total_ns <= 0 or (self.flops == 0 and self.nbytes == 0):
            return ""
        if self.flops:
            return f"{self.flops / self.total_ns:.2f} GFLOP/s"
        return f"{self.nbytes / self.total_ns:.2f} GB/s"


@dataclass(frozen=True, slots=True)
class Summary:
    rows: list[OpRow]
    """Slowest op first."""
    total_ns: int

    def text(self) -> str:
        """A markdown table."""
        lines = ["| op | count | total ms | % | rate |", "| --- | ---: | ---: | ---: | ---: |"]
        lines += [f"| {r.op} | {r.count} | {r.total_ms:.3f} | {100 * r.share:.1f} | {r.rate} |" for r in self.rows]
        lines.append(f"| total | {sum(r.count for r in self.rows)} | {self.total_ns / 1e6:.3f} | 100.0 | |")
        return "\n".join(lines)


def summarize(events: Sequence[TraceEvent]) -> Summary:
    spans: dict[tuple[int, int], list[int]] = {}
    first: dict[tuple[int, int], TraceEvent] = {}
    for e in events:
        if e.op is None or e.group is None:
            continue
        span = spans.get(e.group)
        if span is None:
            spans[e.group] = [e.start_ns, e.end_ns]
            first[e.group] = e
        else:
            span[0], span[1] = min(span[0], e.start_ns), max(span[1], e.end_ns)
    by_op: dict[str, list[int]] = {}
    for g, (s, end) in spans.items():
        e = first[g]
        acc = by_op.setdefault(e.op or "", [0, 0, 0, 0])
        acc[0] += 1
        acc[1] += end - s
        acc[2] += e.flops
        acc[3] += e.nbytes
    total = sum(a[1] for a in by_op.values())
    rows = [OpRow(op, a[0], a[1], a[1] / total if total else 0.0, a[2], 0 if op == "(whole graph)" else a[3])
            for op, a in by_op.items()]
    rows.sort(key=lambda r: -r.total_ns)
    return Summary(rows, total)
