"""Optimiser steps as ops (ggml-opt's way): OPT_STEP_ADAMW and OPT_STEP_SGD update a parameter in place from its
gradient; AdamW also updates its moment tensors m and v in place. The hyper-parameters travel as a small F32 tensor,
not op params, so one graph serves every step of a schedule (the caller rewrites the tensor between steps).

The result is a view of the parameter (ggml_view_tensor): nothing consumes it but the graph's end, and the update
happens because the node is in the graph. m and v are written although they are srcs, so they must be persistent
tensors that live where the step runs (a copy made for another backend would take the update and lose it).
"""

from __future__ import annotations

from pyggml.ops.base import Op, define, fail, need, record
from pyggml.tensor import Ne, Tensor, TensorFlag
from pyggml.types import GGMLType

Srcs = tuple[Tensor | None, ...]

F32 = frozenset({GGMLType.F32})
ADAMW_N_PARAMS = 7
"""alpha, beta1, beta2, eps, wd, beta1h, beta2h (ggml's order)."""
SGD_N_PARAMS = 2
"""alpha, wd."""
WRITTEN_SRCS: dict[Op, tuple[int, ...]] = {Op.OPT_STEP_ADAMW: (2, 3)}
"""Src slots an op writes besides its result (AdamW's m and v); the result itself is a view of src0."""


def written_srcs(node: Tensor) -> tuple[Tensor, ...]:
    """The srcs `node` writes in place besides its result: whatever tracks which bytes a graph writes (the
    conformance guard, a scheduler keeping optimiser state on one backend) asks here."""
    return tuple(t for i in WRITTEN_SRCS.get(node.op, ()) if i < len(node.src) and (t := node.src[i]) is not None)


def _param(op: Op, srcs: Srcs) -> Tensor:
    a = need(srcs[0], op, "src0 (parameter)", F32)
    if not a.flags & TensorFlag.PARAM:
        raise fail(op, "src0 is not marked as a parameter (call set_param() on it first, as ggml requires)", a)
    return a


def _state(op: Op, a: Tensor, t: Tensor | None, slot: str) -> Tensor:
    t = need(t, op, slot, F32)
    if t.ne != a.ne:
        raise fail(op, f"{slot} must have the parameter's shape {list(a.ne)}", a, t)
    return t


def _hyper(op: Op, t: Tensor | None, n: int, slot: str) -> Tensor:
    t = need(t, op, slot, F32)
    if t.nelements() != n:
        raise fail(op, f"{slot} must hold {n} values", t)
    return t


def _distinct(op: Op, *ts: Tensor) -> None:
    """The tensors the step writes (parameter, m, v) must not be the same memory: each update would clobber the
    other."""
    seen: dict[tuple[int, int], Tensor] = {}
    for t in ts:
        key = (id(t.data_owner), t.view_offs if t.view_src is not None else 0)
        if key in seen:
            raise fail(op, "the parameter and its optimiser state must be distinct tensors", seen[key], t)
        seen[key] = t


def _adamw(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.OPT_STEP_ADAMW
    a = _param(op, srcs)
    _state(op, a, srcs[1], "src1 (gradient)")
    m = _state(op, a, srcs[2], "src2 (m, first moment)")
    v = _state(op, a, srcs[3], "src3 (v, second moment)")
    _hyper(op, srcs[4], ADAMW_N_PARAMS, "src4 (adamw params: alpha, beta1, beta2, eps, wd, beta1h, beta2h)")
    _distinct(op, a, m, v)
    return a.type, a.ne


define(Op.OPT_STEP_ADAMW, (5, 5), _adamw)


def opt_step_adamw(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, adamw_params: Tensor) -> Tensor:
    """One AdamW step in place, element by element (ggml_opt_step_adamw): m = beta1 m + (1 - beta1) g,
    v = beta2 v + (1 - beta2) g^2, param = param (1 - alpha wd) - alpha (m beta1h) / (sqrt(v beta2h) + eps).
    adamw_params is F32 [alpha, beta1, beta2, eps, wd, beta1h, beta2h], beta1h = 1 / (1 - beta1^t) and
    beta2h = 1 / (1 - beta2^t) the bias corrections of step t (the caller computes them). Returns a view of param."""
    return record(Op.OPT_STEP_ADAMW, (param, grad, m, v, adamw_params), inplace=True)


def _sgd(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.OPT_STEP_SGD
    a = _param(op, srcs)
    _state(op, a, srcs[1], "src1 (gradient)")
    _hyper(op, srcs[2], SGD_N_PARAMS, "src2 (sgd params: alpha, wd)")
    return a.type, a.ne


define(Op.OPT_STEP_SGD, (3, 3), _sgd)


def opt_step_sgd(param: Tensor, grad: Tensor, sgd_params: Tensor) -> Tensor:
    """One SGD step with decoupled weight decay in place (ggml_opt_step_sgd): param = param (1 - alpha wd) -
    alpha grad, sgd_params F32 [alpha, wd]. Returns a view of param."""
    return record(Op.OPT_STEP_SGD, (param, grad, sgd_params), inplace=True)
