"""The full fuzzing campaign against `pyggml rpc-server`, as JSON: N mutated messages of every command (default
10,000) through `Session.handle` and, for a share of them and every HELLO, as bytes through the socket loop, then
the abusive clients (silent, truncating, trickling, claiming huge payloads, garbage, out of order) against a server
process while pyggml's client keeps computing on it.

Why: ggml's own server had out-of-bounds reads and writes from crafted messages; pyggml's must close a malformed
message's connection and nothing else. What counts as a bug, and how memory is watched (guard pages, sentinel
buffers in this client and another, the allocation count), is pyggml_rpc_testing.fuzz's docstring. The exit status is
1 when anything was found; the first findings are in the JSON.

    .venv/bin/python plugins/rpc/benchmarks/fuzz_server.py [--per-command 10000] [--seed 0] [--output fuzz.json]
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import platform
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from pyggml_rpc.wire import Cmd

from pyggml.backend.sysinfo import cpu_model
from pyggml_rpc_testing.abuse import TIMEOUT, GoodClient, run_scenarios, vm_peak_rss
from pyggml_rpc_testing.fuzz import Harness, bugs
from pyggml_testing.rpc_servers import start_pyggml_server, stop


def in_process(per_command: int, seed: int) -> dict[str, Any]:
    h = Harness(seed=seed)
    t0 = time.perf_counter()
    seconds = {}
    try:
        for cmd in Cmd:
            t = time.perf_counter()
            h.run(cmd, per_command)
            seconds[cmd.name] = round(time.perf_counter() - t, 2)
            print(f"{cmd.name}: {dict(h.outcomes[cmd.name])}", file=sys.stderr, flush=True)
    finally:
        h.close()
    total: Counter[str] = Counter()
    for c in h.outcomes.values():
        total.update(c)
    return {
        "cases": {name: sum(c.values()) for name, c in h.outcomes.items()},
        "outcomes": {name: dict(sorted(c.items())) for name, c in h.outcomes.items()},
        "outcomes_total": dict(sorted(total.items())),
        "total_cases": sum(total.values()),
        "bugs_found": bugs(h),
        "findings": [asdict(f) for f in h.findings[:10]],
        "seconds_per_command": seconds,
        "slowest_case_s": {name: round(v, 3) for name, v in h.slowest.items()},
        "elapsed_s": round(time.perf_counter() - t0, 1),
    }


def against_process(log: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYGGML_RPC_MESSAGE_TIMEOUT", str(TIMEOUT))
        proc, endpoint = start_pyggml_server("cpu", "--threads", "1", log=log)
    try:
        good = GoodClient(endpoint)
        good.start()
        peak = vm_peak_rss(proc.pid)
        results = run_scenarios(endpoint)
        good.stop.set()
        good.join(30)
        growth = vm_peak_rss(proc.pid) - peak
        alive = proc.poll() is None
    finally:
        stop(proc)
    text = log.read_text()
    failed = [k for k, v in results.items() if v != "ok"]
    return {
        "scenarios": results,
        "good_client": {"rounds": good.rounds, "errors": good.errors},
        "server_alive": alive,
        "server_peak_rss_growth_mb": round(growth / 2**20, 1),
        "unexpected_errors_logged": text.count("Traceback"),
        "bugs_found": len(failed) + len(good.errors) + (not alive) + text.count("Traceback"),
        "elapsed_s": round(time.perf_counter() - t0, 1),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-command", type=int, default=10_000, help="mutated messages per command (default 10000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", type=Path, default=None, help="also write the JSON here")
    p.add_argument("--server-log", type=Path, default=Path("/tmp/pyggml-rpc-fuzz-server.log"))
    args = p.parse_args()
    faulthandler.enable()
    t0 = time.perf_counter()
    report: dict[str, Any] = {"per_command": args.per_command, "seed": args.seed, "devices": ["cpu", "numpy"]}
    report["in_process"] = in_process(args.per_command, args.seed)
    report["socket"] = against_process(args.server_log)
    report["bugs_found"] = report["in_process"]["bugs_found"] + report["socket"]["bugs_found"]
    report["elapsed_s"] = round(time.perf_counter() - t0, 1)
    report["cpu"] = cpu_model()
    report["python"] = platform.python_version()
    text = json.dumps(report, indent=2)
    print(text)
    if args.output is not None:
        args.output.write_text(text + "\n")
    return 1 if report["bugs_found"] else 0


if __name__ == "__main__":
    sys.exit(main())
