"""DLPack on the cpu and blas devices: their tensors are host memory numpy sees in place, and an imported array
computes on the cpu device in place (the device wraps host memory)."""

from __future__ import annotations

from pyggml.backend.protocol import Device
from pyggml.backend.registry import get_device
from pyggml_testing.dlpack import assert_computes_on_import, assert_exports_in_place


def test_cpu_and_blas_tensors_export_in_place(cpu_device: Device) -> None:
    assert_exports_in_place(cpu_device.buffer_type())
    assert_exports_in_place(get_device("blas").buffer_type())


def test_an_imported_array_computes_in_place_on_the_cpu_device(cpu_device: Device) -> None:
    assert_computes_on_import(cpu_device, in_place=True)
