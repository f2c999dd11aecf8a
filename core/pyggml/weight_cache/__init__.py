"""A persistent cache of weights converted at load (the cpu device's repacked layout): the first load of a model
converts into memory of its own and runs on it while a thread, on cores the model leaves idle, writes each converted
buffer to a cache file; later loads map that file read-only and use it as the buffer's memory without a copy, as
llama.cpp uses its mmap of the model file. With the file in the page cache a load then costs about a millisecond per
100 MB, and the weights' pages are shared page cache, not anonymous memory of the process.
The mapping asks for 2 MiB pages (a decode step streams every weight: 4 KiB pages cost 10-15% of its speed), and an
entry the page cache holds in small folios is written anew in the background so that the next load gets them
(`pages.py`, `CacheStats.repaged`).

A buffer type takes part by being a `CachedLayout` (its buffers' bytes are a pure function of the tensors' data
and its `layout_id`; `wrap_layout` makes a buffer over memory already in that layout). `pyggml.gguf.load_weights`
asks the `WeightCache` it is given for each such buffer; `WeightCache.from_env()` is the default of the llama
example's Session.

An entry is keyed by the model file's identity (device, inode, size, mtime in ns, and the SHA-256 of its header,
tensor table and the first and last 4 KiB of each tensor's data, read from the file this process mapped), the
layout id, the buffer type and every tensor's name, type, shape and place: a rewritten or touched model file,
another tensor set or a changed layout misses, and the new entry replaces the stale one of the same model and tensor
set (entries of deleted model files go too, and the least recently used ones beyond `max_bytes`: `tidy.py`). A
file that is not a whole valid entry is rebuilt with a WeightCacheWarning naming it; a folder that cannot take the
file loads without the cache, with a warning. Files are in `default_directory()`: `$PYGGML_CACHE_DIR/weights`, else
`$XDG_CACHE_HOME/pyggml/weights`, else `~/.cache/pyggml/weights`; `pyggml cache info` lists them, `pyggml cache
clear` removes them; `PYGGML_REPACK_CACHE=0` turns the cache off, `PYGGML_REPACK_CACHE_MAX_GB` bounds it (default
16).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
import time
import warnings
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyggml.backend.host import aligned_empty
from pyggml.backend.protocol import Buffer, BufferType, BufferUsage, Bytes
from pyggml.errors import PyGGMLError
from pyggml.tensor import Tensor
from pyggml.weight_cache.pages import SMALL_PAGES_MARK, file_maps_huge
from pyggml.weight_cache.store import FORMAT_VERSION, PAGE, SUFFIX, CorruptEntry, Entry, open_entry, write_entry
from pyggml.weight_cache.tidy import clear, entries, tidy, touch

if TYPE_CHECKING:
    from pyggml.gguf import GGUFFile

ENABLE_ENV = "PYGGML_REPACK_CACHE"
MAX_ENV = "PYGGML_REPACK_CACHE_MAX_GB"
DEFAULT_MAX_BYTES = 16 << 30

__all__ = ["DEFAULT_MAX_BYTES", "ENABLE_ENV", "MAX_ENV", "CacheStats", "CachedLayout", "WeightCache",
           "WeightCacheWarning", "clear", "default_directory", "entries"]


class WeightCacheWarning(UserWarning):
    """A cache file was rebuilt (corrupt, truncated) or could not be written (the load went on without it)."""


class CachedLayout(BufferType):
    """A buffer type whose buffers hold tensors in a layout of their own (set_tensor converts), a deterministic
    function of the data and `layout_id`, so the weight cache may keep a filled buffer's bytes and map them back."""

    @property
    @abstractmethod
    def layout_id(self) -> str:
        """Names the layout: changes whenever the bytes a buffer holds for the same data would change."""

    @abstractmethod
    def wrap_layout(self, array: Bytes, guard: Callable[[], None] | None = None) -> Buffer:
        """A buffer over `array` (1-D uint8), whose bytes are (or are about to be written) in this layout;
        `guard` runs before every use of the memory (`MappedFile.check` of a mapped cache file). A read-only
        array makes a buffer that refuses writes."""


def default_directory(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("PYGGML_CACHE_DIR")
    if base:
        return Path(base) / "weights"
    xdg = env.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pyggml" / "weights"


@dataclass
class CacheStats:
    """What a WeightCache did: `hits` buffers mapped from an existing entry; `writes` entries written (new, rebuilt
    or repaged); `rebuilt` entries found corrupt, truncated or of another format and written anew (with a
    WeightCacheWarning); `repaged` entries whose pages were mapped 4 KiB at a time, rewritten so that the next load
    maps 2 MiB pages."""

    hits: int = 0
    writes: int = 0
    rebuilt: int = 0
    repaged: int = 0


@dataclass(frozen=True)
class WeightCache:
    directory: Path
    max_bytes: int = DEFAULT_MAX_BYTES
    """The folder's bound: writing an entry removes the least recently used others beyond it."""
    stats: CacheStats = field(default_factory=CacheStats, compare=False)
    _writers: list[threading.Thread] = field(default_factory=list, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WeightCache | None:
        """The cache the environment asks for (`default_directory`, at most PYGGML_REPACK_CACHE_MAX_GB, default
        16); None with PYGGML_REPACK_CACHE=0."""
        env = os.environ if environ is None else environ
        if env.get(ENABLE_ENV, "1").strip().lower() in ("0", "off", "no", "false"):
            return None
        limit = env.get(MAX_ENV, "").strip()
        try:
            max_bytes = int(float(limit) * (1 << 30)) if limit else DEFAULT_MAX_BYTES
        except ValueError:
            raise PyGGMLError(f"{MAX_ENV}={limit!r} is not a number of GiB") from None
        return cls(default_directory(env), max_bytes)

    def load(self, gf: GGUFFile, buft: CachedLayout, placed: Sequence[tuple[Tensor, int]], size: int,
             fill: Callable[[], None]) -> Buffer:
        """A buffer of `buft` holding `placed` (tensors of `gf` with their offsets in one buffer of `size` bytes):
        this cache's entry mapped read-only where it has a valid one; else `fill()` writes every tensor through a
        buffer over memory of its own (set_tensor) and a thread writes that memory to a new entry while the model
        runs, on the cores it leaves idle (`_yield_to_compute`): the buffer is then read-only as a mapped entry's is,
        so that what is written is what runs; `flush()` waits for the thread. A folder that cannot take the entry
        gives a WeightCacheWarning and a writable buffer.
        The tensors are placed in the buffer returned."""
        key, meta = _key(gf, buft, placed, size)
        prefix = f"{_safe(gf.path.stem)}-{meta['slot']}-"
        path = self.directory / f"{prefix}{key.hex()[:16]}{SUFFIX}"
        entry = self._open(path, key, size, "rebuilding it")
        if entry is not None:
            self.stats.hits += 1
            touch(path)
            if entry.small_pages and not (self.directory / SMALL_PAGES_MARK).exists():
                self.stats.repaged += 1  # written anew, the page cache holds it in large folios for the next load
                self._start_writer(path, key, meta, entry.data, prefix)
            return _place(buft, entry.data, entry.guard, placed)
        data = aligned_empty(size, PAGE)
        filling = _place(buft, data, None, placed)
        try:
            fill()
        except BaseException:
            _unplace(placed)
            raise
        finally:
            filling.free()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            warnings.warn(f"weight cache: cannot write {path}: {e}; loading without the cache", WeightCacheWarning,
                          stacklevel=3)
            return _place(buft, data, None, placed)
        runs = data.view()
        runs.flags.writeable = False
        buf = _place(buft, runs, None, placed)
        self._start_writer(path, key, meta, data, prefix)
        return buf

    def _start_writer(self, path: Path, key: bytes, meta: dict[str, Any], data: Bytes, prefix: str) -> None:
        writer = threading.Thread(target=self._write, args=(path, key, meta, data, prefix),
                                  name=f"pyggml weight cache: {path.name}")
        with self._lock:
            self._writers.append(writer)
        writer.start()

    def flush(self) -> None:
        """Wait until the entries this cache writes in the background are written (or have failed, warned)."""
        while True:
            with self._lock:
                if not self._writers:
                    return
                writer = self._writers.pop()
            writer.join()

    def _open(self, path: Path, key: bytes, size: int, then: str) -> Entry | None:
        try:
            return open_entry(path, key, size)
        except (CorruptEntry, OSError) as e:
            self.stats.rebuilt += 1
            warnings.warn(f"weight cache: {path}: {e}; {then}", WeightCacheWarning, stacklevel=4)
            return None

    def _write(self, path: Path, key: bytes, meta: dict[str, Any], data: Bytes, prefix: str) -> None:
        _yield_to_compute()
        try:
            write_entry(path, key, meta, data)
        except OSError as e:
            warnings.warn(f"weight cache: cannot write {path}: {e}; the next load converts again",
                          WeightCacheWarning, stacklevel=2)
            return
        with self._lock:
            self.stats.writes += 1
        if file_maps_huge(path) is False:  # this file system keeps no large folios: rewriting would not help
            with contextlib.suppress(OSError):
                (self.directory / SMALL_PAGES_MARK).touch()
        tidy(path, prefix, self.max_bytes)


def _yield_to_compute() -> None:
    """Run the calling thread (an entry's writer) only on cores nothing else wants: SCHED_IDLE on Linux, else at
    nice 19. The model runs while the entry is written, its compute threads one
    per core: a writer sharing a core would stall them at every barrier (a 5-token prompt on two cores ran 0.14-0.20 s
    beside it, 0.09 s alone)."""
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def _safe(stem: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "_", stem)[:64] or "model"


def _key(gf: GGUFFile, buft: CachedLayout, placed: Sequence[tuple[Tensor, int]], size: int
         ) -> tuple[bytes, dict[str, Any]]:
    st = gf.stat()
    source = {"device": st.st_dev, "inode": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
              "content_sha256": gf.content_digest()}
    tensors = [[t.name, t.type.name, list(t.ne), off, t.nbytes()] for t, off in placed]
    ident = {"format": FORMAT_VERSION, "source": source, "layout": buft.layout_id, "buffer_type": buft.name,
             "size": size, "tensors": tensors}
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).digest()
    where = str(Path(gf.path).resolve())
    slot = hashlib.sha256(json.dumps([where, buft.name, [t[0] for t in tensors]]).encode()).hexdigest()[:12]
    from pyggml import __version__

    return key, {**ident, "path": where, "slot": slot, "pyggml": __version__, "created": time.time()}


def _place(buft: CachedLayout, data: Bytes, guard: Callable[[], None] | None,
           placed: Sequence[tuple[Tensor, int]]) -> Buffer:
    buf = buft.wrap_layout(data, guard)
    buf.usage = BufferUsage.WEIGHTS
    for t, off in placed:
        t.buffer = buf
        t.offset = off
        buf.init_tensor(t)
    return buf


def _unplace(placed: Sequence[tuple[Tensor, int]]) -> None:
    for t, _ in placed:
        t.buffer = None
        t.offset = 0
