"""The reference kernel table: Op -> kernel(dst). Each family module contributes its entries."""

from __future__ import annotations

from collections.abc import Callable

from pyggml.ops.base import Op
from pyggml.tensor import Tensor

Kernel = Callable[[Tensor], None]
KERNELS: dict[Op, Kernel] = {}


def kernel(*ops: Op) -> Callable[[Kernel], Kernel]:
    """Decorator registering a reference kernel for one or more ops."""

    def deco(fn: Kernel) -> Kernel:
        for op in ops:
            KERNELS[op] = fn
        return fn

    return deco


# importing a family registers its kernels
from pyggml.reference.kernels import (  # noqa: E402,F401
    attention,
    elementwise,
    layout,
    matmul,
    norm,
    reduce,
    rope,
    unary,
)
