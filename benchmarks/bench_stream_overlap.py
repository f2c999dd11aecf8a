"""How much of the machine's read bandwidth a stream keeps when it also computes on every byte it reads: the
ceiling under a decode step's decode_bw_fraction (bench_cpu_llama.py), measured without any model.

benchmarks/stream_overlap.c (built here with the C compiler, AVX2) streams a large buffer on n threads and runs
`work` rounds of byte arithmetic per 32 bytes read. For each work value it measures the memory alone (two probes,
before and after), the stream with that work, and the same work over a buffer that stays in L2 (the arithmetic's own
pace, `compute_gb_s`). A decode mat-vec is such a stream: its kernels' pace from the caches (`compute_gb_s`) against
the memory's (`memory_gb_s`) says where on this table it sits.

    python benchmarks/bench_stream_overlap.py [--threads 2] [--buffer-mb 1024] [--work 1,2,3,4,6] [--rounds 30]

Prints one JSON object: the CPU model, every measurement, and per work value and memory state (the samples whose two
probes agree within 10%, binned by their mean to 10 GB/s) the medians of compute_over_memory (compute_gb_s /
memory_gb_s) and fraction (stream / memory).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from pyggml.backend.sysinfo import cpu_model

SOURCE = Path(__file__).resolve().parent / "stream_overlap.c"


def build(dest: Path) -> Path:
    """stream_overlap.c compiled into dest (the C compiler of $CC, else cc)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        sys.exit(f"bench_stream_overlap: its arithmetic is AVX2 (x86-64); this machine is {platform.machine()}")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        sys.exit("bench_stream_overlap: no C compiler (set CC or install gcc)")
    exe = dest / "stream_overlap"
    subprocess.run([cc, "-O2", "-pthread", str(SOURCE), "-o", str(exe)], check=True)
    return exe


def samples(lines: list[str]) -> list[dict[str, Any]]:
    """The program's lines (memory, stream, compute, memory per work value and round) as one sample each."""
    rows = [ln.split() for ln in lines if ln.strip()]
    out = []
    for i in range(0, len(rows) - 3, 4):
        (_, w, m1), (_, _, s), (_, _, c), (_, _, m2) = rows[i:i + 4]
        m = (float(m1) + float(m2)) / 2
        out.append({"work": int(w), "memory_probes_gb_s": [float(m1), float(m2)], "memory_gb_s": round(m, 2),
                    "stream_gb_s": float(s), "compute_gb_s": float(c), "fraction": round(float(s) / m, 3),
                    "compute_over_memory": round(float(c) / m, 2)})
    return out


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians per work value and steady memory state (both probes within 10%; bins of 10 GB/s)."""
    groups: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        m1, m2 = r["memory_probes_gb_s"]
        if abs(m1 - m2) <= 0.1 * max(m1, m2):
            groups[(r["work"], int(r["memory_gb_s"] // 10 * 10))].append(r)
    return [{"work": w, "memory_state_gb_s": f"{b}-{b + 10}", "samples": len(g),
             "compute_over_memory": round(statistics.median(r["compute_over_memory"] for r in g), 2),
             "fraction": round(statistics.median(r["fraction"] for r in g), 3)}
            for (w, b), g in sorted(groups.items())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--buffer-mb", type=int, default=1024)
    ap.add_argument("--work", default="1,2,3,4,6", help="rounds of arithmetic per 32 bytes, comma list")
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp))
        done = subprocess.run([str(exe), str(a.threads), str(a.buffer_mb), a.work, str(a.rounds)],
                              capture_output=True, text=True, check=True)
    rows = samples(done.stdout.splitlines())
    print(json.dumps({"cpu": cpu_model(), "threads": a.threads, "buffer_mb": a.buffer_mb,
                      "summary": summary(rows), "samples": rows}))


if __name__ == "__main__":
    main()
