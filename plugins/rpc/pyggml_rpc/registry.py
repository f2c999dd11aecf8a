"""The RPC registry: remote servers and their devices.

`PYGGML_RPC_SERVERS=host:port,...` names servers at start-up; `get_registry("RPC").add_server("host:port")` adds
one later. Devices are numbered across servers in the order they were added: RPC0, RPC1, ... Each server gets one
connection (`Connection`), shared by its devices, buffers and backends (client.py).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from pyggml.backend.extensions import ADD_SERVER
from pyggml.backend.protocol import Device, Registry
from pyggml_rpc.client import RPCDevice
from pyggml_rpc.connection import Connection, RPCError
from pyggml_rpc.graph_codec import RPCGraphPlan
from pyggml_rpc.wire import U32, U64, Cmd


class RemoteServer:
    """One endpoint: its connection, device count and the graph each of its devices holds for GRAPH_RECOMPUTE."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.conn = Connection(endpoint)
        self.n_devices = U32.unpack(self.conn.call(Cmd.DEVICE_COUNT, b"", U32.size))[0]
        self.stored: dict[int, tuple[int, RPCGraphPlan]] = {}
        """device -> (connection generation, the plan whose graph the server keeps for that device)."""

    def query_u64(self, cmd: Cmd, device: int) -> int:
        return int(U64.unpack(self.conn.call(cmd, U32.pack(device), U64.size))[0])


class RPCRegistry(Registry):
    def __init__(self) -> None:
        super().__init__("RPC")
        self._lock = threading.Lock()
        self._devices: list[RPCDevice] = []
        self._servers: dict[str, RemoteServer] = {}
        self._errors: list[str] = []
        self._env_done = False

    def devices(self) -> Sequence[Device]:
        with self._lock:
            if not self._env_done:
                self._env_done = True
                for ep in filter(None, (e.strip() for e in os.environ.get("PYGGML_RPC_SERVERS", "").split(","))):
                    try:
                        self._add(ep)
                    except RPCError as e:
                        self._errors.append(str(e))
            return list(self._devices)

    def unavailable_reason(self) -> str | None:
        if self.devices():
            return None
        if self._errors:
            return "; ".join(self._errors)
        return "no RPC servers: set PYGGML_RPC_SERVERS=host:port,... or call get_registry('RPC').add_server()"

    def get_extension(self, name: str) -> object | None:
        return self.add_server if name == ADD_SERVER else None

    def add_server(self, endpoint: str) -> list[RPCDevice]:
        """Connect to a server and add its devices. Again for a known server: its devices, reconnected first if
        the connection was lost."""
        self.devices()
        with self._lock:
            devs = self._add(endpoint)
        from pyggml.backend.registry import hub

        hub().refresh(self.name)
        return devs

    def _add(self, endpoint: str) -> list[RPCDevice]:
        known = self._servers.get(endpoint)
        if known is not None:
            devs = [d for d in self._devices if d.server is known]
            if known.conn.broken is None:
                return devs
            # reconnect: the same devices (names, backends) over a new connection; buffers made on the lost one
            # stay unusable, as their memory is gone on the server
            server = RemoteServer(endpoint)
            if server.n_devices != len(devs):
                raise RPCError(f"RPC server {endpoint} now has {server.n_devices} devices, not {len(devs)}")
            self._servers[endpoint] = server
            for d in devs:
                d.server = server
            return devs
        server = RemoteServer(endpoint)
        self._servers[endpoint] = server
        devs = [RPCDevice(self, server, k, f"RPC{len(self._devices) + k}") for k in range(server.n_devices)]
        self._devices.extend(devs)
        return devs
