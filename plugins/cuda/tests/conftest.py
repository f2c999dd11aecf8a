from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import cuda_fakedriver


@pytest.fixture
def gpu_state(monkeypatch: pytest.MonkeyPatch) -> cuda_fakedriver.State:
    """A fake driver with one GPU in place of pycuda.driver and libcuda (add GPUs to state.gpus before use)."""
    state = cuda_fakedriver.State()
    cuda_fakedriver.install(monkeypatch, state)
    return state


@pytest.fixture
def fake_devices(gpu_state: cuda_fakedriver.State):  # type: ignore[no-untyped-def]
    from pyggml_cuda.registry import CudaRegistry

    gpu_state.gpus.append(cuda_fakedriver.GPU(name="Fake A100", cc=(8, 0)))
    return list(CudaRegistry().devices())
