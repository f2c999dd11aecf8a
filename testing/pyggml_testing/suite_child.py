"""Conformance cases run in child processes (`pyggml conformance --mode test --format jsonl`), for tests whose
cases may crash the interpreter (the lifetime and concurrency scenarios): a case that kills its process (a
segfault, an abort) or hangs fails with that said, and never takes the pytest run with it.

One child runs every case named; when it dies or stops reporting, the case it was running fails with how it ended
and the cases after it run in a new child, so the others still get their results."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyggml_conformance.case import Case

TIMEOUT_S = 300.0
"""How long one child may run before it counts as hung."""
CLI: tuple[str, ...] = (sys.executable, "-m", "pyggml.cli")
"""How a child starts pyggml's command line (a test may run a wrapper that breaks a case on purpose)."""


@dataclass(frozen=True)
class ChildResult:
    """One case's outcome on one backend: the suite's status ('pass', 'fail', 'skip', 'unsupported') and its
    message."""

    status: str
    error: str | None = None


class BackendAbsent(Exception):
    """The child found no such backend here (no hardware, no server): the reason it gave."""


def _params_regex(cases: Sequence[Case]) -> str:
    return "^(?:" + "|".join(re.escape(c.params) for c in cases) + ")$"


def _died(rc: int) -> str:
    if rc < 0:
        try:
            return f"the process died of {signal.Signals(-rc).name}"
        except ValueError:
            return f"the process died of signal {-rc}"
    return f"the process exited with status {rc} before reporting"


def _child(backend: str, cases: Sequence[Case], env: Mapping[str, str], timeout: float, cli: Sequence[str]
           ) -> tuple[dict[str, ChildResult], str | None]:
    """Run `cases` on `backend` in one child: the results it reported, and why it stopped early (None: it did
    not). BackendAbsent when the child says there is no such backend."""
    cmd = [*cli, "conformance", "--mode", "test", "--format", "jsonl",
           "--backend", backend, "--params", _params_regex(cases)]
    try:
        proc = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout,
                              check=False)
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
        stopped = None if rc in (0, 1) else _died(rc)
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        rc, stopped = -1, f"the process did not finish in {timeout:g} s (a hang?)"
    if rc == 2 and "no backend named" in stderr:
        raise BackendAbsent(stderr.strip().splitlines()[-1])
    results: dict[str, ChildResult] = {}
    for line in stdout.splitlines():
        try:
            rec: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError:
            continue
        results[str(rec["name"])] = ChildResult(str(rec["status"]), rec.get("error"))
    if stopped is not None:
        tail = stderr.strip().splitlines()[-3:]
        stopped += f" (stderr: {' | '.join(tail)})" if tail else ""
    elif len(results) < len(cases):
        stopped = f"the process reported {len(results)} of {len(cases)} cases (stderr: {stderr.strip()[-500:]})"
    return results, stopped


def run_cases(backend: str, cases: Sequence[Case], env: Mapping[str, str] | None = None,
              timeout: float = TIMEOUT_S, cli: Sequence[str] = CLI) -> dict[str, ChildResult]:
    """Each case's result on `backend` by case name, run in child processes with `env` added to this process's
    environment. `cases` come in the suite's order (`pyggml_conformance.cases.select(all_cases(), ...)`), the
    order a child runs them in: when a child dies or hangs, the first case it had not reported is the one it was
    running, a 'fail' saying how it ended, and the cases after it run in a new child (each a 'fail' if the backend
    is gone by then). BackendAbsent when there is no such backend at the start."""
    extra = dict(env or {})
    results: dict[str, ChildResult] = {}
    todo = list(cases)
    while todo:
        try:
            got, stopped = _child(backend, todo, extra, timeout, cli)
        except BackendAbsent as e:
            if not results:
                raise
            # the backend went away during the run (a crashed server takes its RPC device along)
            results.update((c.name, ChildResult("fail", f"{backend} was gone after an earlier case: {e}"))
                           for c in todo)
            break
        results.update(got)
        todo = [c for c in todo if c.name not in results]
        if stopped is None or not todo:
            break
        results[todo[0].name] = ChildResult("fail", f"{stopped} running this case")
        todo = todo[1:]
    return results
