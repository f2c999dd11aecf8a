"""The op conformance suite through RPC servers, for `make test`: llama.cpp's ggml-rpc-server (ggml's CPU backend
behind it) and `pyggml rpc-server` for each named device, started on free 127.0.0.1 ports and stopped at the end.
llama.cpp's server serves one client at a time, so it runs as one server per core (two at most), each taking its
part of the cases (`--shard`) at once; pyggml's serves a client per connection and takes `--jobs 2`.

    python plugins/rpc/tests/conformance_rpc.py [--pyggml-device cpu --pyggml-device OpenCL0] [--no-ggml] [ARGS]

ARGS go to `pyggml conformance` (e.g. --op MUL_MAT). Exits non-zero when a case fails; a server that cannot be
started (llama.cpp's not built, a device absent) is reported and skipped.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from pyggml_testing.rpc_servers import NotBuilt, start_ggml_server, start_pyggml_server, stop

GGML_PARAMS = r"^(?!.*edge=(special|long))"
"""Cases run through llama.cpp's server: all but the edge family's NaN/infinity and 2^23+-element rows. ggml's CPU
orders NaN and infinities otherwise in ARGMAX/ARGSORT/TOP_K, lets a NaN activation through a quantised MUL_MAT
differently and loses ARGMAX indices past 2^23; the values are data, which a client cannot look at before sending
(docs/rpc.md lists these differences)."""


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pyggml-device", action="append", default=None, help="serve this device (default: cpu)")
    p.add_argument("--no-ggml", action="store_true", help="leave out llama.cpp's ggml-rpc-server")
    args, rest = p.parse_known_args(argv)
    procs = []
    runs: list[list[tuple[str, list[str]]]] = []
    """Runs at once: (endpoint, extra conformance arguments) per server."""
    try:
        if not args.no_ggml:
            try:
                shards = min(2, os.cpu_count() or 1)
                group = []
                for i in range(1, shards + 1):
                    proc, ep = start_ggml_server()
                    procs.append(proc)
                    group.append((ep, ["--params", GGML_PARAMS, "--shard", f"{i}/{shards}"]))
                    print(f"ggml-rpc-server at {ep} (part {i} of {shards})", flush=True)
                runs.append(group)
            except NotBuilt as e:
                print(f"skipping llama.cpp's server: {e}", flush=True)
        for dev in args.pyggml_device or ["cpu"]:
            try:
                proc, ep = start_pyggml_server(dev)
            except RuntimeError as e:
                print(f"skipping pyggml rpc-server --device {dev}: {e}", flush=True)
                continue
            procs.append(proc)
            runs.append([(ep, ["--jobs", "2"])])  # pyggml's server serves clients at once (ggml's one at a time)
            print(f"pyggml rpc-server --device {dev} at {ep}", flush=True)
        if not runs:
            print("no RPC server could be started", file=sys.stderr)
            return 1
        status = 0
        for group in runs:
            clients = []
            for ep, extra in group:
                env = {**os.environ, "PYGGML_RPC_SERVERS": ep}
                cmd = [sys.executable, "-m", "pyggml.cli", "conformance", "--mode", "test", "--format", "console",
                       "--backend", "RPC0", *extra, *rest]
                print(f"== conformance through {ep} {' '.join(extra)}", flush=True)
                clients.append(subprocess.Popen(cmd, env=env))
            for client in clients:
                status |= client.wait()
        return status
    finally:
        for proc in procs:
            stop(proc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
