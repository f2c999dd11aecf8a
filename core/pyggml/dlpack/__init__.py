"""DLPack, both ways: pyggml tensors to other array libraries and their arrays into pyggml, without a copy where the
memory allows (the DLPack capsule protocol; versioned capsules where the consumer asks with `max_version >= (1, 0)`,
as numpy 2 does, else the older "dltensor" ones).

Out: `Tensor.__dlpack__` / `Tensor.__dlpack_device__` (`export_tensor`, `dlpack_device`), so `np.from_dlpack(t)` and
`torch.from_dlpack(t)` see the tensor's memory. A buffer says what its memory is with
`Buffer.dlpack_memory(stream) -> DLPackMemory`: the protocol's default exports a buffer's `host_array()` (numpy, cpu,
blas, OpenCL host buffers, pinned CUDA host memory) as kDLCPU memory; a plugin whose memory another library can
address otherwise overrides it (CUDA device memory as kDLCUDA, Vulkan's host-mapped memory as kDLCPU), and any
other buffer refuses with a DLPackError that says so. A capsule holds the buffer and its memory until its consumer
lets go (`ExportPins` lets a buffer's `free()` leave memory it would unmap to the last export).

In: `buffer_from_dlpack(obj, device=None, copy=None)` wraps an array that has `__dlpack__` as a pyggml buffer: in
place where the device can use that memory (`Device.buffer_from_dlpack(memory, size)`: host memory for a device
with `caps.buffer_from_host_ptr`, memory of the same GPU for a CUDA device), else a copy (never with copy=False).
The buffer holds the producer's export (and so the array) until the buffer is garbage collected.
`tensor_from_dlpack` places a tensor of the array's type, shape and strides in such a buffer.

Errors are `DLPackError` (a BufferError, as the array API asks of `__dlpack__`) naming the tensor or the array:
block-quantised types, views whose strides are not whole elements, tensors without memory or in a freed buffer,
memory a device cannot export.
"""

from pyggml.dlpack.exchange import (
    HOST_BUFT,
    buffer_from_dlpack,
    dlpack_device,
    export_tensor,
    from_dlpack,
    tensor_from_dlpack,
)
from pyggml.dlpack.memory import (
    CPU_DEVICE,
    HOST_TYPES,
    DLDataTypeCode,
    DLDevice,
    DLDeviceType,
    DLPackMemory,
    ExportPins,
    dl_dtype,
    ggml_type,
    host_array,
    host_memory,
)

__all__ = [
    "CPU_DEVICE", "HOST_BUFT", "HOST_TYPES",
    "DLDataTypeCode", "DLDevice", "DLDeviceType", "DLPackMemory", "ExportPins",
    "buffer_from_dlpack", "dl_dtype", "dlpack_device", "export_tensor", "from_dlpack", "ggml_type", "host_array",
    "host_memory", "tensor_from_dlpack",
]
