"""GET_ROWS, SET_ROWS and copies into / out of block types (rows.cl)."""

from __future__ import annotations

from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import PLAIN, QUANT_READ, QUANT_WRITE, Builder, tname

rules: RuleSet[Builder] = RuleSet()

FILE = "rows.cl"
T = GGMLType
INDEX = {T.I32: "i32", T.I64: "i64"}


def spec(t0: GGMLType, td: GGMLType, idx: GGMLType = T.I32) -> ProgramSpec:
    extra = {"QUANT_DST": 1} if td in QUANT_WRITE else {}
    return ProgramSpec.of(FILE, T0=tname(t0), TD=tname(td), IDX_T=INDEX[idx], IS_QUANT=int(t0 in QUANT_READ),
                          RAWCOPY=int(t0 == td and t0 not in QUANT_READ), **extra)


def _get_rows_ok(node: Tensor) -> bool:
    a = node.src[0]
    if a is None:
        return False
    if a.type in QUANT_READ:
        return a.is_contiguous_rows()
    return a.type in PLAIN or a.type == T.I32


@rules.rule(Op.GET_ROWS, accepts=_get_rows_ok)
def build_get_rows(node: Tensor, b: Builder) -> None:
    a, ids = src(node, 0), src(node, 1)
    b.launch_1d(spec(a.type, node.type, ids.type), "k_get_rows", node.nelements(), *b.tensor(a), *b.tensor(ids),
                *b.tensor(node), *b.error_args(f"a row id outside 0..{a.ne[1] - 1}"))


def _set_rows_ok(node: Tensor) -> bool:
    rows, ids = node.src[1], node.src[2]
    if rows is None or ids is None or ids.type not in INDEX:
        return False
    if node.type in QUANT_WRITE:
        return node.ne[0] % node.type.traits.blck_size == 0 and node.is_contiguous_rows()
    return node.type in PLAIN


@rules.rule(Op.SET_ROWS, accepts=_set_rows_ok)
def build_set_rows(node: Tensor, b: Builder) -> None:
    rows, ids = src(node, 1), src(node, 2)
    s = spec(rows.type, node.type, ids.type)
    err = b.error_args(f"a row id outside 0..{node.ne[1] - 1}")
    if node.type in QUANT_WRITE:
        b.launch_1d(s, "k_set_rows_q", rows.nelements() // node.type.traits.blck_size, *b.tensor(rows),
                    *b.tensor(ids), *b.tensor(node), *err)
    else:
        b.launch_1d(s, "k_set_rows", rows.nelements(), *b.tensor(rows), *b.tensor(ids), *b.tensor(node), *err)


def block_copy_ok(a: Tensor, dst: Tensor) -> bool:
    """CPY/DUP/CONT between a plain type and a block type (the block side contiguous)."""
    if a.type in PLAIN and dst.type in QUANT_WRITE:
        return dst.is_contiguous()
    if a.type in QUANT_READ and dst.type in PLAIN:
        return a.is_contiguous()
    return False


def build_block_copy(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    if node.type in QUANT_WRITE:
        b.launch_1d(spec(a.type, node.type), "k_quantize", node.nelements() // node.type.traits.blck_size,
                    *b.tensor(a), *b.tensor(node))
    else:
        b.launch_1d(spec(a.type, node.type), "k_dequantize", node.nelements(), *b.tensor(a), *b.tensor(node))
