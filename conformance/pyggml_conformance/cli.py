"""`pyggml conformance ...` (dispatched by pyggml's CLI to `main`) and the `pyggml-conformance` script.

Exit status: 0 when no case failed, 1 when some did, 2 on bad usage (unknown backend or op, bad regex,
unreadable case file).
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import sys
from collections.abc import Sequence
from typing import TextIO

from pyggml.cli import run_command
from pyggml.errors import PyGGMLError
from pyggml_conformance.report import FORMATS, RunInfo, make_reporter, write_list
from pyggml_conformance.runner import REFERENCE, BackendNotFound, Status, open_target, open_targets
from pyggml_conformance.suite import MODES, REFERENCE_MODES, Options, load_cases, run
from pyggml_conformance.viewops import view_ops_warnings


def build_parser(prog: str = "pyggml conformance") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Run the pyggml conformance suite: every op case on the chosen backends, compared with the "
                    "numpy reference (test), backward checked against finite differences of the reference (grad), "
                    "timed (perf), checked for claimed support (support) or listed.",
    )
    p.add_argument("--mode", choices=MODES, default="test", help="what to do with each case (default: test)")
    p.add_argument("--backend", "-b", action="extend", nargs="+", metavar="NAME", default=None,
                   help="device or registry name(s) to test (repeatable, comma-separated allowed); "
                        "default: every installed backend")
    p.add_argument("--op", "-o", action="append", metavar="OPS", default=None,
                   help="only these ops, comma-separated (core op names such as MUL_MAT, or UNARY/GLU sub-ops "
                        "such as SILU)")
    p.add_argument("--params", "-p", metavar="REGEX", default=None,
                   help="only cases whose parameter string matches REGEX (re.search)")
    p.add_argument("--format", "-f", choices=FORMATS, default="console", help="output format (default: console)")
    p.add_argument("--every-case", action="store_true",
                   help="console format off a terminal: print a line for every case, not only failures and progress")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="worker processes for test and support modes (default: 1)")
    p.add_argument("--case-file", metavar="PATH", default=None,
                   help="replay the cases of a case file exported from a real graph instead of the suite's")
    p.add_argument("--shard", metavar="I/N", default=None,
                   help="only the I-th of N parts of the selected cases (each op's every N-th case from its I-th; "
                        "the first part has every op): N runs, in parallel or on N machines, share the cases")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (mixed with each case name)")
    p.add_argument("--perf-seconds", type=float, default=0.5, metavar="S",
                   help="perf mode: run each case for at least S seconds (default: 0.5)")
    p.add_argument("--output", metavar="PATH", default=None, help="write the report to PATH instead of stdout")
    p.add_argument("--verbose", "-v", action="store_true", help="log debugging details to stderr")
    return p


def _split(values: Sequence[str] | None) -> list[str] | None:
    if not values:
        return None
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    bad = _check_args(args)
    if bad:
        print(f"pyggml conformance: error: {bad}", file=sys.stderr)
        return 2
    opts = Options(mode=args.mode, backends=_split(args.backend), ops=args.op, params=args.params,
                   case_file=args.case_file, jobs=args.jobs, seed=args.seed, perf_seconds=args.perf_seconds,
                   shard=_shard(args.shard))
    try:
        out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115
    except OSError as e:
        print(f"pyggml conformance: error: cannot write the report to {args.output!r}: {e.strerror or e}",
              file=sys.stderr)
        return 2
    try:
        return _run(opts, args.format, out, every_case=args.every_case)
    except BrokenPipeError:
        raise  # the reader of the report has gone: `run_command` ends quietly
    except (PyGGMLError, re.error, OSError) as e:
        print(f"pyggml conformance: error: {e}", file=sys.stderr)
        return 2
    finally:
        if out is not sys.stdout:
            out.close()


def _shard(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", value)
    return (int(m[1]), int(m[2])) if m else (0, 0)


def _check_args(args: argparse.Namespace) -> str | None:
    """What is wrong with the options (for exit status 2), or None."""
    if args.jobs < 1:
        return "--jobs must be at least 1"
    shard = _shard(args.shard)
    if shard is not None and not 1 <= shard[0] <= shard[1]:
        return f"--shard must be I/N with 1 <= I <= N (the I-th of N parts), got {args.shard!r}"
    if not math.isfinite(args.perf_seconds) or args.perf_seconds <= 0:
        return f"--perf-seconds must be a positive number of seconds, got {args.perf_seconds:g}"
    return None


def _run(opts: Options, fmt: str, out: TextIO, every_case: bool = False) -> int:
    cases = load_cases(opts)
    if opts.mode == "list":
        write_list(cases, fmt, out)
        return 0
    targets = open_targets(opts.backends)
    if not targets:
        raise PyGGMLError("no backend is installed (no device found); see `pyggml plugins`")
    if opts.mode in REFERENCE_MODES:
        try:
            open_target(REFERENCE)
        except BackendNotFound as e:
            raise PyGGMLError(f"{opts.mode} mode compares with the {REFERENCE!r} reference backend, which is not "
                              f"loaded (is it excluded by PYGGML_BACKENDS?): {e}") from None
    info = RunInfo(opts.mode, targets, len(cases), every_case)
    info.warnings.update(view_ops_warnings(targets))
    for warning in info.warnings.values():
        print(f"pyggml conformance: warning: {warning}", file=sys.stderr)
    reporter = make_reporter(fmt, info, out)
    run(cases, targets, opts, reporter.add)
    reporter.finish()
    return 1 if any(r.status is Status.FAIL for r in reporter.results) else 0


def console_main() -> None:
    sys.exit(run_command(main))  # a report piped into a reader that stops early (`| head`) ends quietly


if __name__ == "__main__":
    console_main()
