"""A backend's out-of-range status word: kernels that read indices (GET_ROWS, SET_ROWS, MUL_MAT_ID...; the dialect's
`ERR_ARGS` / `CHECK_INDEX`, GLSL's `DECLARE_STATUS`) store a code there when an index is out of range and skip the
write; after the backend's work drained, `check()` reads the word and raises ComputeError naming the node, as the
numpy reference and the cpu backend do.

One word per backend (stream), never per device: two backends of one device run their work on their own queues or
streams, and one's `synchronize` must raise, and clear, only the errors of the work it queued. The word lives in a
16-byte `Buffer` of the backend's device, reached through the Buffer protocol only (`write`, `read`, `free`); the
plugin binds that buffer to its kernels as it binds any other (OpenCL's `cl.Buffer`, CUDA's device pointer, Vulkan's
and Metal's storage buffers). Codes come from the word's own `ErrorSites`: one per distinct node description, so
replays and re-records of the same graph reuse them.
"""

from __future__ import annotations

import threading

import numpy as np

from pyggml.backend.launch import ErrorSites
from pyggml.backend.protocol import Buffer, BufferType
from pyggml.errors import ComputeError
from pyggml.tensor import Tensor

STATUS_BYTES = 16
"""The word is the first 4 bytes (an int32, zero while all is well); 16 keep every binding's alignment rules."""


class StatusWord:
    """One backend's status word. `code(node, what)` names a check for a kernel's arguments; `arm()` after queueing
    work that checks; `check()` once that work drained (reads the word only when armed, clears a nonzero one and
    raises ComputeError); `free()` with the backend."""

    def __init__(self, buft: BufferType, name: str) -> None:
        """buft: the backend's device's buffer type (device memory the kernels can write); name: the backend's, for
        messages."""
        self.name = name
        self.buffer: Buffer = buft.alloc_buffer(STATUS_BYTES)
        self.buffer.write(0, np.zeros(STATUS_BYTES, np.uint8))
        self.errors = ErrorSites(threading.RLock())
        """What each code means. Its lock is re-entrant: a finalizer run by garbage collection inside a locked
        section on the same thread may ask for a code."""
        self.armed = False
        """Work that checks indices was queued since the last `check()`: the next one reads the word."""

    def code(self, node: Tensor, what: str) -> int:
        """The code (>= 1) that names `node` and the violated condition."""
        return self.errors.code(node, what)

    def arm(self) -> None:
        """Work queued on the backend may store a code: the next `check()` reads the word."""
        self.armed = True

    def check(self) -> None:
        """After the backend's work drained: raise ComputeError if a kernel stored a code (and clear the word, so the
        next compute starts clean). Does nothing unless armed."""
        if not self.armed:
            return
        self.armed = False
        code = int(self.buffer.read(0, 4).view(np.int32)[0])
        if code:
            self.buffer.write(0, np.zeros(4, np.uint8))
            raise ComputeError(f"{self.name}: {self.errors.describe(code, 'kernel status code')}; the node's "
                               "output is incomplete")

    def free(self) -> None:
        self.buffer.free()
