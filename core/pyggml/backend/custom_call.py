"""Running a custom op's Python callable on host memory: what every host backend (numpy, cpu) does for
MAP_CUSTOM1/2/3 and CUSTOM nodes, so the call convention lives in one place.

`run_custom(node, n_threads)` builds numpy views of the node's tensors (dst writable, srcs read-only; numpy
order, the tensors' own strides; BF16 as its uint16 bits), works out nth with ggml's rule (`CustomParams.tasks`),
and calls the callable once per ith, tasks 1.. on threads of their own and task 0 on the caller's, as ggml's
thread pool does. numpy releases the GIL in its loops, so tasks over disjoint rows do run in parallel.

A callable that raises fails the node: `CustomOpError` (a ComputeError naming the callable and the task, chained
to the callable's exception), which the backend wraps with the node's name as it does any kernel's error. Nothing
the backend holds depends on the callable, so the backend stays usable.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.errors import ComputeError
from pyggml.ops.base import Op
from pyggml.ops.custom import CUSTOM_OPS, CustomParams
from pyggml.reference.access import raw_bytes
from pyggml.tensor import Tensor

__all__ = ["CustomOpError", "is_custom", "run_custom"]


class CustomOpError(ComputeError):
    """A custom op's callable raised; `__cause__` is its exception."""


def is_custom(node: Tensor) -> bool:
    return node.op in CUSTOM_OPS


def _view(t: Tensor, writeable: bool) -> npt.NDArray[Any]:
    v = t.element_view(raw_bytes(t))
    if not writeable:
        v = np.lib.stride_tricks.as_strided(v, v.shape, v.strides, writeable=False)
    return v


def run_custom(node: Tensor, n_threads: int) -> None:
    """Compute a custom node with up to n_threads tasks (see the module docstring)."""
    p = node.params
    if not isinstance(p, CustomParams):
        raise ComputeError(f"{node.op.name} carries {type(p).__name__}, not CustomParams")
    nth = max(1, p.tasks(max(1, n_threads)))
    dst = _view(node, True)
    srcs = tuple(_view(s, False) for s in node.src if s is not None)
    if node.op is Op.CUSTOM:
        def call(ith: int) -> None:
            p.fn(dst, srcs, ith, nth, p.userdata)
    else:
        def call(ith: int) -> None:
            p.fn(dst, *srcs, ith, nth, p.userdata)

    errors: list[tuple[int, Exception]] = []
    lock = threading.Lock()

    def task(ith: int) -> None:
        try:
            call(ith)
        except Exception as e:  # every failure of user code becomes the node's error
            with lock:
                errors.append((ith, e))

    threads = [threading.Thread(target=task, args=(i,), name=f"pyggml-custom-{i}", daemon=True)
               for i in range(1, nth)]
    for t in threads:
        t.start()
    task(0)
    for t in threads:
        t.join()
    if errors:
        ith, e = min(errors, key=lambda x: x[0])
        fn = getattr(p.fn, "__qualname__", repr(p.fn))
        raise CustomOpError(f"the custom callable {fn} raised {type(e).__name__}: {e} (task {ith} of {nth})") from e
