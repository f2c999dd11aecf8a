"""This plugin's MUL_MAT. 32-element block weights (and, past decode, Q4_K / Q5_K by their 32-element sub-blocks)
take the integer kernels of kernels/mmq.cu: the activations are
quantised by the shared k_quantize_act into the q8_1 layout (the 36-byte blocks of q4_1's dot partner: d, s = d *
sum, 4-byte aligned qs), then k_mmvq (dp4a, up to MV_MAXC columns), k_mmq_mma (8-bit tensor-core fragments, from
matmul_mma.MMA_MIN_COLS columns) or k_mmq (dp4a tiles, between those, or with the backend's `mma` option off), all
with the same exact block sums. Prompts over F16 and the other K types take the tensor cores of matmul_mma (unless
`mma` is off); the rest the shared rule."""

from __future__ import annotations

from pyggml.backend.launch import i64
from pyggml.backend.op_table import Rule, RuleSet, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_cuda.launch import CudaLaunchBuilder
from pyggml_cuda.ops import matmul_mma
from pyggml_dialect.ops import epilogue
from pyggml_dialect.ops import matmul as shared
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import QUANT32, Builder, tname

FILE = "mmq.cu"
QA = 36
"""Bytes of one q8_1 activation block (QA in mmq.cu)."""
MV_NW = 4
"""Weight rows (warps) per block of k_mmvq (MV_NW in mmq.cu)."""
MV_MAXC = 8
"""Most src1 columns k_mmvq takes (MV_MAXC in mmq.cu); more go to the tiled k_mmq."""
MQ_T = 64
"""Rows and columns of a k_mmq tile (MQ_T in mmq.cu)."""
MQ_THREADS = 256
MT_THREADS = 128
"""Threads (4 warps) of k_mmq_mma, the tile on the tensor cores (MT_THREADS in mmq.cu)."""


def act_spec(t1: GGMLType) -> ProgramSpec:
    """The shared quantiser's program for the q8_1 layout: q4_1's (k_quantize_act reads only T1, QA_SIZE, HAS_MIN),
    so no program beyond the OpenCL plugin's own is compiled for it."""
    return shared.spec_q(GGMLType.Q4_1, t1)


K_SUBBLOCKS = frozenset({GGMLType.Q4_K, GGMLType.Q5_K})
"""K types whose 32-element sub-blocks have one scale and minimum each, so the integer tiles take them as blocks (their
dot with q8_1 activations, as llama.cpp's CUDA backend takes it). At decode they keep the shared float mat-vec,
which needs no quantising launch before it (the tiles' kernels do: a prompt amortises it)."""
INTEGER = QUANT32 | K_SUBBLOCKS
"""Weight types the integer kernels take (mmq.cu's pg_decode_at)."""
WITH_MIN = frozenset({GGMLType.Q4_1, GGMLType.Q5_1, GGMLType.Q4_K, GGMLType.Q5_K})
"""Weight types whose blocks carry a minimum (HAS_MIN in mmq.cu: value = d q + m)."""


def spec(wt: GGMLType) -> ProgramSpec:
    has_min = wt in WITH_MIN
    return ProgramSpec.of(FILE, WT=tname(wt), HAS_MIN=int(has_min), **{f"WT_IS_{tname(wt)}": 1})


def tensor_cores(b: Builder) -> bool:
    """Whether the plan takes the tensor-core kernels where they apply (`CudaOptions.mma`)."""
    return isinstance(b, CudaLaunchBuilder) and b.mma


def build_mul_mat(node: Tensor, b: Builder, epi: epilogue.Epilogue | None = None) -> None:
    """epi: the nodes after it fused (mat-vec kernels only, `mat_vec`; pyggml_dialect.ops.epilogue)."""
    a, c = src(node, 0), src(node, 1)
    if a.type not in INTEGER or (a.type in K_SUBBLOCKS and shared.mat_vec(node)):
        if tensor_cores(b) and matmul_mma.takes(node):
            matmul_mma.build_mul_mat(node, b)
        else:
            shared.build_mul_mat(node, b, epi)
        return
    nblk = c.ne[0] // 32
    mem, fresh = b.derived(("quantized activations", QA), c, nblk * c.nrows() * QA)
    if fresh:  # else an earlier MUL_MAT of the plan quantised the same src1 (a layer's Q, K and V, say)
        b.launch_1d(act_spec(c.type), "k_quantize_act", nblk * c.nrows(), *b.tensor(c), mem, i64(0))
    batches = c.ne[2] * c.ne[3]
    args = (*b.tensor(a), mem, i64(0), *b.tensor(node), i64(c.ne[1]), i64(c.ne[2]))
    if c.ne[1] <= MV_MAXC:
        threads = 32 * MV_NW
        a2, e, d, code = epilogue.kernel_args(epi, node, b)
        b.launch(spec(a.type), "k_mmvq", (-(-a.ne[1] // MV_NW) * threads, 1, batches), (threads, 1, 1),
                 *b.tensor(a), *a2, mem, i64(0), *e, *d, i64(c.ne[1]), i64(c.ne[2]), code)
    elif tensor_cores(b) and c.ne[1] >= matmul_mma.MMA_MIN_COLS:
        b.launch(spec(a.type), "k_mmq_mma", (-(-a.ne[1] // MQ_T) * MT_THREADS, -(-c.ne[1] // MQ_T), batches),
                 (MT_THREADS, 1, 1), *args)
    else:
        b.launch(spec(a.type), "k_mmq", (-(-a.ne[1] // MQ_T) * MQ_THREADS, -(-c.ne[1] // MQ_T), batches),
                 (MQ_THREADS, 1, 1), *args)


def mat_vec(node: Tensor) -> bool:
    """Whether build_mul_mat runs the MUL_MAT with a mat-vec kernel (k_mmvq, or the shared rule's)."""
    return src(node, 1).ne[1] <= MV_MAXC if src(node, 0).type in QUANT32 else shared.mat_vec(node)


rules: RuleSet[Builder] = RuleSet()
rules.add(Op.MUL_MAT, Rule(shared.rules.rules[Op.MUL_MAT].accepts, build_mul_mat))
"""MUL_MAT: the shared rule's support (decided once, by the dialect rules), this plugin's launches."""


epilogue.add_fusions(rules, mat_vec, build_mul_mat)
"""The mat-vec fusions, in place of the shared rule's: k_mmvq takes the epilogue too."""
