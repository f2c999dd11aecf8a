"""The OpenCL registry: platforms and devices, enumerated lazily on the first `devices()` call.

Devices are named OpenCL0, OpenCL1 ... in enumeration order (platform by platform) over the devices selected by
`OpenCLOptions.devices` (`PYGGML_OPENCL_DEVICES`, read once, here): a comma-separated list whose entries are either a
global device index (as listed when nothing is filtered) or a case-insensitive substring of "<platform name> <device
name>". All selected devices of one platform share one OpenCL context, so buffers and events move between them
without the host.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyggml.backend.env import is_selected
from pyggml.backend.protocol import Device, LazyRegistry
from pyggml_opencl.options import DEVICES_ENV, OpenCLOptions

log = logging.getLogger(__name__)


class OpenCLRegistry(LazyRegistry[OpenCLOptions]):
    name = "OpenCL"
    options_type = OpenCLOptions

    def _enumerate(self) -> Sequence[Device]:
        try:
            import pyopencl as cl
        except ImportError as e:
            return self._unavailable(f"pyopencl is not importable: {e}")
        try:
            platforms = cl.get_platforms()
        except cl.Error as e:
            return self._unavailable(f"no OpenCL platform (is an ICD such as pocl-opencl-icd installed?): {e}")
        if not platforms:
            return self._unavailable("no OpenCL platform (is an ICD such as pocl-opencl-icd installed?)")
        opts = self.options()
        wanted = opts.devices
        from pyggml_opencl.device import OpenCLDevice

        out: list[Device] = []
        seen = 0
        for platform in platforms:
            try:
                cl_devices: list[cl.Device] = platform.get_devices()
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
                out.append(OpenCLDevice(self, ctx, d, f"OpenCL{len(out)}", opts))
        if not out:
            return self._unavailable(f"{DEVICES_ENV}={','.join(wanted)!r} selects none of the {seen} OpenCL "
                                     "devices" if wanted and seen else "the OpenCL platforms expose no devices")
        return out
