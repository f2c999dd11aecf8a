"""MUL_MAT: a (any readable type, block types dequantised in registers) x b (f32/f16) -> f32; MUL_MAT_ID (the same
shaders, the expert of each column looked up in the ids); OUT_PROD."""

from __future__ import annotations

from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import PLAIN, QUANTS, READABLE, generic_pc, grid, groups_for, loop_share, patch_pc, srcs_ok

rules: RuleSet[Builder] = RuleSet()

Q8_DOT = QUANTS - {GGMLType.Q8_1}
"""Weights whose product uses activations quantised to ggml's dot partner (Q8_0 / Q8_1 / Q8_K), as ggml's CPU
backend computes it; this is what makes greedy tokens equal to the CPU backend's."""
NC_MAX = 8
WG = 64
"""Columns of b per work group (each a element loaded once for all of them)."""
LOOP_BUDGET = loop_share(1)
"""Elements of a row one thread multiplies on a CPU-emulated device. lavapipe (llvmpipe) ends an invocation's loops
after 65535 iterations, counted over all its loops together (a K-quant super-block's 256-step dequantisation loop
counts each step), and silently: a K of 70,000 came out 6% low, 131,072 50%. Threads share a row until each has at
most this many elements (2^15); the rest of LAVAPIPE_LOOPS is left to the shader's other loops."""
MAX_K = WG * LOOP_BUDGET
"""Longest row (K) a work group of WG threads takes within that budget (2^21, as the norms' MAX_ROW); longer rows
are left to another backend."""


def _mul_mat_ok(node: Tensor) -> bool:
    a = node.src[0]
    if a is None or a.ne[0] > MAX_K or not srcs_ok(node, (READABLE, PLAIN)):
        return False
    return a.type in PLAIN or a.ne[0] % 32 == 0


def quantize_activations(a_type: GGMLType, b: Tensor, p: Builder) -> tuple[Tensor, Tensor]:
    """b quantised to a_type's dot partner in scratch memory: (the scratch bytes, a layout tensor over them with
    ne = (blocks per row, ne1, ne2, ne3) and nb = (block bytes, row bytes, ...) for the push constants)."""
    qk = a_type.traits.blck_size
    block = 8 + qk
    nblk = b.ne[0] // qk
    row = nblk * block
    q = p.scratch(row * b.ne[1] * b.ne[2] * b.ne[3])
    lay = Tensor(GGMLType.I8, (nblk, b.ne[1], b.ne[2], b.ne[3]),
                 (block, row, row * b.ne[1], row * b.ne[1] * b.ne[2]), op=Op.NONE)
    lay.buffer, lay.offset = q.buffer, q.offset
    spec = (int(b.type), int(qk == 256))
    p.dispatch("quantize_q8", spec, [b], q, generic_pc(b, None, lay), grid(groups_for(b.nrows() * nblk, 64)))
    return q, lay


@rules.rule(Op.MUL_MAT, accepts=_mul_mat_ok)
def mul_mat(node: Tensor, p: Builder) -> None:
    a, b = src(node, 0), src(node, 1)
    nc = 1 if b.ne[1] == 1 else NC_MAX
    tpr = threads_per_row(p, a.ne[0])
    n = -(-a.ne[1] // (WG // tpr)) * -(-b.ne[1] // nc) * b.ne[2] * b.ne[3]
    if a.type in Q8_DOT:
        q, lay = quantize_activations(a.type, b, p)
        p.dispatch("mul_mat_q8", (int(a.type), nc, tpr), [a, q], node, generic_pc(a, lay, node), grid(n))
        return
    p.dispatch("mul_mat", (int(a.type), int(b.type), nc, tpr), [a, b], node, generic_pc(a, b, node), grid(n))


def _mul_mat_id_ok(node: Tensor) -> bool:
    a = node.src[0]
    return (a is not None and a.ne[0] <= MAX_K and srcs_ok(node, (READABLE, PLAIN, frozenset({GGMLType.I32})))
            and node.type == GGMLType.F32)


def ids_pc(a: Tensor, b: Tensor, d: Tensor, ids: Tensor) -> bytes:
    """GENERIC_PC of MUL_MAT_ID: u0 = ids' offset; a's nb03 and b's nb13 (3-D tensors, unused) carry ids' nb0 and
    nb1."""
    return patch_pc(generic_pc(a, b, d, ids.offset), a_nb3=ids.nb[0], b_nb3=ids.nb[1])


@rules.rule(Op.MUL_MAT_ID, accepts=_mul_mat_id_ok)
def mul_mat_id(node: Tensor, p: Builder) -> None:
    """One column per (slot, token); the shaders read the expert id of each (NC 1: neighbouring columns may use
    other experts)."""
    a, b, ids = src(node, 0), src(node, 1), src(node, 2)
    tpr = threads_per_row(p, a.ne[0])
    n = -(-a.ne[1] // (WG // tpr)) * node.ne[1] * node.ne[2]
    what = f"an expert id outside 0..{a.ne[2] - 1}"
    if a.type in Q8_DOT:
        q, lay = quantize_activations(a.type, b, p)
        p.dispatch("mul_mat_q8", (int(a.type), 1, tpr, 1), [a, q, ids], node, ids_pc(a, lay, node, ids), grid(n),
                   checks=what)
        return
    p.dispatch("mul_mat", (int(a.type), int(b.type), 1, tpr, 1), [a, b, ids], node, ids_pc(a, b, node, ids),
               grid(n), checks=what)


def threads_per_row(p: Builder, k: int) -> int:
    """A cooperative reduction of 32 threads per output row on real GPUs. On CPU-emulated devices one thread per
    row (lavapipe vectorises across rows), or the fewest (a power of two) that keep each thread's share of a row of
    k elements within LOOP_BUDGET. The builder's `forced_threads_per_row` overrides all of that."""
    forced = p.forced_threads_per_row
    if forced is not None:
        return max(1, min(WG, forced))
    if not p.cpu_emulated:
        return 32
    return min(WG, 1 << max(0, -(-k // LOOP_BUDGET) - 1).bit_length())


def _out_prod_ok(node: Tensor) -> bool:
    """One thread per output element loops over k (a.ne[1]): at most LOOP_BUDGET (k = 70,000 was 23% off)."""
    a = node.src[0]
    return a is not None and a.ne[1] <= LOOP_BUDGET and srcs_ok(node, (READABLE, PLAIN)) and node.type == GGMLType.F32


@rules.rule(Op.OUT_PROD, accepts=_out_prod_ok)
def out_prod(node: Tensor, p: Builder) -> None:
    a, b = src(node, 0), src(node, 1)
    p.dispatch("out_prod", (int(a.type), int(b.type)), [a, b], node, generic_pc(a, b, node),
               grid(groups_for(node.nelements(), 64)))
