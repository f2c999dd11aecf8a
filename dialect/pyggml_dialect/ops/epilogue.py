"""What a mat-vec kernel does with its products as it stores them (`epi` of matmul.cl's k_mul_mat_vec, _short and
the CUDA plugin's k_mmvq; activations.h): the fusions of a mat-vec with the node(s) after it. EPI_ADD: the ADD of a
residual or bias, run (MUL_MAT, ADD); EPI_SWIGLU / EPI_GEGLU: the GLU of two mat-vecs of one src1, run (MUL_MAT
gate, MUL_MAT up, GLU), the kernel computing both products."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyggml.backend.launch import i32
from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.ops.elementwise import GluOp, GluParams
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.types import Builder

EPI_STORE, EPI_ADD, EPI_SWIGLU, EPI_GEGLU = 0, 1, 2, 3
"""The epilogue codes of activations.h."""
GLUS = {GluOp.SWIGLU: EPI_SWIGLU, GluOp.GEGLU: EPI_GEGLU}
F32 = GGMLType.F32


@dataclass(frozen=True, slots=True)
class Epilogue:
    code: int
    out: Tensor
    """The node whose result the kernel writes (the run's last)."""
    e: Tensor | None = None
    """EPI_ADD's addend."""
    a2: Tensor | None = None
    """The GLUs' second weights (the up projection), laid out as the first ones."""


def kernel_args(epi: Epilogue | None, node: Tensor, b: Builder) -> tuple[list[Any], list[Any], list[Any], Any]:
    """The kernels' a2, e and d tensor arguments and `epi` for the MUL_MAT `node` (no epilogue: node's own result,
    a2 and e unread)."""
    if epi is None:
        return b.tensor(src(node, 0)), b.tensor(node), b.tensor(node), i32(EPI_STORE)
    return (b.tensor(epi.a2 if epi.a2 is not None else src(node, 0)), b.tensor(epi.e if epi.e is not None else node),
            b.tensor(epi.out), i32(epi.code))


def of_add(run: tuple[Tensor, ...]) -> Epilogue | None:
    """(MUL_MAT, ADD) whose ADD adds an F32 tensor e to the product (either src; the result the product's shape)."""
    mm, add = run
    e = add.src[1] if add.src[0] is mm else add.src[0] if len(add.src) > 1 and add.src[1] is mm else None
    if e is None or e is mm or e.type != F32 or add.type != F32 or tuple(add.ne) != tuple(mm.ne):
        return None
    return Epilogue(EPI_ADD, add, e=e)


def addend(run: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """The operand a mat-vec's EPI_ADD reads where it writes (the result may take its place): `Fusion.in_place`."""
    epi = of_add(run)
    return (epi.e,) if epi is not None and epi.e is not None else ()


def of_glu(run: tuple[Tensor, ...]) -> Epilogue | None:
    """(MUL_MAT gate, MUL_MAT up, GLU) of one src1, weights of one type and layout, GLU SWIGLU or GEGLU of (gate,
    up) in split form, not swapped."""
    gate, up, glu = run
    p = glu.params
    wg, wu = src(gate, 0), src(up, 0)
    same_weights = wg.type == wu.type and tuple(wg.ne) == tuple(wu.ne) and tuple(wg.nb) == tuple(wu.nb)
    if (glu.op is not Op.GLU or not isinstance(p, GluParams) or type(p) is not GluParams or p.op not in GLUS
            or p.swapped or len(glu.src) < 2 or glu.src[0] is not gate or glu.src[1] is not up
            or gate.src[1] is not up.src[1] or not same_weights or glu.type != F32):
        return None
    return Epilogue(GLUS[p.op], glu, a2=wu)


def add_fusions(rules: RuleSet[Builder], mat_vec: Callable[[Tensor], bool],
                build_mul_mat: Callable[[Tensor, Builder, Epilogue | None], None]) -> None:
    """Declare a family's mat-vec fusions in `rules`: (MUL_MAT, ADD) and (MUL_MAT gate, MUL_MAT up, GLU), where
    `mat_vec(node)` says the family's MUL_MAT rule runs that node with a mat-vec kernel and `build_mul_mat` builds it
    with the epilogue (the dialect's rule; the CUDA plugin's, whose k_mmvq takes it too)."""

    def build(run: tuple[Tensor, ...], b: Builder) -> None:
        epi = of_add(run) if len(run) == 2 else of_glu(run)
        assert epi is not None  # the fusion's accepts asked
        build_mul_mat(run[0], b, epi)

    rules.fusion(Op.MUL_MAT, Op.ADD, accepts=lambda run: mat_vec(run[0]) and of_add(run) is not None,
                 in_place=addend)(build)
    rules.fusion(Op.MUL_MAT, Op.MUL_MAT, Op.GLU,
                 accepts=lambda run: mat_vec(run[0]) and of_glu(run) is not None)(build)
