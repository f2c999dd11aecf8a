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


SECTIONS = ("Shapes", "Weights and quantisation", "Graph inputs and outputs", "Operators", "A function of numpy "
            "arrays", "Where each op runs", "Inference after training", "The default device",
            "Sharing memory with numpy")
"""The page's sections with python blocks, in order: the test checks what each one promises."""


def test_library_page_runs_as_printed() -> None:
    text = PAGE.read_text(encoding="utf-8")
    headings = [h for h in re.findall(r"^## (.*)$", text, flags=re.M)]
    assert [any(h.startswith(s) for h in headings) for s in SECTIONS] == [True] * len(SECTIONS), headings
    code = blocks()
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
    # Operators: x @ w.T is MUL_MAT(w, x); a shape error names both tensors
    assert "+: cannot broadcast 'xs' of numpy shape (8, 64) (ne=[64, 8, 1, 1]) with" in printed
    # pyggml.function: the MLP as numpy computes it, on the last batch of 5 rows
    h = np.maximum(scope["XB"].astype(np.float64) @ scope["W1"], 0.0) @ scope["W2"]
    e = np.exp(h - h.max(axis=1, keepdims=True))
    np.testing.assert_allclose(scope["P"], e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-6)
    # reading the scheduler: the plan of the inputs section's graph, one numpy split
    assert "-> 1 splits, 0 inputs copied (0.0 KiB) per compute" in printed and "[numpy 1.inp]" in printed
    # inference after training: the function of the trained weights agrees with trainer.predict
    assert scope["scores"].shape == (300, 3)
    # the default device: ggml's choice, printed
    assert "default device: " in printed and scope["best"] is scope["default_device"]()
    # DLPack: numpy shares w's memory, an array comes in as a tensor, a quantised tensor is refused by name
    assert "tensor 'wq' is q4_0, a block-quantised type" in printed
