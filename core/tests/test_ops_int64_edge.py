"""Element counts and byte extents at the int64 edge are refused where the tensor is recorded (issue 33, item 5:
`ops.sum(ops.view(a, (4, 1 << 62), (0,)))` on 4 floats returned 0.0 on OpenCL0 and ran past 30 s on cpu; with
`1 << 63` cpu raised a bare OverflowError), on the memory of every device, before any backend sees the graph."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend import devices, get_device
from pyggml.backend.sched import Scheduler
from pyggml.errors import ShapeError
from pyggml.ops.base import Op
from pyggml.tensor import INT64_MAX, Tensor, check_extent

DEVICES = [d.name for d in devices()]


def test_numpy_is_among_the_devices() -> None:
    assert "numpy" in DEVICES


def four_floats(device: str) -> Tensor:
    """A tensor of 4 floats in a buffer of `device`."""
    ctx = gg.Context(no_alloc=True)
    a = ctx.new_tensor(gg.F32, 4, name="a")
    alloc_ctx_tensors(ctx, get_device(device).buffer_type())
    a.set(np.arange(4, dtype=np.float32))
    return a


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n1", [1 << 62, 1 << 63, (1 << 64) + 3])
def test_a_view_of_more_than_int64_elements_is_refused(device: str, n1: int) -> None:
    """The issue's reproduction: 4 * n1 elements over 16 bytes (nb[1] = 0)."""
    a = four_floats(device)
    with pytest.raises(ShapeError, match=r"VIEW: tensor 'a \(view\)' f32 ne=\[4, \d+, 1, 1\].* has \d+ elements, "
                                         r"more than int64 counts .*sources: 'a' f32 ne=\[4, 1, 1, 1\]"):
        ops.sum(ops.view(a, (4, n1), (0,)))


@pytest.mark.parametrize("device", DEVICES)
def test_the_int64_edge_itself(device: str) -> None:
    """2^63 elements are refused; 2^63 - 1 are recorded (and the tensor stays usable)."""
    a = four_floats(device)
    with pytest.raises(ShapeError, match="9223372036854775808 elements"):
        ops.view(a, (2, 1 << 62), (0,))
    edge = ops.view(a, (1, INT64_MAX), (0,))
    assert edge.nelements() == INT64_MAX
    assert ops.sum(edge).ne == (1, 1, 1, 1)


@pytest.mark.parametrize("device", DEVICES)
def test_op_results_past_int64_are_refused(device: str) -> None:
    """Result shapes that no source has: PAD and CONCAT past the edge."""
    a = four_floats(device)
    with pytest.raises(ShapeError, match=r"PAD: tensor f32 ne=\[4, 4611686018427387904, 1, 1\]"):
        ops.pad(ops.view(a, (4, (1 << 61) - 1), (0,)), 0, (1 << 61) + 1)
    wide = ops.view(a, (4, 1 << 60), (0,))  # 2^62 elements over 16 bytes: fine as a view; two are 2^63
    with pytest.raises(ShapeError, match=r"CONCAT: .* elements, more than int64"):
        ops.concat(wide, wide, 1)


@pytest.mark.parametrize("ne,ok", [((1 << 61,), False), (((1 << 61) - 1,), True), ((1 << 40, 1 << 23), False),
                                   ((1 << 40, (1 << 21) - 1), True)])
def test_new_tensor_bytes_at_the_edge(ne: tuple[int, ...], ok: bool) -> None:
    """F32: 2^61 elements span 2^63 bytes, one past the edge; one element less fits (metadata only)."""
    ctx = gg.Context(no_alloc=True)
    if ok:
        assert ctx.new_tensor(gg.F32, *ne, name="t").nbytes() <= INT64_MAX
    else:
        with pytest.raises(ShapeError, match=r"new tensor: tensor 't' f32 .* (spans \d+ bytes|elements)"):
            ctx.new_tensor(gg.F32, *ne, name="t")


def test_arange_past_int64_is_refused() -> None:
    with pytest.raises(ShapeError, match="ARANGE: tensor f32"):
        ops.arange(gg.Context(no_alloc=True), 0.0, 1e30)


@pytest.mark.parametrize("device", [d for d in DEVICES if d in ("numpy", "cpu")])
def test_ordinary_tensors_still_compute(device: str) -> None:
    """The check refuses nothing ordinary: a broadcast view (nb[1] = 0) still sums on the device."""
    a = four_floats(device)
    s = ops.sum(ops.view(a, (4, 3), (0,)))
    g = gg.Graph(16)
    g.build_forward_expand(s)
    sched = Scheduler([get_device(device).init_backend()])
    sched.alloc_graph(g)
    sched.graph_compute(g)
    assert float(s.numpy().reshape(-1)[0]) == pytest.approx(18.0)


def test_a_view_past_its_data_owner_is_refused_for_every_view_maker() -> None:
    """ops.view bounds its own views; `check_extent` holds every other view maker (reshape, permute, in-place and
    copy results, Context.view_tensor) to the same rule when the view is recorded."""
    ctx = gg.Context(no_alloc=True)
    a = ctx.new_tensor(gg.F32, 4, name="a")
    check_extent(Tensor(gg.F32, (4, 1, 1, 1), op=Op.VIEW, view_src=a, ctx=ctx))
    with pytest.raises(ShapeError, match=r"VIEW: tensor f32 ne=\[4, 1, 1, 1\].*a view of 16 bytes at offset 4 lies "
                                         r"outside its data owner 'a' f32 ne=\[4, 1, 1, 1\] of 16 bytes"):
        ctx.add_tensor(Tensor(gg.F32, (4, 1, 1, 1), op=Op.VIEW, src=(a,), view_src=a, view_offs=4, ctx=ctx))
    with pytest.raises(ShapeError, match=r"VIEW: view of 8 bytes at offset 12 is outside the data owner"):
        ops.view(a, (2,), offset=12)
