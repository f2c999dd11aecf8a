"""The weight cache's files: one buffer's bytes in a buffer type's own layout, behind a header that says what they
are, written atomically and checked when opened.

    [header: magic, format version, meta length, key, data offset, data size, checksum]
    [meta: JSON (the model file, the layout, the tensors): what `pyggml cache info` shows]
    [padding to a page]
    [data: the buffer's bytes, mapped read-only by every later load]

An entry is written from the converted buffer's memory (anonymous memory the first load runs on) to a temporary
file in the cache folder with pwrite, by a thread of its own while the model already runs (a full disk is an OSError
there, reported as a warning; no blocks are reserved first: ext4 took 12x longer to write into fallocated extents,
1.8 s against 0.15 s for 660 MB, and a busy disk throttles a writer to its speed), and renamed over its name: a
reader sees a whole entry or none, and two processes writing the same entry at once each rename a whole file.
Written so, the page cache holds the file in large folios, which later read-only mappings map with 2 MiB pages: a
file filled through a shared writable mapping (as this module did before) keeps 4 KiB pages in the page cache, and
decoding from it read 8-10% slower (one thread, the 1.1B Q6_K model) until those pages were evicted. A mapping is
advised MADV_HUGEPAGE before its pages are touched, so pages read back from the disk come in as 2 MiB folios too; an
entry whose pages the page cache holds small all the same (`pages.py` says when that was seen) says so
(`Entry.small_pages`), and `WeightCache.load` rewrites it in the background for the next load. `open_entry` refuses
(CorruptEntry, with the reason) a file whose size, magic, version, key, data size or checksum is wrong; the
checksum covers the meta and 64 bytes of every 64 KiB of the data (pages a crash lost before they reached the disk
read back as zeros), which costs about a millisecond per 100 MB.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import secrets
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pyggml.backend.host import MappedFile
from pyggml.backend.protocol import Bytes
from pyggml.errors import AllocationError, PyGGMLError
from pyggml.weight_cache.pages import HUGE_PAGE, SMALL_BELOW, advise_huge, huge_fraction, thp_available

MAGIC = b"PYGGMLWC"
FORMAT_VERSION = 1
SUFFIX = ".pgw"
HEAD = struct.Struct("<8sII32sQQQ")
"""magic, format version, meta length, key (SHA-256), data offset, data size, checksum."""
PAGE = max(mmap.PAGESIZE, 4096)
SAMPLE_STRIDE = 1 << 16
SAMPLE_BYTES = 64
WRITE_PIECE = 1 << 26
SMALL_PAGES_MIN = 8 * HUGE_PAGE
"""An entry smaller than this is not worth rewriting for its page size."""
TMP_PREFIX = "."
TMP_SUFFIX = ".tmp"


class CorruptEntry(PyGGMLError):
    """A cache file that is not a whole, valid entry for the key asked (the message says why)."""


@dataclass(frozen=True)
class Entry:
    """An opened entry: its data mapped read-only, and the guard of the mapping (`MappedFile.check`)."""

    path: Path
    data: Bytes
    guard: Callable[[], None]
    small_pages: bool = False
    """Its pages are mapped 4 KiB at a time where 2 MiB pages were to be had (`pages.py`): the page cache holds
    the file in small folios, and rewriting the entry would give the next load large ones."""


def checksum(meta: bytes, data: Bytes) -> int:
    """CRC-32 of the meta and of SAMPLE_BYTES at every SAMPLE_STRIDE of the data (and its last bytes)."""
    n = data.size
    crc = zlib.crc32(meta)
    if n == 0:
        return crc
    width = min(SAMPLE_BYTES, n)
    starts = np.append(np.arange(0, n - width + 1, SAMPLE_STRIDE, dtype=np.int64), n - width)
    sample = data[starts[:, None] + np.arange(width, dtype=np.int64)[None, :]]
    return zlib.crc32(sample.tobytes(), crc)


def data_offset(meta_len: int) -> int:
    return -(-(HEAD.size + meta_len) // PAGE) * PAGE


def read_meta(path: Path) -> dict[str, Any]:
    """The JSON meta of a cache file (CorruptEntry when it has none readable)."""
    with open(path, "rb") as f:
        head = f.read(HEAD.size)
        if len(head) < HEAD.size:
            raise CorruptEntry(f"{len(head)} bytes is too short for the header")
        magic, version, meta_len, _, _, _, _ = HEAD.unpack(head)
        if magic != MAGIC or version != FORMAT_VERSION:
            raise CorruptEntry(f"not a weight cache file of format {FORMAT_VERSION}")
        try:
            meta = json.loads(f.read(meta_len))
        except (ValueError, UnicodeDecodeError) as e:
            raise CorruptEntry(f"unreadable meta ({e})") from None
    if not isinstance(meta, dict):
        raise CorruptEntry("unreadable meta")
    return meta


def open_entry(path: Path, key: bytes, size: int) -> Entry | None:
    """The entry at `path` mapped read-only (shared), checked against the `key` and data `size` expected; None when
    there is no such file, CorruptEntry when it is not a whole valid entry. The checksum's samples, one every 64 KiB,
    fault the mapping's pages in (the kernel maps 64 KiB around a read fault of a file mapping), so the first
    compute does not: measured, MAP_POPULATE changed nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        total = os.fstat(fd).st_size
        if total < HEAD.size:
            raise CorruptEntry(f"{total} bytes is too short for the header (truncated?)")
        mm = mmap.mmap(fd, total, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        advise_huge(mm)  # pages read from the disk come in as 2 MiB folios
        whole = np.frombuffer(mm, dtype=np.uint8)
        magic, version, meta_len, got_key, off, n, crc = HEAD.unpack(whole[: HEAD.size].tobytes())
        if magic != MAGIC:
            raise CorruptEntry("not a weight cache file (bad magic)")
        if version != FORMAT_VERSION:
            raise CorruptEntry(f"format version {version}, not {FORMAT_VERSION}")
        if got_key != key:
            raise CorruptEntry("it was made for another model file or layout (key differs)")
        if n != size or off != data_offset(meta_len):
            raise CorruptEntry(f"it holds {n} bytes at {off}, not the {size} expected")
        if total != off + n:
            raise CorruptEntry(f"the file is {total} bytes, not {off + n} (truncated?)")
        data = whole[off : off + n]
        if checksum(whole[HEAD.size : HEAD.size + meta_len].tobytes(), data) != crc:
            raise CorruptEntry("checksum mismatch (the data changed or was never written whole)")
        guard = MappedFile(path, os.dup(fd), total, AllocationError)
    finally:
        os.close(fd)
    return Entry(path, data, guard.check, small_pages=n >= SMALL_PAGES_MIN and _on_small_pages(whole))


def _on_small_pages(mapped: Bytes) -> bool:
    fraction = huge_fraction(mapped.ctypes.data) if thp_available() else None
    return fraction is not None and fraction < SMALL_BELOW


def write_entry(path: Path, key: bytes, meta: dict[str, Any], data: Bytes) -> None:
    """Write the entry `path` of `data` (its bytes, already in the layout) atomically: a temporary file in the same
    folder, renamed over `path` once whole. OSError where the folder cannot take the file (then nothing is left
    behind)."""
    meta_b = json.dumps(meta, sort_keys=True).encode()
    off = data_offset(len(meta_b))
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            crc = checksum(meta_b, data)
            head = HEAD.pack(MAGIC, FORMAT_VERSION, len(meta_b), key, off, data.size, crc) + meta_b
            _pwrite_all(fd, memoryview(head.ljust(off, b"\0")), 0)
            _pwrite_all(fd, memoryview(np.ascontiguousarray(data).data), off)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _pwrite_all(fd: int, view: memoryview, at: int) -> None:
    """Write all of `view` at offset `at`, in pieces of WRITE_PIECE bytes (short writes continued)."""
    done = 0
    while done < len(view):
        n = os.pwrite(fd, view[done : done + WRITE_PIECE], at + done)
        if n <= 0:
            raise OSError(f"pwrite wrote {n} bytes")
        done += n


def is_temporary(p: Path) -> bool:
    return p.name.startswith(TMP_PREFIX) and p.name.endswith(TMP_SUFFIX)
