"""The MetalSim registry: MetalSim0, the Metal plugin's device (`pyggml_metal.device.MetalDevice`, emulated) over the
emulator's driver, where PYGGML_METAL_SIM=1 (never by default: it is a CI device, slow and CPU-bound)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from pyggml.backend.protocol import Device, LazyRegistry
from pyggml_metal.options import MetalOptions

SIM_ENV = "PYGGML_METAL_SIM"


def sim_enabled() -> bool:
    return os.environ.get(SIM_ENV, "") not in ("", "0")


class MetalSimRegistry(LazyRegistry[MetalOptions]):
    """The Metal plugin's options group (`MetalOptions`: where the MSL and the emulator library are cached); its
    `devices` selection does not apply (one device)."""

    name = "MetalSim"
    options_type = MetalOptions

    def _enumerate(self) -> Sequence[Device]:
        if not sim_enabled():
            return self._unavailable(f"{SIM_ENV}=1 adds MetalSim0, the Metal kernel emulator (never on by default)")
        from pyggml_metal.device import MetalDevice
        from pyggml_metal_sim.driver import SimDriver

        found = SimDriver(self.options()).devices()
        return [MetalDevice(self, d, f"MetalSim{i}", emulated=True) for i, d in enumerate(found)]
