"""MUL_MAT on the tensor cores (kernels/mma.cu) for prompts over weights without an integer path: F16, Q2_K, Q3_K and
Q6_K (their scales are per 16 elements). A 64 x 64 output tile a block of 4 warps, weights decoded to F16 and src1
rounded to F16 in shared memory, F16 x F16 -> F32 WMMA fragments. Taken from MMA_MIN_COLS src1 columns on; fewer
take the mat-vec kernels."""

from __future__ import annotations

from pyggml.backend.op_table import src
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import Builder, tname

T = GGMLType
FILE = "mma.cu"
WEIGHTS = frozenset({T.F16, T.Q2_K, T.Q3_K, T.Q6_K})
"""Weight types the tensor-core kernel takes. Not F32 (F16 operands would round its values) nor BF16 (its range
is wider than F16's); the 32-element block types, Q4_K and Q5_K keep their exact integer path (matmul_q)."""
SRC1 = frozenset({T.F32, T.F16})
MMA_MIN_COLS = 32
"""src1 columns from which a MUL_MAT takes the tensor cores (this kernel, or mmq.cu's k_mmq_mma for the 32-element
block types): a prompt's batch, not decode."""
TILE = 64
"""Rows and columns of an output tile (MM_T in mma.cu)."""
THREADS = 128


def takes(node: Tensor) -> bool:
    """Whether the tensor-core kernel runs `node` (a MUL_MAT the shared rule accepts)."""
    a, c = src(node, 0), src(node, 1)
    return a.type in WEIGHTS and c.type in SRC1 and c.ne[1] >= MMA_MIN_COLS


def spec(wt: GGMLType, t1: GGMLType) -> ProgramSpec:
    return ProgramSpec.of(FILE, WT=tname(wt), T1=tname(t1), **{f"WT_IS_{tname(wt)}": 1})


def build_mul_mat(node: Tensor, b: Builder) -> None:
    a, c = src(node, 0), src(node, 1)
    b.launch(spec(a.type, c.type), "k_mul_mat_mma", (-(-a.ne[1] // TILE) * THREADS, -(-c.ne[1] // TILE),
                                                       c.ne[2] * c.ne[3]), (THREADS, 1, 1),
             *b.tensor(a), *b.tensor(c), *b.tensor(node))
