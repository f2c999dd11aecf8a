"""The RPC plugin's options: the servers and the client timeout read when the registry first lists its devices,
a bad value named with its variable, and the server's message timeout read when `pyggml rpc-server` starts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pyggml_rpc.options import RPCOptions
from pyggml_rpc.registry import RPCRegistry

from pyggml.errors import OptionError
from pyggml_testing.rpc_servers import free_port


def test_a_bad_timeout_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"^PYGGML_RPC_TIMEOUT='abc': not a number of seconds \(RPC option timeout\)"):
        RPCOptions.from_env({"PYGGML_RPC_TIMEOUT": "abc"})
    monkeypatch.setenv("PYGGML_RPC_TIMEOUT", "abc")
    monkeypatch.setenv("PYGGML_RPC_SERVERS", "127.0.0.1:1")
    reg = RPCRegistry()
    for _ in range(2):  # still named on the next look, never an empty list
        with pytest.raises(OptionError, match="PYGGML_RPC_TIMEOUT='abc'"):
            reg.devices()
    with pytest.raises(OptionError, match="PYGGML_RPC_MESSAGE_TIMEOUT='-1': must be a positive number of seconds"):
        RPCOptions.from_env({"PYGGML_RPC_MESSAGE_TIMEOUT": "-1"})


def test_servers_and_timeout_given_in_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYGGML_RPC_SERVERS", "not read")
    port = free_port()
    reg = RPCRegistry(RPCOptions(servers=(f"127.0.0.1:{port}",), timeout=0.5))
    assert reg.devices() == []
    why = reg.unavailable_reason()
    assert why is not None and f"RPC server 127.0.0.1:{port}: cannot connect" in why
    assert RPCOptions.from_env({"PYGGML_RPC_SERVERS": " a:1, b:2 ,"}).servers == ("a:1", "b:2")


def test_the_server_reads_its_message_timeout_when_it_starts() -> None:
    env = {**os.environ, "PYGGML_RPC_MESSAGE_TIMEOUT": "soon", "PYGGML_BACKENDS": "numpy"}
    done = subprocess.run([sys.executable, "-m", "pyggml.cli", "rpc-server", "--device", "numpy", "--port", "0"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert ("pyggml rpc-server: error: PYGGML_RPC_MESSAGE_TIMEOUT='soon': not a number of seconds (RPC option "
            "message_timeout)") in done.stderr
