"""The C-family kernel source shared by the compiled backends (package data, no Python).

`dialect.h` makes one text serve OpenCL C, CUDA C++ and host C, and the helpers written in it (`blocks.h`,
`quantize.h`, `kquantize.h`: ggml's block layouts and reference quantisers; `act_ext.h`: the parameterised
activations EXPM1, XIELU, SWIGLU_OAI, SWIGLU_CLAMP) are compiled from here by the cpu
plugin (gcc, at build time), the OpenCL plugin (its program loader expands includes from this folder after its own
kernel folder) and the CUDA plugin (through the OpenCL loader). One source per algorithm: the byte-exact tests of
each backend then check one text, not copies held together by tests.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["directory"]


def directory() -> Path:
    """The folder holding the shared headers (an include directory for a C compiler)."""
    return Path(__file__).resolve().parent
