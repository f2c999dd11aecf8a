"""Shared test helpers (module names are unique across the repository's test folders, which share one run)."""

from __future__ import annotations

import shutil

import pytest

NVCC = shutil.which("nvcc") is not None
needs_nvcc = pytest.mark.skipif(not NVCC, reason="nvcc (CUDA's compiler) is not on PATH: CUDA kernels cannot be "
                                "compiled here")
