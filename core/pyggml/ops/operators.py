"""What Tensor's Python operators record: `a + b`, `a - b`, `a * b`, `a / b`, `-a` and `a @ b` with numpy's
meaning for numpy-order shapes (`Tensor.shape`), lowered onto ggml's ops. See docs/library.md, "Operators".

- `+ - * /` of two tensors: ADD, SUB, MUL, DIV. Broadcasting is ggml's (one operand is repeated into the other's
  shape) restricted to what numpy also does: every dimension of the smaller operand equals the larger one's or
  is 1. ggml's own ops also tile (a dimension that divides the other's); the operators refuse that, as numpy
  does, and so a case where both operands would have to stretch (numpy's outer broadcast): ShapeError.
- With a Python number: SCALE (`a * s + b`). `number / tensor` is not an op of ggml: TypeError.
- `a @ b`: numpy's matmul. ggml's MUL_MAT(x, y) is `y @ x.T`, so `a @ b` is MUL_MAT(b.mT, a): free when `b` is
  itself a transpose (`x @ w.T` is MUL_MAT(w, x), ggml's weight layout); otherwise b.mT is made contiguous by a
  CONT node (`pyggml.function` stores constant weights transposed once instead).

Results are recorded in the context entered with `with ctx:`, else in the context of the left operand unless
that one is a leaf holding memory of its own (a weight), then the right operand's: `b1 + h` and `x @ w` go where
`h` and `x` are, never into the weights' context.
"""

from __future__ import annotations

import contextlib
import numbers

from pyggml.errors import ShapeError
from pyggml.ops.base import Op
from pyggml.ops.elementwise import add, div, mul, neg, scale, sub
from pyggml.ops.layout import cont, repeat, reshape, transpose
from pyggml.ops.matmul import mul_mat
from pyggml.tensor import ACTIVE_CONTEXT, Tensor, label

Operand = Tensor | float | int

_SYMBOL = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.DIV: "/"}
_RECORD = {Op.ADD: add, Op.SUB: sub, Op.MUL: mul, Op.DIV: div}
_COMMUTES = frozenset({Op.ADD, Op.MUL})


def _is_weight(t: Tensor) -> bool:
    return t.op is Op.NONE and t.data_owner.buffer is not None


def _home(a: Tensor, b: Tensor | None = None) -> contextlib.AbstractContextManager[object]:
    """Enter the context the result belongs to (see the module docstring); nothing when one is entered already."""
    if ACTIVE_CONTEXT.get() is not None:
        return contextlib.nullcontext()
    t = b if b is not None and _is_weight(a) else a
    ctx = t.ctx if t.ctx is not None else (b.ctx if b is not None else None)
    return ctx if ctx is not None else contextlib.nullcontext()


def _describe(t: Tensor) -> str:
    return f"{label(t)} of numpy shape {t.shape} (ne={list(t.ne)})"


def _stretches(small: Tensor, big: Tensor) -> bool:
    """`small` broadcasts into `big` as numpy and ggml both do: each dim equal or 1."""
    return all(s in (g, 1) for s, g in zip(small.ne, big.ne, strict=True))


def binary(op: Op, a: Operand, b: Operand) -> Tensor:
    """`a <op> b` for op ADD, SUB, MUL or DIV, one of them a Tensor (see the module docstring)."""
    if not isinstance(b, Tensor):
        assert isinstance(a, Tensor)
        return _with_number(op, a, _number(op, b), number_first=False)
    if not isinstance(a, Tensor):
        return _with_number(op, b, _number(op, a), number_first=True)
    with _home(a, b):
        if _stretches(b, a):
            return _RECORD[op](a, b)
        if _stretches(a, b):
            return _RECORD[op](b, a) if op in _COMMUTES else _RECORD[op](repeat(a, b), b)
    both = all(x == y or 1 in (x, y) for x, y in zip(a.ne, b.ne, strict=True))
    why = ("numpy would stretch both operands; ggml repeats one operand into the other's shape, so repeat one "
           "first (ops.repeat)") if both else "every dimension must be equal, or 1 in one of them"
    raise ShapeError(f"{_SYMBOL[op]}: cannot broadcast {_describe(a)} with {_describe(b)}: {why}")


def _number(op: Op, x: object) -> float:
    if isinstance(x, numbers.Real):
        return float(x)
    raise TypeError(f"{_SYMBOL[op]}: a tensor and a {type(x).__name__} do not combine; the other operand must be a "
                    "Tensor or a Python number (an array becomes a tensor through Tensor.set, or a weight of "
                    "pyggml.function)")


def _with_number(op: Op, t: Tensor, c: float, *, number_first: bool) -> Tensor:
    with _home(t):
        if op is Op.ADD:
            return scale(t, 1.0, c)
        if op is Op.SUB:
            return scale(t, -1.0, c) if number_first else scale(t, 1.0, -c)
        if op is Op.MUL:
            return scale(t, c)
        if number_first:
            raise TypeError(f"{c!r} / {label(t)}: a number divided by a tensor is no ggml op; "
                            "divide a tensor of that value (ops.div)")
        return scale(t, 1.0 / c)


def negate(a: Tensor) -> Tensor:
    with _home(a):
        return neg(a)


def swap_last_axes(a: Tensor) -> Tensor:
    """numpy's `a.mT` (ggml's TRANSPOSE: ne[0] and ne[1] swapped), a view."""
    with _home(a):
        return transpose(a)


def matrix_transpose(a: Tensor) -> Tensor:
    """numpy's `a.T` for a tensor of at most 2 dimensions (a view); ShapeError for more, where `.T` would reverse
    every axis: say `.mT` (the last two) or ops.permute."""
    if a.n_dims > 2:
        raise ShapeError(f".T of {_describe(a)}: numpy's .T reverses all {a.n_dims} axes; use .mT to swap the last "
                         "two, or ops.permute")
    return swap_last_axes(a)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """numpy's `a @ b` for numpy-order shapes, as MUL_MAT (see the module docstring). A 1-D `b` is a column
    (numpy's rule); a 1-D `a` is a row, as ggml has no rank: ne [k] is both (k,) and (1, k)."""
    with _home(a, b):
        if b.n_dims == 1 and a.ne[0] == b.ne[0] != 1:  # matrix @ vector: (..., m, k) @ (k,) -> (..., m)
            out = mul_mat(b, a)
            return reshape(out, *out.ne[1:])
        if a.ne[0] != b.ne[1]:
            raise ShapeError(f"@: {_describe(a)} @ {_describe(b)}: the left operand's last dimension ({a.ne[0]}) "
                             f"must equal the right operand's second-to-last ({b.ne[1]})")
        batch_a, batch_b = a.ne[2:], b.ne[2:]
        if not all(x in (y, 1) for x, y in zip(batch_b, batch_a, strict=True)):
            if all(x in (y, 1) for x, y in zip(batch_a, batch_b, strict=True)):
                # only b is batched: (a @ b).mT = b.mT @ a.mT, with b.mT as the operand MUL_MAT broadcasts over
                return cont(transpose(mul_mat(a, _as_src0(b))))
            raise ShapeError(f"@: cannot broadcast the batch dimensions of {_describe(a)} and {_describe(b)}: each "
                             "must be equal, or 1 in one of them")
        return mul_mat(_as_src0(b), a)


def _as_src0(b: Tensor) -> Tensor:
    """b.mT laid out as MUL_MAT's src0 ([k, n] rows of k): the transposed tensor itself when b is a transpose of
    one, else a contiguous copy (CONT)."""
    if b.op is Op.TRANSPOSE:
        inner = b.src[0]
        if inner is not None and not inner.is_transposed():
            return inner
    return cont(transpose(b))
