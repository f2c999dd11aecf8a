"""Fuzz soak of the public op API (issue 19): the random recipes of pyggml_testing.fuzz_ops, of which
conformance/tests/test_fuzz_ops.py draws a few hundred in CI (ops over random shapes, zero-size ones included, types,
views with random strides and offsets, permutes, in-place results, random ids), run in rounds of hypothesis examples
on each backend against the numpy reference. Every outcome must be the
reference's result or a PyGGMLError; anything else (a different result, a changed guard byte, a graph computed that
the reference refuses, another exception) is a failure, reported with its shrunk recipe, and the soak goes on with
the next round. A crash or a hang ends the process, which is the other way to fail. Prints JSON.

    python benchmarks/fuzz_soak.py [--examples 10000] [--backend numpy --backend cpu] [--round 500] [--seed 0]
                                   [--minutes M]

Counts per backend: examples drawn by hypothesis (shrinking included), and per outcome: refused by the op API,
unsupported by the backend, a clear error at compute, equal to the reference. --minutes stops starting new rounds
once that much time has gone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, seed, settings

from pyggml.backend.sysinfo import cpu_model
from pyggml.errors import PyGGMLError
from pyggml_testing import fuzz_ops


def soak(backend: str, examples: int, round_size: int, first_seed: int, deadline: float) -> dict[str, Any]:
    from pyggml_conformance.runner import open_target

    try:
        target = open_target(backend)
    except PyGGMLError as e:
        return {"backend": backend, "skipped": str(e)}
    reference = open_target("numpy")
    counts: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    rounds = 0
    t0 = time.monotonic()
    while counts["drawn"] < examples and time.monotonic() < deadline:
        n = min(round_size, examples - counts["drawn"])

        @seed(first_seed + rounds)
        @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(fuzz_ops.recipes())
        def one(r: Any) -> None:
            counts["drawn"] += 1
            counts[fuzz_ops.outcome(r, target, reference)] += 1

        before = counts["drawn"]
        try:
            one()
        except Exception as e:  # every failure is reported, then the next round starts
            failures.append({"round": rounds, "seed": first_seed + rounds,
                             "error": "".join(traceback.format_exception_only(e)).strip()[-2000:],
                             "notes": list(getattr(e, "__notes__", []))})
        rounds += 1
        if counts["drawn"] == before:  # hypothesis drew nothing: avoid spinning
            break
    return {"backend": backend, "device": target.device.name, "rounds": rounds,
            "seconds": round(time.monotonic() - t0, 1), "counts": dict(counts), "failures": failures}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=10_000, help="examples per backend (default 10000)")
    ap.add_argument("--backend", action="append", help="backends to soak (default: numpy and cpu)")
    ap.add_argument("--round", type=int, default=500, help="examples per hypothesis run (a failure ends a round)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first round (round k uses seed + k)")
    ap.add_argument("--minutes", type=float, default=0.0, help="start no new round after this long (0: no limit)")
    args = ap.parse_args()
    if args.examples < 1 or args.round < 1 or args.minutes < 0:
        ap.error("--examples and --round must be positive, --minutes not negative")
    backends = args.backend or ["numpy", "cpu"]
    start = time.monotonic()
    deadline = start + args.minutes * 60 if args.minutes else float("inf")
    results = [soak(b, args.examples, args.round, args.seed, deadline) for b in backends]
    report = {"benchmark": "fuzz_soak", "cpu": cpu_model(), "python": sys.version.split()[0],
              "examples_per_backend": args.examples, "seconds": round(time.monotonic() - start, 1),
              "backends": results, "failures": sum(len(r.get("failures", [])) for r in results)}
    print(json.dumps(report, indent=2))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
