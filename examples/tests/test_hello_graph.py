"""examples/hello_graph.py on every device this machine has: the numbers against a float64 numpy formula written
here (not against the script's own numpy run), and the script itself, run as a user runs it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from pyggml.backend import devices

SCRIPT = Path(__file__).resolve().parents[1] / "hello_graph.py"
NAMES = [d.name for d in devices()]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hello_graph", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def expected(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """soft_max(0.5 * w @ rms_norm(x)) per token, in float64."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    n = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6)
    z = 0.5 * (n @ w64.T)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("name", NAMES)
def test_hello_graph_numbers_on(name: str) -> None:
    from pyggml.backend import get_device

    hello = _script()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((hello.TOKENS, 64), dtype=np.float32)
    w = rng.standard_normal((32, 64), dtype=np.float32)
    out, splits = hello.run_on(get_device(name), x, w)
    ref = expected(x, w)
    assert out.shape == ref.shape
    nmse = float(np.sum((out - ref) ** 2) / np.sum(ref**2))
    assert nmse <= hello.MAX_NMSE, f"{name}: nmse {nmse:.3g} (splits {splits})"
    assert splits and set(splits) <= {name, "numpy"}


def test_hello_graph_script_on_every_device() -> None:
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln.strip()}
    assert sorted(lines) == sorted(NAMES)
    for name, line in lines.items():
        assert "nmse vs numpy = " in line, f"{name}: {line}"
