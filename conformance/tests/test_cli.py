"""The command line: modes, formats, filters, bad input, exit status."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from pyggml.ops.base import Op
from pyggml_conformance.cli import main

ADD_FEW = ["--op", "ADD", "--params", "type_a=f32,type_b=f32,ne=\\[10,5,4,3\\],nr=\\[1,1,1,1\\],v=[01]"]


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_console_summary_and_plain_lines(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "--backend", "numpy", "--every-case", *ADD_FEW)
    assert rc == 0
    assert "  [numpy] ADD(type_a=f32,type_b=f32,ne=[10,5,4,3],nr=[1,1,1,1],v=0,inplace=0): PASS" in out
    assert "2/2 cases passed (0 unsupported, 0 skipped)" in out
    assert out.rstrip().endswith("OK")


def test_console_off_a_terminal_prints_progress_not_every_case(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "--backend", "numpy", "--op", "ADD", "--params", "type_a=f32,type_b=f32")
    lines = out.splitlines()
    assert rc == 0 and not any(": PASS" in line for line in lines)
    progress = [line for line in lines if line.startswith("  ... ")]
    assert 1 <= len(progress) <= 21 and progress[-1].endswith(" 0 failed")
    assert out.rstrip().endswith("OK")


def test_json_carries_every_field(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "--backend", "numpy", "--format", "json", *ADD_FEW)
    doc = json.loads(out)
    assert rc == 0 and doc["mode"] == "test" and doc["pyggml_version"]
    assert doc["devices"] == [{"backend": "numpy", "description": doc["devices"][0]["description"]}]
    r = doc["results"][0]
    for key in ("op", "params", "backend", "status", "nmse", "threshold", "error", "time_us", "gflops", "gbps",
                "device", "pyggml_version"):
        assert key in r
    assert r["op"] == "ADD" and r["status"] == "pass" and r["threshold"] == pytest.approx(1e-7)
    assert doc["summary"] == {"numpy": {"pass": 2}}


def test_jsonl_and_csv(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(capsys, "--backend", "numpy", "--format", "jsonl", *ADD_FEW)
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 2 and {r["status"] for r in rows} == {"pass"}
    _, out, _ = run_cli(capsys, "--backend", "numpy", "--format", "csv", *ADD_FEW)
    table = list(csv.DictReader(io.StringIO(out)))
    assert len(table) == 2 and table[0]["op"] == "ADD" and table[0]["backend"] == "numpy"


def test_markdown_report(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "--backend", "numpy", "--format", "markdown", *ADD_FEW)
    assert rc == 0 and "| numpy |" in out and "| 2 | 0 | 0 | 0 |" in out


def test_list_mode(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "--mode", "list", "--op", "GLU", "--params", "op=swiglu,type=f32,ne=\\[128")
    names = out.splitlines()
    assert rc == 0 and names and all(n.startswith("GLU(op=swiglu,type=f32,ne=[128,") for n in names)
    _, out, _ = run_cli(capsys, "--mode", "list", "--op", "SILU", "--format", "json")
    assert {r["op"] for r in json.loads(out)} == {"UNARY"}


def test_shards_split_the_selection_into_disjoint_parts(capsys: pytest.CaptureFixture[str]) -> None:
    sel = ["--mode", "list", "--op", "GLU", "--params", "type=f32"]
    _, out, _ = run_cli(capsys, *sel)
    every = out.splitlines()
    parts = [run_cli(capsys, *sel, "--shard", f"{i}/3")[1].splitlines() for i in (1, 2, 3)]
    assert len(every) > 3 and all(parts)
    assert sorted(n for p in parts for n in p) == sorted(every)  # each case in exactly one part
    assert parts[0] == every[0::3]  # one op: its every third case
    few = ["--op", "ADD,TRANSPOSE,WIN_PART", "--shard", "1/4"]  # two ops a stride over all cases misses
    _, out, _ = run_cli(capsys, "--mode", "list", "--format", "json", *few)
    assert {r["op"] for r in json.loads(out)} == {"ADD", "TRANSPOSE", "WIN_PART"}  # the first part has every op


def test_support_mode(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(capsys, "--mode", "support", "--backend", "numpy", "--op", "ROPE", "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert rc == 0 and rows and {r["status"] for r in rows} == {"supported"}


def test_perf_mode(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from pyggml_conformance import perf

    monkeypatch.setattr(perf, "TARGET_BYTES", 1e6)
    rc, out, _ = run_cli(capsys, "--mode", "perf", "--backend", "numpy", "--op", "SCALE", "--params",
                         "type=f16,ne=\\[4096", "--perf-seconds", "0.05", "--format", "json")
    r = json.loads(out)["results"][0]
    assert rc == 0 and r["status"] == "pass" and r["time_us"] > 0 and r["gbps"] > 0 and r["runs"] >= 1


@pytest.mark.parametrize(("args", "text"), [
    (["--backend", "nosuch"], "no backend named 'nosuch'; installed backends: "),
    (["--op", "NOT_AN_OP"], "unknown op name(s) NOT_AN_OP; known: "),
    (["--params", "("], "error:"),
    (["--case-file", "/nonexistent/file.jsonl"], "error:"),
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--shard", "3/2"], "--shard must be I/N with 1 <= I <= N (the I-th of N parts), got '3/2'"),
    (["--shard", "half"], "--shard must be I/N"),
])
def test_bad_input_is_a_clear_error(capsys: pytest.CaptureFixture[str], args: list[str], text: str) -> None:
    rc, _, err = run_cli(capsys, *args)
    assert rc == 2 and text in err


def test_unknown_backend_lists_what_exists(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = run_cli(capsys, "--backend", "nosuch")
    assert "numpy" in err


def test_console_script_and_pyggml_dispatch() -> None:
    bindir = os.path.dirname(sys.executable)  # the scripts of the environment running the tests, PATH or not
    for cmd in ([os.path.join(bindir, "pyggml-conformance")], [os.path.join(bindir, "pyggml"), "conformance"]):
        p = subprocess.run([*cmd, "--mode", "list", "--op", "ARANGE"], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert "ARANGE(type=f32,start=0,stop=3,step=1)" in p.stdout


def test_jobs_gives_the_same_results(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--backend", "numpy", "--op", "SOFT_MAX,ARGSORT", "--params", "ne=\\[16,", "--format", "json"]
    _, out, _ = run_cli(capsys, *args)
    serial = {r["name"]: r["status"] for r in json.loads(out)["results"]}
    p = subprocess.run([sys.executable, "-m", "pyggml_conformance.cli", *args, "--jobs", "2"],
                       capture_output=True, text=True, timeout=300)
    parallel = {r["name"]: r["status"] for r in json.loads(p.stdout)["results"]}
    assert p.returncode == 0 and len(serial) > 10 and parallel == serial


def test_a_dying_worker_fails_only_its_case() -> None:
    from pyggml_conformance.parallel import CRASH_ENV

    victim = "ARGMAX(type=f32,ne=[100,10],v=0)"
    p = subprocess.run([sys.executable, "-m", "pyggml_conformance.cli", "--backend", "numpy", "--op", "ARGMAX",
                        "--params", "^type=", "--jobs", "2", "--format", "json"], capture_output=True, text=True,
                       timeout=300, env={**os.environ, CRASH_ENV: victim})
    doc = json.loads(p.stdout)
    status = {r["name"]: r["status"] for r in doc["results"]}
    assert p.returncode == 1 and status[victim] == "fail"
    assert [n for n, s in status.items() if s != "pass"] == [victim] and len(status) == 11
    assert "worker process died" in next(r["error"] for r in doc["results"] if r["name"] == victim)


def test_a_hanging_worker_fails_only_its_case() -> None:
    from pyggml_conformance.parallel import HANG_ENV

    victim = "ARGMAX(type=f32,ne=[100,10],v=0)"
    env = {**os.environ, HANG_ENV: victim, "PYGGML_CONFORMANCE_CHUNK_TIMEOUT": "5",
           "PYGGML_CONFORMANCE_CASE_TIMEOUT": "5"}
    p = subprocess.run([sys.executable, "-m", "pyggml_conformance.cli", "--backend", "numpy", "--op", "ARGMAX",
                        "--params", "^type=", "--jobs", "2", "--format", "json"], capture_output=True, text=True,
                       timeout=300, env=env)
    doc = json.loads(p.stdout)
    status = {r["name"]: r["status"] for r in doc["results"]}
    assert p.returncode == 1 and [n for n, s in status.items() if s != "pass"] == [victim] and len(status) == 11
    assert "did not finish in 5 s" in next(r["error"] for r in doc["results"] if r["name"] == victim)


@pytest.mark.parametrize(("args", "message"), [
    (["--output", "/nonexistent/dir/report.txt"], "cannot write the report to '/nonexistent/dir/report.txt'"),
    (["--mode", "perf", "--perf-seconds", "-1"], "--perf-seconds must be a positive number of seconds, got -1"),
    (["--mode", "perf", "--perf-seconds", "nan"], "--perf-seconds must be a positive number"),
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--shard", "3/2"], "--shard must be I/N with 1 <= I <= N (the I-th of N parts), got '3/2'"),
    (["--shard", "half"], "--shard must be I/N"),
])
def test_bad_options_are_usage_errors_not_tracebacks(capsys: pytest.CaptureFixture[str], args: list[str],
                                                      message: str) -> None:
    """These raised FileNotFoundError / ZeroDivisionError tracebacks (issue 19)."""
    rc, _, err = run_cli(capsys, "--backend", "numpy", *ADD_FEW, *args)
    assert rc == 2 and message in err and "Traceback" not in err


def test_a_backend_refusing_view_ops_is_warned_about(capsys: pytest.CaptureFixture[str],
                                                     register: Callable[..., str]) -> None:
    """Refusing views made 94 of 141 cases "unsupported" while the run said OK (issue 24): now a warning, in the
    summary, on stderr and in the json document."""
    views = frozenset({Op.VIEW, Op.RESHAPE, Op.PERMUTE, Op.TRANSPOSE})
    name = register("cli_noviews", None, frozenset(), unsupported=views)
    rc, out, err = run_cli(capsys, "--backend", name, *ADD_FEW)
    assert rc == 0
    assert "WARNING: cli_noviews refuses VIEW, RESHAPE, PERMUTE, TRANSPOSE in supports_op" in out
    assert "backend(s) with warnings" in out.rstrip().splitlines()[-1]
    assert "warning: cli_noviews refuses" in err
    rc, out, _ = run_cli(capsys, "--backend", name, "--format", "json", *ADD_FEW)
    assert "cli_noviews refuses" in json.loads(out)["warnings"][name]
    rc, out, _ = run_cli(capsys, "--backend", "numpy", "--format", "json", *ADD_FEW)
    assert json.loads(out)["warnings"] == {}


def test_a_report_into_a_closed_pipe_ends_quietly() -> None:
    """`pyggml-conformance --mode list | head -1` ended in a BrokenPipeError traceback (issue 33): both entry points
    now end quietly, with status 141 as a tool killed by SIGPIPE."""
    bindir = os.path.dirname(sys.executable)
    for cmd in ([os.path.join(bindir, "pyggml-conformance")], [os.path.join(bindir, "pyggml"), "conformance"]):
        r, w = os.pipe()
        os.close(r)  # the reader is gone before the report is written
        try:
            p = subprocess.run([*cmd, "--mode", "list", "--op", "ARANGE"], stdout=w, stderr=subprocess.PIPE,
                               text=True, timeout=120)
        finally:
            os.close(w)
        assert p.stderr == "" and p.returncode == 141, (cmd, p.stderr)
