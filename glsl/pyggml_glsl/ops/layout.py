"""Data movement: GET_ROWS, CPY / CONT / DUP (type conversion, reshaping copies, block moves within a block type,
quantising into block types), SET_ROWS (plain or quantised destinations)."""

from __future__ import annotations

from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import (
    INTS,
    PLAIN,
    QUANTS,
    READABLE,
    generic_pc,
    grid,
    groups_for,
    srcs_ok,
    unit_words,
    units_ok,
)

rules: RuleSet[Builder] = RuleSet()

T = GGMLType
I32 = frozenset({T.I32})
IDS = frozenset({T.I32, T.I64})
WRITABLE = PLAIN | INTS
QUANT_DST = frozenset({T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K})
"""Block types quantise.comp writes (byte-exact with ggml's reference quantisers)."""


def _get_rows_ok(node: Tensor) -> bool:
    return srcs_ok(node, (READABLE, I32)) and node.type in (T.F32, T.I32)


@rules.rule(Op.GET_ROWS, accepts=_get_rows_ok)
def get_rows(node: Tensor, p: Builder) -> None:
    a, ids = src(node, 0), src(node, 1)
    p.dispatch("get_rows", (int(a.type), int(node.type)), [a, ids], node, generic_pc(a, ids, node),
               grid(groups_for(node.nelements())), checks=f"a row id outside 0..{a.ne[1] - 1}")


def _block_dst(node: Tensor) -> bool:
    return node.type in QUANTS


def _copy_ok(node: Tensor) -> bool:
    a = node.src[0]
    if a is None or not srcs_ok(node, (READABLE,)):
        return False
    if _block_dst(node):
        if a.type == node.type:
            return units_ok(a) and units_ok(node)
        return a.type in PLAIN and node.type in QUANT_DST and units_ok(node)
    if node.type not in WRITABLE:
        return False
    return not a.type.traits.is_quantized or a.is_contiguous()


def _copy(node: Tensor, p: Builder) -> None:
    a = src(node, 0)
    if a.type == node.type and _block_dst(node):
        n = node.nelements() // node.type.traits.blck_size
        p.dispatch("blocks", (unit_words(node), 0), [a], node, generic_pc(a, None, node, units=True),
                   grid(groups_for(n)))
    elif _block_dst(node):
        n = node.nelements() // node.type.traits.blck_size
        p.dispatch("quantize", (int(a.type), int(node.type), 0), [a], node, generic_pc(a, None, node, units=True),
                   grid(groups_for(n, 64)))
    else:
        p.dispatch("cpy", (int(a.type), int(node.type)), [a], node, generic_pc(a, None, node),
                   grid(groups_for(node.nelements())))


rules.rule(Op.CPY, Op.CONT, Op.DUP, accepts=_copy_ok)(_copy)


def _set_rows_ok(node: Tensor) -> bool:
    if node.type in QUANT_DST:
        return srcs_ok(node, (QUANT_DST, frozenset({T.F32}), IDS)) and units_ok(node)
    return srcs_ok(node, (WRITABLE, frozenset({T.F32}), IDS)) and node.type in PLAIN | INTS


@rules.rule(Op.SET_ROWS, accepts=_set_rows_ok)
def set_rows(node: Tensor, p: Builder) -> None:
    rows, ids = src(node, 1), src(node, 2)
    what = f"a row id outside 0..{node.ne[1] - 1}"
    wide = ids.type.traits.type_size  # u0: 8 for i64 ids (the shaders check both words)
    if node.type in QUANT_DST:
        p.dispatch("quantize", (int(rows.type), int(node.type), 1), [rows, ids], node,
                   generic_pc(rows, ids, node, wide, units=True),
                   grid(groups_for(rows.nelements() // node.type.traits.blck_size, 64)), checks=what)
        return
    p.dispatch("set_rows", (int(node.type),), [rows, ids], node, generic_pc(rows, ids, node, wide),
               grid(groups_for(rows.nelements())), checks=what)
