"""Memory planning: the tensor allocator (free blocks per chunk), the graph allocator (gallocr: liveness ->
offsets, reserve once, replay many), weights allocation (alloc_ctx_tensors) and an independent checker."""

from pyggml.alloc.buffers import MultiBuffer
from pyggml.alloc.gallocr import AllocRecord, GraphAllocator, NodeAlloc
from pyggml.alloc.tensor_alloc import MAX_CHUNKS, TensorAllocator
from pyggml.alloc.verify import verify_allocation
from pyggml.alloc.weights import alloc_ctx_tensors

__all__ = [
    "MAX_CHUNKS", "AllocRecord", "GraphAllocator", "MultiBuffer", "NodeAlloc", "TensorAllocator",
    "alloc_ctx_tensors", "verify_allocation",
]
