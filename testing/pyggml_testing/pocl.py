"""Enough OpenCL devices for the tests that spread one graph over several (core's and the llama example's meta-device
tests): PoCL makes as many CPU devices as POCL_DEVICES names, read once per process, so `pocl_rerun_test` reruns a
test file in a child process that asks for more. Imports no plugin: the devices come from the registry."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from pyggml.backend.protocol import Device
from pyggml.errors import PyGGMLError

CHILD = "PYGGML_OPENCL_CHILD"
"""Set in the child process of `run_with_pocl_devices` (its tests must not start another)."""


def opencl_devices() -> list[Device]:
    """Every OpenCL device of this process (none without the plugin or an ICD)."""
    from pyggml.backend.registry import devices

    try:
        return [d for d in devices() if d.name.startswith("OpenCL")]
    except PyGGMLError:
        return []


def need(devs: list[Device], n: int) -> list[Device]:
    """The first n of `devs`, or a skip saying how many there are."""
    if len(devs) < n:
        pytest.skip(f"{len(devs)} OpenCL devices here; the test needs {n}")
    return devs[:n]


def in_child() -> bool:
    return bool(os.environ.get(CHILD))


def run_with_pocl_devices(test_file: str, n: int, devs: list[Device]) -> None:
    """Run `test_file`'s tests in a child process whose PoCL makes `n` CPU devices, and fail with the child's output
    if any fails. Skips when this process has no OpenCL device at all (no plugin or no ICD)."""
    if not devs:
        pytest.skip("no OpenCL device (the opencl plugin or an ICD is missing)")
    env = dict(os.environ, POCL_DEVICES=" ".join(["pthread"] * n), **{CHILD: "1"})
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", test_file],
                       env=env, capture_output=True, text=True, timeout=900, cwd=os.path.dirname(test_file))
    tail = (r.stdout + r.stderr)[-3000:]
    assert r.returncode == 0, tail
    assert " passed" in r.stdout and " failed" not in r.stdout, tail


def pocl_rerun_test(test_file: str, n: int, devs: list[Device]) -> Callable[[], None]:
    """The test a module that needs n OpenCL devices binds to a test_ name: PoCL reads POCL_DEVICES once per
    process, so when this process sees fewer than n devices it reruns `test_file` in a child process that asks PoCL
    for n (`run_with_pocl_devices`); it is skipped where the devices are here already, or in that child."""

    @pytest.mark.skipif(len(devs) >= n or in_child(), reason="the OpenCL devices are here already")
    def test() -> None:
        run_with_pocl_devices(test_file, n, devs)

    return test
