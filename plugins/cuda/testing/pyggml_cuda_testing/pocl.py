"""A test-only device (for plugins/cuda/tests/test_cuda_pocl.py) that runs the CUDA plugin's plans on PoCL: the CUDA
op table and `CudaLaunchBuilder` (grids, blocks, packed arguments), the same kernel texts nvcc compiles
(`pyggml_cuda.compile.variant`, including the dp4a fast paths of kernels/mmq.cu, whose CUDA-only intrinsics have
portable forms), built by PyOpenCL and launched with global size = grid * block. What it cannot show is the CUDA side
of the dialect; nvcc compiles that."""

from __future__ import annotations

from typing import Any

import numpy as np

from pyggml.backend.protocol import Backend, BufferType, Device, DeviceType
from pyggml.errors import ComputeError
from pyggml.graph import Graph
from pyggml.tensor import Tensor
from pyggml_cuda.compile import variant
from pyggml_cuda.launch import CudaLaunchBuilder, DevPtr, ErrorSites
from pyggml_cuda.op_table import build_launches, supports
from pyggml_dialect.source import ProgramSpec
from pyggml_opencl.buffer import cl_mem_of
from pyggml_opencl.device import OpenCLDevice

CONV = {"q": np.int64, "i": np.int32, "f": np.float32}


class PoclCudaDevice(Device):
    def __init__(self, cl_dev: OpenCLDevice) -> None:
        super().__init__(cl_dev.reg, "CUDA-plans-on-PoCL", DeviceType.GPU)
        self.cl = cl_dev
        self._programs: dict[str, Any] = {}

    def memory(self) -> tuple[int, int]:
        return self.cl.memory()

    def buffer_type(self) -> BufferType:
        return self.cl.buffer_type()

    def supports_buft(self, buft: BufferType) -> bool:
        return buft is self.cl.buffer_type()

    def supports_op(self, op: Tensor) -> bool:
        return supports(op)

    def new_backend(self) -> Backend:
        return PoclCudaBackend(self)

    def kernel(self, spec: ProgramSpec, name: str) -> Any:
        import pyopencl as cl

        v = variant(spec)
        prg = self._programs.get(v.tag)
        if prg is None:
            prg = self._programs[v.tag] = cl.Program(self.cl.ctx, v.source).build("-cl-std=CL1.2")
        return cl.Kernel(prg, name)


class PoclCudaBackend(Backend):
    def __init__(self, device: PoclCudaDevice) -> None:
        super().__init__(device)
        self.dev = device
        self.launches = 0
        self.mma = True
        """The `mma` option of the plans (CudaLaunchBuilder.mma): tensor-core kernels for prompts, or not."""

    def graph_compute(self, graph: Graph) -> None:
        import pyopencl as cl

        ctx, queue = self.dev.cl.ctx, self.dev.cl.queue
        mems: dict[int, Any] = {}
        ids: dict[int, DevPtr] = {}

        def register(mem: Any) -> DevPtr:
            p = ids.setdefault(id(mem), DevPtr(len(ids) + 1))
            mems[p] = mem
            return p

        def ptr_of(t: Tensor) -> DevPtr | None:
            mem = cl_mem_of(t.buffer) if t.buffer is not None else None
            return None if mem is None else register(mem)

        def alloc(n: int) -> tuple[DevPtr, Any]:
            mem = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, n)
            return register(mem), mem

        status = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=np.zeros(1, np.int32))
        errors = ErrorSites()
        b = CudaLaunchBuilder(None, ptr_of, alloc, register(status), errors, self.mma)
        for la in build_launches(graph.nodes, b, self.dev.name, graph.use_count):
            k = self.dev.kernel(la.spec, la.kernel)
            k.set_args(*[mems[v] if c == "P" else CONV[c](v) for c, v in zip(la.fmt, la.args, strict=True)])
            gsize = tuple(g * bl for g, bl in zip(la.grid, la.block, strict=True))
            cl.enqueue_nd_range_kernel(queue, k, gsize, la.block)
            self.launches += 1
        queue.finish()
        word = np.zeros(1, np.int32)
        cl.enqueue_copy(queue, word, status)
        if word[0]:
            raise ComputeError(f"{self.dev.name}: {errors.describe(int(word[0]))}")
