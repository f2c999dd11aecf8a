"""The example trains to the accuracy its README states, and a seeded short run gives the same loss curve on the
numpy reference and on every other device (float32 kernels against float64: within float tolerance)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pyggml.backend.registry import hub
from pyggml.errors import PyGGMLError
from pyggml_train_mlp.data import spirals
from pyggml_train_mlp.train import Config, main, train, write_png

SHORT = Config(epochs=3, n_per_class=96, batch=16, hidden=32)
LOSS_RTOL = 2e-3
"""Per-epoch mean losses after 3 epochs (54 AdamW steps): float32 kernels drift from the float64 reference by far
less than this; a wrong kernel or a lost optimiser update is off by much more."""


def test_dataset_is_balanced_and_seeded() -> None:
    x, y = spirals(50, seed=3)
    x2, _ = spirals(50, seed=3)
    assert x.shape == (150, 2) and y.shape == (150, 3)
    assert (y.sum(0) == 50).all()
    np.testing.assert_array_equal(x, x2)


def test_numpy_reaches_stated_accuracy(tmp_path: Path) -> None:
    """The README's figure: at least 95% validation accuracy after 60 epochs (the run gets 100%)."""
    out = tmp_path / "r.json"
    assert main(["--device", "numpy", "--epochs", "60", "--quiet", "--json", str(out), "--target", "0.95"]) == 0
    assert out.exists()


def _available(name: str) -> bool:
    try:
        hub().device(name)
    except PyGGMLError:
        return False
    return True


@pytest.mark.parametrize("device", ["cpu", "OpenCL0", "Vulkan0"])
def test_same_loss_curve_as_numpy(device: str) -> None:
    if not _available(device):
        pytest.skip(f"no {device} device here")
    ref = train(Config(**{**SHORT.__dict__, "device": "numpy"}))
    try:
        got = train(Config(**{**SHORT.__dict__, "device": device}))
    except PyGGMLError as e:
        if "cannot run OPT_STEP" in str(e):
            pytest.skip(f"{device} has no optimiser-step kernel yet: {e}")
        raise
    for r, g in zip(ref, got, strict=True):
        assert g.train.loss == pytest.approx(r.train.loss, rel=LOSS_RTOL), r.epoch
        assert g.val.loss == pytest.approx(r.val.loss, rel=LOSS_RTOL), r.epoch


def test_png_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    res = train(Config(**{**SHORT.__dict__, "device": "numpy", "epochs": 2}))
    png = tmp_path / "loss.png"
    assert write_png(res, str(png), "test")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("flag", ["--epochs", "--batch", "--hidden"])
def test_counts_below_one_are_refused_at_the_command_line(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--epochs 0 used to end in an IndexError, --batch 0 in a CROSS_ENTROPY_LOSS shape error."""
    with pytest.raises(SystemExit) as e:
        main(["--device", "numpy", flag, "0", "--quiet"])
    assert e.value.code == 2 and "must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "reason"), [(["--device", "nosuch"], "no device named 'nosuch'"),
                                              (["--batch", "5000"], "no whole training batch")])
def test_bad_runs_report_the_reason(args: list[str], reason: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*args, "--epochs", "1", "--quiet"]) == 2
    assert reason in capsys.readouterr().err
