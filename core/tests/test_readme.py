"""The README's Python example runs as printed, on every device this machine has, and gives what its comments
promise. The code is read from README.md, so the example cannot drift from what is tested."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

from pyggml.backend import default_device, devices, get_device

README = Path(__file__).resolve().parents[2] / "README.md"
DEVICE_LINE = re.compile(r'^device = default_device\(\)', flags=re.M)
"""The line that picks the device; the test puts each device's name in it."""


def example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1, "README.md should have exactly one python example"
    assert len(DEVICE_LINE.findall(blocks[0])) == 1, "the README example no longer picks its device on one line"
    return str(blocks[0])


def run_example(code: str) -> dict[str, object]:
    scope: dict[str, object] = {"get_device": get_device}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), scope)
    x = np.arange(12, dtype=np.float64).reshape(3, 4) + 1.0
    expect = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(scope["y"].numpy(), expect, rtol=1e-5)  # type: ignore[attr-defined]
    assert out.getvalue().count("\n") == 3  # the printed 3 x 4 result
    return scope


@pytest.mark.parametrize("name", [d.name for d in devices()])
def test_readme_python_example_runs_on(name: str) -> None:
    run_example(DEVICE_LINE.sub(f"device = get_device({name!r})", example()))


def test_readme_python_example_runs_as_printed_on_the_default_device() -> None:
    scope = run_example(example())
    assert scope["device"] is default_device()
