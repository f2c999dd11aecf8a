"""`python -m pyggml_cuda_testing.check --check`: compile every kernel the CUDA op table launches and check each
launch.

The kernels to compile are found by running the plan builder dry (no device) over the graphs of the conformance
suite's cases (test and perf sizes) and of `extra_graphs()`: every launch names its program (file + defines) and
kernel. Each program is compiled with nvcc (bundled and cached, see `pyggml_cuda.compile`), then every launch's
packed arguments are checked against its kernel's PTX parameters and CUDA's grid limits. Exit status 1 when any
compile or check fails, 2 on bad usage. No GPU or driver is involved.

Test tooling of the CUDA plugin (it traces the conformance suite's graphs), so it lives in pyggml-cuda-testing, not
in the runtime package pyggml-cuda.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from pyggml.backend.op_table import compute_nodes
from pyggml.errors import PyGGMLError
from pyggml.graph import Graph
from pyggml.tensor import Tensor
from pyggml_cuda.compile import Bundle, KernelBuildError, KernelCache, Variant, label, variant
from pyggml_cuda.launch import CudaLaunchBuilder, Launch, check_signature
from pyggml_cuda.op_table import TABLE
from pyggml_cuda.options import CudaOptions
from pyggml_dialect.source import ProgramSpec

log = logging.getLogger(__name__)


@dataclass
class Catalog:
    launches: dict[tuple[ProgramSpec, str, str], Launch] = field(default_factory=dict)
    """one launch per (program, kernel, argument codes)"""
    problems: list[str] = field(default_factory=list)
    graphs: int = 0

    def specs(self) -> list[ProgramSpec]:
        return sorted({s for s, _, _ in self.launches}, key=lambda s: (s.file, s.defines))

    def add_graph(self, nodes: Sequence[Tensor], name: str) -> None:
        self.graphs += 1
        for node in compute_nodes(nodes):
            r = TABLE.get(node.op)
            if r is None or not r.accepts(node):
                continue
            b = CudaLaunchBuilder()
            b.node = node
            try:
                r.build(node, b)
            except PyGGMLError as e:
                self.problems.append(f"{name}: {e}")
                continue
            for la in b.launches:
                self.launches.setdefault((la.spec, la.kernel, la.fmt), la)


def conformance_graphs(modes: Iterable[str] = ("test", "perf")) -> Iterable[tuple[str, Graph]]:
    try:
        from pyggml_conformance.cases import all_cases
        from pyggml_conformance.runner import realize
    except ImportError as e:
        raise PyGGMLError(f"the kernel catalog is traced from pyggml-conformance's cases, which is not importable: "
                          f"{e}") from e
    for mode in modes:
        for case in all_cases(mode):
            try:
                yield case.name, realize(case).graph
            except PyGGMLError as e:
                log.debug("case %s does not build: %s", case.name, e)


def catalog(modes: Iterable[str] = ("test", "perf")) -> Catalog:
    cat = Catalog()
    for name, g in conformance_graphs(modes):
        cat.add_graph(g.nodes, name)
    return cat


@dataclass(frozen=True)
class Report:
    """What `--check` did: the programs and distinct kernels the op table launches, the bundles they were compiled
    into (`compiled` of them by this run, the rest from the kernel cache), the launch signatures checked against
    the compiled kernels, and every problem found."""

    programs: int
    kernels: int
    bundles: int
    compiled: int
    launches_checked: int
    seconds: float
    failures: list[str]


def compile_all(variants: Sequence[Variant], kc: KernelCache, jobs: int | None,
                failures: list[str]) -> dict[str, Bundle]:
    """Bundles of every variant; a failing bundle is recorded and its variants retried one by one, so one bad
    specialisation is named precisely and does not hide the others."""
    try:
        return kc.ensure(variants, jobs)
    except KernelBuildError:
        pass
    out: dict[str, Bundle] = {}
    for v in variants:
        try:
            out.update(kc.ensure([v], 1))
        except KernelBuildError as e:
            failures.append(str(e))
    return out


def run_check(kc: KernelCache, jobs: int | None = None, modes: Iterable[str] = ("test", "perf")) -> Report:
    t0 = time.perf_counter()
    cat = catalog(modes)
    failures = list(cat.problems)
    variants = [variant(s) for s in cat.specs()]
    before = kc.compiled
    bundles = compile_all(variants, kc, jobs, failures)
    checked = 0
    for (spec, kernel, _), la in sorted(cat.launches.items(), key=lambda kv: (label(kv[0][0]), kv[0][1])):
        v = variant(spec)
        b = bundles.get(v.tag)
        if b is None:
            continue  # its compile failure is reported already
        try:
            check_signature(la, b.signatures.get(v.symbol(kernel)), f"{kernel} of {label(spec)}")
        except PyGGMLError as e:
            failures.append(str(e))
        checked += 1
    return Report(programs=len(variants), kernels=len({(v.tag, k) for v in variants for k in v.kernels}),
                  bundles=len({b.key for b in bundles.values()}), compiled=kc.compiled - before,
                  launches_checked=checked, seconds=round(time.perf_counter() - t0, 2), failures=failures)


def list_programs(modes: Iterable[str]) -> list[str]:
    cat = catalog(modes)
    kernels: dict[ProgramSpec, set[str]] = defaultdict(set)
    for spec, kernel, _ in cat.launches:
        kernels[spec].add(kernel)
    return [f"{label(s)}: {', '.join(sorted(kernels[s]))}" for s in cat.specs()]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pyggml_cuda_testing.check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compile every kernel and check every launch")
    ap.add_argument("--list", action="store_true", help="list the programs and kernels the op table launches")
    ap.add_argument("--jobs", type=int, default=None, help="nvcc processes at once (default: CPU count)")
    ap.add_argument("--modes", default="test,perf", help="conformance case modes to trace (test,perf)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.list:
        print("\n".join(list_programs(modes)))
        return 0
    if not args.check:
        ap.print_usage(sys.stderr)
        return 2
    try:
        opts = CudaOptions.from_env()  # the tool's edge: the cache and the nvcc the devices would use
        rep = run_check(KernelCache(opts.cache_dir, strict=True, nvcc=opts.nvcc), args.jobs, modes)
    except KernelBuildError as e:  # no nvcc
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(asdict(rep), indent=1))
    else:
        print(f"{rep.programs} programs, {rep.kernels} kernels in {rep.bundles} bundles ({rep.compiled} compiled "
              f"now), {rep.launches_checked} launch signatures checked in {rep.seconds} s")
        for f in rep.failures:
            print(f"FAILED: {f}", file=sys.stderr)
    return 1 if rep.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
