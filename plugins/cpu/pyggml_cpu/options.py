"""The cpu and blas devices' options (`pyggml.backend.options`), read when their registries enumerate the devices.
Pure Python: the registries name these classes without loading the compiled kernels."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pyggml.backend.option_parsers import count
from pyggml.backend.options import Options, option

THREADS_ENV = "PYGGML_CPU_THREADS"


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it, else the CPU count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def thread_count(text: str) -> int:
    try:
        return count(text)
    except ValueError:
        raise ValueError("not a thread count (an integer of at least 1)") from None


def _threads(doc: str, per_backend: bool) -> int:
    return option(factory=available_cores, env=THREADS_ENV, parse=thread_count, per_backend=per_backend,
                  aliases=("threads",), default_doc="the cores this process may use", doc=doc)


@dataclass(frozen=True)
class CpuOptions(Options):
    """Read when the cpu device is enumerated. A backend takes its own thread count: `init_backend("n_threads=4")`,
    `init_backend("4")` or `init_backend({"n_threads": 4})`."""

    label = "cpu"
    positional = "n_threads"
    n_threads: int = _threads("threads of a backend's pool (more than the cores this process may use are cut to "
                              "those, with a warning)", per_backend=True)


@dataclass(frozen=True)
class BlasOptions(CpuOptions):
    """Read when the blas device is enumerated (its backends take no options)."""

    label = "blas"
    n_threads: int = _threads("OpenBLAS's threads (one C thread widens the operands)", per_backend=False)
    lib: Path | None = option(None, env="PYGGML_BLAS_LIB", parse=lambda t: Path(t.strip()),
                              default_doc="scipy-openblas32, else numpy's OpenBLAS",
                              doc="an OpenBLAS shared library (cblas_sgemm) to use instead of those searched for")
