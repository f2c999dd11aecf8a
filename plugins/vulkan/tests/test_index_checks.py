"""Out-of-range indices (GET_ROWS, SET_ROWS, MUL_MAT_ID) raise ComputeError naming the node, nothing is written
outside the destination, and the backend stays usable (issue 19, defect 1)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.errors import ComputeError
from pyggml.graph import build_graph
from pyggml.tensor import Tensor
from pyggml_testing.on_device import place_graph

Build = Callable[[Context], tuple[dict[str, Tensor], Tensor]]


def _run_bad(backend, build: Build, data: dict[str, np.ndarray], match: str):  # type: ignore[no-untyped-def]
    """Compute with bad indices: ComputeError; every byte of the buffer outside the output unchanged."""
    ctx = Context(no_alloc=True)
    ins, out = build(ctx)
    g = build_graph(out)
    buf = place_graph(g, backend.device.buffer_type())
    for name, t in ins.items():
        t.set(data[name])
    before = buf.read(0, buf.size)
    with pytest.raises(ComputeError, match=match):
        backend.graph_compute(g)
    after = buf.read(0, buf.size)
    keep = np.ones(buf.size, bool)
    keep[out.offset: out.offset + out.nbytes()] = False
    assert np.array_equal(before[keep], after[keep]), "bytes outside the destination changed"
    return ins, out, g


@pytest.mark.parametrize("idt,bad", [(np.int32, 4), (np.int32, -1), (np.int64, 1 << 40), (np.int64, -1),
                                     (np.int64, 3 + (1 << 32))])
@pytest.mark.parametrize("dtype", ["f32", "f16", "q8_0"])
def test_set_rows_out_of_range(backend, idt, bad, dtype) -> None:  # type: ignore[no-untyped-def]
    def build(ctx: Context) -> tuple[dict[str, Tensor], Tensor]:
        d = ctx.new_tensor(dtype, 32, 3, name="d")
        rows = ctx.new_tensor("f32", 32, 2, name="rows")
        ids = ctx.new_tensor("i32" if idt is np.int32 else "i64", 2, name="ids")
        return {"rows": rows, "ids": ids}, ops.set_rows(d, rows, ids)

    data = {"rows": np.ones((2, 32), np.float32), "ids": np.array([1, bad], idt)}
    ins, out, g = _run_bad(backend, build, data, r"SET_ROWS.*row id outside 0\.\.2")
    ins["ids"].set(np.array([2, 0], idt))
    backend.graph_compute(g)  # the error was cleared: the same graph runs
    got = out.numpy().astype(np.float32)
    assert np.allclose(got[[2, 0]], 1.0, atol=1e-3)


@pytest.mark.parametrize("atype", ["f32", "q4_0"])
def test_get_rows_out_of_range(backend, atype) -> None:  # type: ignore[no-untyped-def]
    def build(ctx: Context) -> tuple[dict[str, Tensor], Tensor]:
        a = ctx.new_tensor(atype, 32, 3, name="a")
        ids = ctx.new_tensor("i32", 2, name="ids")
        return {"a": a, "ids": ids}, ops.get_rows(a, ids)

    a = np.arange(96, dtype=np.float32).reshape(3, 32) / 96  # set() quantises for q4_0
    ins, out, g = _run_bad(backend, build, {"a": a, "ids": np.array([1, 3], np.int32)},
                           r"GET_ROWS.*row id outside 0\.\.2")
    ins["ids"].set(np.array([2, 0], np.int32))
    backend.graph_compute(g)
    assert np.allclose(out.numpy(), a[[2, 0]], atol=0.1)


@pytest.mark.parametrize("atype", ["f32", "q8_0"])
@pytest.mark.parametrize("bad", [4, -1])
def test_mul_mat_id_bad_expert(backend, atype, bad) -> None:  # type: ignore[no-untyped-def]
    def build(ctx: Context) -> tuple[dict[str, Tensor], Tensor]:
        w = ctx.new_tensor(atype, 32, 5, 4, name="experts")
        x = ctx.new_tensor("f32", 32, 1, 3, name="x")
        ids = ctx.new_tensor("i32", 2, 3, name="ids")
        return {"experts": w, "x": x, "ids": ids}, ops.mul_mat_id(w, x, ids)

    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 5, 32)).astype(np.float32)
    ids = np.array([[0, 1], [2, bad], [3, 0]], np.int32)
    data = {"experts": w, "x": rng.standard_normal((3, 1, 32)).astype(np.float32), "ids": ids}
    ins, out, g = _run_bad(backend, build, data, r"MUL_MAT_ID.*expert id outside 0\.\.3")
    ins["ids"].set(np.array([[0, 1], [2, 3], [3, 0]], np.int32))
    backend.graph_compute(g)
    assert np.isfinite(out.numpy()).all()


def test_neighbour_tensor_unchanged(backend) -> None:  # type: ignore[no-untyped-def]
    """The issue's reproduction: set_rows into a 4x3 F32 tensor with id 4; a tensor after it in the same buffer."""
    ctx = Context(no_alloc=True)
    d = ctx.new_tensor("f32", 4, 3, name="d")
    rows = ctx.new_tensor("f32", 4, 1, name="rows")
    ids = ctx.new_tensor("i32", 1, name="ids")
    y = ops.set_rows(d, rows, ids)
    g = build_graph(y)
    buft = backend.device.buffer_type()
    buf = buft.alloc_buffer(4096)
    for i, t in enumerate((d, rows, ids)):
        t.buffer, t.offset = buf, i * 256
    neighbour = d.offset + 16  # d's row 4 would start here
    buf.write(0, np.zeros(4096, np.uint8))
    buf.write(neighbour, np.full(16, 7, np.uint8))
    rows.set(np.ones((1, 4), np.float32))
    ids.set(np.array([4], np.int32))
    y.buffer, y.offset = buf, d.offset
    with pytest.raises(ComputeError, match="row id outside"):
        backend.graph_compute(g)
    assert np.array_equal(buf.read(neighbour, 16), np.full(16, 7, np.uint8))
    buf.free()
