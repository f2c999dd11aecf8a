"""The training ops on the cpu backend beyond the conformance suite (pyggml_testing.train_ops, the checks the
OpenCL and Vulkan tests run too): in place over either source, optimiser steps replayed with new
hyper-parameters, deterministic sums (the loss's per-thread partial sums added in thread order); and bad row ids."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.backend.protocol import Device
from pyggml.context import Context
from pyggml.errors import ComputeError
from pyggml.graph import build_graph
from pyggml.types import GGMLType
from pyggml_testing.train_ops import TrainOpsTests


@pytest.fixture
def device(cpu_device: Device) -> Device:
    """The cpu device under the name TrainOpsTests asks for."""
    return cpu_device


class TestTrainOps(TrainOpsTests):
    def test_bad_row_id_names_the_node(self, device: Device) -> None:
        """A row id outside the result's rows fails the node by the kernels' error code (the cpu message names the
        node and the kind of error, not the range the device backends print)."""
        ctx = Context(1 << 20)
        rows, grad = ctx.new_tensor(GGMLType.I32, 3), ctx.new_tensor(GGMLType.F32, 8, 3)
        out = ops.get_rows_back(grad, rows, ctx.new_tensor(GGMLType.F32, 8, 5)).set_name("grad_rows")
        rows.set(np.array([0, 5, 1], np.int32))
        grad.set(np.ones(24, np.float32))
        backend = device.init_backend("n_threads=2")
        try:
            with pytest.raises(ComputeError, match=r"node 'grad_rows' \(GET_ROWS_BACK.*index out of range"):
                backend.graph_compute(build_graph(out))
        finally:
            backend.free()
