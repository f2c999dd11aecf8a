"""Starting and stopping RPC servers for tests and CI scripts: llama.cpp's `ggml-rpc-server` (built by `make
llama-cpp-ref`) and `pyggml rpc-server`, each on 127.0.0.1 at a free port it picks."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyggml_testing.llama_cpp_ref import rpc_tool


class NotBuilt(RuntimeError):
    """llama.cpp's server is not built here."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_ggml_server(threads: int = 1) -> tuple[subprocess.Popen[bytes], str]:
    exe = rpc_tool("ggml-rpc-server")
    if exe is None:
        raise NotBuilt("llama.cpp's ggml-rpc-server is not built (make llama-cpp-ref)")
    port = free_port()
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port), "-t", str(threads)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port, proc)
    return proc, f"127.0.0.1:{port}"


def start_pyggml_server(device: str, *extra: str, log: Path | None = None) -> tuple[subprocess.Popen[bytes], str]:
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([sys.executable, "-m", "pyggml.cli", "rpc-server", "--device", device, "--port", "0",
                             *extra], stdout=subprocess.PIPE, stderr=out, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    m = re.search(r"listening on ([\d.]+):(\d+)", line)
    if m is None:
        stop(proc)
        raise RuntimeError(f"pyggml rpc-server did not start: {line!r}")
    return proc, f"{m.group(1)}:{m.group(2)}"


@contextmanager
def serving(kind: str, log: Path | None = None) -> Iterator[str]:
    """The endpoint of a server started now and stopped on leaving, also when the body raised: llama.cpp's for
    kind "ggml" (NotBuilt where it is not built), else `pyggml rpc-server --device kind` (its stderr into `log`).
    A server that had ended by itself before the body was done is an error (RuntimeError): a client killed it."""
    proc, endpoint = start_ggml_server() if kind == "ggml" else start_pyggml_server(kind, log=log)
    try:
        yield endpoint
    finally:
        ended = proc.poll()
        stop(proc)
    if ended is not None:
        raise RuntimeError(f"the {kind} RPC server at {endpoint} had ended by itself (status {ended})")
