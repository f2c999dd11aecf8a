"""docs/library.md runs as printed: its Python blocks, one after the other in one namespace, on the numpy device,
print the errors they promise and compute what numpy computes. The code is read from the page, so it cannot drift
from what is tested."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import numpy as np

PAGE = Path(__file__).resolve().parents[2] / "docs" / "library.md"


def blocks() -> list[str]:
    return [str(b) for b in re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)]


def test_library_page_runs_as_printed() -> None:
    code = blocks()
    assert len(code) == 4, "docs/library.md: the test expects its four python blocks"
    scope: dict[str, Any] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, block in enumerate(code):
            exec(compile(block, f"{PAGE}#block{i}", "exec"), scope)
    printed = out.getvalue()
    assert "has numpy shape (128, 64) (numpy order is ne reversed), got an array of shape (64, 128)" in printed
    assert "new tensor 'too_short': q4_K stores rows in blocks of 256 elements" in printed
    assert "reads 1 input(s) not written" in printed and "'x' f32" in printed
    x, w, wq = scope["X"], scope["W"], scope["wq"].numpy()
    h = np.maximum(x.astype(np.float64) @ w.T, 0.0) @ wq.T
    e = np.exp(h - h.max(axis=1, keepdims=True))
    np.testing.assert_allclose(scope["probs"], e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-6)
