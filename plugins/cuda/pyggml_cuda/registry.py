"""The CUDA registry: devices from the CUDA driver through PyCUDA, enumerated on the first `devices()` call.

Devices are named CUDA0, CUDA1 ... in the driver's order, which honours `CUDA_VISIBLE_DEVICES` (the driver applies
it; an empty value or -1 hides every device and is reported without asking the driver). Without PyCUDA, without a
driver or without a device the registry lists zero devices and `unavailable_reason()` says why; a device older
than compute capability 7.5 is left out with a logged reason.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from pyggml.backend.extensions import COMM_INIT
from pyggml.backend.protocol import Device, LazyRegistry
from pyggml_cuda.options import CudaOptions

log = logging.getLogger(__name__)
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"


class CudaRegistry(LazyRegistry[CudaOptions]):
    name = "CUDA"
    options_type = CudaOptions

    def get_extension(self, name: str) -> object | None:
        if name == COMM_INIT:
            from pyggml_cuda.allreduce import comm_init

            return comm_init
        return None

    def _enumerate(self) -> Sequence[Device]:
        visible = os.environ.get(VISIBLE_ENV)
        if visible is not None and visible.strip() in ("", "-1"):
            return self._unavailable(f"{VISIBLE_ENV}={visible!r} hides every CUDA device")
        try:
            import pycuda.driver as cuda
        except (ImportError, OSError) as e:
            return self._unavailable(f"pycuda is not importable ({e}); install pyggml-cuda[runtime] on a machine "
                                     "with the CUDA driver")
        try:
            cuda.init()
            n = int(cuda.Device.count())
        except cuda.Error as e:
            return self._unavailable(f"the CUDA driver did not initialise: {e}")
        if n == 0:
            return self._unavailable("the CUDA driver sees no device"
                                     + (f" ({VISIBLE_ENV}={visible!r})" if visible else ""))
        from pyggml_cuda.device import MIN_CC, CudaDevice

        opts = self.options()
        out: list[Device] = []
        skipped: list[str] = []
        for i in range(n):
            d = cuda.Device(i)
            cc = tuple(d.compute_capability())
            if cc < MIN_CC:
                skipped.append(f"{d.name()} (compute capability {cc[0]}.{cc[1]})")
                continue
            out.append(CudaDevice(self, d, i, f"CUDA{len(out)}", opts))
        if skipped:
            log.warning("CUDA devices older than compute capability %d.%d are not used: %s", *MIN_CC,
                        ", ".join(skipped))
        if not out:
            return self._unavailable(f"no CUDA device of compute capability {MIN_CC[0]}.{MIN_CC[1]} or newer: "
                                     + ", ".join(skipped))
        return out
