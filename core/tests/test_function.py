"""pyggml.function: the MLP of docs/library.md gives numpy's numbers on every device present, one plan per input
signature placed once and replayed, weights written to the device once (stored transposed where multiplied from
the right), and clear errors for what cannot become a graph."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.backend import default_device, hub
from pyggml.backend.protocol import Device
from pyggml.errors import GraphError, PyGGMLError, ShapeError, UnsupportedTypeError
from pyggml.ops.base import Op

DEVICES = ["numpy", "cpu", "OpenCL0", "Vulkan0", "MetalSim0"]
Array = np.ndarray[Any, Any]


def device(name: str) -> Device:
    """The device, or a skip. MetalSim0 (the Metal plugin's emulator, pyggml-metal-sim) appears only with
    PYGGML_METAL_SIM=1 set when its registry enumerates: a fresh registry of the same class is asked with it set."""
    try:
        return hub().device(name)
    except PyGGMLError as e:
        reason = str(e)
    if name == "MetalSim0":
        try:
            reg_cls = type(hub().registry("MetalSim"))
        except PyGGMLError as e:
            pytest.skip(f"no Metal emulator here (pyggml-metal-sim): {e}")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PYGGML_METAL_SIM", "1")
            devs = [d for d in reg_cls().devices() if d.name == name]  # type: ignore[call-arg]
        if devs:
            return devs[0]
    pytest.skip(f"no {name} device here: {reason}")


def mlp(x: gg.Tensor, w1: gg.Tensor, w2: gg.Tensor) -> gg.Tensor:
    return ops.soft_max(ops.relu(x @ w1) @ w2)


def mlp_numpy(x: Array, w1: Array, w2: Array) -> Array:
    h = np.maximum(x.astype(np.float64) @ w1, 0.0) @ w2
    e = np.exp(h - h.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]


def weights(n_in: int = 64, hidden: int = 128, n_out: int = 10) -> dict[str, Array]:
    rng = np.random.default_rng(0)
    return {"w1": (rng.standard_normal((n_in, hidden)) * 0.1).astype(np.float32),
            "w2": (rng.standard_normal((hidden, n_out)) * 0.1).astype(np.float32)}


@pytest.mark.parametrize("name", DEVICES)
def test_mlp_on_every_device(name: str) -> None:
    dev = device(name)
    w = weights()
    f = gg.function(mlp, weights=w, device=dev)
    rng = np.random.default_rng(1)
    for batch in (32, 5, 32, 5):
        x = rng.standard_normal((batch, 64)).astype(np.float32)
        got = f(x)
        assert isinstance(got, np.ndarray) and got.shape == (batch, 10) and got.dtype == np.float32
        np.testing.assert_allclose(got, mlp_numpy(x, **w), rtol=1e-4, atol=1e-6)
    assert f.device is dev and len(f.plans) == 2
    for plan in f.plans:  # each placed once, then replayed
        s = plan.sched.stats
        assert (s.plans, s.allocs, s.reserves, s.computes) == (1, 1, 1, 2)
        assert {n.op for n in plan.graph.nodes} == {Op.MUL_MAT, Op.UNARY, Op.SOFT_MAX}  # no CONT: weights stored .T
        assert sorted(t.name for t in plan.graph.leafs) == ["w1.T", "w2.T", "x"]
        assert plan.sched.get_tensor_backend(plan.outputs[0]) is plan.sched.backends[0]  # all on the device


def test_weights_are_written_once_and_set_weight_rewrites_them() -> None:
    """A weight used both ways is held in both layouts; set_weight writes both, for every plan."""
    w = {"w": np.arange(12, dtype=np.float32).reshape(3, 4) / 10}
    f = gg.function(lambda x, w: x @ w + w * 0, weights=w, device="numpy")
    x = np.ones((3, 3), dtype=np.float32)
    np.testing.assert_allclose(f(x), x @ w["w"], rtol=1e-6)
    leafs = {t.name: t for t in f.plans[0].graph.leafs}
    assert set(leafs) == {"x", "w", "w.T"}
    before = leafs["w"].buffer
    w2 = w["w"] * 2
    f.set_weight("w", w2)
    assert leafs["w"].buffer is before                    # rewritten in place, not placed again
    np.testing.assert_allclose(f(x), x @ w2, rtol=1e-6)
    np.testing.assert_allclose(f(x.astype(np.float64)), x @ w2, rtol=1e-6)  # another dtype: a new plan, new values
    assert len(f.plans) == 2
    with pytest.raises(ShapeError, match=r"weight 'w' has numpy shape \(3, 4\), got an array of shape \(4, 3\)"):
        f.set_weight("w", w2.T)
    with pytest.raises(KeyError, match="no weight 'v'; its weights: w"):
        f.set_weight("v", w2)


def test_several_outputs_float64_inputs_and_unused_arguments() -> None:
    @gg.function(device="numpy")
    def f(a: gg.Tensor, b: gg.Tensor, unused: gg.Tensor) -> tuple[gg.Tensor, gg.Tensor]:
        return a + b, a * b

    a = np.linspace(0, 1, 12).reshape(3, 4)               # float64: computed as float32
    b = np.full(4, 2.0)
    s, p = f(a, b, np.zeros(2, dtype=np.float32))
    np.testing.assert_allclose(s, a + b, rtol=1e-6)
    np.testing.assert_allclose(p, a * b, rtol=1e-6)
    assert s.dtype == np.float32
    assert [t.name for t in f.plans[0].inputs] == ["a", "b", "unused"]


def test_default_device() -> None:
    f = gg.function(lambda x: x * 2)
    assert f.device is default_device()
    np.testing.assert_array_equal(f(np.ones(3, dtype=np.float32)), np.full(3, 2, dtype=np.float32))


@pytest.mark.parametrize(("fn", "args", "error", "message"), [
    (lambda x: x * 2, [np.ones(3, dtype=np.int64)], UnsupportedTypeError, "argument 0 (x): arrays of dtype int64 "
     "have no ggml type here"),
    (lambda x: x * 2, [np.ones((1, 1, 1, 1, 2), dtype=np.float32)], ShapeError, "has 5 dimensions"),
    (lambda x: 2.0, [np.ones(3, dtype=np.float32)], GraphError, "returned float; a function traced by "
     "pyggml.function returns a Tensor"),
    (lambda x: x, [np.ones(3, dtype=np.float32)], GraphError, "returns 'x', one of its arguments or weights "
     "unchanged"),
    (lambda x: (x * 2, None), [np.ones(3, dtype=np.float32)], GraphError, "returned tuple"),
])
def test_refused_before_anything_runs(fn: Any, args: list[Array], error: type[Exception], message: str) -> None:
    with pytest.raises(error) as e:
        gg.function(fn, device="numpy")(*args)
    assert message in str(e.value)
