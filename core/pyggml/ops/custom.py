"""Custom ops: MAP_CUSTOM1/2/3 and CUSTOM run a Python callable on numpy views of the node's memory, as ggml's
ggml_map_custom1/2/3 and ggml_custom_4d run a C function pointer.

The callable is called once per task, `fn(dst, a, ith, nth, userdata)` (MAP_CUSTOM1; MAP_CUSTOM2 adds b, MAP_CUSTOM3
b and c; CUSTOM gets `fn(dst, args, ith, nth, userdata)` with args the tuple of its srcs), each task with its own
`ith` in [0, nth), concurrently, and writes its share of `dst` in place. Arrays are in numpy order (shape
ne[::-1]) with the tensors' strides; srcs are read-only. nth is the backend's thread count, or n_tasks when that
is smaller (ggml's rule; N_TASKS_MAX means all threads). Only host-memory backends run them: a device backend
refuses them and the scheduler places them on the CPU.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyggml.errors import ShapeError
from pyggml.ops.base import Op, define, fail, ne4, record
from pyggml.tensor import Ne, Tensor, context_for
from pyggml.types import GGMLType, type_traits

CustomFn = Callable[..., None]
N_TASKS_MAX = -1
"""n_tasks meaning 'as many tasks as the backend has threads' (GGML_N_TASKS_MAX)."""
MAX_ARGS = 10
"""GGML_MAX_SRC: a CUSTOM node has at most this many srcs."""
CUSTOM_OPS = frozenset({Op.MAP_CUSTOM1, Op.MAP_CUSTOM2, Op.MAP_CUSTOM3, Op.CUSTOM})

Srcs = tuple[Tensor | None, ...]


@dataclass(frozen=True, slots=True, eq=False)
class CustomParams:
    """MAP_CUSTOM1/2/3: the callable, its task count and the userdata it is given. Compared by identity (the
    callable and userdata need not be comparable)."""

    fn: CustomFn
    n_tasks: int = N_TASKS_MAX
    userdata: Any = None

    def tasks(self, n_threads: int) -> int:
        """How many tasks (nth) run on a backend of n_threads threads (ggml-cpu's rule)."""
        return n_threads if self.n_tasks == N_TASKS_MAX else min(self.n_tasks, n_threads)


@dataclass(frozen=True, slots=True, eq=False)
class CustomOpParams(CustomParams):
    """CUSTOM: as CustomParams, plus the result's type and shape (ggml_custom_4d's)."""

    type: GGMLType = GGMLType.F32
    ne: Ne = (1, 1, 1, 1)


def _check_params(op: Op, params: object, want: type[CustomParams]) -> CustomParams:
    if type(params) is not want:
        raise fail(op, f"params must be {want.__name__}, got {type(params).__name__}")
    assert isinstance(params, CustomParams)
    if not callable(params.fn):
        raise fail(op, f"fn {params.fn!r} is not callable")
    n = params.n_tasks
    if not isinstance(n, int) or isinstance(n, bool) or not (n == N_TASKS_MAX or n > 0):
        raise fail(op, f"n_tasks must be a positive int or N_TASKS_MAX (-1), got {n!r}")
    return params


def _check_plain(op: Op, t: Tensor, slot: str) -> None:
    if type_traits(t.type).np_dtype is None:
        raise fail(op, f"{slot} is a block type: a custom op sees numpy arrays, which block types have none", t)


def _map_custom(op: Op, n: int) -> Callable[[Srcs, object], tuple[GGMLType, Ne]]:
    def infer(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
        _check_params(op, params, CustomParams)
        for i in range(n):
            s = srcs[i] if i < len(srcs) else None
            if s is None:
                raise ShapeError(f"{op.name}: src{i} is required")
            _check_plain(op, s, f"src{i}")
        a = srcs[0]
        assert a is not None
        return a.type, a.ne

    return infer


def _custom(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    p = _check_params(Op.CUSTOM, params, CustomOpParams)
    assert isinstance(p, CustomOpParams)
    for i, s in enumerate(srcs):
        if s is not None:
            _check_plain(Op.CUSTOM, s, f"src{i}")
    if type_traits(p.type).np_dtype is None:
        raise fail(Op.CUSTOM, f"result type {p.type} is a block type, which a numpy array cannot hold")
    return p.type, p.ne


for _op, _n in ((Op.MAP_CUSTOM1, 1), (Op.MAP_CUSTOM2, 2), (Op.MAP_CUSTOM3, 3)):
    define(_op, (_n, _n), _map_custom(_op, _n), CustomParams)
define(Op.CUSTOM, (0, MAX_ARGS), _custom, CustomOpParams)


def map_custom1(a: Tensor, fn: CustomFn, n_tasks: int = N_TASKS_MAX, userdata: Any = None, *,
                inplace: bool = False) -> Tensor:
    """A result of a's type and shape computed by `fn(dst, a, ith, nth, userdata)` (ggml_map_custom1)."""
    return record(Op.MAP_CUSTOM1, (a,), CustomParams(fn, n_tasks, userdata), inplace=inplace)


def map_custom2(a: Tensor, b: Tensor, fn: CustomFn, n_tasks: int = N_TASKS_MAX, userdata: Any = None, *,
                inplace: bool = False) -> Tensor:
    """A result of a's type and shape computed by `fn(dst, a, b, ith, nth, userdata)` (ggml_map_custom2)."""
    return record(Op.MAP_CUSTOM2, (a, b), CustomParams(fn, n_tasks, userdata), inplace=inplace)


def map_custom3(a: Tensor, b: Tensor, c: Tensor, fn: CustomFn, n_tasks: int = N_TASKS_MAX, userdata: Any = None,
                *, inplace: bool = False) -> Tensor:
    """A result of a's type and shape computed by `fn(dst, a, b, c, ith, nth, userdata)` (ggml_map_custom3)."""
    return record(Op.MAP_CUSTOM3, (a, b, c), CustomParams(fn, n_tasks, userdata), inplace=inplace)


def custom(args: Sequence[Tensor], fn: CustomFn, ttype: GGMLType, ne: Sequence[int], n_tasks: int = N_TASKS_MAX,
           userdata: Any = None) -> Tensor:
    """A new tensor of type `ttype` and shape `ne` computed by `fn(dst, args, ith, nth, userdata)`
    (ggml_custom_4d); `args` (1 to 10 tensors) become its srcs and give it its context."""
    srcs = tuple(args)
    if not 1 <= len(srcs) <= MAX_ARGS:
        raise ShapeError(f"CUSTOM: 1 to {MAX_ARGS} args are needed (they give the result its context), "
                         f"got {len(srcs)}")
    try:
        tt = GGMLType(operator.index(ttype))
    except (TypeError, ValueError):
        raise ShapeError(f"CUSTOM: {ttype!r} is not a tensor type") from None
    return record(Op.CUSTOM, srcs, CustomOpParams(fn, n_tasks, userdata, tt, ne4(*ne)))


def custom_inplace(a: Tensor, args: Sequence[Tensor], fn: CustomFn, n_tasks: int = N_TASKS_MAX,
                   userdata: Any = None) -> Tensor:
    """CUSTOM whose result is a view of a (ggml_custom_inplace): srcs are (a, *args), at most 10 in all."""
    srcs = (a, *args)
    if len(srcs) > MAX_ARGS:
        raise ShapeError(f"CUSTOM: at most {MAX_ARGS - 1} args besides a, got {len(args)}")
    if context_for(a) is None:
        raise ShapeError(f"CUSTOM: src '{a.name}' belongs to no context")
    return record(Op.CUSTOM, srcs, CustomOpParams(fn, n_tasks, userdata, a.type, a.ne), inplace=True)
