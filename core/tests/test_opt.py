"""pyggml.opt: one optimiser step against hand-computed AdamW / SGD updates, training that converges, the dataset's
batches and split, and the trainer's refusals."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend import get_device
from pyggml.backend.sched import Scheduler
from pyggml.errors import OptimizerParamsError, PyGGMLError, ShapeError
from pyggml.opt import SGD, AdamW, Dataset, Optimizer, Trainer

N_IN, N_OUT, BATCH = 3, 2, 8


def linear(w0: np.ndarray) -> tuple[Scheduler, gg.Tensor, gg.Tensor, gg.Tensor]:
    dev = get_device("numpy")
    weights = gg.Context(no_alloc=True)
    w = weights.new_tensor(gg.F32, N_IN, N_OUT, name="w").set_param()
    alloc_ctx_tensors(weights, dev.buffer_type())
    w.set(w0)
    with gg.Context(no_alloc=True) as ctx:
        x = ctx.new_tensor(gg.F32, N_IN, BATCH, name="x")
        z = ops.mul_mat(w, x)
    return Scheduler([dev.init_backend()]), x, z, w


@pytest.mark.parametrize("opt", [AdamW(alpha=0.01, wd=0.1), SGD(alpha=0.1, wd=0.01)])
def test_one_step_matches_hand_computed_update(opt: Optimizer) -> None:
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((N_OUT, N_IN)).astype(np.float32)
    xs = rng.standard_normal((BATCH, N_IN)).astype(np.float32)
    ys = rng.standard_normal((BATCH, N_OUT)).astype(np.float32)
    sched, x, z, w = linear(w0)
    tr = Trainer(sched, x, z, loss="mse", optimizer=opt)
    res = tr.run_pass(Dataset(xs, ys), 0, BATCH, train=True)
    zz = xs.astype(np.float64) @ w0.T
    assert res.losses[0] == pytest.approx(np.mean((zz - ys) ** 2), rel=1e-5)
    g = 2 * (zz - ys).T @ xs / zz.size
    if isinstance(opt, AdamW):  # step 1: the bias-corrected moments are g and g^2
        want = w0 * (1 - opt.alpha * opt.wd) - opt.alpha * g / (np.abs(g) + opt.eps)
    else:
        want = w0 * (1 - opt.alpha * opt.wd) - opt.alpha * g
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-5, atol=1e-6)


def test_training_converges_and_reports_per_epoch() -> None:
    rng = np.random.default_rng(2)
    n = 256
    cls = rng.integers(0, N_OUT, n)
    xs = (rng.standard_normal((n, N_IN)) + np.where(cls[:, None] == 1, 1.5, -1.5)).astype(np.float32)
    ys = np.eye(N_OUT, dtype=np.float32)[cls]
    sched, x, z, _ = linear(np.zeros((N_OUT, N_IN), dtype=np.float32))
    tr = Trainer(sched, x, z, optimizer=AdamW(alpha=0.05))
    seen: list[tuple[bool, int, int]] = []
    out = tr.fit(Dataset(xs, ys), 4, val_split=0.25, progress=lambda t, i, k, r, dt: seen.append((t, i, k)))
    assert len(out) == 4
    assert out[-1].train.loss < out[0].train.loss
    assert out[-1].val.accuracy > 0.9
    assert out[0].train.ndata == 192 and out[0].val.ndata == 64
    assert (True, 24, 24) in seen and (False, 8, 8) in seen
    assert tr.step == 4 * 24


def test_predict_runs_the_model_alone_on_any_number_of_rows() -> None:
    """predict: the outputs for every row (the last batch padded, its padding dropped) with the weights as trained,
    between training passes; a wrong input width is refused naming the model's input."""
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((N_OUT, N_IN)).astype(np.float32)
    sched, x, z, w = linear(w0)
    tr = Trainer(sched, x, z, loss="mse", optimizer=SGD(alpha=0.1))
    xs = rng.standard_normal((2 * BATCH + 3, N_IN)).astype(np.float32)
    np.testing.assert_allclose(tr.predict(xs), xs @ w0.T, rtol=1e-5, atol=1e-6)
    ds = Dataset(xs, rng.standard_normal((len(xs), N_OUT)).astype(np.float32))
    tr.fit(ds, 1, val_split=0.0)
    trained = w.numpy()
    assert not np.allclose(trained, w0)
    got = tr.predict(xs[:1])
    assert got.shape == (1, N_OUT)
    np.testing.assert_allclose(got, xs[:1] @ trained.T, rtol=1e-5, atol=1e-6)
    assert tr.evaluate(ds).ndata == 2 * BATCH        # whole batches, as the validation passes
    tr.fit(ds, 1, val_split=0.0)                       # training goes on after a prediction
    assert not np.allclose(w.numpy(), trained)
    with pytest.raises(ShapeError, match=r"Trainer.predict: x of shape \(4, 2\) must be \(n, 3\).*'x' f32"):
        tr.predict(np.zeros((4, 2)))


def test_dataset_batches_and_shuffle() -> None:
    ds = Dataset(np.arange(20, dtype=np.float32).reshape(10, 2), np.zeros((10, 1)))
    assert [b[0][:, 0].tolist() for b in ds.batches(4, 0, 10)] == [[0, 2, 4, 6], [8, 10, 12, 14]]
    ds.shuffle(np.random.default_rng(0), end=8)
    assert sorted(ds.order[:8].tolist()) == list(range(8)) and ds.order[8:].tolist() == [8, 9]
    with pytest.raises(ShapeError):
        Dataset(np.zeros((3, 2)), np.zeros((4, 1)))


def test_refusals() -> None:
    sched, x, z, _ = linear(np.zeros((N_OUT, N_IN), dtype=np.float32))
    with pytest.raises(PyGGMLError, match="loss"):
        Trainer(sched, x, z, loss="hinge")
    with pytest.raises(PyGGMLError, match="AdamW parameters"):
        Trainer(sched, x, z, optimizer=AdamW(alpha=-1.0))
    tr = Trainer(sched, x, z)
    with pytest.raises(PyGGMLError, match="val_split"):
        tr.fit(Dataset(np.zeros((16, N_IN)), np.zeros((16, N_OUT))), 1, val_split=1.5)
    with pytest.raises(PyGGMLError, match="no whole training batch"):
        tr.fit(Dataset(np.zeros((4, N_IN)), np.zeros((4, N_OUT))), 1)
    dev = get_device("numpy")
    with gg.Context(no_alloc=True) as ctx:
        w = ctx.new_tensor(gg.F32, N_IN, N_OUT, name="unplaced").set_param()
        x2 = ctx.new_tensor(gg.F32, N_IN, BATCH)
        z2 = ops.mul_mat(w, x2)
    with pytest.raises(PyGGMLError, match="no buffer"):
        Trainer(Scheduler([dev.init_backend()]), x2, z2)


def test_gradient_accumulation_steps_once_per_period() -> None:
    """opt_period=2: the first micro-batch only accumulates, the second steps on the mean of both gradients."""
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((N_OUT, N_IN)).astype(np.float32)
    xs = rng.standard_normal((2 * BATCH, N_IN)).astype(np.float32)
    ys = rng.standard_normal((2 * BATCH, N_OUT)).astype(np.float32)
    sched, x, z, w = linear(w0)
    opt = SGD(alpha=0.1)
    tr = Trainer(sched, x, z, loss="mse", optimizer=opt, opt_period=2)
    ds = Dataset(xs, ys)
    tr.run_pass(ds, 0, BATCH, train=True)
    np.testing.assert_array_equal(w.numpy(), w0)  # nothing stepped yet
    assert tr.step == 0
    res = tr.run_pass(ds, BATCH, 2 * BATCH, train=True)
    assert tr.step == 1
    grads = []
    for k in range(2):
        xb, yb = xs[k * BATCH:(k + 1) * BATCH], ys[k * BATCH:(k + 1) * BATCH]
        zz = xb.astype(np.float64) @ w0.T
        grads.append(2 * (zz - yb).T @ xb / zz.size)
        if k == 1:  # the reported loss is the batch's own, not the share divided over the period
            assert res.losses[0] == pytest.approx(np.mean((zz - yb) ** 2), rel=1e-5)
    np.testing.assert_allclose(w.numpy(), w0 - opt.alpha * (grads[0] + grads[1]) / 2, rtol=1e-5, atol=1e-6)
    with pytest.raises(PyGGMLError, match="opt_period"):
        Trainer(sched, x, z, opt_period=0)


def test_parameters_outside_the_first_backend_are_refused() -> None:
    """Parameters in OpenCL memory with numpy as the first backend: the step would update a copy."""
    from pyggml.backend.registry import hub

    try:
        dev = hub().device("OpenCL0")
    except PyGGMLError:
        pytest.skip("no OpenCL0 device here")
    weights = gg.Context(no_alloc=True)
    w = weights.new_tensor(gg.F32, N_IN, N_OUT, name="w").set_param()
    alloc_ctx_tensors(weights, dev.buffer_type())
    with gg.Context(no_alloc=True) as ctx:
        x = ctx.new_tensor(gg.F32, N_IN, BATCH, name="x")
        z = ops.mul_mat(w, x)
    with pytest.raises(PyGGMLError, match="cannot update in place"):
        Trainer(Scheduler([get_device("numpy").init_backend()]), x, z)


def test_parameters_in_a_memory_mapped_file_are_refused(tmp_path: Path) -> None:
    """Weights loaded with use_mmap live in the GGUF's read-only map: the step's in-place write would crash, so the
    trainer refuses them and says how to load them."""
    gguf = pytest.importorskip("gguf")
    from pyggml.gguf import GGUFFile, load_weights

    path = tmp_path / "w.gguf"
    writer = gguf.GGUFWriter(path, "test")
    writer.add_tensor("w", np.zeros((N_OUT, N_IN), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    dev = get_device("numpy")
    w = load_weights(GGUFFile(path), dev.buffer_type())["w"].set_param()
    with gg.Context(no_alloc=True) as ctx:
        x = ctx.new_tensor(gg.F32, N_IN, BATCH, name="x")
        z = ops.mul_mat(w, x)
    with pytest.raises(PyGGMLError, match=r"read-only memory.*use_mmap=False"):
        Trainer(Scheduler([dev.init_backend()]), x, z)


INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("kw,name,allowed", [
    ({"beta1": 1.0}, "beta1", "[0, 1)"), ({"beta2": 1.0}, "beta2", "[0, 1)"), ({"beta1": -0.1}, "beta1", "[0, 1)"),
    ({"beta2": NAN}, "beta2", "[0, 1)"), ({"alpha": INF}, "alpha", "(0, inf)"), ({"alpha": 0.0}, "alpha", "(0, inf)"),
    ({"alpha": NAN}, "alpha", "(0, inf)"), ({"eps": -1e-8}, "eps", "[0, inf)"), ({"eps": INF}, "eps", "[0, inf)"),
    ({"wd": 1.5}, "wd", "[0, 1]"), ({"wd": -INF}, "wd", "[0, 1]"), ({"alpha": "0.1"}, "alpha", "(0, inf)"),
    ({"beta1": True}, "beta1", "[0, 1)"), ({"eps": None}, "eps", "[0, inf)"),
])
def test_adamw_parameters_are_checked_when_made(kw: dict[str, object], name: str, allowed: str) -> None:
    """Issue 33, item 9: beta1 = 1.0 passed the check and divided by zero at the first step (a bare
    ZeroDivisionError); alpha = inf was accepted. Every parameter is checked up front, by name and range."""
    with pytest.raises(OptimizerParamsError, match=rf"AdamW parameters out of range: {name} = .* must be in "
                                                   rf"{re.escape(allowed)}"):
        AdamW(**kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("kw,name,allowed", [
    ({"alpha": INF}, "alpha", "(0, inf)"), ({"alpha": -1.0}, "alpha", "(0, inf)"),
    ({"alpha": NAN}, "alpha", "(0, inf)"), ({"wd": 1.01}, "wd", "[0, 1]"), ({"wd": NAN}, "wd", "[0, 1]"),
    ({"wd": [0.1]}, "wd", "[0, 1]"),
])
def test_sgd_parameters_are_checked_when_made(kw: dict[str, object], name: str, allowed: str) -> None:
    with pytest.raises(OptimizerParamsError, match=rf"SGD parameters out of range: {name} = .* must be in "
                                                   rf"{re.escape(allowed)}"):
        SGD(**kw)  # type: ignore[arg-type]


def test_optimiser_errors_are_value_errors_of_the_hierarchy() -> None:
    assert issubclass(OptimizerParamsError, PyGGMLError) and issubclass(OptimizerParamsError, ValueError)


def test_optimiser_edges_that_are_allowed() -> None:
    """The ends of each range that make sense are kept (ggml-opt's asserts, minus beta = 1)."""
    opt = AdamW(alpha=np.float32(0.5), beta1=0.0, beta2=0.0, eps=0.0, wd=1.0)  # type: ignore[arg-type]
    assert isinstance(opt.alpha, float) and opt.alpha == 0.5
    assert np.all(np.isfinite(opt.values(1)))
    assert np.all(np.isfinite(AdamW(beta1=0.999999, beta2=0.999999).values(1)))
    assert SGD(alpha=3, wd=0).values(1).tolist() == [3.0, 0.0]
    for bad in (0, -1, 1.5):
        with pytest.raises(OptimizerParamsError, match="step"):
            AdamW().values(bad)  # type: ignore[arg-type]
