"""--jobs N: cases run in N worker processes (spawned, so drivers are initialised fresh in each).

Workers rebuild the case list and open the backends by name, so only backends found through entry points can
run in parallel. A worker that dies (a segfault in a native kernel) fails only the case that killed it: the
cases of a broken pool are retried one by one, each suspect alone in a fresh process. A worker that hangs (a
deadlock in a driver) is treated the same way once its chunk exceeds CHUNK_TIMEOUT_S: the pool is killed and the
chunk's cases are retried alone, each failing after CASE_TIMEOUT_S.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypedDict

from pyggml.backend.registry import hub
from pyggml_conformance.case import Case
from pyggml_conformance.runner import REFERENCE, CaseResult, Status, Target, open_target
from pyggml_conformance.suite import REFERENCE_MODES, Options, load_cases, run_one


class _WorkerState(TypedDict, total=False):
    """What a worker process keeps between chunks of the same options: the cases by name and the opened targets."""

    key: str
    cases: dict[str, Case]
    targets: list[Target]
    reference: Target | None


_STATE: _WorkerState = {}
CRASH_ENV = "PYGGML_CONFORMANCE_TEST_CRASH"
"""Test hook: a worker dies (abort) when it reaches the case of this name, as a segfaulting kernel would."""
HANG_ENV = "PYGGML_CONFORMANCE_TEST_HANG"
"""Test hook: a worker hangs (sleeps) when it reaches the case of this name, as a deadlocked driver would."""
CHUNK_TIMEOUT_S = float(os.environ.get("PYGGML_CONFORMANCE_CHUNK_TIMEOUT", "900"))
CASE_TIMEOUT_S = float(os.environ.get("PYGGML_CONFORMANCE_CASE_TIMEOUT", "300"))


def can_run_parallel(targets: list[Target]) -> str | None:
    """Why the targets cannot be opened again in a worker process, or None."""
    for info in hub().registries():
        if info.plugin == "<in-process>" and any(t.device.reg is info.registry for t in targets):
            return f"backend registry {info.registry.name!r} was registered in-process, not by an entry point"
    return None


def _worker(opts: dict[str, Any], names: list[str]) -> list[dict[str, Any]]:
    o = Options(**opts)
    key = repr(sorted(opts.items()))
    if _STATE.get("key") != key:
        every = Options(mode=o.mode, case_file=o.case_file)
        _STATE["key"] = key
        _STATE["cases"] = {c.name: c for c in load_cases(every)}
        _STATE["targets"] = [open_target(n) for n in o.backends or []]
        _STATE["reference"] = open_target(REFERENCE) if o.mode in REFERENCE_MODES else None
    cases: dict[str, Case] = _STATE["cases"]
    out: list[dict[str, Any]] = []
    crash_on, hang_on = os.environ.get(CRASH_ENV), os.environ.get(HANG_ENV)
    for n in names:
        if n == crash_on:
            os.abort()
        if n == hang_on:
            time.sleep(1e6)
        out.extend(r.to_dict() for r in run_one(cases[n], _STATE["targets"], _STATE["reference"], o))
    return out


def _crashed(case: Case, targets: list[Target], why: str) -> list[CaseResult]:
    return [CaseResult(case.name, case.op.name, case.params, t.name, Status.FAIL, error=why) for t in targets]


def _kill(ex: ProcessPoolExecutor) -> None:
    """Stop a pool whose worker hangs: its futures then fail with BrokenProcessPool."""
    for proc in list(getattr(ex, "_processes", {}).values()):
        proc.kill()


def run_parallel(cases: Sequence[Case], targets: list[Target], opts: Options,
                 on_result: Callable[[CaseResult], None]) -> None:
    od = {**opts.to_dict(), "backends": [t.name for t in targets]}
    by_name = {c.name: c for c in cases}
    names = list(by_name)
    size = max(1, min(64, len(names) // (opts.jobs * 4) or 1))
    pending = [names[i : i + size] for i in range(0, len(names), size)]
    ctx = multiprocessing.get_context("spawn")
    while pending:
        suspects: list[str] = []
        ex = ProcessPoolExecutor(opts.jobs, mp_context=ctx)
        try:
            futs = [(chunk, ex.submit(_worker, od, chunk)) for chunk in pending]
            pending = []
            for chunk, fut in futs:
                try:
                    res = fut.result(timeout=CHUNK_TIMEOUT_S)
                except (FutureTimeout, BrokenProcessPool) as e:
                    if isinstance(e, FutureTimeout):
                        _kill(ex)
                    if len(chunk) > 1:
                        pending.extend([n] for n in chunk)
                    else:
                        suspects.extend(chunk)
                    continue
                for d in res:
                    on_result(CaseResult.from_dict(d))
        finally:  # on Ctrl-C (or any error) drop the queued chunks instead of waiting for them
            ex.shutdown(wait=True, cancel_futures=True)
        for n in suspects:
            ex = ProcessPoolExecutor(1, mp_context=ctx)
            try:
                res = ex.submit(_worker, od, [n]).result(timeout=CASE_TIMEOUT_S)
            except FutureTimeout:
                _kill(ex)
                why = f"the case did not finish in {CASE_TIMEOUT_S:g} s (a hang in the backend?)"
                res = [r.to_dict() for r in _crashed(by_name[n], targets, why)]
            except BrokenProcessPool:
                why = "the worker process died running this case (crash in the backend?)"
                res = [r.to_dict() for r in _crashed(by_name[n], targets, why)]
            finally:
                ex.shutdown(wait=True, cancel_futures=True)
            for d in res:
                on_result(CaseResult.from_dict(d))
