"""The cpu plugin's C kernels under AddressSanitizer and UndefinedBehaviorSanitizer (`make sanitize`, issue 19).

Builds a copy of pyggml_cpu whose extension is compiled with -fsanitize=address,undefined (the plugin's own build,
setup.py build_ext with PYGGML_CPU_SANITIZE=1, into --dir; the installed build is not touched), puts it first on
PYTHONPATH, preloads libasan (Python itself is not instrumented), and runs the cpu plugin's tests (but the SIMD
harness, a program of its own the test compiles, not the extension), the conformance suite on the cpu backend and
the op API fuzz test (conformance/tests/test_fuzz_ops.py) on cpu. Leak detection is off (CPython's own allocations
are reported as leaks). Every report fails the run: ASan stops the process at its first error, UBSan too
(-fno-sanitize-recover, halt_on_error=1), and the reports are also written to files under --dir/reports, so one
from a worker process whose exit status is lost is still seen. Before the runs, the extension must carry both
sanitizers' hooks and a heap overflow in a canary library built the same way must be reported.

    python plugins/cpu/tests/run_sanitized.py [--dir build/sanitize] [--jobs 2] [--quick] [--fuzz 1000]

--quick: the conformance suite only for QUICK_OPS, the kernels that index most (matrix products, row gathers and
scatters, softmax, attention, copies), for a shorter check while editing C; `make sanitize` (part of `make test`)
runs it whole, about 3 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = ROOT / "plugins" / "cpu"
SIMD_HARNESS = PLUGIN / "tests" / "test_cpu_simd_harness.py"
"""Not run here: it compiles and runs a program of its own (every SIMD level against the portable one), without the
sanitizers; `make pytest` runs it."""
QUICK_OPS = "MUL_MAT,MUL_MAT_ID,GET_ROWS,SET_ROWS,SOFT_MAX,FLASH_ATTN_EXT,CPY"


def _runtime(name: str) -> str:
    cc = os.environ.get("CC", "gcc")
    path = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True, check=True).stdout
    if not os.path.isabs(path.strip()):
        sys.exit(f"run_sanitized: {cc} does not know {name} (install gcc's {name.split('.')[0]})")
    return path.strip()


def _preload() -> str:
    """libasan first, then libstdc++: ASan resolves its C++ interceptors (__cxa_throw) once at start, so a C++
    library dlopen-ed later (ggml's CPU library, which the bit tests load) would abort ASan on its first throw."""
    return " ".join([_runtime("libasan.so"), _runtime("libstdc++.so.6")])


def _asan_options(log: Path) -> str:
    """use_sigaltstack=0: a thread of another library the tests load (listing every device loads the OpenCL, Vulkan
    and BLAS drivers) may swap ASan's alternate signal stack for a heap block of its own, which ASan then fails to
    unmap when that thread exits (a CHECK failure in UnsetAlternateSignalStack, not a finding in our code)."""
    return f"detect_leaks=0:use_sigaltstack=0:log_path={log}"


def _env(san_dir: Path, reports: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(san_dir), *filter(None, [env.get("PYTHONPATH")])])
    env["LD_PRELOAD"] = _preload()
    env["ASAN_OPTIONS"] = _asan_options(reports / "asan")
    env["UBSAN_OPTIONS"] = f"halt_on_error=1:print_stacktrace=1:log_path={reports / 'ubsan'}"
    return env


CANARY = """#include <stdlib.h>
int canary(int i) { int *p = malloc(4 * sizeof(int)); int v = p[i]; free(p); return v; }
"""


def _canary(san_dir: Path, env: dict[str, str]) -> str | None:
    """None when the sanitizers report as configured: a library built with the same flags reads past a heap
    block in a subprocess with the run's environment, which must die and leave a report."""
    from pyggml_cpu._build import SANITIZE_ARGS

    src, lib = san_dir / "canary.c", san_dir / "canary.so"
    src.write_text(CANARY)
    subprocess.run([os.environ.get("CC", "gcc"), "-shared", "-fPIC", *SANITIZE_ARGS, "-o", str(lib), str(src)],
                   check=True)
    probe = f"import ctypes; ctypes.CDLL({str(lib)!r}).canary(4)"
    env = {**env, "ASAN_OPTIONS": _asan_options(san_dir / "canary-log")}
    rc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True).returncode
    logs = list(san_dir.glob("canary-log.*"))
    ok = rc != 0 and any("heap-buffer-overflow" in p.read_text(errors="replace") for p in logs)
    for p in logs:
        p.unlink()
    return None if ok else f"a heap overflow in an instrumented library was not reported (exit {rc}, logs {logs})"


def _uninstrumented(so: str) -> str | None:
    """None when the extension calls into both sanitizers' runtimes (nm -D lists their entry points)."""
    if shutil.which("nm") is None:
        return None
    syms = subprocess.run(["nm", "-D", so], capture_output=True, text=True, check=True).stdout
    missing = [s for s in ("__asan_report", "__ubsan_handle") if s not in syms]
    return f"{so} has no {' nor '.join(missing)} symbols" if missing else None


def _build(san_dir: Path) -> Path:
    """The sanitizer build: the plugin's setup.py build_ext with PYGGML_CPU_SANITIZE=1 (the wheel's build: sources
    compiled a core each, skipped when nothing changed since the last run) into san_dir/build, and a copy of the
    pyggml_cpu package in san_dir (with the C sources and pyggml's shared kernel headers, as an sdist lays them out)
    with that extension in it. Returns the extension's path."""
    from pyggml_cpu._build import kernelsrc_dir

    lib, tmp = san_dir / "build" / "lib", san_dir / "build" / "temp"
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(lib), "--build-temp", str(tmp)],
                   cwd=PLUGIN, env={**os.environ, "PYGGML_CPU_SANITIZE": "1"}, check=True)
    [so] = (lib / "pyggml_cpu").glob("_pgc*.so")
    pkg = san_dir / "pyggml_cpu"
    shutil.rmtree(pkg, ignore_errors=True)
    skip = shutil.ignore_patterns("*.so", "*.o", "__pycache__", "kernelsrc")
    shutil.copytree(PLUGIN / "pyggml_cpu", pkg, ignore=skip)
    shutil.copytree(kernelsrc_dir(), pkg / "kernelsrc")
    return Path(shutil.copy2(so, pkg / so.name))


def _run(what: str, cmd: list[str], env: dict[str, str]) -> tuple[bool, float]:
    print(f"== {what}: {' '.join(cmd)}", flush=True)
    t = time.monotonic()
    rc = subprocess.run(cmd, env=env, cwd=ROOT).returncode
    dt = time.monotonic() - t
    print(f"== {what}: exit {rc} in {dt:.0f} s", flush=True)
    return rc == 0, dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(ROOT / "build" / "sanitize"), help="where the sanitizer build goes")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes of the cpu tests and the conformance suite")
    ap.add_argument("--quick", action="store_true", help="a subset of the conformance suite")
    ap.add_argument("--fuzz", type=int, default=1000, help="examples of the op API fuzz test on cpu")
    args = ap.parse_args()
    san_dir = Path(args.dir).resolve()
    reports = san_dir / "reports"
    shutil.rmtree(reports, ignore_errors=True)
    reports.mkdir(parents=True)

    t = time.monotonic()
    so = _build(san_dir)
    print(f"== sanitizer build: {so} in {time.monotonic() - t:.0f} s", flush=True)
    env = _env(san_dir, reports)
    probe = "import pyggml_cpu._pgc as m; print(m.__file__)"
    where = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    if where.returncode or Path(where.stdout.strip()).resolve() != Path(so).resolve():
        print(f"run_sanitized: the sanitizer build is not what Python imports ({where.stdout}{where.stderr})")
        return 1
    bad = _uninstrumented(str(so)) or _canary(san_dir, env)
    if bad:
        print(f"run_sanitized: the sanitizers are not working: {bad}")
        return 1
    workers = ["-n", str(args.jobs), "--dist", "loadfile"] if args.jobs > 1 else []
    ok, _ = _run("cpu plugin tests", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers,
                                      "--ignore", str(SIMD_HARNESS), "plugins/cpu/tests"], env)
    conf = [sys.executable, "-m", "pyggml.cli", "conformance", "--mode", "test", "--backend", "cpu",
            "--jobs", str(args.jobs), "--format", "console"]
    if args.quick:
        conf += ["--op", QUICK_OPS]
    ok2, _ = _run("conformance on cpu", conf, env)
    fuzz_env = {**env, "PYGGML_FUZZ_EXAMPLES": str(args.fuzz)}
    ok3, _ = _run(f"op API fuzz on cpu ({args.fuzz} examples)",
                  [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "cpu",
                   "conformance/tests/test_fuzz_ops.py"], fuzz_env)
    found = sorted(p for p in reports.iterdir() if p.stat().st_size)
    for p in found:
        print(f"== sanitizer report {p.name}:\n{p.read_text(errors='replace')}")
    if found:
        print(f"run_sanitized: {len(found)} sanitizer report(s) under {reports}")
    return 0 if ok and ok2 and ok3 and not found else 1


if __name__ == "__main__":
    sys.exit(main())
