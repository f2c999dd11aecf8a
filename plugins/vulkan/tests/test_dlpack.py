"""DLPack on Vulkan: host-mapped memory (unified memory, lavapipe) exports in place and outlives a free() while an
export holds it; memory the host does not map is refused by name; an imported array is copied onto the device."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from pyggml.dlpack import buffer_from_dlpack
from pyggml.errors import AllocationError, DLPackError
from pyggml_testing.dlpack import assert_computes_on_import, assert_exports_in_place, assert_refused_and_copied


def test_mapped_memory_exports_in_place_and_outlives_a_free(device) -> None:  # type: ignore[no-untyped-def]
    buf = device.buffer_type().alloc_buffer(64)
    if not buf.mapped:
        pytest.skip(f"{device.name}: device-local memory is not host-mapped here")
    t = assert_exports_in_place(device.buffer_type())
    t.set(np.arange(12, dtype=np.float32))
    a = np.from_dlpack(t)
    assert t.buffer is not None
    t.buffer.free()  # the export still holds the mapping: destroyed when `a` goes
    with pytest.raises(AllocationError, match="used after free"):
        t.numpy()
    assert np.array_equal(a.reshape(-1), np.arange(12, dtype=np.float32))
    del a
    gc.collect()


def test_unmapped_memory_is_refused_by_name(staged_device) -> None:  # type: ignore[no-untyped-def]
    assert_refused_and_copied(staged_device.buffer_type(), "staged", r"tensor 'staged'.*does not map")


def test_an_imported_array_is_copied_onto_the_device(device) -> None:  # type: ignore[no-untyped-def]
    assert_computes_on_import(device, in_place=False)
    with pytest.raises(DLPackError, match=r"copy=False.*cannot use memory on DLPack device CPU:0 in place"):
        buffer_from_dlpack(np.zeros(4, np.float32), device, copy=False)
