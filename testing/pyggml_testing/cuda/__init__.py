"""Test support of the CUDA plugin (imports pyggml_cuda): `fakedriver` (a fake CUDA driver under the plugin), `pocl`
(the plugin's plans run on PoCL), and `needs_nvcc` for tests that compile kernels."""

from __future__ import annotations

import shutil

import pytest

NVCC = shutil.which("nvcc") is not None
needs_nvcc = pytest.mark.skipif(not NVCC, reason="nvcc (CUDA's compiler) is not on PATH: CUDA kernels cannot be "
                                "compiled here")
