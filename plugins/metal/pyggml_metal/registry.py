"""The Metal registry: Metal0, Metal1, ... over MTLCopyAllDevices on macOS (PyObjC). MetalSim0, the kernel emulator,
is another distribution's registry (pyggml-metal-sim, test tooling: this plugin does not import it)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from pyggml.backend.env import is_selected
from pyggml.backend.protocol import Device, LazyRegistry
from pyggml_metal.options import DEVICES_ENV, MetalOptions

log = logging.getLogger(__name__)


class MetalRegistry(LazyRegistry[MetalOptions]):
    name = "Metal"
    options_type = MetalOptions

    def _enumerate(self) -> Sequence[Device]:
        from pyggml_metal.device import MetalDevice

        devices: list[Device] = []
        reason = ""
        if sys.platform == "darwin":
            try:
                from pyggml_metal.objc_driver import ObjCDriver

                opts = self.options()
                selection = opts.devices
                found = ObjCDriver(opts).devices()
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
