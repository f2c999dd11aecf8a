"""Selecting cases and running them in a mode (test, perf, support), serially or across worker processes."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from pyggml.errors import PyGGMLError
from pyggml_conformance.case import Case
from pyggml_conformance.cases import all_cases, parse_ops, select
from pyggml_conformance.runner import REFERENCE, CaseResult, Target, compare_case, open_target, support_case

log = logging.getLogger(__name__)
MODES = ("test", "grad", "perf", "support", "list")
REFERENCE_MODES = ("test", "grad")
"""Modes that compare with the numpy reference."""


@dataclass
class Options:
    mode: str = "test"
    backends: list[str] | None = None
    ops: list[str] | None = None
    params: str | None = None
    case_file: str | None = None
    jobs: int = 1
    seed: int = 0
    perf_seconds: float = 0.5
    shard: tuple[int, int] | None = None
    """(i, n): only part i of n (1-based) of the selection: each op's every n-th case from its i-th on, so that n
    runs share the cases and the first part has every op."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class DuplicateCaseError(PyGGMLError):
    """Two cases share a name (names must identify cases, e.g. for --jobs and pytest ids)."""


def load_cases(opts: Options) -> list[Case]:
    """The cases of the run: the suite's (or a case file's), filtered by --op and --params, then --shard's part."""
    if opts.case_file:
        from pyggml_conformance.casefile import load_case_file

        base = load_case_file(opts.case_file)
    elif opts.mode == "grad":
        from pyggml_conformance.grad_cases import grad_cases

        base = list(grad_cases())
    else:
        base = all_cases("perf" if opts.mode == "perf" else "test")
    dup = [n for n, k in Counter(c.name for c in base).items() if k > 1]
    if dup:
        raise DuplicateCaseError(f"{len(dup)} case names are not unique, e.g. {dup[0]}")
    chosen = select(base, parse_ops(opts.ops), opts.params)
    if opts.shard is None:
        return chosen
    i, n = opts.shard
    seen: Counter[str] = Counter()  # the j-th case of each op goes to part j mod n: the first part has every op
    part = []
    for c in chosen:
        if seen[c.op.name] % n == i - 1:
            part.append(c)
        seen[c.op.name] += 1
    return part


def run_serial(cases: Sequence[Case], targets: list[Target], opts: Options,
               on_result: Callable[[CaseResult], None]) -> None:
    reference = open_target(REFERENCE) if opts.mode in REFERENCE_MODES else None
    for case in cases:
        for r in run_one(case, targets, reference, opts):
            on_result(r)


def run_one(case: Case, targets: list[Target], reference: Target | None, opts: Options) -> list[CaseResult]:
    if opts.mode == "test":
        assert reference is not None
        return compare_case(case, targets, reference, opts.seed)
    if opts.mode == "grad":
        from pyggml_conformance.grad import grad_case

        assert reference is not None
        return grad_case(case, targets, reference, opts.seed)
    if opts.mode == "support":
        return support_case(case, targets)
    if opts.mode == "perf":
        from pyggml_conformance.perf import perf_case

        return [perf_case(case, t, opts.seed, opts.perf_seconds) for t in targets]
    raise PyGGMLError(f"mode {opts.mode!r} runs no cases; modes: {', '.join(MODES)}")


def run(cases: Sequence[Case], targets: list[Target], opts: Options,
        on_result: Callable[[CaseResult], None]) -> None:
    """Run `cases` on `targets` in opts.mode, reporting each result as it comes."""
    if opts.jobs > 1 and len(cases) > 1 and opts.mode != "perf":
        from pyggml_conformance.parallel import can_run_parallel, run_parallel

        why_not = can_run_parallel(targets)
        if why_not is None:
            run_parallel(cases, targets, opts, on_result)
            return
        log.warning("running serially: %s", why_not)
    run_serial(cases, targets, opts, on_result)
