"""Whether the weight cache's mappings run on 2 MiB pages (Linux transparent huge pages).

A decode step streams every weight once, so the page size of the weights' memory shows in its speed: measured on
one thread (AMD EPYC Zen 4, the qwen2-1.5b Q4_K_M benchmark model), decode ran at 15.0 tok/s from a cache file
whose page cache held 4 KiB folios, and 17.3 tok/s from the same file in 2 MiB folios (mapped with PMD entries:
a TLB entry per 2 MiB, and no page boundary every 4 KiB for the hardware prefetchers to stop at).

The page cache keeps a file in the folios it was read or written in: a file written with large pwrites, or faulted
in through a mapping advised MADV_HUGEPAGE, is held in 2 MiB folios (on a file system with large folios: ext4 from
Linux 6.16, xfs), but not always for good: kernels before that filled a file written through a shared mapping in
4 KiB folios, and on this project's VMs (Linux 6.18, whose DAMON pageout reclaims cold memory) an entry written in
2 MiB folios was found hours later with 51 of its 770 MB on 2 MiB pages. `advise_huge` gives a mapping the advice
before its pages are touched; `huge_fraction` says how much of a mapping the process maps with 2 MiB pages
(/proc/self/smaps), so that a load can tell that an entry's pages are small and have it rewritten
(`WeightCache.load`).
"""

from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path

import numpy as np

HUGE_PAGE = 2 << 20
THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")
SMAPS = Path("/proc/self/smaps")
HUGE_FIELDS = ("FilePmdMapped:", "AnonHugePages:", "ShmemPmdMapped:")
"""The smaps fields that count a mapping's bytes mapped with 2 MiB pages (kB)."""
SMALL_PAGES_MARK = ".small-pages"
"""A file in the cache folder that says a freshly written entry was mapped 4 KiB at a time there (no large folios
on that file system): loads then never rewrite an entry for its page size."""
SMALL_BELOW = 0.5
"""A mapping with less than this fraction of its resident bytes on 2 MiB pages is on small pages."""


def thp_available() -> bool:
    """Whether this kernel gives 2 MiB pages to a mapping that asks (transparent huge pages not `never`)."""
    try:
        return "[never]" not in THP_SETTING.read_text()
    except OSError:
        return False


def advise_huge(mm: mmap.mmap) -> None:
    """Ask for 2 MiB pages for `mm` (MADV_HUGEPAGE; nothing where the platform has no such advice)."""
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        with contextlib.suppress(OSError):
            mm.madvise(advice)


def huge_fraction(address: int) -> float | None:
    """The fraction of the resident bytes of the mapping holding `address` that this process maps with 2 MiB
    pages; None where that cannot be known (no /proc/self/smaps, nothing resident)."""
    try:
        with SMAPS.open() as f:
            inside = False
            rss = huge = 0
            for line in f:
                head = line.split(maxsplit=1)[0]
                if "-" in head and not head.endswith(":"):
                    if inside:
                        break
                    lo, hi = (int(v, 16) for v in head.split("-"))
                    inside = lo <= address < hi
                elif inside and head == "Rss:":
                    rss = int(line.split()[1])
                elif inside and head in HUGE_FIELDS:
                    huge += int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return huge / rss if rss else None


PROBES = 8
"""The 2 MiB pages of a file `file_maps_huge` touches (spread over it: its RSS grows by at most that much)."""


def file_maps_huge(path: Path) -> bool | None:
    """Whether a read-only mapping of `path` (its pages in the page cache as they are) gets 2 MiB pages; None where
    that cannot be known. Touches PROBES bytes spread over the file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size < HUGE_PAGE:
            return None
        with mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ) as mm:
            advise_huge(mm)
            view = np.frombuffer(mm, dtype=np.uint8)
            int(view[np.linspace(0, size - 1, PROBES).astype(np.int64)].sum())
            fraction = huge_fraction(view.ctypes.data)
            del view
        return None if fraction is None else fraction >= SMALL_BELOW
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
