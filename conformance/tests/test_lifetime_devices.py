"""The lifetime and concurrency family (`misuse=`: cases/misuse.py and cases/lifetime.py) and the int64 edge family
(`edge=int64`: cases/int64.py) on every device (issue 33): cpu, blas, numpy, OpenCL0 (PoCL), Vulkan0 (lavapipe),
MetalSim0 (the Metal emulator, PYGGML_METAL_SIM=1) and RPC0 served by `pyggml rpc-server --device cpu` and by
llama.cpp's ggml-rpc-server, each server on 127.0.0.1 at a port it picks and stopped at the end of the session,
also when a test failed. A device's cases run in child processes (`pyggml_testing.suite_child`), so a case that
crashes the interpreter fails by name instead of ending the pytest run. A device this machine lacks is skipped
with the reason the child gives (its registry's)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from pyggml_conformance.case import Case
from pyggml_conformance.cases import select
from pyggml_testing.conformance import suite
from pyggml_testing.rpc_servers import NotBuilt, serving
from pyggml_testing.suite_child import BackendAbsent, ChildResult, run_cases

FAMILIES = "misuse=|edge=int64"
CASES: list[Case] = select(suite(), params=FAMILIES)


@dataclass(frozen=True)
class Target:
    label: str
    backend: str
    """The --backend name the child opens."""
    env: dict[str, str] = field(default_factory=dict)
    server: str | None = None
    """The kind of RPC server the device is on ('ggml', or the device `pyggml rpc-server` serves)."""


TARGETS = [Target(n, n) for n in ("cpu", "blas", "numpy", "OpenCL0", "Vulkan0")] + [
    Target("MetalSim0", "MetalSim0", {"PYGGML_METAL_SIM": "1"}),
    Target("RPC0-pyggml-server", "RPC0", server="cpu"),
    Target("RPC0-ggml-server", "RPC0", server="ggml"),
]
_RESULTS: dict[str, dict[str, ChildResult] | BackendAbsent] = {}
"""Per target: every case's result (one child run per target and session), or why the target is absent."""


@pytest.fixture(scope="session")
def rpc_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], str]]:
    """endpoint(kind): the endpoint of an RPC server of that kind ('ggml', or a device for `pyggml rpc-server`),
    started at the first call; every server started is stopped at the end of the session."""
    with contextlib.ExitStack() as stack:
        started: dict[str, str] = {}

        def endpoint(kind: str) -> str:
            if kind not in started:
                log = tmp_path_factory.mktemp("rpc") / f"{kind}.log"
                started[kind] = stack.enter_context(serving(kind, log))
            return started[kind]

        yield endpoint


def _results(target: Target, request: pytest.FixtureRequest) -> dict[str, ChildResult]:
    if target.label not in _RESULTS:
        env = dict(target.env)
        try:
            if target.server is not None:
                env["PYGGML_RPC_SERVERS"] = request.getfixturevalue("rpc_endpoint")(target.server)
            _RESULTS[target.label] = run_cases(target.backend, CASES, env)
        except (BackendAbsent, NotBuilt) as e:
            _RESULTS[target.label] = BackendAbsent(str(e))
    got = _RESULTS[target.label]
    if isinstance(got, BackendAbsent):
        pytest.skip(f"{target.label}: {got}")
    return got


def test_the_families_are_selected() -> None:
    assert {c.params for c in CASES} >= {"misuse=free_during_compute_loop", "misuse=two_threads_one_scheduler",
                                         "misuse=reuse_freed_memory", "edge=int64,check=refused"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.params)
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.label)
def test_case_on_device(target: Target, case: Case, request: pytest.FixtureRequest) -> None:
    r = _results(target, request).get(case.name)
    assert r is not None, f"{case.name} reported no result on {target.label}"
    if r.status in ("unsupported", "skip"):
        pytest.skip(f"{r.status}: {r.error}")
    assert r.status == "pass", f"{case.name} on {target.label}: {r.error}"


_BREAKER = """import os, sys, time
from pyggml.cli import main
from pyggml_conformance.cases import lifetime
lifetime.SCENARIOS["reuse_freed_memory"] = lambda dev: os.abort()
lifetime.SCENARIOS["alloc_free_cycles"] = lambda dev: time.sleep(600)
sys.exit(main(sys.argv[1:]))
"""


def test_a_crash_or_hang_fails_its_case_and_the_rest_still_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The negative control: a scenario that aborts the process and one that hangs fail by name; every other case
    of the family still reports (each after them in a new child)."""
    script = tmp_path / "breaker.py"
    script.write_text(_BREAKER)
    cases = select(suite(), params="misuse=(reuse_freed_memory|alloc_free_cycles|two_threads_one_buffer|backend_use)")
    assert len(cases) == 4
    got = run_cases("numpy", cases, timeout=10, cli=(sys.executable, str(script)))
    assert set(got) == {c.name for c in cases}
    crashed, hung = got.pop("MUL_MAT(misuse=reuse_freed_memory)"), got.pop("MUL_MAT(misuse=alloc_free_cycles)")
    assert crashed.status == "fail" and "died of SIGABRT running this case" in (crashed.error or "")
    assert hung.status == "fail" and "did not finish in 10 s" in (hung.error or "")
    assert {r.status for r in got.values()} == {"pass"}


def test_an_absent_device_is_named() -> None:
    with pytest.raises(BackendAbsent, match="no backend named 'NoSuchDevice0'"):
        run_cases("NoSuchDevice0", CASES[:1])
