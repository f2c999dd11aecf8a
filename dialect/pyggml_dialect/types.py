"""The host side of the dialect kernels' types: the type sets the kernel texts (kernelsrc/*.cl and their headers)
read and write, the type names they are specialised by, and the builder type the op rules launch through
(`pyggml.backend.launch.LaunchBuilder` over `ProgramSpec`; the OpenCL and the CUDA plugin each implement one)."""

from __future__ import annotations

from pyggml.backend.launch import LaunchBuilder
from pyggml.types import GGMLType
from pyggml_dialect.source import ProgramSpec

T = GGMLType
PLAIN = frozenset({T.F32, T.F16, T.BF16})
"""Float types every element-wise kernel reads and writes."""
COPY_TYPES = PLAIN | frozenset({T.I32, T.I16, T.I8})
"""Types CPY / DUP convert between element by element (elementwise.cl)."""
SAME_TYPE = COPY_TYPES | frozenset({T.I64})
"""Types the layout kernels move unchanged, source and destination of one type (layout.cl)."""
QUANT32 = frozenset({T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.IQ4_NL})
"""Block types with 32-element blocks that kernels read element by element (quants.h)."""
KQUANTS = frozenset({T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K})
"""256-element block types read element by element (kquants.h): GET_ROWS, MUL_MAT (f32 activations)."""
QUANT_READ = QUANT32 | KQUANTS
QUANT_WRITE = QUANT32 | KQUANTS
"""Block types kernels can write (SET_ROWS / CPY): ggml's reference quantisers, byte for byte (quants.h,
kquantize.h)."""

Builder = LaunchBuilder[ProgramSpec]
"""What a dialect rule's `build(node, b)` appends its launches to (the OpenCL or the CUDA plan builder)."""


def tname(t: GGMLType) -> str:
    """A type's name in the kernel dialect (the define value): f32, f16, q4_0 ..."""
    return str(t)
