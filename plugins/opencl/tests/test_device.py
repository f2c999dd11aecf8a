"""Registry and devices: lazy import, names, CL facts, the PYGGML_OPENCL_DEVICES filter, no-ICD reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from pyggml.backend.protocol import DeviceType

PROBE = """
import json, sys
from pyggml_opencl.registry import OpenCLRegistry
r = OpenCLRegistry()
print(json.dumps({"devices": [d.name for d in r.devices()], "reason": r.unavailable_reason()}))
"""


def probe(**env: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, **env}, capture_output=True, text=True,
                         check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_importing_the_plugin_touches_no_driver() -> None:
    code = ("import sys, pyggml_opencl.plugin as p; regs = p.pyggml_backend_registries(); "
            "assert 'pyopencl' not in sys.modules, 'pyopencl imported'; print(regs[0].name)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "OpenCL"


def test_devices_have_names_and_cl_facts(cl_devices) -> None:  # type: ignore[no-untyped-def]
    for i, d in enumerate(cl_devices):
        assert d.name == f"OpenCL{i}"
        p = d.props()
        assert p.memory_total > 0 and 0 <= p.memory_free <= p.memory_total
        for key in ("max_alloc", "max_work_group", "fp16", "fp64", "subgroups", "driver_version", "exact_div_sqrt"):
            assert key in p.details
        # correctly rounded division and sqrt wherever the device has them (the quantisers' scales need them)
        assert ("-cl-fp32-correctly-rounded-divide-sqrt" in d.programs.options) == d.info.exact_div_sqrt
        assert d.buffer_type().max_size == d.info.max_alloc
        assert d.type in (DeviceType.GPU, DeviceType.IGPU, DeviceType.ACCEL)
        assert p.caps.events


def test_hub_finds_the_plugin(dev) -> None:  # type: ignore[no-untyped-def]
    from pyggml.backend.registry import hub

    names = [d.name for d in hub().devices()]
    assert "OpenCL0" in names


def test_env_filter_selects_by_index_and_name(cl_devices) -> None:  # type: ignore[no-untyped-def]
    one = probe(PYGGML_OPENCL_DEVICES="0")
    assert one["devices"] == ["OpenCL0"]
    by_name = probe(PYGGML_OPENCL_DEVICES=cl_devices[0].info.name[:6])
    assert "OpenCL0" in by_name["devices"]  # type: ignore[operator]
    none = probe(PYGGML_OPENCL_DEVICES="no-such-device")
    assert none["devices"] == [] and "selects none" in str(none["reason"])


def test_options_given_in_code_select_the_devices(cl_devices, monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pyggml_opencl.options import OpenCLOptions
    from pyggml_opencl.registry import OpenCLRegistry

    monkeypatch.setenv("PYGGML_OPENCL_DEVICES", "no-such-device")  # a registry given its options reads no variable
    reg = OpenCLRegistry(options=OpenCLOptions(devices=("0",), cache_dir=tmp_path))
    (d,) = reg.devices()
    assert d.options() is reg.options() and d.programs.cache_dir == tmp_path  # type: ignore[attr-defined]
    none = OpenCLRegistry(options=OpenCLOptions(devices=("no-such-device",)))
    assert none.devices() == [] and "PYGGML_OPENCL_DEVICES='no-such-device' selects none" in str(
        none.unavailable_reason())


def test_no_icd_gives_zero_devices_and_a_reason(tmp_path) -> None:  # type: ignore[no-untyped-def]
    r = probe(OCL_ICD_VENDORS=str(tmp_path), OCL_ICD_FILENAMES="")
    assert r["devices"] == []
    assert "ICD" in str(r["reason"])


def test_buffer_finalizer_inside_a_locked_section_does_not_deadlock(dev) -> None:  # type: ignore[no-untyped-def]
    """Garbage collection can free a buffer (its finalizer takes the device's mem_lock and updates its allocation
    tally) while the same thread holds that lock, e.g. in the middle of a transfer: that must not wait for itself."""
    import gc
    import threading

    def locked_then_freed() -> None:
        buf = dev.buffer_type().alloc_buffer(64)
        with dev.mem_lock:
            del buf
            gc.collect()

    gc.collect()
    before = dev.allocations.bytes
    t = threading.Thread(target=locked_then_freed, daemon=True)
    t.start()
    t.join(timeout=10)
    assert not t.is_alive(), "a buffer's finalizer waited for a lock its own thread holds"
    assert dev.allocations.bytes == before
