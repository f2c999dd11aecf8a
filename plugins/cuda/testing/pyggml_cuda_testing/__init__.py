"""Test support of the CUDA plugin (distribution pyggml-cuda-testing, beside the plugin's tests; imports pyggml_cuda):
`fakedriver` (a fake CUDA driver under the plugin), `pocl` (the plugin's plans run on PoCL), `check` (every kernel
the op table launches for the conformance suite's graphs, compiled by nvcc and checked: `python -m
pyggml_cuda_testing.check --check`) and `needs_nvcc` for tests that compile kernels."""

from __future__ import annotations

import shutil

import pytest

NVCC = shutil.which("nvcc") is not None
needs_nvcc = pytest.mark.skipif(not NVCC, reason="nvcc (CUDA's compiler) is not on PATH: CUDA kernels cannot be "
                                "compiled here")
