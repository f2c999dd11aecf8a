"""Element counts and byte sizes at the int64 edge (issue 33), on every device: what passes 2^63 - 1 is refused when
it is recorded, by core, with the same ShapeError (naming the op and the tensor) whatever device holds the data;
the largest shapes that fit are recorded and every device answers `supports_op` for them; and the cheap graphs over
such shapes (rows picked from a broadcast view of 2^60 rows, strides of 2^62 over one row) compute right on the
device where it claims them, and through a Scheduler (with the numpy reference as its fallback) everywhere.

Each check is a scenario run on each device (`edge=int64,check=...`; the `edge=` family's tag); the graph each
case builds only decides whether a device takes part (a view, which every device accepts)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import Backend, Buffer, Device
from pyggml.backend.sched import Scheduler
from pyggml.context import Context
from pyggml.errors import PyGGMLError, ShapeError
from pyggml.graph import build_graph
from pyggml.ops.base import Op
from pyggml.tensor import INT64_MAX, Tensor
from pyggml_conformance.case import Case, CaseBuilder, Scenario, fmt_params
from pyggml_conformance.cases.lifetime import _sched_backends
from pyggml_conformance.cases.misuse import _place
from pyggml_conformance.compare import nmse_check

H = (1 << 62) - 4
"""The largest stride a view takes (strides are below 2^62) that keeps an F32 view element-aligned."""
IDS = (0, (1 << 31) - 1, 5)
A = np.arange(1, 5, dtype=np.float32)


@dataclass
class Leaves:
    """Four floats `a` (1..4), eight floats `b` (4x2: 1..8) and the row ids IDS, in one buffer of the device (or in
    no buffer: metadata only)."""

    a: Tensor
    b: Tensor
    ids: Tensor
    buffer: Buffer | None

    @classmethod
    def make(cls, dev: Device | None) -> Leaves:
        """In a buffer of `dev` of their own, written; None: in no buffer (the caller may place them)."""
        ctx = Context(no_alloc=True)
        a = ctx.new_tensor("f32", 4, name="a")
        b = ctx.new_tensor("f32", 4, 2, name="b")
        ids = ctx.new_tensor("i32", len(IDS), name="ids")
        leaves = cls(a, b, ids, None if dev is None else alloc_ctx_tensors(ctx, dev.buffer_type()))
        if dev is not None:
            leaves.write()
        return leaves

    def write(self) -> None:
        """The values of those placed."""
        for t, v in ((self.a, A), (self.b, np.arange(1, 9, dtype=np.float32)), (self.ids, np.array(IDS, np.int32))):
            if t.buffer is not None:
                t.set(v)

    def free(self) -> None:
        if self.buffer is not None:
            self.buffer.free()


Build = Callable[[Leaves], object]


def _wide(t: Tensor, rows: int) -> Tensor:
    """`rows` copies of t's one row: a broadcast view (nb[1] = 0)."""
    return ops.view(t, (t.ne[0], rows), (0,))


def _one_row(t: Tensor, *nb: int) -> Tensor:
    """t's row as a 4-d view whose unit dims have the strides nb (they step over nothing)."""
    return ops.view(t, (t.ne[0], 1, 1, 1), nb or (H, H, H))


REFUSED: dict[str, tuple[str, Build]] = {
    "view_2^64_elements": ("VIEW", lambda x: _wide(x.a, 1 << 62)),
    "view_2^65_elements": ("VIEW", lambda x: _wide(x.a, 1 << 63)),
    "view_2^63_elements": ("VIEW", lambda x: ops.view(x.a, (2, 1 << 62), (0,))),
    "view_product_of_dims": ("VIEW", lambda x: ops.view(x.a, (4, 1 << 31, 1 << 31, 2), (0, 0, 0))),
    "view_stride_2^62": ("VIEW", lambda x: ops.view(x.a, (4, 1), (1 << 62,))),
    "view_ne_times_nb": ("VIEW", lambda x: ops.view(x.a, (4, 3), (H,))),
    "view_offset_2^63": ("VIEW", lambda x: ops.view(x.a, (1,), offset=1 << 63)),
    "view_ne_-2^63": ("VIEW", lambda x: ops.view(x.a, (4, -(1 << 63)), (0,))),
    "reshape_2^64_elements": ("RESHAPE", lambda x: ops.reshape(x.b, 1 << 32, 1 << 32)),
    "cont_bytes": ("CONT", lambda x: ops.cont(_wide(x.a, 1 << 60))),
    "repeat_bytes": ("REPEAT", lambda x: ops.repeat(x.a, _wide(x.a, 1 << 60))),
    "pad_elements": ("PAD", lambda x: ops.pad(_wide(x.a, (1 << 61) - 1), 0, (1 << 61) + 1)),
    "concat_elements": ("CONCAT", lambda x: ops.concat(_wide(x.a, 1 << 60), _wide(x.a, 1 << 60), 1)),
    "mul_mat_elements": ("MUL_MAT", lambda x: ops.mul_mat(x.b, ops.view(x.a, (4, 1 << 31, 1 << 29), (0, 0)))),
    "upscale_elements": ("UPSCALE", lambda x: ops.upscale(x.a, 1 << 62)),
}
"""Each builds past the edge from the leaves: (the op its ShapeError must name, how)."""


def _error(build: Build, leaves: Leaves) -> ShapeError | str:
    """The ShapeError recording raised, or what happened instead."""
    try:
        t = build(leaves)
    except ShapeError as e:
        return e
    except Exception as e:
        return f"{type(e).__name__} instead of a ShapeError: {e}"
    return f"recorded without an error: {t!r}"


def refused(dev: Device) -> str | None:
    """Every REFUSED shape raises ShapeError naming its op and the tensor it came from, word for word the error
    of the same recording over tensors in no buffer."""
    on_dev, bare = Leaves.make(dev), Leaves.make(None)
    problems: list[str] = []
    try:
        for name, (op, build) in REFUSED.items():
            got, want = _error(build, on_dev), _error(build, bare)
            if not isinstance(got, ShapeError):
                problems.append(f"{name}: {got}")
            elif str(got) != str(want):
                problems.append(f"{name}: on {dev.name} the error reads {str(got)!r}, over no buffer {str(want)!r}")
            elif not str(got).startswith(f"{op}: ") or not any(f"'{n}" in str(got) for n in ("a", "b")):
                problems.append(f"{name}: the error does not name {op} and the tensor: {got}")
    finally:
        on_dev.free()
    return "; ".join(problems) or None


LARGEST: dict[str, tuple[int, Build]] = {
    "view_int64_max_elements": (INT64_MAX, lambda x: ops.view(x.a, (1, INT64_MAX), (0,))),
    "view_2^63-4_elements": ((1 << 63) - 4, lambda x: _wide(x.a, (1 << 61) - 1)),
    "view_strides_2^62-4": (4, lambda x: _one_row(x.a)),
    "view_of_the_widest_view": (12, lambda x: ops.view(_wide(x.a, (1 << 61) - 1), (4, 3), (0,))),
    "sum_of_int64_max_elements": (1, lambda x: ops.sum(ops.view(x.a, (1, INT64_MAX), (0,)))),
    "repeat_2^63-16_bytes": (4 * ((1 << 59) - 1), lambda x: ops.repeat(ops.view(x.a, (1,)),
                                                                       _wide(x.a, (1 << 59) - 1))),
    "new_f32_2^63-4_bytes": ((1 << 61) - 1, lambda x: Context(no_alloc=True).new_tensor("f32", (1 << 61) - 1)),
    "new_q4_0_int64_rows": (INT64_MAX // 32 * 32,
                            lambda x: Context(no_alloc=True).new_tensor("q4_0", 32, INT64_MAX // 32)),
}
"""Each records at the edge: (its element count, how)."""


def largest(dev: Device) -> str | None:
    """Every LARGEST shape records with its element count and bytes within int64, and the device answers
    supports_op (True or False, no exception) for every node of its graph."""
    leaves = Leaves.make(dev)
    problems: list[str] = []
    try:
        for name, (count, build) in LARGEST.items():
            try:
                t = build(leaves)
                assert isinstance(t, Tensor)
                if t.nelements() != count or t.nbytes() > INT64_MAX:
                    problems.append(f"{name}: {t.nelements()} elements, {t.nbytes()} bytes")
                for node in build_graph(t).nodes:
                    if not isinstance(dev.supports_op(node), bool):
                        problems.append(f"{name}: supports_op({node.op.name}) is not a bool")
            except Exception as e:
                problems.append(f"{name}: {type(e).__name__}: {e}")
    finally:
        leaves.free()
    return "; ".join(problems) or None


Expect = Callable[[], npt.NDArray[Any]]
COMPUTED: dict[str, tuple[Build, Expect]] = {
    "get_rows_of_2^60_rows": (lambda x: ops.get_rows(_wide(x.a, 1 << 60), x.ids), lambda: np.tile(A, (3, 1))),
    "get_rows_of_2^61-1_rows": (lambda x: ops.get_rows(_wide(x.a, (1 << 61) - 1), x.ids),
                                lambda: np.tile(A, (3, 1))),
    "get_rows_of_2^32+1_rows": (lambda x: ops.get_rows(_wide(x.a, (1 << 32) + 1), x.ids),
                                lambda: np.tile(A, (3, 1))),
    "get_rows_strides_2^62-4": (lambda x: ops.get_rows(ops.view(x.a, (4, 1 << 40, 1, 1), (0, H, H)), x.ids),
                                lambda: np.tile(A, (3, 1))),
    "cont_of_a_view_of_2^60_rows": (lambda x: ops.cont(ops.view(_wide(x.a, 1 << 60), (4, 3), (0,))),
                                    lambda: np.tile(A, (3, 1))),
    "sum_strides_2^62-4": (lambda x: ops.sum(_one_row(x.a)), lambda: np.array([10.0])),
    "add_strides_2^62-4": (lambda x: ops.add(_one_row(x.a), _one_row(x.a, H - 4, H, 8)), lambda: 2.0 * A),
    "soft_max_strides_2^62-4": (lambda x: ops.soft_max(_one_row(x.a)),
                                lambda: np.exp(A.astype(np.float64)) / np.exp(A.astype(np.float64)).sum()),
    "mul_mat_strides_2^62-4": (lambda x: ops.mul_mat(_one_row(x.a), _one_row(x.a)), lambda: np.array([30.0])),
}
"""Cheap graphs over shapes at the edge: (how, the expected values)."""


def _run(backend: Backend | Scheduler, build: Build, expect: Expect, dev: Device) -> str | None:
    """On a backend: the graph and its leaves in one buffer of the device (skipped where the device refuses a
    node: a scheduler runs it elsewhere); through a scheduler: the leaves in a buffer of the device, the rest
    placed by the scheduler."""
    direct = isinstance(backend, Backend)
    leaves = Leaves.make(None if direct else dev)
    arena: Buffer | None = None
    try:
        y = build(leaves)
        assert isinstance(y, Tensor)
        g = build_graph(y)
        if isinstance(backend, Backend):
            if not all(dev.supports_op(n) for n in g.nodes):
                return None
            arena = _place(g, dev)
            leaves.write()
            backend.graph_compute(g)
            backend.synchronize()
        else:
            backend.graph_compute(g)
        v = nmse_check(expect(), y.numpy().astype(np.float64), 1e-6)
        return None if v.ok else f"wrong result: {v.error}"
    except PyGGMLError as e:
        return f"{type(e).__name__}: {e}"
    finally:
        leaves.free()
        if arena is not None:
            arena.free()


def computed(dev: Device) -> str | None:
    """Every COMPUTED graph gives the expected values on the device (where it claims every node) and through a
    Scheduler over the device and the numpy reference."""
    problems: list[str] = []
    be = dev.init_backend()
    backends = _sched_backends(dev)
    sched = Scheduler(backends)
    try:
        for name, (build, expect) in COMPUTED.items():
            for on, how in ((be, dev.name), (sched, "the scheduler")):
                bad = _run(on, build, expect, dev)
                if bad:
                    problems.append(f"{name} on {how}: {bad}")
    finally:
        for b in (be, *backends):
            b.free()
    return "; ".join(problems) or None


SCENARIOS: dict[str, Scenario] = {"refused": refused, "largest": largest, "computed": computed}


def _view_graph(b: CaseBuilder) -> Tensor:
    return ops.view(b.input("f32", (4,)), (2,))


def eval_cases() -> list[Case]:
    return [Case(Op.VIEW, fmt_params(edge="int64", check=name), _view_graph, scenario=fn)
            for name, fn in SCENARIOS.items()]


def perf_cases() -> list[Case]:
    return []
