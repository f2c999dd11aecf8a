"""pyggml: ggml's execution model in Python.

    import pyggml as gg
    from pyggml import ops

    ctx = gg.Context(no_alloc=True)
    a = ctx.new_tensor(gg.F32, 4096, 32)        # ne[0] first, as ggml
    y = ops.rms_norm(a)                          # lazy: records a node
    graph = gg.build_graph(y)                    # post-order DFS, use counts

    f = gg.function(lambda x, w: ops.relu(x @ w), weights={"w": W})   # numpy arrays in and out
    h = f(X)
"""

from pyggml.context import Context
from pyggml.errors import (
    AllocationError,
    ComputeError,
    GGUFError,
    GraphError,
    PluginLoadError,
    PyGGMLError,
    ShapeError,
    UnsupportedOpError,
    UnsupportedTypeError,
)
from pyggml.func import Function, function
from pyggml.graph import Graph, build_graph
from pyggml.tensor import Tensor, TensorFlag
from pyggml.types import GGMLType

__version__ = "0.1.0"

F32 = GGMLType.F32
F16 = GGMLType.F16
BF16 = GGMLType.BF16
I32 = GGMLType.I32

__all__ = [
    "BF16", "F16", "F32", "I32", "AllocationError", "ComputeError", "Context", "Function", "GGMLType", "GGUFError",
    "Graph",
    "GraphError", "PluginLoadError", "PyGGMLError", "ShapeError", "Tensor", "TensorFlag", "UnsupportedOpError",
    "UnsupportedTypeError", "__version__", "build_graph", "function",
]
