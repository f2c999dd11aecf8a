"""The RPC registry: remote servers and their devices.

`PYGGML_RPC_SERVERS=host:port,...` (`RPCOptions.servers`, read when the devices are first listed) names servers;
`get_registry("RPC").add_server("host:port")` adds one later. Devices are numbered across servers in the order they
were added: RPC0, RPC1, ... Each server gets one connection (`Connection`, with `RPCOptions.timeout`), shared by its
devices, buffers and backends (client.py).

A server of PYGGML_RPC_SERVERS that cannot be reached is remembered with the reason (`unavailable_reason()`, which
the hub's "no device named" error shows) and tried again when a device lookup misses (the `rescan_devices`
extension: only those servers, each at most once per `retry_interval` seconds), so one that was briefly down joins
when it is back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from pyggml.backend.extensions import ADD_SERVER, RESCAN_DEVICES
from pyggml.backend.protocol import Device, Registry
from pyggml_rpc.client import RPCDevice
from pyggml_rpc.connection import Connection, RPCError
from pyggml_rpc.graph_codec import RPCGraphPlan
from pyggml_rpc.options import DEFAULT_TIMEOUT, RPCOptions
from pyggml_rpc.wire import U32, U64, Cmd


class RemoteServer:
    """One endpoint: its connection, device count and the graph each of its devices holds for GRAPH_RECOMPUTE."""

    def __init__(self, endpoint: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.endpoint = endpoint
        self.conn = Connection(endpoint, timeout)
        self.n_devices = U32.unpack(self.conn.call(Cmd.DEVICE_COUNT, b"", U32.size))[0]
        self.stored: dict[int, tuple[int, RPCGraphPlan]] = {}
        """device -> (connection generation, the plan whose graph the server keeps for that device)."""

    def query_u64(self, cmd: Cmd, device: int) -> int:
        return int(U64.unpack(self.conn.call(cmd, U32.pack(device), U64.size))[0])


RETRY_INTERVAL = 1.0
"""Seconds before an unreached server of PYGGML_RPC_SERVERS is tried again (`rescan`)."""


class RPCRegistry(Registry[RPCOptions]):
    name = "RPC"
    options_type = RPCOptions

    def __init__(self, options: RPCOptions | None = None) -> None:
        super().__init__(options=options)
        self._lock = threading.Lock()
        self._devices: list[RPCDevice] = []
        self._servers: dict[str, RemoteServer] = {}
        self._unreached: dict[str, tuple[str, float]] = {}
        """Servers of PYGGML_RPC_SERVERS not connected yet: endpoint -> (why, time.monotonic() of the last try)."""
        self._env_done = False
        self.retry_interval = RETRY_INTERVAL

    def devices(self) -> Sequence[Device]:
        with self._lock:
            if not self._env_done:
                servers = self.options().servers  # a bad variable raises here, and again on the next call
                self._env_done = True
                for ep in servers:
                    self._try(ep)
            return list(self._devices)

    def unavailable_reason(self) -> str | None:
        """Why devices are missing: the servers that could not be reached and why (also while other servers'
        devices are here, so a lookup of a missing device says which server it waits for); None when every server
        answered."""
        devices = self.devices()
        with self._lock:
            if self._unreached:
                return "; ".join(why for why, _ in self._unreached.values())
        if devices:
            return None
        return "no RPC servers: set PYGGML_RPC_SERVERS=host:port,... or call get_registry('RPC').add_server()"

    def get_extension(self, name: str) -> object | None:
        if name == ADD_SERVER:
            return self.add_server
        return self.rescan if name == RESCAN_DEVICES else None

    def rescan(self) -> bool:
        """Try again the servers of PYGGML_RPC_SERVERS that could not be reached, those not tried within
        `retry_interval` seconds; True when one answered (its devices were added). The hub calls this when a device
        lookup misses (the `rescan_devices` extension), then enumerates the registry again."""
        self.devices()
        with self._lock:
            now = time.monotonic()
            due = [ep for ep, (_, tried) in self._unreached.items() if now - tried >= self.retry_interval]
            reached = [ep for ep in due if self._try(ep)]  # every due one is tried
            return bool(reached)

    def _try(self, endpoint: str) -> bool:
        """Connect to a server of PYGGML_RPC_SERVERS (lock held); a failure is remembered for `rescan`."""
        try:
            self._add(endpoint)
        except RPCError as e:
            self._unreached[endpoint] = (str(e), time.monotonic())
            return False
        return True

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
            server = RemoteServer(endpoint, self.options().timeout)
            if server.n_devices != len(devs):
                raise RPCError(f"RPC server {endpoint} now has {server.n_devices} devices, not {len(devs)}")
            self._servers[endpoint] = server
            for d in devs:
                d.server = server
            return devs
        server = RemoteServer(endpoint, self.options().timeout)
        self._servers[endpoint] = server
        self._unreached.pop(endpoint, None)
        devs = [RPCDevice(self, server, k, f"RPC{len(self._devices) + k}") for k in range(server.n_devices)]
        self._devices.extend(devs)
        return devs
