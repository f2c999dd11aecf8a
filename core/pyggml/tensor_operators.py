"""Tensor's Python operators (`+ - * / @`, unary `-`, `.T`, `.mT`), a base class of `Tensor` kept apart from the
tensor record. Each records ggml ops with numpy's meaning for numpy-order shapes: `pyggml.ops.operators`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from pyggml.ops.operators import Operand
    from pyggml.tensor import Tensor


def _binary(op: str, *, reflected: bool = False) -> Callable[[TensorOperators, Operand], Tensor]:
    """The method for `self <op> other` (reflected: `other <op> self`), `op` naming an Op (ADD, SUB, MUL, DIV)."""

    def method(self: TensorOperators, other: Operand) -> Tensor:
        from pyggml.ops.base import Op
        from pyggml.ops.operators import binary

        me = self._tensor()
        return binary(Op[op], other, me) if reflected else binary(Op[op], me, other)

    method.__name__ = f"__{'r' if reflected else ''}{op.lower().replace('div', 'truediv')}__"
    return method


class TensorOperators:
    """`a + b`, `a - b`, `a * b`, `a / b` (with tensors or Python numbers), `-a`, `a @ b`, `a.T`, `a.mT`."""

    __slots__ = ()
    __array_ufunc__ = None
    """numpy defers to these operators (`array + tensor` raises TypeError here, not an object array)."""

    def _tensor(self) -> Tensor:
        return cast("Tensor", self)

    __add__ = _binary("ADD")
    __radd__ = _binary("ADD", reflected=True)
    __sub__ = _binary("SUB")
    __rsub__ = _binary("SUB", reflected=True)
    __mul__ = _binary("MUL")
    __rmul__ = _binary("MUL", reflected=True)
    __truediv__ = _binary("DIV")
    __rtruediv__ = _binary("DIV", reflected=True)

    def __neg__(self) -> Tensor:
        from pyggml.ops.operators import negate

        return negate(self._tensor())

    def __matmul__(self, other: Tensor) -> Tensor:
        from pyggml.ops.operators import matmul

        return matmul(self._tensor(), other)

    @property
    def T(self) -> Tensor:
        """numpy's `.T` for at most 2 dimensions: a transposed view (ops.transpose)."""
        from pyggml.ops.operators import matrix_transpose

        return matrix_transpose(self._tensor())

    @property
    def mT(self) -> Tensor:
        """numpy's `.mT`: the last two numpy axes swapped (ggml's ne[0] and ne[1]), a view (ops.transpose)."""
        from pyggml.ops.operators import swap_last_axes

        return swap_last_axes(self._tensor())
