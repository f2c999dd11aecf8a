"""Run the conformance suite (or `--op` / `--params` subsets) on llama.cpp's `ggml-rpc-server` and report JSON.

Why: ggml's CPU backend, behind the RPC server, aborts the whole server process on a node its kernels lack, and the
RPC protocol cannot ask what it supports; `pyggml_rpc.ggml_support.ggml_cpu_runs` is the client's answer. This
script is its check: every case the predicate accepts must pass, none may crash the server, the rest must be
"unsupported". `--unfiltered` sends every case `opcodes` can express (the predicate off) and tells, per case, what
the predicate would have said, which shows both directions: refused cases that ggml passes (the predicate is
narrower than needed) and accepted ones that fail or crash (it is too broad).

Cases run one at a time in this process through the conformance runner's `compare_case` (numpy reference). A server
that dies is restarted on a fresh free port; since a broken RPC connection stays broken, each server gets a fresh
`RPCRegistry` and device (never the hub's RPC registry, so PYGGML_RPC_SERVERS is ignored). The case running when
the server died is reported as a crash with the tail of the server's log (ggml's abort message).

    PYGGML_LLAMA_RPC_DIR=/tmp/rpcbuild/bin .venv/bin/python plugins/rpc/benchmarks/ggml_sweep.py --output sweep.json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pyggml_rpc.client as rpc_client
from pyggml_rpc import opcodes
from pyggml_rpc.ggml_support import ggml_cpu_runs
from pyggml_rpc.registry import RPCRegistry

from pyggml.backend.sysinfo import cpu_model
from pyggml_conformance.case import Case
from pyggml_conformance.runner import REFERENCE, CaseResult, Status, Target, compare_case, open_target, realize
from pyggml_conformance.suite import Options, load_cases
from pyggml_testing.llama_cpp_ref import rpc_tool
from pyggml_testing.rpc_servers import free_port, stop

CRASH = "crash"
LOG_TAIL = 1500



@dataclass
class Server:
    """One ggml-rpc-server process on 127.0.0.1, its log in a temporary file."""

    exe: Path
    threads: int
    proc: subprocess.Popen[bytes] | None = None
    endpoint: str = ""
    log: IO[bytes] | None = None
    starts: int = 0
    target: Target | None = field(default=None, repr=False)

    def start(self) -> Target:
        self.stop()
        port = free_port()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen([str(self.exe), "-H", "127.0.0.1", "-p", str(port), "-t", str(self.threads)],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "GGML_NO_BACKTRACE": "1"})  # the abort line, no gdb
        self.endpoint = f"127.0.0.1:{port}"
        self.starts += 1
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ggml-rpc-server exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nothing listens on {self.endpoint} after 60 s") from None
                time.sleep(0.05)
        dev = RPCRegistry().add_server(self.endpoint)[0]  # a fresh registry: a fresh connection
        self.target = Target(dev.name, dev)
        return self.target

    def died(self, wait: float) -> bool:
        """Whether the process has exited (waiting up to `wait` s: an abort closes the socket before it exits)."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            return False
        return True

    def log_tail(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        text = self.log.read().decode(errors="replace")
        lines = text.splitlines()
        banner_end = max((i for i, ln in enumerate(lines) if ln.strip().startswith("transport")), default=-1)
        return "\n".join(ln for ln in lines[banner_end + 1:] if ln.strip())[-LOG_TAIL:]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop(self.proc)
        self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None


def predicate_accepts(case: Case) -> bool | None:
    """Whether the client (opcodes + ggml_cpu_runs) would send every node of the case; None if it does not build."""
    try:
        graph = realize(case).graph
    except Exception:
        return None
    return all(opcodes.supported(n) and ggml_cpu_runs(n) for n in graph.nodes)


@dataclass
class Sweep:
    server: Server
    seed: int
    unfiltered: bool
    results: list[dict[str, Any]] = field(default_factory=list)

    def run(self, cases: list[Case], progress: bool) -> None:
        reference = open_target(REFERENCE)
        target = self.server.start()
        t0 = time.monotonic()
        for i, case in enumerate(cases):
            res = compare_case(case, [target], reference, self.seed)[0]
            row = self._row(case, res)
            conn = target.device.server.conn  # type: ignore[attr-defined]
            broken = conn.broken is not None or (res.status is Status.FAIL and "RPC server" in (res.error or ""))
            if self.server.died(5.0 if broken else 0.0):
                row["status"] = CRASH
                row["exit_code"] = self.server.proc.returncode if self.server.proc else None
                row["server_log"] = self.server.log_tail()
                target = self.server.start()
            elif broken:  # the server closed the connection or stalled: start afresh
                target = self.server.start()
            self.results.append(row)
            if progress and (i + 1) % 500 == 0:
                print(f"{i + 1}/{len(cases)} cases, {time.monotonic() - t0:.0f} s, "
                      f"{self.server.starts - 1} restarts", file=sys.stderr, flush=True)
        self.server.stop()

    def _row(self, case: Case, res: CaseResult) -> dict[str, Any]:
        row: dict[str, Any] = {"name": case.name, "op": case.op.name if case.sub is None else case.sub,
                               "status": res.status.value}
        if res.status is Status.FAIL:
            row.update(nmse=res.nmse, threshold=res.threshold, error=res.error)
        if self.unfiltered:
            row["accepted"] = predicate_accepts(case)
        return row


def summarise(rows: list[dict[str, Any]], unfiltered: bool, list_unsupported: bool) -> dict[str, Any]:
    totals = Counter(r["status"] for r in rows)
    by_op: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        by_op[r["op"]][r["status"]] += 1
    keep = ("name", "nmse", "threshold", "error", "exit_code", "server_log")
    out: dict[str, Any] = {
        "totals": {s: totals.get(s, 0) for s in ("pass", "fail", "unsupported", "skip", CRASH)},
        "by_op": {op: dict(c) for op, c in sorted(by_op.items())},
        "fails": [{k: r[k] for k in keep if k in r} for r in rows if r["status"] == "fail"],
        "crashes": [{k: r[k] for k in keep if k in r} for r in rows if r["status"] == CRASH],
    }
    if list_unsupported:
        out["unsupported"] = [r["name"] for r in rows if r["status"] == "unsupported"]
    if unfiltered:
        out["predicate"] = {
            "accepted": sum(1 for r in rows if r.get("accepted")),
            "accepted_but_failed": [r["name"] for r in rows if r.get("accepted") and r["status"] == "fail"],
            "accepted_but_crashed": [r["name"] for r in rows if r.get("accepted") and r["status"] == CRASH],
            "refused_but_passed": [r["name"] for r in rows if r.get("accepted") is False and r["status"] == "pass"],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--op", "-o", action="append", metavar="OPS", help="only these ops (comma-separated)")
    p.add_argument("--params", "-p", metavar="REGEX", help="only cases whose params match REGEX")
    p.add_argument("--threads", "-t", type=int, default=1, help="server threads (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--unfiltered", action="store_true",
                   help="send every case opcodes can express (ggml_cpu_runs off) and report what it would say")
    p.add_argument("--list-unsupported", action="store_true", help="list the unsupported cases by name")
    p.add_argument("--output", metavar="PATH", help="write the JSON here instead of stdout")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    args = p.parse_args(argv)

    exe = rpc_tool("ggml-rpc-server")
    if exe is None:
        print("ggml-rpc-server not found: build it (make llama-cpp-ref) or set PYGGML_LLAMA_RPC_DIR",
              file=sys.stderr)
        return 2
    os.environ.pop("PYGGML_RPC_SERVERS", None)
    os.environ.setdefault("PYGGML_RPC_TIMEOUT", "60")
    if args.unfiltered:
        vars(rpc_client)["ggml_cpu_runs"] = lambda node: True  # what client.supports_op calls
    cases = load_cases(Options(ops=args.op, params=args.params))
    sweep = Sweep(Server(exe, args.threads), args.seed, args.unfiltered)
    t0 = time.monotonic()
    try:
        sweep.run(cases, not args.quiet)
    finally:
        sweep.server.stop()
    report = {"cpu": cpu_model(), "server": str(exe), "threads": args.threads, "unfiltered": args.unfiltered,
              "cases": len(cases), "seconds": round(time.monotonic() - t0, 1), "server_starts": sweep.server.starts,
              **summarise(sweep.results, args.unfiltered, args.list_unsupported)}
    text = json.dumps(report, indent=1)
    if args.output:
        Path(args.output).write_text(text + "\n")
        print(json.dumps({k: report[k] for k in ("cpu", "cases", "seconds", "server_starts", "totals")}))
    else:
        print(text)
    return 0 if not report["fails"] and not report["crashes"] else 1


if __name__ == "__main__":
    sys.exit(main())
