"""cffi API-mode build of the C kernels (run at install by setup.py's cffi_modules).

No -march flag is passed: the x86-64 SIMD kernels are compiled under `#pragma GCC target` in their own file and
chosen at run time from CPU features, so one build runs on any CPU of its architecture.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(HERE, "csrc")
SOURCES = sorted(p.name for p in Path(CSRC).glob("*.c"))
KERNELSRC_COPY = os.path.join(HERE, "kernelsrc")
"""Where an sdist carries its copy of pyggml's shared C-family source (setup.py's sdist writes it)."""
KERNELSRC_CHECKOUT = os.path.normpath(os.path.join(HERE, "..", "..", "..", "core", "pyggml", "kernelsrc"))


def find_kernelsrc() -> str | None:
    """The include folder of pyggml's shared C-family source (dialect.h, blocks.h, quantize.h, kquantize.h: the block
    quantisers the OpenCL and CUDA kernels compile too): an sdist's copy, else the checkout's core/pyggml/kernelsrc
    (a build from the repository: editable install, `make wheels-smoke`); None when neither is there (setup.py's
    build_ext then stops with a message)."""
    for d in (KERNELSRC_COPY, KERNELSRC_CHECKOUT):
        if os.path.isfile(os.path.join(d, "dialect.h")):
            return d
    return None


def kernelsrc_dir() -> str:
    """find_kernelsrc(), which must have found the folder."""
    d = find_kernelsrc()
    if d is None:
        raise RuntimeError(f"pyggml-cpu: pyggml's shared kernel source (dialect.h) is in neither {KERNELSRC_COPY} "
                           f"(an sdist's copy) nor {KERNELSRC_CHECKOUT} (a checkout)")
    return d


INCLUDE_DIRS = [CSRC, *filter(None, [find_kernelsrc()])]
"""The C include folders (tests/test_cpu_simd_harness.py builds its harness with the same ones)."""


def _cdef_part(name: str) -> str:
    """The declarations between the cdef-begin and cdef-end markers of a C header (comments dropped)."""
    text = Path(CSRC, name).read_text(encoding="utf-8")
    body = text.split("cdef-begin", 1)[1].split("*/", 1)[1].split("/* cdef-end", 1)[0]
    for macro, value in re.findall(r"#define (PGC_\w+) (\d+)", text):  # cffi wants plain numbers in arrays
        body = body.replace(macro, value)
    return re.sub(r"/\*.*?\*/", "", body, flags=re.S)


CDEF = _cdef_part("pgc.h") + _cdef_part("api.h")
COMPILE_ARGS = ["-O3", "-std=gnu11", "-pthread", "-fno-strict-aliasing", "-ffp-contract=off", "-Wall",
                "-Wno-unused-function"]
"""The C flags of the wheel (tests/test_cpu_simd_harness.py builds its harness with the same ones)."""
LIBRARIES = ["m", "dl", "pthread"] if sys.platform != "win32" else []
# the shipped extension carries no debug info nor symbol table (3.8 MB -> well under 1 MB); PYGGML_CPU_DEBUG=1 keeps
# both, for gdb or perf on an editable install
STRIP = not os.environ.get("PYGGML_CPU_DEBUG") and sys.platform.startswith("linux")

SANITIZE_ARGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-g"]
"""AddressSanitizer and UndefinedBehaviorSanitizer (any UB report ends the process): PYGGML_CPU_SANITIZE=1 at build
time (`make sanitize` builds a copy so: tests/run_sanitized.py). Run under LD_PRELOAD of libasan."""
SANITIZE_OPT = ["-O1"]
"""The sanitized extension's optimisation, after COMPILE_ARGS' -O3: ASan's advice for reports that point at the
line, and measured here a quarter of -O3's build time (74 s against 260 s on 2 cores)."""
SANITIZE = bool(os.environ.get("PYGGML_CPU_SANITIZE"))


def make_ffibuilder(sanitize: bool = SANITIZE) -> FFI:
    """The cffi builder of pyggml_cpu._pgc (sources named from setup.py's folder, where the build runs); sanitize:
    with SANITIZE_ARGS, symbols kept."""
    strip = STRIP and not sanitize
    csrc = os.path.join("pyggml_cpu", "csrc")
    # the headers too: without them an edit to a kernel header leaves a stale extension in place
    headers = sorted(str(h) for d in INCLUDE_DIRS for h in Path(d).glob("*.h"))
    ffi = FFI()
    ffi.cdef(CDEF)
    ffi.set_source(
        "pyggml_cpu._pgc",
        '#include "api.h"\n',
        sources=[os.path.join(csrc, s) for s in SOURCES],
        include_dirs=INCLUDE_DIRS,
        depends=headers,
        extra_compile_args=(COMPILE_ARGS + (["-g0"] if strip else [])
                            + (SANITIZE_ARGS + SANITIZE_OPT if sanitize else [])),
        extra_link_args=(["-s"] if strip else []) + (SANITIZE_ARGS[:1] if sanitize else []),
        libraries=LIBRARIES,
    )
    return ffi


ffibuilder = make_ffibuilder()


if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
