"""The backend protocol and the registry of plugins."""

from pyggml.backend.choice import best_device, default_device, init_best
from pyggml.backend.protocol import (
    API_VERSION,
    Backend,
    Buffer,
    BufferType,
    BufferUsage,
    Device,
    DeviceCaps,
    DeviceProps,
    DeviceType,
    Event,
    Registry,
    SyncEvent,
    tensor_copy,
)
from pyggml.backend.registry import devices, get_device, get_registry, hub, init_backend

__all__ = [
    "API_VERSION", "Backend", "Buffer", "BufferType", "BufferUsage", "Device", "DeviceCaps", "DeviceProps",
    "DeviceType", "Event", "Registry", "SyncEvent", "best_device", "default_device", "devices", "get_device",
    "get_registry", "hub", "init_backend", "init_best", "tensor_copy",
]
