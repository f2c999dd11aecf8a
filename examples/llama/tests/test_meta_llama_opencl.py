"""The llama example's tensor split over real OpenCL devices (PoCL: POCL_DEVICES="pthread pthread pthread" gives
three): a small llama equals one OpenCL device, and SmolLM2 greedy tokens on two devices match one device. With
fewer than three OpenCL devices here the tests rerun in a child process that asks PoCL for three
(`pyggml_testing.pocl.pocl_rerun_test`)."""

from __future__ import annotations

import pytest

from pyggml.backend.meta import MetaBackend
from pyggml.errors import PyGGMLError
from pyggml_llama import session
from pyggml_llama.split_states import llama_meta_device
from pyggml_testing.compare import nmse
from pyggml_testing.devices import numpy_backend
from pyggml_testing.llama import GREEDY, STEPS, TINY, run_tiny, tiny_values
from pyggml_testing.pocl import need, opencl_devices, pocl_rerun_test

DEVS = opencl_devices()


test_in_a_child_process_with_three_pocl_devices = pocl_rerun_test(__file__, 3, DEVS)


@pytest.mark.parametrize("n", [2, 3])
def test_tiny_llama_on_opencl_devices(n: int) -> None:
    devs = need(DEVS, n)
    one = devs[0].init_backend()
    ref = run_tiny([one, numpy_backend()], devs[0].buffer_type(), STEPS)  # one OpenCL device
    meta = llama_meta_device(devs, TINY, None, {k: t for k, (t, _, _) in tiny_values(TINY).items()})
    backend = MetaBackend(meta)
    got = run_tiny([backend, numpy_backend()], meta.buffer_type(), STEPS)
    for a, b in zip(got, ref, strict=True):
        assert nmse(a, b) <= 5e-4
    assert backend.last_plan.n_allreduce == 2 * TINY.n_layer


def test_smollm2_greedy_tokens_on_two_opencl_devices() -> None:
    need(DEVS, 2)
    try:
        model = session.default_model_path()
    except PyGGMLError as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"SmolLM2 GGUF not available: {e}")
    one = session.Session(model, ["OpenCL0"], n_ctx=64, n_batch=32, split_mode="none")
    two = session.Session(model, ["OpenCL0", "OpenCL1"], n_ctx=64, n_batch=32, split_mode="tensor")
    prompt, n = GREEDY[0]
    for s in (one, two):
        s.reset()
    a = list(one.generate(one.tokenizer.encode(prompt), n))
    b = list(two.generate(two.tokenizer.encode(prompt), n))
    assert a == b
