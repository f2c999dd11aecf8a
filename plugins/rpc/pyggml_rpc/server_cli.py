"""`pyggml rpc-server --device NAME [--host 127.0.0.1] [--port 50052] [--threads N] [--cache DIR]`."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from pyggml.backend.extensions import SET_N_THREADS, SetNThreads
from pyggml.backend.registry import get_device
from pyggml.errors import PyGGMLError
from pyggml_rpc.server import RPCServer, Served
from pyggml_rpc.wire import PROTO_VERSION

log = logging.getLogger("pyggml_rpc.server")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def build_served(names: Sequence[str], threads: int | None, memory_limit: int | None,
                 cache_dir: Path | None) -> Served:
    devices = [get_device(n) for n in names]
    backends = []
    for dev in devices:
        backend = dev.init_backend()
        ext = dev.reg.get_extension(SET_N_THREADS)
        if threads is not None and ext is not None:
            cast(SetNThreads, ext)(backend, threads)
        backends.append(backend)
    limit = memory_limit if memory_limit is not None else sum(d.memory()[0] for d in devices)
    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
    return Served(devices, backends, limit, cache_dir)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pyggml rpc-server", description="Serve pyggml devices over ggml's RPC "
                                f"protocol {'.'.join(map(str, PROTO_VERSION))} (llama.cpp's --rpc clients too).")
    p.add_argument("--device", "-d", action="append", required=True,
                   help="a pyggml device to serve (cpu, OpenCL0, Vulkan0, ...); repeat or comma-separate")
    p.add_argument("--host", "-H", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", "-p", type=int, default=50052, help="port (default 50052; 0 picks a free one)")
    p.add_argument("--threads", "-t", type=int, default=None, help="threads of CPU devices")
    p.add_argument("--max-memory", type=int, default=None,
                   help="bytes all clients may allocate together (default: the devices' free memory)")
    p.add_argument("--cache", "-c", type=Path, default=None,
                   help="directory where weights announced by hash are kept (ggml's SET_TENSOR_HASH)")
    p.add_argument("--log-level", default="INFO")
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    names = [n for d in args.device for n in d.split(",") if n]
    try:
        served = build_served(names, args.threads, args.max_memory, args.cache)
        server = RPCServer(served, args.host, args.port)
    except (PyGGMLError, OSError) as e:
        print(f"pyggml rpc-server: {e}", file=sys.stderr)
        return 1
    if args.host not in LOOPBACK:
        log.warning("listening on %s: ggml's RPC protocol has no authentication or encryption; anyone who can "
                    "reach this port can use these devices and read their memory", args.host)
    host, port = server.address
    print(f"pyggml rpc-server: protocol {'.'.join(map(str, PROTO_VERSION))}, listening on {host}:{port}",
          flush=True)
    for dev in served.devices:
        free, total = dev.memory()
        print(f"  {dev.name}: {dev.description} ({total >> 20} MiB, {free >> 20} MiB free)", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.shutdown())
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
