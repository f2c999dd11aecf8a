"""Compile the emulator library: every kernel's MSL translated by emucc, the fiber runtime and the shim, with g++
into one shared object in the cache dir (`$PYGGML_CACHE_DIR/metal/emu-<hash>.so`), built once per content.

A kernel that g++ rejects is left out of the library and reported (`EmuLibrary.failed`): the op table claims no op
whose kernel is missing, and the test of the build fails on it.

A kernel whose MSL sizes an array by a specialisation constant (spirv-cross makes it a macro,
SPIRV_CROSS_CONSTANT_ID_<i>) is built again for each value it is used with (`variant`): a small shared object of
its own, with its own copy of the runtime, cached like the library.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pyggml.errors import PyGGMLError
from pyggml_metal import mslgen
from pyggml_metal.options import MetalOptions
from pyggml_metal_sim import emucc

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
SHIM = HERE / "shim"
RUNTIME = HERE / "runtime.cpp"
CXXFLAGS = ["-std=c++20", "-O2", "-fPIC", "-ffp-contract=off", "-fno-strict-aliasing", "-U_FORTIFY_SOURCE", "-w"]
"""-ffp-contract=off: no fused multiply-add the MSL did not ask for; -U_FORTIFY_SOURCE: the fibers switch stacks
with _longjmp, which the fortified longjmp would refuse."""


class EmulatorBuildError(PyGGMLError):
    """The emulator library could not be built (no compiler, or the runtime does not compile)."""


@dataclass(frozen=True)
class EmuLibrary:
    path: Path
    kernels: tuple[str, ...]
    failed: dict[str, str]
    """Kernels g++ rejected: name -> the first lines of its errors."""
    msl_dir: Path


def cxx() -> str:
    exe = shutil.which(os.environ.get("CXX", "g++"))
    if not exe:
        raise EmulatorBuildError("the Metal emulator needs a C++20 compiler: install g++ or set CXX")
    return exe


def _digest(compiler: str, msl_dir: Path, names: list[str]) -> str:
    h = hashlib.sha256(" ".join([compiler, *CXXFLAGS]).encode())
    for p in [*sorted(SHIM.rglob("*")), RUNTIME, HERE / "emucc.py"]:
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    for n in names:
        h.update((msl_dir / f"{n}.metal").read_bytes())
    return h.hexdigest()[:20]


def _compile(compiler: str, src: Path, obj: Path, extra: Sequence[str] = ()) -> str | None:
    proc = subprocess.run([compiler, *CXXFLAGS, *extra, f"-I{SHIM}", "-c", str(src), "-o", str(obj)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode == 0:
        return None
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    return "\n".join(errors[:5]) or proc.stderr[-2000:]


def build(options: MetalOptions, jobs: int | None = None) -> EmuLibrary:
    """The emulator library of every kernel, in `options.cache_dir` (built there once per MSL and compiler)."""
    msl_dir = mslgen.msl_dir(options.cache_dir, options.shader_dir)
    names = sorted(p.stem for p in msl_dir.glob("*.metal"))
    compiler = cxx()
    key = _digest(compiler, msl_dir, names)
    out_dir = options.cache_dir
    lib = out_dir / f"emu-{key}.so"
    manifest = out_dir / f"emu-{key}.txt"
    if lib.exists() and manifest.exists():
        lines = manifest.read_text().splitlines()
        ok = tuple(x for x in lines if not x.startswith("!"))
        failed = {x[1:]: "(see the build that made this library)" for x in lines if x.startswith("!")}
        return EmuLibrary(lib, ok, failed, msl_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pyggml-metal-emu-") as tmp:
        work = Path(tmp)
        units = [(RUNTIME, work / "runtime.o", "")]
        for n in names:
            cpp = work / f"{n}.cpp"
            try:
                cpp.write_text(emucc.translate(n, (msl_dir / f"{n}.metal").read_text()))
            except emucc.EmuccError as e:
                log.warning("Metal emulator: %s", e)
                continue
            units.append((cpp, work / f"{n}.o", n))
        with ThreadPoolExecutor(max_workers=jobs or min(4, os.cpu_count() or 1)) as pool:
            results = list(pool.map(lambda u: (u[2], u[1], _compile(compiler, u[0], u[1])), units))
        failed = {n: err for n, _, err in results if err is not None}
        if "" in failed:
            raise EmulatorBuildError(f"the emulator's runtime does not compile:\n{failed['']}")
        objs = [str(o) for n, o, err in results if err is None]
        tmp_lib = out_dir / f".emu-{key}.{os.getpid()}.so"  # beside the library: the rename stays on one disk
        proc = subprocess.run([compiler, "-shared", *objs, "-o", str(tmp_lib)], capture_output=True, text=True)
        if proc.returncode != 0:
            tmp_lib.unlink(missing_ok=True)
            raise EmulatorBuildError(f"linking the emulator failed:\n{proc.stderr[-2000:]}")
        os.replace(tmp_lib, lib)
    ok = tuple(n for n, _, err in results if err is None and n)
    for n, err in failed.items():
        log.warning("Metal emulator: kernel %s does not compile as C++:\n%s", n, err)
    mslgen.write_atomic(manifest, "\n".join([*ok, *(f"!{n}" for n in failed)]) + "\n")  # after the library
    return EmuLibrary(lib, ok, failed, msl_dir)


def variant(lib: EmuLibrary, kernel: str, defines: dict[str, str]) -> Path:
    """The shared object of `kernel` compiled with `defines` (the array-sizing constants' values), built once."""
    compiler = cxx()
    key = hashlib.sha256(f"{lib.path.name} {kernel} {sorted(defines.items())}".encode()).hexdigest()[:20]
    path = lib.path.parent / f"emu-{kernel}-{key}.so"
    if path.exists():
        return path
    flags = [f"-D{k}={v}" for k, v in sorted(defines.items())]
    with tempfile.TemporaryDirectory(prefix="pyggml-metal-emu-") as tmp:
        work = Path(tmp)
        cpp = work / f"{kernel}.cpp"
        cpp.write_text(emucc.translate(kernel, (lib.msl_dir / f"{kernel}.metal").read_text()))
        objs = []
        for src in (cpp, RUNTIME):
            obj = work / f"{src.stem}.o"
            err = _compile(compiler, src, obj, flags)
            if err is not None:
                raise EmulatorBuildError(f"the emulator's {kernel} with {' '.join(flags)} does not compile:\n{err}")
            objs.append(str(obj))
        tmp_lib = path.parent / f".{path.name}.{os.getpid()}"
        proc = subprocess.run([compiler, "-shared", *objs, "-o", str(tmp_lib)], capture_output=True, text=True)
        if proc.returncode != 0:
            tmp_lib.unlink(missing_ok=True)
            raise EmulatorBuildError(f"linking the emulator's {kernel} variant failed:\n{proc.stderr[-2000:]}")
        os.replace(tmp_lib, path)
    return path
