"""Kernel programs on OpenCL: compilation once per device, and a disk cache.

A program is one dialect kernel file specialised by defines (`pyggml_dialect.source.ProgramSpec`); its text comes
from `pyggml_dialect.source.source_of` (the CUDA plugin compiles the same text with nvcc). Binaries are cached
under `$PYGGML_CACHE_DIR/opencl` (default `~/.cache/pyggml/opencl`), keyed by device name, driver version,
platform version, build options and the source hash (the folder: `OpenCLOptions.cache_dir`). A cached binary that
fails to load is rebuilt from source.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, cast

from pyggml.errors import ComputeError
from pyggml_dialect.source import ProgramSpec, numbered, source_of

if TYPE_CHECKING:
    import pyopencl as cl
    from pyopencl._cl import _Program  # what this cache builds: the binding's program, not the wrapper

log = logging.getLogger(__name__)

BUILD_OPTIONS = "-cl-std=CL1.2 -DPYGGML_OPENCL=1"
EXACT_DIV_SQRT = "-cl-fp32-correctly-rounded-divide-sqrt"
"""Added where the device offers it: OpenCL lets float division and sqrt be off by ulps otherwise, and the
quantisers' scales must round as the reference's (byte-exact blocks)."""


class KernelBuildError(ComputeError):
    """An OpenCL program failed to compile; the message holds the generated source and the compiler log."""


class ProgramCache:
    """Built programs of one device (in memory, and on disk across processes)."""

    def __init__(self, ctx: cl.Context, device: cl.Device, label: str, device_defines: tuple[tuple[str, str], ...] = (),
                 options: str = BUILD_OPTIONS, *, cache_dir: Path | None = None) -> None:
        """`cache_dir`: the folder of the disk cache (`OpenCLOptions.cache_dir`); None: no disk cache."""
        self.ctx = ctx
        self.cache_dir = cache_dir
        self.device_defines = device_defines
        """Defines every program of this device gets (PYGGML_FP64 ...)."""
        self.options = options
        """Compiler options of every program of this device."""
        self.device = device
        self.label = label
        self._programs: dict[ProgramSpec, _Program] = {}
        self._lock = threading.Lock()
        platform = device.platform
        self._identity = f"{device.name}|{device.driver_version}|{device.version}|{platform.version}|{options}"
        self.builds = 0
        """Programs compiled from source in this process (not loaded from the disk cache)."""

    def program(self, spec: ProgramSpec) -> _Program:
        prg = self._programs.get(spec)
        if prg is None:
            with self._lock:
                prg = self._programs.get(spec)
                if prg is None:
                    prg = self._load_or_build(spec)
                    self._programs[spec] = prg
        return prg

    def kernel(self, spec: ProgramSpec, name: str) -> cl.Kernel:
        """A new kernel object (each launch of a plan owns one, so its arguments stay set)."""
        import pyopencl as cl

        return cl.Kernel(self.program(spec), name)

    # ---- internals ---------------------------------------------------------------------------------------

    def _load_or_build(self, spec: ProgramSpec) -> _Program:
        import pyopencl as cl

        source = source_of(spec, self.device_defines)
        if self.cache_dir is None:
            return self._build(spec, source)
        key = hashlib.sha256(f"{self._identity}\n{source}".encode()).hexdigest()
        path = self.cache_dir / f"{key}.bin"
        if path.exists():
            try:
                prg = cl._cl._Program(self.ctx, [self.device], [path.read_bytes()])
                prg.build(self.options.encode(), [self.device])
                return prg
            except (cl.Error, OSError) as e:
                log.warning("%s: cached program %s is unusable (%s); rebuilding", self.label, path, e)
        prg = self._build(spec, source)
        try:
            binary = cast(list[bytes], prg.get_info(cl.program_info.BINARIES))[0]  # one device: one binary
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(binary)
            os.replace(tmp, path)
        except (cl.Error, OSError) as e:
            log.warning("%s: cannot cache program %s: %s", self.label, spec.file, e)
        return prg

    def _build(self, spec: ProgramSpec, source: str) -> _Program:
        import pyopencl as cl

        prg = cl._cl._Program(self.ctx, source)
        try:
            prg.build(self.options.encode(), [self.device])
        except cl.Error as e:
            try:
                build_log = prg.get_build_info(self.device, cl.program_build_info.LOG)
            except cl.Error:
                build_log = "(no build log)"
            defines = " ".join(f"{k}={v}" for k, v in spec.defines)
            msg = (f"{self.label}: building {spec.file} [{defines}] failed: {e}\n"
                   f"---- generated source ----\n{numbered(source)}\n---- compiler log ----\n{build_log}")
            log.error("%s", msg)
            raise KernelBuildError(msg) from e
        self.builds += 1
        log.info("%s: built %s %s", self.label, spec.file, spec.defines)
        return prg
