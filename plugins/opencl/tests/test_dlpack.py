"""DLPack on OpenCL: tensors in host-visible buffers (a unified-memory device: PoCL) export in place, tensors in
device memory say they cannot (and copy to the host on request), and an imported array computes on the device."""

from __future__ import annotations

import pytest

from pyggml_testing.dlpack import assert_computes_on_import, assert_exports_in_place, assert_refused_and_copied


def test_host_visible_tensors_export_in_place(dev) -> None:  # type: ignore[no-untyped-def]
    host = dev.host_buffer_type()
    if host is None:
        pytest.skip(f"{dev.name} shares no memory with the host")
    assert_exports_in_place(host)


def test_device_memory_is_refused_by_name_and_copied_on_request(dev) -> None:  # type: ignore[no-untyped-def]
    assert_refused_and_copied(dev.buffer_type(), "in_device_memory", r"tensor 'in_device_memory'.*not host memory")


def test_an_imported_array_computes_on_the_device(dev) -> None:  # type: ignore[no-untyped-def]
    assert_computes_on_import(dev, in_place=dev.caps.buffer_from_host_ptr)
