"""The builder interface of backends whose op rules launch compiled kernels over an N-D range (OpenCL, CUDA):
a rule names a program (`spec`, the backend's kernel-source key), a kernel, a global and a local size and the
arguments, and the builder turns them into the backend's launches. One set of rules thus serves every backend
that compiles the same kernel texts; each backend only implements how a launch, a tensor argument, scratch
memory and an index-error site look on its API.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from pyggml.tensor import Tensor

S = TypeVar("S")
"""The program spec type of a backend (which kernel file, specialised by which defines)."""

WG = 64
"""Work-group size of 1-D element launches and row reductions."""


def round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def f32(x: float) -> np.float32:
    return np.float32(x)


def i32(x: int) -> np.int32:
    return np.int32(x)


def i64(x: int) -> np.int64:
    return np.int64(x)


class LaunchBuilder(ABC, Generic[S]):
    """Collects the kernel launches of one graph; `node` is the node whose rule is running."""

    node: Tensor | None

    @abstractmethod
    def launch(self, spec: S, name: str, gsize: Sequence[int], lsize: Sequence[int] | None, *args: Any) -> None:
        """Launch kernel `name` of program `spec` over `gsize` work-items in groups of `lsize` (None: the
        backend's choice); a zero-sized range launches nothing."""

    def launch_1d(self, spec: S, name: str, n: int, *args: Any) -> None:
        """n work-items in groups of WG (kernels check the bound)."""
        self.launch(spec, name, (round_up(n, WG),), (WG,), *args)

    @abstractmethod
    def tensor(self, t: Tensor | None) -> list[Any]:
        """The 10 TENSOR(x) kernel arguments of t: memory, byte offset, ne[4], nb[4]."""

    @abstractmethod
    def scratch(self, nbytes: int) -> Any:
        """Device memory of at least nbytes for one node's intermediates, kept by the plan."""

    @abstractmethod
    def error_args(self, what: str) -> list[Any]:
        """ERR_ARGS of a kernel that checks indices: the status word and a code naming this node and `what`."""
