from __future__ import annotations

import pytest

from pyggml_cuda_testing import fakedriver


@pytest.fixture
def gpu_state(monkeypatch: pytest.MonkeyPatch) -> fakedriver.State:
    """A fake driver with one GPU in place of pycuda.driver and libcuda (add GPUs to state.gpus before use)."""
    state = fakedriver.State()
    fakedriver.install(monkeypatch, state)
    return state


@pytest.fixture
def nccl_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """PYGGML_CUDA_NCCL=0 for the devices enumerated after it (name it before `fake_devices`)."""
    monkeypatch.setenv("PYGGML_CUDA_NCCL", "0")


@pytest.fixture
def graphs_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """PYGGML_CUDA_GRAPHS=0 for the devices enumerated after it (name it before `fake_devices`)."""
    monkeypatch.setenv("PYGGML_CUDA_GRAPHS", "0")


@pytest.fixture
def fake_devices(gpu_state: fakedriver.State):  # type: ignore[no-untyped-def]
    from pyggml_cuda.registry import CudaRegistry

    gpu_state.gpus.append(fakedriver.GPU(name="Fake A100", cc=(8, 0)))
    return list(CudaRegistry().devices())
