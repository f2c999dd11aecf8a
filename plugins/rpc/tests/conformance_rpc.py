"""The op conformance suite through RPC servers, for `make test`: llama.cpp's ggml-rpc-server (ggml's CPU backend
behind it) and `pyggml rpc-server` for each named device, started on free 127.0.0.1 ports and stopped at the end.

    python plugins/rpc/tests/conformance_rpc.py [--pyggml-device cpu --pyggml-device OpenCL0] [--no-ggml] [ARGS]

ARGS go to `pyggml conformance` (e.g. --op MUL_MAT). Exits non-zero when a case fails; a server that cannot be
started (llama.cpp's not built, a device absent) is reported and skipped.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from servers import NotBuilt, start_ggml_server, start_pyggml_server, stop


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pyggml-device", action="append", default=None, help="serve this device (default: cpu)")
    p.add_argument("--no-ggml", action="store_true", help="leave out llama.cpp's ggml-rpc-server")
    args, rest = p.parse_known_args(argv)
    procs = []
    endpoints: list[str] = []
    try:
        if not args.no_ggml:
            try:
                proc, ep = start_ggml_server()
                procs.append(proc)
                endpoints.append(ep)
                print(f"ggml-rpc-server at {ep}", flush=True)
            except NotBuilt as e:
                print(f"skipping llama.cpp's server: {e}", flush=True)
        for dev in args.pyggml_device or ["cpu"]:
            try:
                proc, ep = start_pyggml_server(dev)
            except RuntimeError as e:
                print(f"skipping pyggml rpc-server --device {dev}: {e}", flush=True)
                continue
            procs.append(proc)
            endpoints.append(ep)
            print(f"pyggml rpc-server --device {dev} at {ep}", flush=True)
        if not endpoints:
            print("no RPC server could be started", file=sys.stderr)
            return 1
        env = {**os.environ, "PYGGML_RPC_SERVERS": ",".join(endpoints)}
        backends = [f"RPC{i}" for i in range(len(endpoints))]
        cmd = [sys.executable, "-m", "pyggml.cli", "conformance", "--mode", "test", "--format", "console",
               "--backend", *backends, *rest]
        return subprocess.run(cmd, env=env, check=False).returncode
    finally:
        for proc in procs:
            stop(proc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
