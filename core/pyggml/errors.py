"""One exception hierarchy for the whole library: every ggml assertion becomes one of these."""

from __future__ import annotations


class PyGGMLError(Exception):
    """Base class of every error pyggml raises on purpose."""


class ShapeError(PyGGMLError, ValueError):
    """Shapes, strides or layouts of an op's inputs do not fit together."""


class UnsupportedTypeError(PyGGMLError, TypeError):
    """A tensor type is not accepted where it was given."""


class UnsupportedOpError(PyGGMLError):
    """A backend was asked to run an op (or op/type combination) it does not support."""


class AllocationError(PyGGMLError, MemoryError):
    """A buffer or tensor could not be allocated (size limits, budget, device memory)."""


class GraphError(PyGGMLError):
    """A graph is malformed or exceeds its size, or a replay does not match its reservation."""


class InputNotWrittenError(GraphError):
    """A graph input (a leaf whose memory the graph allocator placed) was not written since it was placed, or
    since the last compute consumed it (its memory goes to intermediates after its last reader), so the compute
    would read whatever that memory holds. Raised by the scheduler before anything runs; see docs/scheduler.md."""


class PluginLoadError(PyGGMLError):
    """A backend plugin failed to import, register or enumerate its devices (strict mode)."""


class GGUFError(PyGGMLError, ValueError):
    """A GGUF file is truncated, corrupted or holds something unexpected."""


class ComputeError(PyGGMLError, RuntimeError):
    """A backend failed while computing a node; the message names the node."""


class OptionError(PyGGMLError, ValueError):
    """An option's value that does not parse or is out of range (`pyggml.backend.options`): from the environment
    (the message names the variable and its value) or given in code."""


class BackendParamsError(OptionError):
    """`init_backend` params that the device does not take (an unknown option, one fixed when its devices are
    enumerated, or a bad value); the message names the device and the option."""


class OptimizerParamsError(PyGGMLError, ValueError):
    """An optimiser hyper-parameter (AdamW, SGD) that is not a real number in its allowed range."""


class DLPackError(PyGGMLError, BufferError):
    """A tensor cannot be exported through DLPack, or an array imported (a block-quantised type, strides that are
    not whole elements, a freed buffer, memory a device cannot use in place); the message names the tensor or the
    array. A BufferError, as the array API asks of `__dlpack__`."""
