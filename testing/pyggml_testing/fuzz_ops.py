"""The recipes of the op API fuzz test (issue 19): random ops over random shapes (zero-size included), types, views
(random strides and offsets, valid or not), permutes and in-place results, with random ids for the index ops. Every
outcome must be a PyGGMLError (at record time or at compute) or, on the cpu backend, the numpy reference's result;
never a crash, a hang or another exception. A backend may not compute a graph the reference refuses.

conformance/tests/test_fuzz_ops.py draws a few hundred of them in CI; benchmarks/fuzz_soak.py draws the same recipes
in rounds of thousands and counts the outcomes."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from pyggml import ops
from pyggml.errors import PyGGMLError
from pyggml.graph import build_graph
from pyggml.ops.elementwise import UnaryOp
from pyggml.ops.reduce import SortOrder
from pyggml.tensor import Tensor
from pyggml_conformance.case import CaseBuilder, Compare
from pyggml_conformance.compare import check
from pyggml_conformance.inputs import generate, integers
from pyggml_conformance.runner import Executed, Realized, Target, execute, first_unsupported

UNARY = [UnaryOp.RELU, UnaryOp.GELU, UnaryOp.SILU, UnaryOp.TANH, UnaryOp.EXP, UnaryOp.ABS, UnaryOp.NEG,
         UnaryOp.SGN, UnaryOp.SIGMOID, UnaryOp.HARDSWISH, UnaryOp.FLOOR]
Op = Callable[[CaseBuilder, Tensor, Any], Tensor]


def _second(b: CaseBuilder, a: Tensor, shrink: tuple[bool, ...]) -> Tensor:
    """Another input broadcasting into a: dims shrunk to 1 where `shrink` says."""
    ne = [1 if s and n else n for n, s in zip(a.ne, shrink, strict=False)]
    return b.input(a.type, ne)


OPS: dict[str, Op] = {
    "unary": lambda b, a, p: ops.unary(a, UNARY[p % len(UNARY)]),
    "scale": lambda b, a, p: ops.scale(a, 0.5 + p, -1.0),
    "clamp": lambda b, a, p: ops.clamp(a, -0.5, 0.25 * p),
    "add": lambda b, a, p: ops.add(a, _second(b, a, tuple(bool(p >> i & 1) for i in range(4)))),
    "mul_inplace": lambda b, a, p: ops.mul(a, _second(b, a, (bool(p & 1), False, False, False)), inplace=True),
    "sum": lambda b, a, p: ops.sum(a),
    "sum_rows": lambda b, a, p: ops.sum_rows(a),
    "mean": lambda b, a, p: ops.mean(a),
    "cumsum": lambda b, a, p: ops.cumsum(a),
    "argmax": lambda b, a, p: ops.argmax(a),
    "argsort": lambda b, a, p: ops.argsort(a, SortOrder(p % 2)),
    "top_k": lambda b, a, p: ops.top_k(a, p),
    "soft_max": lambda b, a, p: ops.soft_max(a, scale=0.5),
    "rms_norm": lambda b, a, p: ops.rms_norm(a, 1e-5),
    "norm": lambda b, a, p: ops.norm(a, 1e-5),
    "cont": lambda b, a, p: ops.cont(a),
    "cpy_f16": lambda b, a, p: ops.cpy(a, b.input("f16", a.ne)),
    "transpose": lambda b, a, p: ops.cont(ops.transpose(a)),
    "get_rows": lambda b, a, p: ops.get_rows(a, b.input("i32", (p % 5, a.ne[2], a.ne[3]),
                                                       integers(-1, a.ne[1] + 1))),
    "set_rows": lambda b, a, p: ops.set_rows(a, b.input("f32", (a.ne[0], p % 3, a.ne[2], a.ne[3])),
                                             b.input("i32", (p % 3,), integers(-1, a.ne[1] + 1))),
    "mul_mat": lambda b, a, p: ops.mul_mat(a, b.input("f32", (a.ne[0], p % 4, a.ne[2], a.ne[3]))),
    "concat": lambda b, a, p: ops.concat(a, a, p % 4),
    "repeat": lambda b, a, p: ops.repeat(a, b.input(a.type, [n * (1 + (p >> i & 1)) for i, n in enumerate(a.ne)])),
    "pad": lambda b, a, p: ops.pad(a, p % 3, p % 2),
}


@dataclass(frozen=True)
class Recipe:
    type: str
    ne: tuple[int, ...]
    view: tuple[tuple[int, ...], tuple[int, ...], int] | None
    perm: tuple[int, int, int, int] | None
    op: str
    param: int

    def build(self, b: CaseBuilder) -> Tensor:
        a = b.input(self.type, self.ne)
        if self.view is not None:
            a = ops.view(a, *self.view)
        if self.perm is not None:
            a = ops.permute(a, *self.perm)
        return OPS[self.op](b, a, self.param)


@st.composite
def recipes(draw: st.DrawFn) -> Recipe:
    ne = tuple(draw(st.lists(st.integers(0, 9), min_size=1, max_size=4)))
    view = None
    if draw(st.booleans()):
        vne = tuple(draw(st.lists(st.integers(0, 9), min_size=1, max_size=4)))
        nb = tuple(draw(st.lists(st.integers(-64, 400), max_size=len(vne) - 1)))
        view = (vne, nb, draw(st.integers(-8, 200)))
    perm = tuple(draw(st.permutations(range(4)))) if draw(st.booleans()) else None
    return Recipe(draw(st.sampled_from(["f32", "f16"])), ne, view, perm,  # type: ignore[arg-type]
                  draw(st.sampled_from(sorted(OPS))), draw(st.integers(0, 15)))


def _realize(r: Recipe) -> Realized | None:
    """The recipe's graph, or None when the op API refuses it (a PyGGMLError: allowed)."""
    b = CaseBuilder()
    try:
        out = r.build(b)
    except PyGGMLError:
        return None
    return Realized(build_graph(out), [out], b.inits)


def _run(rz: Realized, target: Target, data: dict[str, Any]) -> Executed | PyGGMLError:
    try:
        return execute(rz, target, data)
    except PyGGMLError as e:
        return e


def outcome(r: Recipe, target: Target, reference: Target) -> str:
    """What happened to r on target: 'refused' (the op API), 'unsupported' (by the backend), 'error' (a clear
    PyGGMLError at compute) or 'equal' (the reference's result). AssertionError for anything else: a result that
    differs, guard bytes changed, or a graph computed that the reference refuses. (The soak run,
    benchmarks/fuzz_soak.py, counts these.)"""
    ref_g = _realize(r)
    if ref_g is None:
        return "refused"
    got_g = _realize(r)
    assert got_g is not None
    if first_unsupported(got_g.graph, target.device) is not None:
        return "unsupported"
    data = generate(ref_g.graph, ref_g.inits, np.random.default_rng(zlib.crc32(repr(r).encode())))
    ref = _run(ref_g, reference, data)
    got = _run(got_g, target, data)
    if isinstance(got, PyGGMLError):
        return "error"  # a clear refusal
    assert not got.problems, f"{r}: {got.problems}"
    assert not isinstance(ref, PyGGMLError), f"{r}: {target.device.name} computed what the reference refuses ({ref})"
    out = got_g.outputs[0]
    mode = Compare.SET if r.op == "top_k" else Compare.EXACT if out.type.name.startswith("I") else Compare.NMSE
    threshold = 5e-4 if r.op in ("mul_mat",) or r.type == "f16" else 1e-6
    v = check(mode, ref.values[0], got.values[0], threshold, nan_ok=True)
    assert v.ok, f"{r}: {v.error}"
    return "equal"
