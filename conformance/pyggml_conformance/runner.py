"""Running one case on backends: build, check support, place with guards, upload, compute, read back, compare.

Every backend run builds the case's graph afresh in a `Context(no_alloc=True)` and places it in one buffer of
its own device (`placement.GuardedArena`); the reference (the numpy backend) runs the same case with identical
input bytes, once per case however many backends are tested.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from pyggml.backend.protocol import Backend, Device
from pyggml.backend.registry import hub
from pyggml.errors import PyGGMLError
from pyggml.graph import Graph, build_graph
from pyggml.ops.base import describe
from pyggml.tensor import Tensor
from pyggml_conformance.case import Case, CaseBuilder
from pyggml_conformance.compare import Array, check, decode
from pyggml_conformance.inputs import Bytes, Init, InputUnavailable, case_rng, generate
from pyggml_conformance.placement import ArenaTooLarge, GuardedArena

_T = TypeVar("_T")

log = logging.getLogger(__name__)
REFERENCE = "numpy"


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    UNSUPPORTED = "unsupported"
    SUPPORTED = "supported"
    """support mode: the backend claims every node of the case"""


@dataclass
class CaseResult:
    name: str
    op: str
    params: str
    backend: str
    status: Status
    nmse: float | None = None
    threshold: float | None = None
    error: str | None = None
    time_us: float | None = None
    gflops: float | None = None
    gbps: float | None = None
    runs: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CaseResult:
        return cls(**{**d, "status": Status(d["status"])})


class BackendNotFound(PyGGMLError):
    """A --backend name matches no device or registry."""


@dataclass
class Target:
    """A device under test and (lazily) one backend stream on it."""

    name: str
    device: Device
    _backend: Backend | None = field(default=None, repr=False)

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = self.device.init_backend()
        return self._backend

    @property
    def description(self) -> str:
        return self.device.description


def available_names() -> list[str]:
    h = hub()
    names: list[str] = []
    for info in h.registries():
        devs = h.devices_of(info)
        names.extend(d.name for d in devs)
        if info.registry.name not in names and devs:
            names.append(info.registry.name)
    return names


def open_target(name: str) -> Target:
    """The device called `name` (or a registry's first device)."""
    try:
        dev = hub().device(name)
    except PyGGMLError:
        known = ", ".join(available_names()) or "none"
        raise BackendNotFound(f"no backend named {name!r}; installed backends: {known}") from None
    return Target(dev.name, dev)


def open_targets(names: list[str] | None) -> list[Target]:
    """Targets for the names given, or every device of every loaded plugin."""
    if names:
        return [open_target(n) for n in names]
    return [Target(d.name, d) for d in hub().devices()]


# ---- one realisation of a case ----------------------------------------------------------------------------------


@dataclass
class Realized:
    graph: Graph
    outputs: list[Tensor]
    inits: dict[str, Init]


def realize(case: Case) -> Realized:
    """Record the case's graph into a fresh no_alloc context."""
    b = CaseBuilder()
    res = case.build(b)
    outs = [res] if isinstance(res, Tensor) else list(res)
    return Realized(build_graph(*outs), outs, b.inits)


def first_unsupported(graph: Graph, device: Device) -> str | None:
    """Why `device` cannot run the graph (the first node it refuses), or None."""
    for node in graph.nodes:
        if not device.supports_op(node):
            srcs = ", ".join(describe(s) for s in node.src if s is not None)
            return f"{device.name} does not support node '{node.name}' {node.op.name} -> {node.type} " \
                   f"ne={list(node.ne)} (srcs: {srcs})"
    return None


def built_for(target: Target, build: Callable[[], _T], graph_of: Callable[[_T], Graph], failed: str,
              res: CaseResult) -> _T | CaseResult:
    """Build a case for `target` and ask its device about every node of the graph (`graph_of` picks it): what
    `build` returned when the device can run it, or else `res` as the target's result: FAIL when building or asking
    raised (the error after `failed`), UNSUPPORTED naming the first node the device refuses."""
    try:
        built = build()
        why = first_unsupported(graph_of(built), target.device)
    except Exception as e:
        res.status, res.error = Status.FAIL, f"{failed}: {error_text(e)}"
        return res
    if why is not None:
        res.status, res.error = Status.UNSUPPORTED, why
        return res
    return built


@dataclass
class Executed:
    values: list[Array]
    problems: list[str]
    time_us: float


def _on_arena(r: Realized, target: Target, data: dict[str, Bytes], run: Callable[[GuardedArena], _T]) -> _T:
    """Place r's graph in a fresh guarded arena of the target's device, upload `data`, `run`, then free the arena
    (also when `run` raises)."""
    pl = GuardedArena(r.graph, target.device.buffer_type())
    try:
        pl.upload(data)
        return run(pl)
    finally:
        pl.free()


def execute(r: Realized, target: Target, data: dict[str, Bytes]) -> Executed:
    def run(pl: GuardedArena) -> Executed:
        backend = target.backend
        t0 = time.perf_counter()
        backend.graph_compute(r.graph)
        backend.synchronize()
        dt = (time.perf_counter() - t0) * 1e6
        problems = pl.check()
        values = [decode(o, pl.buffer.get_tensor(o)) for o in r.outputs]
        return Executed(values, problems, dt)

    return _on_arena(r, target, data, run)


def execute_failing(r: Realized, target: Target, data: dict[str, Bytes]) -> list[str]:
    """Compute a graph that must fail (ids out of range): what went wrong, or nothing. The compute must raise a
    PyGGMLError; afterwards no guard byte and no input byte may have changed."""

    def run(pl: GuardedArena) -> list[str]:
        try:
            target.backend.graph_compute(r.graph)
            target.backend.synchronize()
        except PyGGMLError:
            return pl.check()
        return ["computed without an error; the case's ids are out of range and must raise ComputeError"]

    return _on_arena(r, target, data, run)


def error_text(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    return f"{type(e).__name__}: {e}{where}"


# ---- test mode ----------------------------------------------------------------------------------------------------


def compare_case(case: Case, targets: list[Target], reference: Target, seed: int = 0) -> list[CaseResult]:
    """Run `case` on each target and compare with the reference; one result per target."""

    def result(target: Target, status: Status, **kw: Any) -> CaseResult:
        return CaseResult(case.name, case.op.name, case.params, target.name, status, **kw)

    try:
        ref = realize(case)
        ref_missing = first_unsupported(ref.graph, reference.device)
    except Exception as e:
        return [result(t, Status.FAIL, error=f"the case does not build: {error_text(e)}") for t in targets]
    data: dict[str, Bytes] | None = None
    expected: Executed | None = None
    out: list[CaseResult] = []
    for target in targets:
        r = built_for(target, lambda: realize(case), lambda x: x.graph, "supports_op failed",
                      result(target, Status.PASS))
        if isinstance(r, CaseResult):
            out.append(r)
            continue
        if case.scenario is not None:
            out.append(_scenario(case, target, result(target, Status.PASS)))
            continue
        if ref_missing is not None:
            out.append(result(target, Status.SKIP, error=f"no reference: {ref_missing}"))
            continue
        try:
            if data is None:
                data = generate(ref.graph, ref.inits, case_rng(case.name, seed))
        except InputUnavailable as e:
            out.append(result(target, Status.SKIP, error=str(e)))
            continue
        except Exception as e:
            out.append(result(target, Status.FAIL, error=f"the case's inputs cannot be made: {error_text(e)}"))
            continue
        if case.expect_error:
            if not target.device.caps.checks_indices:
                out.append(result(target, Status.SKIP, error=f"{target.name} cannot report ids out of range "
                                  "(DeviceCaps.checks_indices is off)"))
                continue
            out.append(_failing(case, ref, r, reference, target, data, result(target, Status.PASS)))
            continue
        if expected is None:
            try:
                expected = execute(ref, reference, data)
            except Exception as e:
                log.debug("reference failed on %s", case.name, exc_info=True)
                out.append(result(target, Status.FAIL, error=f"the reference failed: {error_text(e)}"))
                continue
        try:
            got = execute(r, target, data)
        except ArenaTooLarge as e:
            out.append(result(target, Status.SKIP, error=str(e)))
            continue
        except Exception as e:
            log.debug("%s failed on %s", target.name, case.name, exc_info=True)
            out.append(result(target, Status.FAIL, error=error_text(e)))
            continue
        out.append(_judge(case, r, expected, got, result(target, Status.PASS)))
    return out


def _scenario(case: Case, target: Target, res: CaseResult) -> CaseResult:
    assert case.scenario is not None
    t0 = time.perf_counter()
    try:
        why = case.scenario(target.device)
    except Exception as e:
        why = error_text(e)
    res.time_us = (time.perf_counter() - t0) * 1e6
    if why is not None:
        res.status, res.error = Status.FAIL, why
    return res


def _failing(case: Case, ref: Realized, r: Realized, reference: Target, target: Target, data: dict[str, Bytes],
             res: CaseResult) -> CaseResult:
    """An expect_error case: the reference and the backend must both refuse to compute it, cleanly."""
    try:
        problems = [f"reference: {p}" for p in execute_failing(ref, reference, data)]
        problems += execute_failing(r, target, data)
    except Exception as e:
        problems = [error_text(e)]
    if problems:
        res.status, res.error = Status.FAIL, "; ".join(problems)
    return res


def _judge(case: Case, r: Realized, expected: Executed, got: Executed, res: CaseResult) -> CaseResult:
    res.time_us = got.time_us
    res.threshold = case.max_nmse()
    errors: list[str] = [f"reference: {p}" for p in expected.problems] + list(got.problems)
    worst: float | None = None
    for i, (o, a, b) in enumerate(zip(r.outputs, expected.values, got.values, strict=True)):
        v = check(case.compare_mode(o), a, b, res.threshold, case.nan_ok)
        if v.nmse is not None:
            worst = v.nmse if worst is None else max(worst, v.nmse)
        if not v.ok:
            label = f"output {i} " if len(r.outputs) > 1 else ""
            errors.append(f"{label}{v.error}")
    res.nmse = worst
    if errors:
        res.status = Status.FAIL
        res.error = "; ".join(errors)
    return res


# ---- support mode -------------------------------------------------------------------------------------------------


def support_case(case: Case, targets: list[Target]) -> list[CaseResult]:
    """Whether each target claims every node of the case (one graph, asked of every device)."""
    out: list[CaseResult] = []
    try:
        graph: Graph | None = realize(case).graph
        build_error = None
    except Exception as e:
        graph, build_error = None, f"the case does not build: {error_text(e)}"
    for target in targets:
        res = CaseResult(case.name, case.op.name, case.params, target.name, Status.SUPPORTED)
        if graph is None:
            res.status, res.error = Status.FAIL, build_error
        else:
            try:
                why = first_unsupported(graph, target.device)
            except Exception as e:
                res.status, res.error = Status.FAIL, f"supports_op failed: {error_text(e)}"
            else:
                if why is not None:
                    res.status, res.error = Status.UNSUPPORTED, why
        out.append(res)
    return out
