"""Matrix products (matmul.cl): MUL_MAT (mat-vec and tiled kernels; a mat-vec fused with what follows it, epilogue.py:
the ADD of a residual or bias, or a second mat-vec of the same src1 and the GLU of both), MUL_MAT_ID, OUT_PROD."""

from __future__ import annotations

from pyggml.backend.launch import WG, i64, round_up
from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.ops import epilogue
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import PLAIN, QUANT32, QUANT_READ, Builder, tname

rules: RuleSet[Builder] = RuleSet()

FILE = "matmul.cl"
WEIGHTS = PLAIN | QUANT_READ
Q_WG = 16
"""Local size (weight rows) of the quantised kernel."""
Q_NC = 4
"""Activation columns per work-item of the quantised kernel (NC in matmul_q.cl)."""
TILED_MIN_COLS = 8
"""MUL_MAT with at least this many src1 columns uses the tiled kernel (weights read once per 32 columns)."""
SHORT_ROW = 256
"""Rows (k) of at most this many elements take k_mul_mat_vec_short (one lane per output) below TILED_MIN_COLS."""


def spec(wt: GGMLType, t1: GGMLType) -> ProgramSpec:
    return ProgramSpec.of(FILE, WT=tname(wt), T1=tname(t1), WG=WG, **{f"WT_IS_{tname(wt)}": 1})


def _mm_ok(node: Tensor) -> bool:
    a, b = node.src[0], node.src[1]
    return (a is not None and b is not None and a.type in WEIGHTS and b.type in PLAIN and a.is_contiguous_rows()
            and node.type == GGMLType.F32)


def spec_q(wt: GGMLType, t1: GGMLType) -> ProgramSpec:
    has_min = wt.traits.vec_dot_type == GGMLType.Q8_1
    return ProgramSpec.of("matmul_q.cl", WT=tname(wt), T1=tname(t1), QA_SIZE=36 if has_min else 34,
                          HAS_MIN=int(has_min), **{f"WT_IS_{tname(wt)}": 1})


def build_mul_mat_q(node: Tensor, b: Builder) -> None:
    """Quantise the activations to the weights' dot partner (once for the MUL_MATs of a plan that share them),
    then integer block dots (ggml's CPU numerics)."""
    a, c = src(node, 0), src(node, 1)
    s = spec_q(a.type, c.type)
    nblk = c.ne[0] // 32
    qa = 36 if a.type.traits.vec_dot_type == GGMLType.Q8_1 else 34
    mem, fresh = b.derived(("quantized activations", qa), c, nblk * c.nrows() * qa)
    if fresh:  # else an earlier MUL_MAT of the plan quantised the same src1 (a layer's Q, K and V, say)
        b.launch_1d(s, "k_quantize_act", nblk * c.nrows(), *b.tensor(c), mem, i64(0))
    b.launch(s, "k_mul_mat_q", (round_up(a.ne[1], Q_WG), -(-c.ne[1] // Q_NC), c.ne[2] * c.ne[3]), (Q_WG, 1, 1),
             *b.tensor(a), mem, i64(0), *b.tensor(node), i64(c.ne[1]), i64(c.ne[2]))


def mat_vec(node: Tensor) -> bool:
    """Whether this family builds the MUL_MAT with a mat-vec kernel (k_mul_mat_vec or _short)."""
    return src(node, 0).type not in QUANT32 and src(node, 1).ne[1] < TILED_MIN_COLS


@rules.rule(Op.MUL_MAT, accepts=_mm_ok)
def build_mul_mat(node: Tensor, b: Builder, epi: epilogue.Epilogue | None = None) -> None:
    """epi: the nodes after it fused (mat-vec kernels only; epilogue.py), node's own result then not written."""
    a, c = src(node, 0), src(node, 1)
    if a.type in QUANT32:
        build_mul_mat_q(node, b)
        return
    s = spec(a.type, c.type)
    batches = c.ne[2] * c.ne[3]
    if c.ne[1] >= TILED_MIN_COLS:
        gx, gy = -(-a.ne[1] // 32) * 16, -(-c.ne[1] // 32) * 16
        b.launch(s, "k_mul_mat_tiled", (gx, gy, batches), (16, 16, 1), *b.tensor(a), *b.tensor(c), *b.tensor(node))
        return
    a2, e, d, code = epilogue.kernel_args(epi, node, b)
    args = (*b.tensor(a), *a2, *b.tensor(c), *e, *d, code)
    if a.ne[0] <= SHORT_ROW:
        b.launch(s, "k_mul_mat_vec_short", (round_up(a.ne[1], WG), c.ne[1], batches), (WG, 1, 1), *args)
    else:
        b.launch(s, "k_mul_mat_vec", (a.ne[1] * WG, c.ne[1], batches), (WG, 1, 1), *args)


epilogue.add_fusions(rules, mat_vec, build_mul_mat)


@rules.rule(Op.MUL_MAT_ID, accepts=_mm_ok)
def build_mul_mat_id(node: Tensor, b: Builder) -> None:
    a, c, ids = src(node, 0), src(node, 1), src(node, 2)
    b.launch(spec(a.type, c.type), "k_mul_mat_id", (a.ne[1] * WG, ids.ne[0], ids.ne[1]), (WG, 1, 1),
             *b.tensor(a), *b.tensor(c), *b.tensor(ids), *b.tensor(node),
             *b.error_args(f"an expert id outside 0..{a.ne[2] - 1}"))


def _out_prod_ok(node: Tensor) -> bool:
    a, c = node.src[0], node.src[1]
    return (a is not None and c is not None and a.type in WEIGHTS and c.type in PLAIN
            and (a.type in PLAIN or a.is_contiguous_rows()))


@rules.rule(Op.OUT_PROD, accepts=_out_prod_ok)
def build_out_prod(node: Tensor, b: Builder) -> None:
    a, c = src(node, 0), src(node, 1)
    b.launch_1d(spec(a.type, c.type), "k_out_prod", node.nelements(), *b.tensor(a), *b.tensor(c),
                *b.tensor(node))
