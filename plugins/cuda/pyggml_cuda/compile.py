"""Kernel compilation with nvcc in a subprocess: no driver and no GPU needed.

A kernel program is a `pyggml_dialect.source.ProgramSpec` (a file and its defines). Its text is either a dialect
kernel file of pyggml-dialect (through `pyggml_dialect.source.source_of`, the text the OpenCL plugin compiles too,
op-code preludes included) or a fast path of this package (`kernelsrc/*.cu`, includes resolved here first, then by
the dialect's loader: its `kernelsrc/`, then pyggml's shared C-family source, `pyggml.kernelsrc`, where dialect.h
lives). Each specialised
text is a `Variant`, tagged by the hash of its text; its kernels are called NAME__TAG on the device.

nvcc runs once per `Bundle`: several variants of one file in one translation unit (the CUDA prelude, then each
variant inside its own namespace with its kernels renamed and its macros undefined after it), so a file's shared
headers are parsed and its process started once for many specialisations. Each bundle becomes one fatbin with
sm_80 and sm_90 machine code and compute_90 PTX (newer GPUs JIT it), plus the kernels' parameter lists read from
the PTX, which the plan builder checks every launch against. Results are cached on disk under
`CudaOptions.cache_dir` (`$PYGGML_CACHE_DIR/cuda`, default `~/.cache/pyggml/cuda`), keyed by the nvcc version,
the flags and the text.

Every kernel the op table launches is compiled and checked by the CUDA plugin's test tooling:

    python -m pyggml_cuda_testing.check --check      # plugins/cuda/testing (pyggml-cuda-testing)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pyggml.errors import ComputeError
from pyggml_dialect.source import ProgramSpec, expand, source_of

log = logging.getLogger(__name__)

KERNELSRC_DIR = Path(__file__).parent / "kernelsrc"
PRELUDE = "prelude.cuh"
ARCHS = ("80", "90")
"""Machine code targets (sm_XX); PTX of the last one is embedded for newer GPUs."""
FLAGS = ("-O3", "-std=c++17", "--fmad=false", "-fatbin", "-x", "cu")  # no FMA contraction: see dialect.h
TIMEOUT_S = 600
BUCKETS = 4
"""A file's variants are spread over at most this many bundles (by tag), so CPUs compile them side by side and a
new variant recompiles one bucket only."""
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)
_KERNEL = re.compile(r"\bKERNEL\s+void\s+(\w+)\s*\(")
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)", re.MULTILINE)


class KernelBuildError(ComputeError):
    """nvcc failed (or is missing); the message names the program and holds the source lines and nvcc's log."""


# ---- variants: one specialised kernel text -----------------------------------------------------------------------


def own_file(name: str) -> bool:
    return (KERNELSRC_DIR / name).is_file()


def _expand_own(name: str, seen: set[str]) -> str:
    """A file of this package with includes resolved here first, then among the dialect's headers."""

    def repl(m: re.Match[str]) -> str:
        inc = m.group(1)
        if inc in seen:
            return f"/* {inc} already included */"
        seen.add(inc)
        body = _expand_own(inc, seen) if own_file(inc) else expand(inc, seen)
        return f"/* ---- {inc} ---- */\n{body}\n/* ---- end {inc} ---- */"

    try:
        text = (KERNELSRC_DIR / name).read_text()
    except OSError as e:
        raise KernelBuildError(f"CUDA kernel file {KERNELSRC_DIR / name} cannot be read: {e}") from e
    return _INCLUDE.sub(repl, text)


@dataclass(frozen=True, slots=True)
class Variant:
    spec: ProgramSpec
    source: str
    """The text compiled for this spec alone (defines, op codes, the file with its includes expanded)."""
    tag: str
    kernels: tuple[str, ...]

    def symbol(self, kernel: str) -> str:
        """The kernel's name in the compiled module."""
        return f"{kernel}__{self.tag}"


@cache
def variant(spec: ProgramSpec) -> Variant:
    if own_file(spec.file):
        head = "".join(f"#define {k} {v}\n" for k, v in spec.defines)
        source = f"/* pyggml CUDA program: {spec.file} */\n{head}{_expand_own(spec.file, set())}\n"
    else:
        source = source_of(spec)
    tag = hashlib.sha256(source.encode()).hexdigest()[:12]
    return Variant(spec, source, tag, tuple(dict.fromkeys(_KERNEL.findall(source))))


def label(spec: ProgramSpec) -> str:
    return f"{spec.file} [{' '.join(f'{k}={v}' for k, v in spec.defines)}]"


# ---- bundles: one translation unit, one nvcc run -------------------------------------------------------------------


def bundle_source(variants: Sequence[Variant]) -> tuple[str, list[tuple[int, Variant]]]:
    """The translation unit of `variants` (one file) and the first line of each variant in it."""
    lines: list[str] = [f"/* pyggml CUDA bundle: {len(variants)} variant(s) */", (KERNELSRC_DIR / PRELUDE).read_text()]
    starts: list[tuple[int, Variant]] = []
    for v in variants:
        names = list(v.kernels)
        macros = list(dict.fromkeys(_DEFINE.findall(v.source)))
        lines.append(f"namespace pgv_{v.tag} {{  /* {label(v.spec)} */")
        lines.extend(f"#define {k} {v.symbol(k)}" for k in names)
        starts.append((sum(s.count("\n") + 1 for s in lines) + 1, v))
        lines.append(v.source)
        lines.extend(f"#undef {m}" for m in (*names, *macros))
        lines.append(f"}}  /* pgv_{v.tag} */")
    return "\n".join(lines) + "\n", starts


@dataclass(frozen=True, slots=True)
class Toolchain:
    nvcc: str
    version: str
    archs: tuple[str, ...] = ARCHS

    @property
    def gencode(self) -> tuple[str, ...]:
        out: list[str] = []
        for a in self.archs[:-1]:
            out += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
        last = self.archs[-1]
        return (*out, "-gencode", f"arch=compute_{last},code=[sm_{last},compute_{last}]")

    @property
    def identity(self) -> str:
        """What, besides the source, decides the compiled bytes."""
        return hashlib.sha256(f"{self.version}|{' '.join((*FLAGS, *self.gencode))}".encode()).hexdigest()[:16]

    def with_arch(self, arch: str) -> Toolchain:
        return self if arch in self.archs else Toolchain(self.nvcc, self.version, tuple(sorted({*self.archs, arch})))


def find_nvcc(named: str | None = None) -> str | None:
    """`named` (`CudaOptions.nvcc`), else nvcc on PATH, else in CUDA's conventional folders ($CUDA_HOME, $CUDA_PATH:
    CUDA's own variables, not pyggml options)."""
    if named:
        return named
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "bin", "nvcc")):
            return os.path.join(root, "bin", "nvcc")
    return None


_TOOLCHAIN: dict[str, Toolchain] = {}


def toolchain(named: str | None = None) -> Toolchain:
    """nvcc (`find_nvcc(named)`) and its version (asked once per process and nvcc); KernelBuildError when there is
    none."""
    nvcc = find_nvcc(named)
    if nvcc is None:
        raise KernelBuildError("nvcc is not on PATH (nor PYGGML_NVCC, $CUDA_HOME/bin): CUDA kernels cannot be "
                               "compiled; install CUDA's compiler")
    tc = _TOOLCHAIN.get(nvcc)
    if tc is None:
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60, check=True).stdout
        except (OSError, subprocess.SubprocessError) as e:
            raise KernelBuildError(f"{nvcc} --version failed: {e}") from e
        version = next((ln.strip() for ln in out.splitlines() if ln.startswith("Cuda compilation tools")), out.strip())
        tc = _TOOLCHAIN[nvcc] = Toolchain(nvcc, version)
    return tc


# ---- PTX signatures --------------------------------------------------------------------------------------------

_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\((.*?)\)", re.DOTALL)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.([busf])(8|16|32|64)\b(?:\s+\.ptr[^\n,]*?)?\s+\w+(?:\[(\d+)\])?")


def ptx_signatures(ptx: str) -> dict[str, list[str]]:
    """kernel -> parameter types ('u64', 'f32', 'b8x16' ...) of every entry point of a PTX text."""
    out: dict[str, list[str]] = {}
    for name, params in _ENTRY.findall(ptx):
        sig: list[str] = []
        for kind, bits, count in _PARAM.findall(params):
            sig.append(f"{kind}{bits}x{count}" if count else f"{kind}{bits}")
        out[name] = sig
    return out


# ---- the cache and the compile step -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bundle:
    key: str
    fatbin: Path
    signatures: dict[str, list[str]]
    tags: tuple[str, ...]

    def image(self) -> bytes:
        return self.fatbin.read_bytes()


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class KernelCache:
    """Compiled bundles on disk (one folder per toolchain identity) and the index tag -> bundle in memory."""

    def __init__(self, root: Path, tc: Toolchain | None = None, strict: bool = False, *,
                 nvcc: str | None = None) -> None:
        """`root`: the cache folder (`CudaOptions.cache_dir`); `tc`: the toolchain, else the one of `nvcc`
        (`CudaOptions.nvcc`) found when first needed."""
        self.root = root
        self._nvcc = nvcc
        self._tc = tc
        self.strict = strict
        """Only bundles of this very toolchain count (`--check`); otherwise a bundle another nvcc built from the
        same text serves too (a cache carried to a machine whose nvcc is a different build)."""
        self._index: dict[str, Bundle] | None = None
        self._lock = threading.Lock()
        self.compiled = 0
        """Bundles this object compiled (not found on disk)."""

    @property
    def toolchain(self) -> Toolchain:
        if self._tc is None:
            self._tc = toolchain(self._nvcc)
        return self._tc

    def _dir(self) -> Path:
        return self.root / self.toolchain.identity

    def _search_dirs(self) -> list[Path]:
        """This toolchain's folder first, then (unless strict, or without nvcc) every other toolchain's."""
        others = sorted(p for p in self.root.iterdir() if p.is_dir() and p.name != "failed") \
            if self.root.is_dir() else []
        try:
            own = self._dir()
        except KernelBuildError:
            return others
        return [own] if self.strict else [own, *(p for p in others if p != own)]

    def index(self) -> dict[str, Bundle]:
        """tag -> bundle for every bundle on disk (read once; the first folder that has a tag wins)."""
        with self._lock:
            if self._index is None:
                self._index = {}
                for d in self._search_dirs():
                    for meta in sorted(d.glob("*.json")):
                        b = _load_meta(meta)
                        if b is not None:
                            for t in b.tags:
                                self._index.setdefault(t, b)
            return self._index

    def lookup(self, v: Variant) -> Bundle | None:
        return self.index().get(v.tag)

    def ensure(self, variants: Iterable[Variant], jobs: int | None = None) -> dict[str, Bundle]:
        """Every variant's bundle, compiling the missing ones (grouped by file and bucket, `jobs` nvcc at once)."""
        todo: dict[tuple[str, int], dict[str, Variant]] = {}
        out: dict[str, Bundle] = {}
        for v in variants:
            b = self.lookup(v)
            if b is not None:
                out[v.tag] = b
            else:
                todo.setdefault((v.spec.file, int(v.tag, 16) % BUCKETS), {})[v.tag] = v
        groups = [sorted(g.values(), key=lambda x: x.tag) for g in todo.values()]
        if groups:
            n = max(1, min(jobs or os.cpu_count() or 1, len(groups)))
            with ThreadPoolExecutor(n) as pool:
                for b in pool.map(self.compile, groups):
                    out.update((t, b) for t in b.tags)
        return out

    def compile(self, variants: Sequence[Variant]) -> Bundle:
        """One nvcc run for `variants` (a cache hit runs nothing)."""
        tc = self.toolchain
        source, starts = bundle_source(variants)
        key = hashlib.sha256(f"{tc.identity}\n{source}".encode()).hexdigest()[:32]
        meta = self._dir() / f"{key}.json"
        cached = _load_meta(meta) if meta.exists() else None
        if cached is not None:
            self._remember(cached)
            return cached
        with tempfile.TemporaryDirectory(prefix="pyggml-nvcc-") as tmp:
            src = Path(tmp) / "bundle.cu"
            src.write_text(source)
            out = Path(tmp) / "bundle.fatbin"
            cmd = [tc.nvcc, *FLAGS[:-2], *tc.gencode, "-keep", "-keep-dir", tmp, "-o", str(out), *FLAGS[-2:],
                   str(src)]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp)
            except (OSError, subprocess.SubprocessError) as e:
                raise KernelBuildError(f"nvcc did not run for {_names(variants)}: {e}") from e
            if r.returncode != 0 or not out.exists():
                raise KernelBuildError(self._failure(variants, source, starts, r.stdout + r.stderr, key))
            ptx = next(Path(tmp).glob(f"*compute_{tc.archs[-1]}.ptx"), None)
            sigs = ptx_signatures(ptx.read_text()) if ptx is not None else {}
            fatbin = out.read_bytes()
        bundle = Bundle(key, self._dir() / f"{key}.fatbin", sigs, tuple(v.tag for v in variants))
        _write_atomic(bundle.fatbin, fatbin)
        specs = [[v.spec.file, [list(d) for d in v.spec.defines]] for v in variants]
        _write_atomic(meta, json.dumps({"tags": bundle.tags, "signatures": sigs, "specs": specs,
                                        "toolchain": tc.version}).encode())
        self.compiled += 1
        log.info("nvcc: compiled %s", _names(variants))
        self._remember(bundle)
        return bundle

    def _remember(self, b: Bundle) -> None:
        idx = self.index()
        with self._lock:
            idx.update((t, b) for t in b.tags)

    def _failure(self, variants: Sequence[Variant], source: str, starts: list[tuple[int, Variant]], nvcc_log: str,
                 key: str) -> str:
        kept = self.root / "failed" / f"{key}.cu"
        try:
            _write_atomic(kept, source.encode())
        except OSError:
            kept = Path("(not kept)")
        lines = source.splitlines()
        shown: list[str] = []
        for ln in sorted({int(m) for m in re.findall(r"bundle\.cu\((\d+)\)", nvcc_log)})[:8]:
            owner = next((v for s, v in reversed(starts) if s <= ln), None)
            where = f" in {label(owner.spec)}" if owner is not None else ""
            shown.append(f"---- around line {ln}{where} ----")
            shown.extend(f"{i + 1:6d}  {lines[i]}" for i in range(max(0, ln - 6), min(len(lines), ln + 3)))
        if not shown:
            shown = [f"{i + 1:6d}  {t}" for i, t in enumerate(lines[:200])]
        return (f"nvcc failed for {_names(variants)}\n---- source ({kept}) ----\n" + "\n".join(shown)
                + f"\n---- nvcc log ----\n{nvcc_log.strip()}")


def _load_meta(meta: Path) -> Bundle | None:
    fatbin = meta.with_suffix(".fatbin")
    try:
        d = json.loads(meta.read_text())
        if not fatbin.is_file():
            return None
        return Bundle(meta.stem, fatbin, {k: list(v) for k, v in d["signatures"].items()}, tuple(d["tags"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("CUDA kernel cache entry %s is unreadable (%s); it will be rebuilt", meta, e)
        return None


def _names(variants: Sequence[Variant]) -> str:
    if len(variants) == 1:
        return label(variants[0].spec)
    return f"{variants[0].spec.file} ({len(variants)} variants)"

