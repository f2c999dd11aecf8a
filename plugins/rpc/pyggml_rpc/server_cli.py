"""`pyggml rpc-server --device NAME [--host 127.0.0.1] [--port 50052] [--threads N] [--cache DIR]
[--max-clients 64] [--idle-timeout 300]`.

A bad option is argparse's one-line usage error (status 2); a device that cannot be served or an address that
cannot be bound is one line `pyggml rpc-server: error: ...` (status 1)."""

from __future__ import annotations

import argparse
import logging
import math
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

from pyggml.backend.extensions import SET_N_THREADS, SetNThreads
from pyggml.backend.registry import get_device
from pyggml.cli import run_command
from pyggml.errors import PyGGMLError
from pyggml_rpc.options import RPCOptions
from pyggml_rpc.server import IDLE_TIMEOUT, MAX_CLIENTS, RPCServer, Served
from pyggml_rpc.wire import PROTO_VERSION

log = logging.getLogger("pyggml_rpc.server")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
PROG = "pyggml rpc-server"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high] (no upper bound when high is None)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if v < low or (high is not None and v > high):
            raise argparse.ArgumentTypeError(f"{v} is not in {low}..{high}" if high is not None else
                                             f"{v} is less than {low}")
        return v

    return parse


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds >= 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number of seconds >= 0")
    return v


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Serve pyggml devices over ggml's RPC "
                                f"protocol {'.'.join(map(str, PROTO_VERSION))} (llama.cpp's --rpc clients too).")
    p.add_argument("--device", "-d", action="append", required=True,
                   help="a pyggml device to serve (cpu, OpenCL0, Vulkan0, ...); repeat or comma-separate")
    p.add_argument("--host", "-H", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", "-p", type=int_in(0, 65535), default=50052,
                   help="port (default 50052; 0 picks a free one)")
    p.add_argument("--threads", "-t", type=int_in(1), default=None, help="threads of CPU devices")
    p.add_argument("--max-memory", type=int_in(0), default=None,
                   help="bytes all clients may allocate together (default: the devices' free memory)")
    p.add_argument("--cache", "-c", type=Path, default=None,
                   help="directory where weights announced by hash are kept (ggml's SET_TENSOR_HASH)")
    p.add_argument("--max-clients", type=int_in(1), default=MAX_CLIENTS,
                   help=f"connections served at once (default {MAX_CLIENTS}); when all are taken, a new client "
                        "replaces the one idle the longest, one holding no buffers first")
    p.add_argument("--idle-timeout", type=seconds, default=IDLE_TIMEOUT, metavar="SECONDS",
                   help=f"close a connection holding no buffers after this long without a message (default "
                        f"{IDLE_TIMEOUT:g}; 0: never)")
    p.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(message)s")
    names = [n for d in args.device for n in d.split(",") if n]
    if not names:
        print(f"{PROG}: error: --device names no device", file=sys.stderr)
        return 2
    try:
        opts = RPCOptions.from_env()  # the server's edge: PYGGML_RPC_MESSAGE_TIMEOUT, read once
        served = build_served(names, args.threads, args.max_memory, args.cache)
    except (PyGGMLError, OSError, ValueError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    try:
        server = RPCServer(served, args.host, args.port, max_clients=args.max_clients,
                           idle_timeout=args.idle_timeout, message_timeout=opts.message_timeout)
    except OSError as e:
        print(f"{PROG}: error: cannot listen on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return 1
    if args.host not in LOOPBACK:
        log.warning("listening on %s: ggml's RPC protocol has no authentication or encryption; anyone who can "
                    "reach this port can use these devices and read their memory", args.host)
    host, port = server.address
    signal.signal(signal.SIGTERM, lambda *_: server.shutdown())
    try:
        print(f"{PROG}: protocol {'.'.join(map(str, PROTO_VERSION))}, listening on {host}:{port}", flush=True)
        for dev in served.devices:
            free, total = dev.memory()
            print(f"  {dev.name}: {dev.description} ({total >> 20} MiB, {free >> 20} MiB free)", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
