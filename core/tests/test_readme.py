"""The README's Python example runs as printed and gives what its comments promise."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "README.md has no python example"
    scope: dict[str, object] = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for code in blocks:
            exec(compile(code, str(README), "exec"), scope)
    y = scope["y"]
    x = np.arange(12, dtype=np.float64).reshape(3, 4) + 1.0
    expect = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y.numpy(), expect, rtol=1e-5)  # type: ignore[attr-defined]
