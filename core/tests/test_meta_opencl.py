"""The meta device over real OpenCL devices (PoCL: POCL_DEVICES="pthread pthread pthread" gives three): column and row
parallel MUL_MAT equal the numpy reference (the llama example's tests run a small llama and SmolLM2 there). With
fewer than three OpenCL devices here the tests rerun in a child process that asks PoCL for three
(`pyggml_testing.pocl.pocl_rerun_test`)."""

from __future__ import annotations

import pytest

from pyggml.backend.meta import MetaBackend, MetaDevice
from pyggml.errors import PyGGMLError
from pyggml.types import GGMLType
from pyggml_testing.compare import nmse
from pyggml_testing.meta import by_name, mlp, mlp_leafs, mlp_states, on_meta, reference
from pyggml_testing.pocl import need, opencl_devices, pocl_rerun_test

DEVS = opencl_devices()


test_in_a_child_process_with_three_pocl_devices = pocl_rerun_test(__file__, 3, DEVS)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("wtype", [GGMLType.F32, GGMLType.Q4_1])
@pytest.mark.parametrize("comm", ["butterfly", "inprocess"])
def test_mlp_on_opencl_devices(n: int, wtype: GGMLType, comm: str) -> None:
    meta = MetaDevice(need(DEVS, n), by_name(mlp_states(n)))
    backend = MetaBackend(meta, comm=comm)
    try:
        out, _ = on_meta(backend, mlp_leafs(wtype), mlp)
    except PyGGMLError as e:
        pytest.skip(f"the OpenCL plugin cannot run this yet: {e}")
    assert nmse(out.numpy(), reference(mlp_leafs(wtype), mlp)) <= 5e-4
    assert backend.last_plan.n_allreduce == 1
