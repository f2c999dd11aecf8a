"""benchmarks/bench_stream_overlap.py builds its C program and reports consistent figures (a tiny run: the figures
themselves are the benchmark's, never a test's)."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_stream_overlap.py"


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the benchmark's arithmetic is AVX2: x86-64 only")
@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_stream_overlap_reports_each_sample() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--threads", "2", "--buffer-mb", "8", "--work", "1,3",
                           "--rounds", "2"], capture_output=True, text=True, check=True, timeout=120)
    report = json.loads(done.stdout)
    assert report["threads"] == 2 and report["cpu"]
    rows = report["samples"]
    assert [r["work"] for r in rows] == [1, 3, 1, 3]
    for r in rows:
        m1, m2 = r["memory_probes_gb_s"]
        assert r["memory_gb_s"] == pytest.approx((m1 + m2) / 2, abs=0.01)
        assert r["fraction"] == pytest.approx(r["stream_gb_s"] / r["memory_gb_s"], abs=1e-3)
        assert r["stream_gb_s"] > 0 and r["compute_gb_s"] > 0
    for s in report["summary"]:
        assert s["work"] in (1, 3) and s["samples"] >= 1
