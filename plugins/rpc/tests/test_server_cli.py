"""`pyggml rpc-server` with bad options (issue 33, item 10): each is one error line and no traceback (`--port
99999` ended in `OverflowError: bind(): port must be 0-65535`); a server whose stdout reader has gone ends quietly.
Every run is a process of its own, bounded in time."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pyggml.cli import SIGPIPE_STATUS

WAIT = 60.0


def rpc_server(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pyggml.cli", "rpc-server", *args], capture_output=True, text=True,
                          timeout=WAIT)


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if "error" in line]


@pytest.mark.parametrize(("args", "says"), [
    (["--port", "99999"], "argument --port/-p: 99999 is not in 0..65535"),
    (["--port", "-1"], "argument --port/-p: -1 is not in 0..65535"),
    (["--port", "http"], "argument --port/-p: 'http' is not an integer"),
    (["--threads", "0"], "argument --threads/-t: 0 is less than 1"),
    (["--max-memory", "-5"], "argument --max-memory: -5 is less than 0"),
    (["--max-clients", "0"], "argument --max-clients: 0 is less than 1"),
    (["--idle-timeout", "-1"], "argument --idle-timeout: -1 is not a finite number of seconds >= 0"),
    (["--idle-timeout", "inf"], "argument --idle-timeout: inf is not a finite number of seconds >= 0"),
    (["--log-level", "loud"], "argument --log-level: invalid choice: 'LOUD'"),
])
def test_a_bad_option_is_one_usage_error(args: list[str], says: str) -> None:
    done = rpc_server("--device", "numpy", *args)
    assert done.returncode == 2
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"pyggml rpc-server: error: {says}"), done.stderr


def test_what_the_program_cannot_do_is_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        for args, says in [(["--device", "nosuch"], "no device named 'nosuch'"),
                           (["--device", "numpy", "--port", port], f"cannot listen on 127.0.0.1:{port}: Address "
                                                                    "already in use"),
                           (["--device", "numpy", "--host", "256.0.0.1", "--port", "0"],
                            "cannot listen on 256.0.0.1:0"),
                           (["--device", "numpy", "--cache", str(tmp_path / "file" / "sub")], "file/sub")]:
            done = rpc_server(*args)
            assert done.returncode == 1, (args, done.stderr)
            lines = [ln for ln in done.stderr.splitlines() if " WARNING " not in ln]  # plugins may log warnings
            assert len(lines) == 1 and lines[0].startswith("pyggml rpc-server: error: "), (args, done.stderr)
            assert says in lines[0], (args, lines)


def test_a_server_whose_stdout_reader_left_ends_quietly() -> None:
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the server says where it listens
    try:
        done = subprocess.run([sys.executable, "-m", "pyggml.cli", "rpc-server", "--device", "numpy", "--port", "0"],
                              stdout=w, stderr=subprocess.PIPE, text=True, timeout=WAIT)
    finally:
        os.close(w)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == SIGPIPE_STATUS
