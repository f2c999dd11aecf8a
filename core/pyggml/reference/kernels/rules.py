"""How a reference family declares its kernels: `rules = KernelRules()`, then `@rules.kernel(Op.X)` on a function
computing one node in place. A reference kernel accepts every node of its ops (the numpy backend runs everything
it has a kernel for), and it runs at once: the builder of the numpy backend collects nothing."""

from __future__ import annotations

from collections.abc import Callable

from pyggml.backend.op_table import RuleSet
from pyggml.ops.base import Op
from pyggml.tensor import Tensor

Kernel = Callable[[Tensor], None]


class Immediate:
    """The numpy backend's builder: `build` computes the node right away, so there is nothing to keep but the
    node being computed."""

    def __init__(self) -> None:
        self.node: Tensor | None = None


def _run(fn: Kernel) -> Callable[[Tensor, Immediate], None]:
    return lambda node, _b: fn(node)


class KernelRules(RuleSet[Immediate]):
    def kernel(self, *ops: Op) -> Callable[[Kernel], Kernel]:
        """Decorator registering a reference kernel for one or more ops."""

        def deco(fn: Kernel) -> Kernel:
            self.rule(*ops)(_run(fn))
            return fn

        return deco
