"""Gradient mode (test-backend-ops' GRAD): each differentiable op's backward, computed on the backend under test by
`pyggml.autodiff.build_backward`, against central finite differences of the forward pass on the numpy reference.

A grad case builds a small forward graph whose float leaves are marked parameters. A non-scalar output becomes the
loss sum(out * w) with w fixed random weights (a plain sum would hide errors that a constant-sum op such as
SOFT_MAX gives, and symmetric ones). The backend computes forward + backward once; the reference evaluates the loss
with each parameter element moved by +-eps (and +-eps/2 when `precise`: the four-point formula, error O(eps^4)).
Agreement is ggml's mean asymmetric error mean(|(n - a) / (n + a)|) over the elements (0 where both are 0), under
`max_err` (ggml's 1e-4 unless the case says otherwise). In reports the `nmse` column carries that error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml import ops
from pyggml.autodiff import Gradients, build_backward
from pyggml.graph import Graph, build_graph
from pyggml.tensor import Tensor, TensorFlag
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder
from pyggml_conformance.inputs import Bytes, case_rng, encode, uniform
from pyggml_conformance.placement import GuardedArena
from pyggml_conformance.runner import CaseResult, Status, Target, built_for, error_text

MAX_MAA = 1e-4
"""ggml's max_maa_err default."""
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class GradCase(Case):
    eps: float = 0.1
    """Finite-difference step."""
    precise: bool = True
    """Four-point central difference (ggml's grad_precise)."""
    max_err: float = MAX_MAA
    expect: tuple[float, ...] = field(default=())
    """When set, only elements whose numeric gradient is one of these values are compared (ggml's grad_expect,
    for functions with kinks)."""


@dataclass
class _Realized:
    graph: Graph
    loss: Tensor
    params: list[Tensor]
    tensors: dict[str, Tensor]
    data: dict[str, Bytes]


def _realize(case: Case, seed: int) -> _Realized:
    """Record the case, turn its output into a scalar F32 loss, and draw every input's bytes (same on every run)."""
    b = CaseBuilder()
    res = case.build(b)
    out = res if isinstance(res, Tensor) else next(iter(res))
    if out.nelements() != 1:
        w = b.input(GGMLType.F32, out.ne, uniform(-1.0, 1.0))
        out = ops.sum(ops.mul(out, w))
    out.set_name("loss").set_loss()
    graph = build_graph(out)
    tensors = {name: t for name in b.inits if (t := b.ctx.get_tensor(name)) is not None}
    rng = case_rng(case.name, seed)
    data = {name: encode(init(rng, tensors[name]), tensors[name].type) for name, init in b.inits.items()}
    params = [t for t in graph.nodes if t.flags & TensorFlag.PARAM]
    return _Realized(graph, out, params, tensors, data)


def _with_backward(case: Case, seed: int) -> tuple[_Realized, Gradients]:
    """The realised case with its backward pass appended to its graph."""
    r = _realize(case, seed)
    return r, build_backward(r.graph)


def _place(r: _Realized, target: Target) -> GuardedArena:
    pl = GuardedArena(r.graph, target.device.buffer_type())
    for name, t in r.tensors.items():
        if t.buffer is not None:
            pl.buffer.set_tensor(t, r.data[name])
    return pl


def numeric_gradients(case: GradCase, reference: Target, seed: int) -> list[F64]:
    """d(loss)/d(param) by central differences of the reference's forward pass, per parameter (flat, ne order)."""
    r = _realize(case, seed)
    pl = _place(r, reference)
    try:
        backend = reference.backend
        out: list[F64] = []

        def loss_at(p: Tensor, x: npt.NDArray[np.float32]) -> float:
            p.set(x)
            backend.graph_compute(r.graph)
            return float(r.loss.numpy().reshape(-1)[0])

        def moved(p: Tensor, x0: npt.NDArray[np.float32], i: int, d: float) -> float:
            """The loss with element i of p moved by d (in float32, as the tensor holds it)."""
            x = x0.copy()
            x[i] = x0[i] + np.float32(d)
            return loss_at(p, x)

        eps = float(np.float32(case.eps))
        for p in r.params:
            x0 = p.numpy().astype(np.float32).reshape(-1)
            g = np.zeros(x0.size)
            for i in range(x0.size):
                if case.precise:
                    g[i] = (8.0 * moved(p, x0, i, eps / 2) + moved(p, x0, i, -eps) - 8.0 * moved(p, x0, i, -eps / 2)
                            - moved(p, x0, i, eps)) / (6.0 * eps)
                else:
                    g[i] = (moved(p, x0, i, eps) - moved(p, x0, i, -eps)) / (2.0 * eps)
            p.set(x0)
            out.append(g)
        return out
    finally:
        pl.free()


def mean_abs_asymm(numeric: F64, analytic: F64, expect: tuple[float, ...] = ()) -> float:
    """ggml's mean |(n - a) / (n + a)| over the compared elements; an element where both are 0 agrees exactly."""
    n, a = numeric.astype(np.float64), analytic.astype(np.float64)
    keep = np.ones(n.shape, dtype=bool)
    if expect:
        keep = np.any(np.abs(n[:, None] - np.array(expect)[None, :]) < 1e-3, axis=1)
    if not keep.any():
        return 0.0
    n, a = n[keep], a[keep]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.abs((n - a) / (n + a))
    q[(n == 0) & (a == 0)] = 0.0
    return float(np.mean(q))


def grad_case(case: Case, targets: list[Target], reference: Target, seed: int = 0) -> list[CaseResult]:
    """Backward of `case` on each target against the reference's finite differences; one result per target."""
    assert isinstance(case, GradCase), f"{case.name} is not a grad case"

    def result(target: Target, status: Status, **kw: Any) -> CaseResult:
        return CaseResult(case.name, case.op.name, case.params, target.name, status, threshold=case.max_err, **kw)

    numeric: list[F64] | None = None
    out: list[CaseResult] = []
    for target in targets:
        built = built_for(target, lambda: _with_backward(case, seed), lambda x: x[0].graph,
                          "the backward graph does not build", result(target, Status.PASS))
        if isinstance(built, CaseResult):
            out.append(built)
            continue
        r, grads = built
        try:
            if numeric is None:
                numeric = numeric_gradients(case, reference, seed)
        except Exception as e:
            out.append(result(target, Status.FAIL, error=f"the reference failed: {error_text(e)}"))
            continue
        try:
            pl = _place(r, target)
            try:
                grads.reset()
                pl.before = pl.buffer.read(0, pl.size)
                t0 = time.perf_counter()
                target.backend.graph_compute(r.graph)
                target.backend.synchronize()
                dt = (time.perf_counter() - t0) * 1e6
                problems = pl.check()
                analytic = [np.zeros(p.nelements()) if (g := grads.grad(p)) is None
                            else g.numpy().astype(np.float64).reshape(-1) for p in r.params]
            finally:
                pl.free()
        except Exception as e:
            out.append(result(target, Status.FAIL, error=error_text(e)))
            continue
        out.append(_judge(case, r.params, numeric, analytic, problems, result(target, Status.PASS, time_us=dt)))
    return out


def _judge(case: GradCase, params: list[Tensor], numeric: list[F64], analytic: list[F64], problems: list[str],
           res: CaseResult) -> CaseResult:
    errors = list(problems)
    worst = 0.0
    for p, n, a in zip(params, numeric, analytic, strict=True):
        if not np.all(np.isfinite(a)):
            errors.append(f"gradient of {p.name} has a non-finite value at element {int(np.argmin(np.isfinite(a)))}")
            continue
        err = mean_abs_asymm(n, a, case.expect)
        worst = max(worst, err)
        if not err <= case.max_err:
            i = int(np.argmax(np.abs(n - a)))
            errors.append(f"gradient of {p.name}: mean asymmetric error {err:.3g} > {case.max_err:g} "
                          f"(worst element {i}: numeric {n[i]:.6g}, backend {a[i]:.6g})")
    res.nmse = worst
    if errors:
        res.status, res.error = Status.FAIL, "; ".join(errors)
    return res
