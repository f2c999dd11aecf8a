"""pyggml's CUDA backend (PyCUDA). Importing this package touches neither PyCUDA nor a driver: devices are
enumerated when `CudaRegistry.devices()` is first called; kernels are compiled by nvcc in a subprocess."""

__version__ = "0.1.0"
