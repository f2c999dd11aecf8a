from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import fakecuda

NVCC = shutil.which("nvcc") is not None
needs_nvcc = pytest.mark.skipif(not NVCC, reason="nvcc (CUDA's compiler) is not on PATH: CUDA kernels cannot be "
                                "compiled here")


@pytest.fixture
def gpu_state(monkeypatch: pytest.MonkeyPatch) -> fakecuda.State:
    """A fake driver with one GPU in place of pycuda.driver and libcuda (add GPUs to state.gpus before use)."""
    state = fakecuda.State()
    fakecuda.install(monkeypatch, state)
    return state


@pytest.fixture
def fake_devices(gpu_state: fakecuda.State):  # type: ignore[no-untyped-def]
    from pyggml_cuda.registry import CudaRegistry

    gpu_state.gpus.append(fakecuda.GPU(name="Fake A100", cc=(8, 0)))
    return list(CudaRegistry().devices())
