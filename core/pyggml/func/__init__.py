"""`pyggml.function`: turn a Python function of tensors into a graph built once per input signature, placed by
the scheduler on a device, and run many times with numpy arrays in and out. See `pyggml.func.function` and
docs/library.md, "A function of numpy arrays".

Modules: `function` (the `Function` API), `plan` (tracing one signature, running it), `weights` (constants held on
the device), `signature` (dtypes and shapes of the arguments)."""

from pyggml.func.function import Function, function
from pyggml.func.plan import Plan

__all__ = ["Function", "Plan", "function"]
