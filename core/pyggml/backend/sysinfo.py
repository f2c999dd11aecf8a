"""Host facts shared by CPU-side devices."""

from __future__ import annotations

import functools
import os
import platform


def host_memory() -> tuple[int, int]:
    """(available, total) bytes of host memory, from /proc/meminfo where present."""
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f if ":" in line}
        return info.get("MemAvailable", info.get("MemFree", 0)), info.get("MemTotal", 0)
    except (OSError, ValueError, IndexError):
        pages = os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
        size = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 0
        return pages * size, pages * size


@functools.cache
def host_memory_total() -> int:
    """Total host memory in bytes, read once: it does not change while the process runs, and the host buffer type
    checks every allocation against it (reading /proc/meminfo each time would cost more than small allocations)."""
    return host_memory()[1]


def cpu_model() -> str:
    """The CPU's model name (what benchmarks print next to their figures)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
