"""Build hook: the cffi extension pyggml_rpc._fnv (the FNV-1a hash), compiled when the wheel is built (an abi3
wheel; without a C compiler or Python's headers the build stops at once naming them: ../build_helpers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # plugins/build_helpers.py in a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))  # an sdist's copy of it, first
from build_helpers import cffi_setup, toolchain_problems

__all__ = ["toolchain_problems"]  # the tests' handle on the build check

if __name__ == "__main__":  # as pip, build and setuptools run it; the tests import toolchain_problems
    cffi_setup("pyggml-rpc", "pyggml_rpc/_build.py:ffibuilder")
