"""stub"""
from __future__ import annotations

from pyggml.tensor import Tensor


def ggml_cpu_runs(node: Tensor) -> bool:
    return True
