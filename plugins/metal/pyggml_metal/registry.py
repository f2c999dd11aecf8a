"""The Metal registry: Metal0, Metal1, ... over MTLCopyAllDevices on macOS (PyObjC), and MetalSim0, the kernel
emulator, where PYGGML_METAL_SIM=1 (never by default: it is a CI device, slow and CPU-bound)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from pyggml.backend.env import device_selection, is_selected
from pyggml.backend.protocol import Device, LazyRegistry

log = logging.getLogger(__name__)

SIM_ENV = "PYGGML_METAL_SIM"
DEVICES_ENV = "PYGGML_METAL_DEVICES"


def sim_enabled() -> bool:
    return os.environ.get(SIM_ENV, "") not in ("", "0")


class MetalRegistry(LazyRegistry):
    def __init__(self) -> None:
        super().__init__("Metal")

    def _enumerate(self) -> Sequence[Device]:
        from pyggml_metal.device import MetalDevice

        devices: list[Device] = []
        reason = ""
        if sys.platform == "darwin":
            try:
                from pyggml_metal.objc_driver import ObjCDriver

                selection = device_selection(DEVICES_ENV)
                found = ObjCDriver().devices()
                devices += [MetalDevice(self, d, f"Metal{i}") for i, d in enumerate(found)
                            if is_selected(selection, i, d.name)]
                reason = "no Metal device" if not found else f"{DEVICES_ENV} selects none of the devices"
            except ImportError as e:
                reason = f"PyObjC's Metal binding is not importable ({e}): pip install pyobjc-framework-Metal"
        else:
            reason = f"Metal needs macOS (this is {sys.platform}); {SIM_ENV}=1 adds MetalSim0, the kernel emulator"
        if sim_enabled():
            from pyggml_metal.sim.driver import SimDriver

            sim = SimDriver().devices()
            devices += [MetalDevice(self, d, f"MetalSim{i}", emulated=True) for i, d in enumerate(sim)]
        if not devices:
            return self._unavailable(reason)
        return devices
