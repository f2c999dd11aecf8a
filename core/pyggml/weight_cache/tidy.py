"""Keeping the weight cache's folder bounded. When an entry is written: the entries of the same model and tensor
set made for an older file or layout go, so do entries whose model file no longer exists, temporary files of
writers that died a day ago, and then the least recently used entries (a hit renews an entry's time) until the
folder holds at most `max_bytes`. `clear` removes everything (`pyggml cache clear`). Removing an entry another
process has mapped is safe: the mapping keeps the file's pages until it goes."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from pyggml.weight_cache.pages import SMALL_PAGES_MARK
from pyggml.weight_cache.store import SUFFIX, CorruptEntry, is_temporary, read_meta

TEMP_MAX_AGE_S = 24 * 3600


def _files(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if p.is_file() and (p.suffix == SUFFIX or is_temporary(p)))
    except FileNotFoundError:
        return []


def _stale(p: Path, kept: Path, prefix: str, now: float) -> bool:
    if is_temporary(p):
        return now - p.stat().st_mtime > TEMP_MAX_AGE_S
    if p == kept:
        return False
    if p.name.startswith(prefix):
        return True
    try:
        model = read_meta(p).get("path")
    except CorruptEntry:
        return True
    return isinstance(model, str) and not os.path.exists(model)


def tidy(kept: Path, prefix: str, max_bytes: int) -> None:
    """After writing `kept`: remove the entries named `prefix*` but it (the same model path and tensor set, made
    for an older file or layout), unreadable entries, entries of model files that are gone and old temporary files;
    then the least recently used entries but `kept` while the folder holds more than `max_bytes`."""
    now = time.time()
    live: list[tuple[float, int, Path]] = []
    for p in _files(kept.parent):
        with contextlib.suppress(OSError):
            if _stale(p, kept, prefix, now):
                p.unlink()
            elif not is_temporary(p):
                st = p.stat()
                live.append((st.st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in live)
    for _, size, p in sorted(live):
        if total <= max_bytes:
            break
        if p != kept:
            with contextlib.suppress(OSError):
                p.unlink()
                total -= size


def touch(p: Path) -> None:
    """Mark an entry used now (least recently used entries go first)."""
    with contextlib.suppress(OSError):
        os.utime(p)


def entries(directory: Path) -> list[dict[str, Any]]:
    """Each file of the cache folder: its name, size and, for an entry, the model file and layout it was made
    for (or the reason it is unreadable); temporary files of writers in progress (or that died) too."""
    out: list[dict[str, Any]] = []
    for p in _files(directory):
        try:
            st = p.stat()
        except OSError:
            continue
        row: dict[str, Any] = {"file": p.name, "bytes": st.st_size, "used": st.st_mtime}
        if is_temporary(p):
            row["temporary"] = True
        else:
            try:
                meta = read_meta(p)
                row.update(model=meta.get("path"), layout=meta.get("layout"), buffer_type=meta.get("buffer_type"),
                           tensors=len(meta.get("tensors", [])), created=meta.get("created"))
            except (CorruptEntry, OSError) as e:
                row["error"] = str(e)
        out.append(row)
    return out


def clear(directory: Path) -> tuple[int, int]:
    """Remove every cache file (entries and temporary files; the folder's SMALL_PAGES_MARK too); returns (files,
    bytes) of entries and temporary files removed."""
    with contextlib.suppress(OSError):
        (directory / SMALL_PAGES_MARK).unlink()
    n = size = 0
    for p in _files(directory):
        with contextlib.suppress(OSError):
            b = p.stat().st_size
            p.unlink()
            n, size = n + 1, size + b
    return n, size
