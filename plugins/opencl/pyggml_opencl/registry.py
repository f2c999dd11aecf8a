"""The OpenCL registry: platforms and devices, enumerated lazily on the first `devices()` call.

Devices are named OpenCL0, OpenCL1 ... in enumeration order (platform by platform) over the devices selected by
`PYGGML_OPENCL_DEVICES`: a comma-separated list whose entries are either a global device index (as listed when
nothing is filtered) or a case-insensitive substring of "<platform name> <device name>". All selected devices of
one platform share one OpenCL context, so buffers and events move between them without the host.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from pyggml.backend.env import device_selection, is_selected
from pyggml.backend.protocol import Device, Registry

log = logging.getLogger(__name__)

DEVICES_ENV = "PYGGML_OPENCL_DEVICES"


class OpenCLRegistry(Registry):
    def __init__(self) -> None:
        self._devices: list[Device] | None = None
        self._reason: str | None = None

    @property
    def name(self) -> str:
        return "OpenCL"

    def devices(self) -> Sequence[Device]:
        if self._devices is None:
            self._devices = self._enumerate()
        return self._devices

    def unavailable_reason(self) -> str | None:
        self.devices()
        return self._reason

    def _enumerate(self) -> list[Device]:
        try:
            import pyopencl as cl
        except ImportError as e:
            self._reason = f"pyopencl is not importable: {e}"
            return []
        try:
            platforms = cl.get_platforms()
        except cl.Error as e:
            self._reason = f"no OpenCL platform (is an ICD such as pocl-opencl-icd installed?): {e}"
            return []
        if not platforms:
            self._reason = "no OpenCL platform (is an ICD such as pocl-opencl-icd installed?)"
            return []
        wanted = device_selection(DEVICES_ENV)
        from pyggml_opencl.device import OpenCLDevice

        out: list[Device] = []
        seen = 0
        for platform in platforms:
            try:
                cl_devices: list[Any] = platform.get_devices()
            except cl.Error as e:
                log.warning("OpenCL platform %r lists no devices: %s", platform.name, e)
                continue
            chosen = []
            for d in cl_devices:
                if is_selected(wanted, seen, f"{platform.name} {d.name}"):
                    chosen.append(d)
                seen += 1
            if not chosen:
                continue
            ctx = cl.Context(chosen)
            for d in chosen:
                out.append(OpenCLDevice(self, ctx, d, f"OpenCL{len(out)}"))
        if not out:
            self._reason = (f"{DEVICES_ENV}={os.environ.get(DEVICES_ENV)!r} selects none of the {seen} OpenCL "
                            f"devices" if wanted and seen else "the OpenCL platforms expose no devices")
        return out
