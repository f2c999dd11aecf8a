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

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "pyggml_cpu._pgc",
    '#include "api.h"\n',
    sources=[os.path.join("pyggml_cpu", "csrc", s) for s in SOURCES],
    include_dirs=[CSRC],
    extra_compile_args=COMPILE_ARGS + (["-g0"] if STRIP else []),
    extra_link_args=["-s"] if STRIP else [],
    libraries=LIBRARIES,
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
