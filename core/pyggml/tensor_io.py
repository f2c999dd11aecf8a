"""TensorIO: write and read one tensor many times, as a replayed graph's inputs and outputs are.

Where the tensor lives in host memory, a numpy view of its bytes is made once per placement and each write or
read is one numpy copy; elsewhere (device memory) `Tensor.set` / `Tensor.numpy`. Why: a compute of a small graph
costs about as much as the checks and conversions of a few set / numpy calls, and a replayed graph keeps its
places. The training loop (`pyggml.opt.Trainer`) and `pyggml.function` move their data through it.
"""

from __future__ import annotations

from typing import Any

import numpy.typing as npt

from pyggml.tensor import Tensor


class TensorIO:
    """Repeated writes into / reads from tensor `t` (a graph input or output)."""

    __slots__ = ("_buf", "_off", "_view", "t")

    def __init__(self, t: Tensor) -> None:
        self.t = t
        self._buf: object = None
        self._off = -1
        self._view: npt.NDArray[Any] | None = None

    def _bound(self) -> npt.NDArray[Any] | None:
        """The 1-D element view of t's host memory (memory order), or None where t is not in plain host memory."""
        t = self.t
        if t.buffer is not self._buf or t.offset != self._off:  # first use, or the allocator moved it: view again
            self._buf, self._off, self._view = t.buffer, t.offset, None
            host = t.buffer.host_array() if t.buffer is not None else None
            if host is not None and t.is_contiguous() and t.type.traits.np_dtype is not None:
                self._view = t.element_view(host[t.offset : t.offset + t.nbytes()]).reshape(-1)
        return self._view

    def write(self, values: npt.NDArray[Any]) -> None:
        """Write `values` (t's element count, any shape Tensor.set takes; converted to t's type) and mark t
        written."""
        view = self._bound()
        if view is None or values.size != view.size:
            self.t.set(values)  # device memory, or a wrong size: Tensor.set converts or names the mismatch
        else:
            view[...] = values.reshape(-1)
            self.t.mark_written()

    def read(self) -> npt.NDArray[Any]:
        """A copy of t's data in numpy order (`Tensor.numpy`)."""
        view = self._bound()
        return self.t.numpy() if view is None else view.reshape(self.t.shape).copy()

    def scalar(self) -> float:
        """t's first element."""
        view = self._bound()
        return float(view[0] if view is not None else self.t.numpy().reshape(-1)[0])
