"""The op table of the OpenCL backend: the dialect rules (`pyggml_dialect.rules`) over core's `OpTable`, and the
plan builder they launch through here.

`supports_op` and the plan builder both read `TABLE`, so support and dispatch cannot drift apart. A rule's
`build(node, b)` appends launches (kernel objects with their arguments already set) to the plan builder `b`;
it runs once per graph plan, never on replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pyggml.backend.launch import LaunchBuilder
from pyggml.backend.op_table import OpTable
from pyggml.errors import ComputeError
from pyggml.tensor import Tensor
from pyggml_dialect.rules import RULES
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import Builder
from pyggml_opencl.buffer import cl_mem_of

if TYPE_CHECKING:
    import pyopencl as cl
    from pyopencl.typing import KernelArg

    from pyggml.backend.status import StatusWord
    from pyggml_opencl.device import OpenCLDevice

TABLE: OpTable[Builder] = OpTable("OpenCL", *RULES)


@dataclass(frozen=True, slots=True)
class Launch:
    kernel: cl.Kernel
    gsize: tuple[int, ...]
    lsize: tuple[int, ...] | None
    node: Tensor


class OpenCLLaunchBuilder(LaunchBuilder[ProgramSpec]):
    """Collects the launches of one graph for one OpenCL device."""

    def __init__(self, dev: OpenCLDevice, status: StatusWord) -> None:
        super().__init__()
        self.dev = dev
        self.status = status
        """The backend's status word, which ERR_ARGS point kernels at."""
        self.checks = False
        """Some launch checks indices (a replay arms the status word)."""
        self.launches: list[Launch] = []
        self.node: Tensor | None = None
        self.scratch_mems: list[cl.Buffer] = []
        self._scratch_size = 0

    def scratch(self, nbytes: int) -> cl.Buffer:
        """A device buffer of at least nbytes for intermediates of one node; the plan keeps it. Launches run in
        queue order, so nodes share one (a larger request replaces it for the nodes that follow)."""
        import pyopencl as cl

        if nbytes > self._scratch_size or not self.scratch_mems:
            self._scratch_size = max(nbytes, 1)
            self.scratch_mems.append(cl.Buffer(self.dev.ctx, cl.mem_flags.READ_WRITE, self._scratch_size))
        return self.scratch_mems[-1]

    def new_memory(self, nbytes: int) -> cl.Buffer:
        import pyopencl as cl

        self.scratch_mems.append(cl.Buffer(self.dev.ctx, cl.mem_flags.READ_WRITE, max(nbytes, 1)))
        return self.scratch_mems[-1]

    def launch(self, spec: ProgramSpec, name: str, gsize: Sequence[int], lsize: Sequence[int] | None,
               *args: KernelArg) -> None:
        if any(g == 0 for g in gsize):
            return
        k = self.dev.programs.kernel(spec, name)
        k.set_args(*args)
        assert self.node is not None
        self.launches.append(Launch(k, tuple(gsize), tuple(lsize) if lsize else None, self.node))

    def error_args(self, what: str) -> list[KernelArg]:
        """ERR_ARGS of a kernel that checks indices: the backend's status word and a code naming this node."""
        assert self.node is not None
        mem = cl_mem_of(self.status.buffer)
        assert mem is not None  # from this device's buffer type
        self.checks = True
        return [mem, np.int32(self.status.code(self.node, what))]

    def tensor(self, t: Tensor | None) -> list[KernelArg]:
        """The 10 TENSOR(x) kernel arguments of t: buffer, byte offset, ne[4], nb[4]."""
        if t is None:
            raise ComputeError(f"{self.dev.name}: node '{self._node_name()}' is missing a src")
        buf = t.buffer
        mem = cl_mem_of(buf) if buf is not None else None
        if mem is None:
            raise ComputeError(f"{self.dev.name}: node '{self._node_name()}': tensor '{t.name}' is in {buf!r}, "
                               "which this device cannot read (allocate it in the device's buffer type)")
        return [mem, np.int64(t.offset), *map(np.int64, t.ne), *map(np.int64, t.nb)]

    def _node_name(self) -> str:
        return self.node.name if self.node is not None else "?"
