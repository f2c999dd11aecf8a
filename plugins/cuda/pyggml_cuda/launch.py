"""Launch plans: the op rules' launches turned into CUDA grids, blocks and packed arguments.

The op rules (the shared dialect's, plus this plugin's fast paths) describe a launch as OpenCL does: a program
spec, a kernel name, a global size, a local size and the arguments. `CudaLaunchBuilder` implements core's
`LaunchBuilder` for them: the grid is global / local in each dimension (the rules always round the global size up to a
multiple of the local one), tensors become (device pointer, byte offset, ne[4], nb[4]), and each argument gets its
struct code for PyCUDA's prepared calls ('P' pointer, 'q' int64, 'i' int32, 'f' float32).

Without a device (`dev=None`) the builder is dry: pointers are 0 and nothing is allocated, which is how
`pyggml_cuda_testing.check` (the plugin's test tooling) lists every kernel the op table launches. `check_signature`
compares a launch's packed arguments with the kernel's parameter list read from nvcc's PTX, so a rule and a kernel
text that drift apart fail with a clear error instead of a wrong launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pyggml.backend.launch import ErrorSites as ErrorSites  # re-exported: the pocl test harness imports it here
from pyggml.backend.launch import LaunchBuilder
from pyggml.errors import ComputeError, UnsupportedOpError
from pyggml.tensor import Tensor
from pyggml_dialect.source import ProgramSpec

MAX_BLOCK = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)


class DevPtr(int):
    """A device address as a kernel argument."""


@dataclass(frozen=True, slots=True)
class Launch:
    spec: ProgramSpec
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    fmt: str
    """struct codes of the arguments, one per argument"""
    args: tuple[Any, ...]
    node: Tensor


_CODES: dict[type, str] = {np.int64: "q", np.int32: "i", np.float32: "f", np.uint64: "Q", np.uint32: "I"}
_PTX_CLASS = {"P": ("u64", "s64", "b64"), "q": ("u64", "s64", "b64"), "Q": ("u64", "s64", "b64"),
              "i": ("u32", "s32", "b32"), "I": ("u32", "s32", "b32"), "f": ("f32", "b32")}


def pack(args: Sequence[Any], where: str) -> tuple[str, tuple[Any, ...]]:
    """Struct codes and values of kernel arguments."""
    codes: list[str] = []
    values: list[Any] = []
    for i, a in enumerate(args):
        if isinstance(a, DevPtr):
            codes.append("P")
            values.append(int(a))
            continue
        code = _CODES.get(type(a))
        if code is None:
            raise ComputeError(f"{where}: kernel argument {i} is {type(a).__name__} {a!r}, which has no CUDA type "
                               "(rules pass numpy int64/int32/float32 scalars and tensors)")
        codes.append(code)
        values.append(a)
    return "".join(codes), tuple(values)


def grid_of(gsize: Sequence[int], lsize: Sequence[int] | None, where: str) -> tuple[tuple[int, int, int],
                                                                                  tuple[int, int, int]]:
    """(grid, block) of an OpenCL-style (global, local) size."""
    g = [*gsize, 1, 1][:3]
    if lsize is None:
        first = next(b for b in (256, 128, 64, 32, 16, 8, 4, 2, 1) if g[0] % b == 0)
        lsize = (first,)
    b = [*lsize, 1, 1][:3]
    if any(x <= 0 for x in b) or any(gi % bi for gi, bi in zip(g, b, strict=True)):
        raise ComputeError(f"{where}: global size {tuple(gsize)} is not a multiple of the local size {tuple(lsize)}")
    grid = (g[0] // b[0], g[1] // b[1], g[2] // b[2])
    if b[0] * b[1] * b[2] > MAX_BLOCK:
        raise ComputeError(f"{where}: a block of {tuple(b)} threads exceeds CUDA's {MAX_BLOCK}")
    if any(x > m for x, m in zip(grid, MAX_GRID, strict=True)):
        raise UnsupportedOpError(f"{where}: grid {grid} exceeds CUDA's limits {MAX_GRID}")
    return grid, (b[0], b[1], b[2])


def check_signature(launch: Launch, params: list[str] | None, symbol: str) -> None:
    """Raise ComputeError unless the packed arguments match the kernel's PTX parameter list."""
    where = f"node '{launch.node.name}' ({launch.node.op.name}): kernel {symbol}"
    if params is None:
        raise ComputeError(f"{where} is not in its compiled module (kernels there are named NAME__TAG)")
    if len(params) != len(launch.fmt):
        raise ComputeError(f"{where} takes {len(params)} parameters, the launch passes {len(launch.fmt)} "
                           f"({launch.fmt})")
    for i, (code, p) in enumerate(zip(launch.fmt, params, strict=True)):
        if p not in _PTX_CLASS[code]:
            raise ComputeError(f"{where}: parameter {i} is .{p} in the PTX, the launch packs '{code}'")


class CudaLaunchBuilder(LaunchBuilder[ProgramSpec]):
    """The dialect rules' builder interface (launch, launch_1d, tensor, scratch) producing CUDA launches."""

    def __init__(self, dev: Any = None, ptr_of: Callable[[Tensor], DevPtr | None] | None = None,
                 alloc: Callable[[int], tuple[DevPtr, Any]] | None = None, status: DevPtr | None = None,
                 errors: ErrorSites | None = None, mma: bool = True) -> None:
        super().__init__()
        self.dev = dev
        self.mma = mma
        """Whether MUL_MATs the tensor-core kernel takes run there (`CudaOptions.mma`)."""
        self.launches: list[Launch] = []
        self.node: Tensor | None = None
        self.scratch_mems: list[Any] = []
        self._scratch_size = 0
        self._scratch_ptr = DevPtr(0)
        self._ptr_of = ptr_of
        self._alloc = alloc
        self._name = getattr(dev, "name", "CUDA (dry)")
        self._status = status if status is not None else DevPtr(0)
        self._errors = errors if errors is not None else ErrorSites()

    def where(self) -> str:
        n = self.node
        return f"{self._name}: node '{n.name}' ({n.op.name})" if n is not None else self._name

    def launch(self, spec: ProgramSpec, name: str, gsize: Sequence[int], lsize: Sequence[int] | None,
               *args: Any) -> None:
        if any(g == 0 for g in gsize):
            return
        where = self.where()
        grid, block = grid_of(gsize, lsize, where)
        fmt, values = pack(args, where)
        assert self.node is not None
        self.launches.append(Launch(spec, name, grid, block, fmt, values, self.node))

    def error_args(self, what: str) -> list[Any]:
        """ERR_ARGS of a kernel that checks indices: the device's status word and the code naming this node."""
        assert self.node is not None
        return [self._status, np.int32(self._errors.code(self.node, what))]

    def tensor(self, t: Tensor | None) -> list[Any]:
        if t is None:
            raise ComputeError(f"{self.where()} is missing a src")
        ptr = DevPtr(0)
        if self._ptr_of is not None:
            found = self._ptr_of(t)
            if found is None:
                raise ComputeError(f"{self.where()}: tensor '{t.name}' is in {t.buffer!r}, which this device cannot "
                                   "read (allocate it in the device's buffer type)")
            ptr = found
        return [ptr, np.int64(t.offset), *map(np.int64, t.ne), *map(np.int64, t.nb)]

    def new_memory(self, nbytes: int) -> DevPtr:
        if self._alloc is None:
            self.scratch_mems.append(None)
            return DevPtr(0)
        ptr, mem = self._alloc(max(nbytes, 1))
        self.scratch_mems.append(mem)
        return ptr

    def scratch(self, nbytes: int) -> DevPtr:
        """Device memory for one node's intermediates, kept by the plan; nodes share it (launches run in stream
        order), a larger request replaces it for the nodes that follow."""
        if nbytes > self._scratch_size or not self.scratch_mems:
            self._scratch_size = max(nbytes, 1)
            if self._alloc is not None:
                self._scratch_ptr, mem = self._alloc(self._scratch_size)
                self.scratch_mems.append(mem)
            else:
                self.scratch_mems.append(None)
        return self._scratch_ptr
