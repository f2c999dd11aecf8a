"""The `pyggml` command at its edges (issue 33, item 10): output into a pipe whose reader has gone ends quietly, as
Unix tools end (it was a BrokenPipeError traceback: `pyggml devices --json | head -3`), and a failure the program
can name is one line `pyggml CMD: error: ...`."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from pathlib import Path

from pyggml.cli import SIGPIPE_STATUS

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
"""Linux's fcntl that sets a pipe's capacity (Python has the name from 3.10 on Linux)."""
WAIT = 120.0


def _pyggml(*args: str) -> list[str]:
    return [sys.executable, "-m", "pyggml.cli", *args]


def test_output_into_a_pipe_closed_after_one_line_ends_quietly() -> None:
    """`pyggml devices --json` into a reader that closes after one line. The pipe holds one page, so the JSON of
    the installed devices (some 5 KB with every plugin) does not fit and the writer still has bytes to write."""
    r, w = os.pipe()
    with contextlib.suppress(OSError):  # a bigger pipe: the test below still meets the writer
        fcntl.fcntl(r, F_SETPIPE_SZ, 4096)
    proc = subprocess.Popen(_pyggml("devices", "--json"), stdout=w, stderr=subprocess.PIPE)
    os.close(w)
    with os.fdopen(r, "rb") as reader:
        assert reader.readline().startswith(b"[")
    _, err = proc.communicate(timeout=WAIT)
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()  # (plugins may log warnings)
    assert proc.returncode in (0, SIGPIPE_STATUS)  # 0 when everything fit in the pipe before the reader left


def test_a_closed_pipe_before_anything_is_status_141() -> None:
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the command writes
    try:
        done = subprocess.run(_pyggml("plugins"), stdout=w, stderr=subprocess.PIPE, timeout=WAIT)
    finally:
        os.close(w)
    assert b"Traceback" not in done.stderr and b"BrokenPipe" not in done.stderr, done.stderr.decode()
    assert done.returncode == SIGPIPE_STATUS


def test_a_graph_that_cannot_be_written_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "one_graph.py").write_text(
        "from pyggml import Context, ops\n"
        "from pyggml.types import GGMLType\n"
        "def graph():\n"
        "    a = Context(no_alloc=True).new_tensor(GGMLType.F32, 4, name='a')\n"
        "    return ops.add(a, a)\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(_pyggml("graph", "one_graph:graph", "-o", str(tmp_path / "no" / "such" / "g.dot")),
                          capture_output=True, text=True, env=env, timeout=WAIT)
    assert done.returncode == 1
    assert done.stderr.startswith("pyggml graph: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "g.dot" in done.stderr
