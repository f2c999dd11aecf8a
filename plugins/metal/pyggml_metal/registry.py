"""The Metal registry: Metal0, Metal1, ... over MTLCopyAllDevices on macOS (PyObjC). MetalSim0, the kernel emulator,
is another distribution's registry (pyggml-metal-sim, test tooling: this plugin does not import it)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from pyggml.backend.env import device_selection, is_selected
from pyggml.backend.protocol import Device, LazyRegistry

log = logging.getLogger(__name__)

DEVICES_ENV = "PYGGML_METAL_DEVICES"


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
            reason = (f"Metal needs macOS (this is {sys.platform}); the kernel emulator MetalSim0 is "
                      "pyggml-metal-sim's, with PYGGML_METAL_SIM=1")
        if not devices:
            return self._unavailable(reason)
        return devices
