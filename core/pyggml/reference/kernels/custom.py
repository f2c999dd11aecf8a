"""Reference kernels: MAP_CUSTOM1/2/3 and CUSTOM run their callable (one task: the numpy backend has one thread)."""

from __future__ import annotations

from pyggml.backend.custom_call import run_custom
from pyggml.ops.custom import CUSTOM_OPS
from pyggml.reference.kernels.rules import KernelRules
from pyggml.tensor import Tensor

rules = KernelRules()


@rules.kernel(*CUSTOM_OPS)
def custom(dst: Tensor) -> None:
    run_custom(dst, 1)
