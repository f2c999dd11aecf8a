"""The RPC registry when a server of PYGGML_RPC_SERVERS cannot be reached (issue 33, item 8): looking up its device
used to say only "no device named 'RPC0'; available: ...", the reason stayed in `unavailable_reason()`, and the
server list was read once per process, so a server briefly down stayed missing. Now the lookup's error names the
server and the reason, and a lookup that misses tries the unreached servers again (each at most once per
`retry_interval` seconds).

Each test has a hub of its own (numpy and this registry) and a real server on 127.0.0.1, on a daemon thread stopped
in a `finally`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pyggml_rpc.registry as rpc_registry
import pytest
from pyggml_rpc.registry import RemoteServer, RPCRegistry
from pyggml_rpc.server import RPCServer, Served

from pyggml.backend.registry import BackendHub, get_device
from pyggml.errors import PyGGMLError
from pyggml_testing.rpc_servers import free_port


@contextmanager
def server_on(port: int) -> Iterator[None]:
    dev = get_device("numpy")
    server = RPCServer(Served([dev], [dev.init_backend()], 1 << 24), "127.0.0.1", port)
    t = threading.Thread(target=server.serve_forever, daemon=True, name="test-rpc-server")
    t.start()
    try:
        yield
    finally:
        server.shutdown()
        t.join(5)


@pytest.fixture
def hub_with_unreachable_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[BackendHub, RPCRegistry, int]]:
    """A hub of numpy and an RPC registry whose one server (PYGGML_RPC_SERVERS) is not listening yet."""
    port = free_port()
    monkeypatch.setenv("PYGGML_RPC_SERVERS", f"127.0.0.1:{port}")
    monkeypatch.setenv("PYGGML_BACKENDS", "numpy")
    h = BackendHub()
    reg = RPCRegistry()
    h.register(reg, "pyggml-rpc")
    yield h, reg, port


def test_the_lookup_error_names_the_server_and_the_reason(
        hub_with_unreachable_server: tuple[BackendHub, RPCRegistry, int]) -> None:
    h, _, port = hub_with_unreachable_server
    with pytest.raises(PyGGMLError) as e:
        h.device("RPC0")
    assert str(e.value).startswith("no device named 'RPC0'; available: numpy; ")
    assert f"registry 'RPC': RPC server 127.0.0.1:{port}: cannot connect" in str(e.value)
    assert "refused" in str(e.value).lower()
    with pytest.raises(PyGGMLError, match=f"127.0.0.1:{port}: cannot connect"):
        h.device("rpc")  # the registry's own name too
    with pytest.raises(PyGGMLError) as other:
        h.device("Vulkan7")
    assert "RPC" not in str(other.value)  # only the registries the name belongs to


def test_a_server_back_up_is_found_by_the_next_lookup(
        hub_with_unreachable_server: tuple[BackendHub, RPCRegistry, int]) -> None:
    h, reg, port = hub_with_unreachable_server
    reg.retry_interval = 0.0
    with pytest.raises(PyGGMLError, match="cannot connect"):
        h.device("RPC0")
    with server_on(port):
        dev = h.device("RPC0")  # the server list was read once: RPC0 stayed missing before the fix
        assert dev.name == "RPC0" and dev.memory()[1] > 0
        assert [d.name for d in h.devices()] == ["numpy", "RPC0"]
        assert reg.unavailable_reason() is None


def test_retries_are_bounded(hub_with_unreachable_server: tuple[BackendHub, RPCRegistry, int],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Only names of the registry make it look again, each unreached server at most once per retry_interval."""
    h, reg, port = hub_with_unreachable_server
    tries: list[str] = []

    def counted(endpoint: str, timeout: float) -> RemoteServer:
        tries.append(endpoint)
        return RemoteServer(endpoint, timeout)

    monkeypatch.setattr(rpc_registry, "RemoteServer", counted)
    reg.retry_interval = 3600.0
    for name in ("RPC0", "RPC1", "numpy7", "cuda0"):
        with pytest.raises(PyGGMLError):
            h.device(name)
    assert tries == [f"127.0.0.1:{port}"]  # the first enumeration only
    reg.retry_interval = 0.0
    for name in ("RPC0", "RPC1", "numpy7"):
        with pytest.raises(PyGGMLError):
            h.device(name)
    assert len(tries) == 3  # once per lookup of an RPC name


def test_a_partly_reachable_list_names_the_missing_server(monkeypatch: pytest.MonkeyPatch) -> None:
    up, down = free_port(), free_port()
    monkeypatch.setenv("PYGGML_RPC_SERVERS", f"127.0.0.1:{down},127.0.0.1:{up}")
    monkeypatch.setenv("PYGGML_BACKENDS", "numpy")
    h = BackendHub()
    reg = RPCRegistry()
    reg.retry_interval = 3600.0
    h.register(reg, "pyggml-rpc")
    with server_on(up):
        assert h.device("RPC0").name == "RPC0"  # the reachable server's device
        with pytest.raises(PyGGMLError, match=rf"available: numpy, RPC0; registry 'RPC': RPC server 127.0.0.1:{down}"):
            h.device("RPC1")
        assert f"127.0.0.1:{down}" in (reg.unavailable_reason() or "")
