"""The meta device over real OpenCL devices (PoCL: POCL_DEVICES="pthread pthread pthread" gives three): column and
row parallel MUL_MAT and a small llama equal the numpy reference, and SmolLM2 greedy tokens match one device.

PoCL reads POCL_DEVICES once per process, so when this process sees fewer than three OpenCL devices the tests run
again in a child process that asks PoCL for three."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_meta_compute import mlp, mlp_leafs, mlp_states
from test_meta_support import by_name, nmse, numpy_backend, on_meta, reference

from pyggml.backend.meta import MetaBackend, MetaDevice, llama_meta_device
from pyggml.backend.protocol import Device
from pyggml.errors import PyGGMLError
from pyggml.types import GGMLType

CHILD = "PYGGML_META_OPENCL_CHILD"


def opencl_devices() -> list[Device]:
    from pyggml.backend.registry import devices

    try:
        return [d for d in devices() if d.name.startswith("OpenCL")]
    except PyGGMLError:
        return []


DEVS = opencl_devices()


def need(n: int) -> list[Device]:
    if len(DEVS) < n:
        pytest.skip(f"{len(DEVS)} OpenCL devices here; the meta device tests need {n}")
    return DEVS[:n]


@pytest.mark.skipif(len(DEVS) >= 3 or bool(os.environ.get(CHILD)), reason="the OpenCL devices are here already")
def test_in_a_child_process_with_three_pocl_devices() -> None:
    if not DEVS:
        pytest.skip("no OpenCL device (the opencl plugin or an ICD is missing)")
    env = dict(os.environ, POCL_DEVICES="pthread pthread pthread", **{CHILD: "1"})
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__],
                       env=env, capture_output=True, text=True, timeout=900, cwd=os.path.dirname(__file__))
    tail = (r.stdout + r.stderr)[-3000:]
    assert r.returncode == 0, tail
    assert " passed" in r.stdout and " failed" not in r.stdout, tail


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("wtype", [GGMLType.F32, GGMLType.Q4_1])
@pytest.mark.parametrize("comm", ["butterfly", "inprocess"])
def test_mlp_on_opencl_devices(n: int, wtype: GGMLType, comm: str) -> None:
    meta = MetaDevice(need(n), by_name(mlp_states(n)))  # type: ignore[arg-type]
    backend = MetaBackend(meta, comm=comm)
    try:
        out, _ = on_meta(backend, mlp_leafs(wtype), mlp)
    except PyGGMLError as e:
        pytest.skip(f"the OpenCL plugin cannot run this yet: {e}")
    assert nmse(out.numpy(), reference(mlp_leafs(wtype), mlp)) <= 5e-4
    assert backend.stats.last_allreduces == 1


@pytest.mark.parametrize("n", [2, 3])
def test_tiny_llama_on_opencl_devices(n: int) -> None:
    from test_meta_llama import STEPS, TINY, run_tiny, tiny_values

    devs = need(n)
    one = devs[0].init_backend()
    ref = run_tiny([one, numpy_backend()], devs[0].buffer_type(), STEPS)  # one OpenCL device
    meta = llama_meta_device(devs, TINY, None, {k: t for k, (t, _, _) in tiny_values(TINY).items()})
    backend = MetaBackend(meta)
    got = run_tiny([backend, numpy_backend()], meta.buffer_type(), STEPS)
    for a, b in zip(got, ref, strict=True):
        assert nmse(a, b) <= 5e-4
    assert backend.stats.last_allreduces == 2 * TINY.n_layer


def test_smollm2_greedy_tokens_on_two_opencl_devices() -> None:
    from test_meta_smollm2 import GREEDY, MODEL, session  # skips without the model

    need(2)
    one = session.Session(MODEL, ["OpenCL0"], n_ctx=64, n_batch=32, split_mode="none")
    two = session.Session(MODEL, ["OpenCL0", "OpenCL1"], n_ctx=64, n_batch=32, split_mode="tensor")
    prompt, n = GREEDY[0]
    for s in (one, two):
        s.reset()
    a = list(one.generate(one.tokenizer.encode(prompt), n))
    b = list(two.generate(two.tokenizer.encode(prompt), n))
    assert a == b
