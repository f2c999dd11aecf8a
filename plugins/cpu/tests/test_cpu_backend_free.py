"""cpu and blas backends after `free()` (issue 33's lifetime family, backend_use_after_free): a compute or a thread
count change raises ComputeError naming the backend (blas's said "cpu"), a second free does nothing, and a new
backend of the device computes as before."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend import get_device
from pyggml.backend.extensions import SET_N_THREADS
from pyggml.backend.registry import get_registry
from pyggml.context import Context
from pyggml.errors import ComputeError
from pyggml.graph import build_graph


@pytest.mark.parametrize("name", ["cpu", "blas"])
def test_a_freed_backend_refuses_and_says_which(name: str) -> None:
    dev = get_device(name)
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", 64, 64, name="a")
    y = ops.mul_mat(a, a)
    g = build_graph(y)
    buf = alloc_ctx_tensors(ctx, dev.buffer_type())
    a.set(np.eye(64, dtype=np.float32))
    be = dev.init_backend()
    be.graph_compute(g)
    be.free()
    with pytest.raises(ComputeError, match=rf"^{name}: the backend was freed \(backend used after free\)"):
        be.graph_compute(g)
    set_n_threads = get_registry(name).get_extension(SET_N_THREADS)
    if name == "cpu":
        assert set_n_threads is not None
        with pytest.raises(ComputeError, match=r"^cpu: the backend was freed"):
            set_n_threads(be, 2)
    be.free()
    fresh = dev.init_backend()
    fresh.graph_compute(g)
    np.testing.assert_allclose(y.numpy(), np.eye(64))
    fresh.free()
    assert buf is not None
    buf.free()
