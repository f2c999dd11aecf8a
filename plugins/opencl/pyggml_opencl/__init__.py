"""pyggml's OpenCL backend (PyOpenCL). Importing this package touches no OpenCL driver; devices are
enumerated when `OpenCLRegistry.devices()` is first called."""

__version__ = "0.1.0"
