"""The training ops on the cpu backend beyond the conformance suite (pyggml_testing.train_ops, the checks the
OpenCL and Vulkan tests run too): in place over either source, optimiser steps replayed with new
hyper-parameters, deterministic sums (the loss's per-thread partial sums added in thread order); and bad row ids."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.backend.protocol import Backend, Device
from pyggml.context import Context
from pyggml.errors import ComputeError
from pyggml.graph import build_graph
from pyggml.types import GGMLType
from pyggml_testing import train_ops


@pytest.mark.parametrize(("name", "alias"), train_ops.IN_PLACE_CASES)
def test_in_place(cpu_device: Device, name: str, alias: int) -> None:
    train_ops.check_in_place(cpu_device, name, alias)


@pytest.mark.parametrize("adamw", [True, False], ids=["adamw", "sgd"])
def test_optimiser_steps_replayed(cpu_device: Device, adamw: bool) -> None:
    train_ops.check_optimiser_replay(cpu_device, adamw)


def test_sums_are_deterministic(cpu_device: Device) -> None:
    train_ops.check_deterministic(cpu_device)


def test_bad_row_id_names_the_node(cpu_backend: Backend) -> None:
    """A row id outside the result's rows fails the node by the kernels' error code (the cpu message names the
    node and the kind of error, not the range the device backends print)."""
    ctx = Context(1 << 20)
    rows, grad = ctx.new_tensor(GGMLType.I32, 3), ctx.new_tensor(GGMLType.F32, 8, 3)
    out = ops.get_rows_back(grad, rows, ctx.new_tensor(GGMLType.F32, 8, 5)).set_name("grad_rows")
    rows.set(np.array([0, 5, 1], np.int32))
    grad.set(np.ones(24, np.float32))
    with pytest.raises(ComputeError, match=r"node 'grad_rows' \(GET_ROWS_BACK.*index out of range"):
        cpu_backend.graph_compute(build_graph(out))
