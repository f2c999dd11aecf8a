"""The C enums of csrc/pgc.h reach Python through cffi (they are inside the cdef), so the op table and the error
texts take every number from the compiled extension; these checks hold the Python names to the header."""

from __future__ import annotations

from pyggml.types import GGMLType
from pyggml_cpu._pgc import lib
from pyggml_cpu.native import ERRORS
from pyggml_cpu.op_table import BLAS_TABLE, TABLE, Descriptors


def _consts(prefix: str) -> dict[str, int]:
    return {n: int(getattr(lib, n)) for n in dir(lib) if n.startswith(prefix)}


def test_type_ids_are_ggml_ones() -> None:
    types = {n: v for n, v in _consts("T_").items() if n != "T_COUNT"}
    assert types and all(GGMLType[n[2:]].value == v for n, v in types.items())


def test_every_error_code_has_a_text() -> None:
    assert set(ERRORS) == set(_consts("PGC_E_").values())


def test_rules_emit_c_op_ids() -> None:
    from pyggml import ops
    from pyggml.context import Context

    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(GGMLType.F32, 64, 64, name="a")
    ids = set(_consts("PGC_OP_").values())
    for table, node in ((TABLE, ops.silu(ops.add(a, a))), (BLAS_TABLE, ops.mul_mat(a, a))):
        d = Descriptors()
        d.node = node
        rule = table.get(node.op)
        assert rule is not None and rule.accepts(node)
        rule.build(node, d)
        assert d.rows[0][1] in ids
