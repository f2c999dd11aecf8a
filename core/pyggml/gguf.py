"""GGUF files: metadata, tensor infos, and weights placed into backend buffers (mapped without copying on host
buffer types, uploaded elsewhere). The container is parsed by pyggml.gguf_reader from one read-only memory map;
every problem becomes a GGUFError naming the file and what is wrong, before anything is allocated."""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from queue import SimpleQueue
from typing import Any

import numpy as np

from pyggml.backend.host import HostBufferType
from pyggml.backend.protocol import Buffer, BufferType, BufferUsage, Bytes
from pyggml.context import Context, init_view
from pyggml.errors import GGUFError, UnsupportedTypeError
from pyggml.gguf_reader import RawTensorInfo, read_container
from pyggml.ops.base import Op
from pyggml.tensor import MAX_DIMS, Ne, Tensor
from pyggml.types import GGMLType, parse_type
from pyggml.weight_cache import CachedLayout, WeightCache

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GGUFTensorInfo:
    name: str
    type: GGMLType
    ne: Ne
    offset: int
    """Absolute byte offset of the data in the file."""
    nbytes: int


class GGUFFile:
    """An opened GGUF file: `metadata` (decoded key/values), `tensors` (name -> info), memory-mapped data."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._container = read_container(self.path)
        self.version = self._container.version
        self.alignment = self._container.alignment
        self.data_start = self._container.data_start
        self.file_size = len(self._container.mapped)
        self.metadata: dict[str, Any] = self._container.metadata
        self.tensors: dict[str, GGUFTensorInfo] = {
            name: self._tensor_info(raw) for name, raw in self._container.tensors.items()}
        self._check_overlaps()
        self._digest: str | None = None

    def _check_overlaps(self) -> None:
        """Two tensors whose data share bytes: a writer bug or a crafted file (writing one would change the other)."""
        spans = sorted((i.offset, i.offset + i.nbytes, i.name) for i in self.tensors.values() if i.nbytes)
        for (s0, e0, n0), (s1, e1, n1) in itertools.pairwise(spans):
            if s1 < e0:
                raise GGUFError(f"{self.path}: tensors {n0!r} [{s0}, {e0}) and {n1!r} [{s1}, {e1}) overlap in the "
                                "file")

    def _tensor_info(self, raw: RawTensorInfo) -> GGUFTensorInfo:
        name = raw.name
        try:
            ttype = parse_type(raw.type_id)
        except UnsupportedTypeError as e:
            raise GGUFError(f"{self.path}: tensor {name!r}: {e}") from e
        dims = list(raw.dims)
        if not 1 <= len(dims) <= MAX_DIMS or any(d <= 0 for d in dims):
            raise GGUFError(f"{self.path}: tensor {name!r} has invalid dims {dims}")
        ne4 = (*dims, 1, 1, 1)
        ne: Ne = (ne4[0], ne4[1], ne4[2], ne4[3])
        tr = ttype.traits
        if ne[0] % tr.blck_size:
            raise GGUFError(f"{self.path}: tensor {name!r} {ttype}: ne[0]={ne[0]} is not a multiple of the "
                            f"block size {tr.blck_size}")
        nbytes = ne[0] // tr.blck_size * tr.type_size * ne[1] * ne[2] * ne[3]
        offset = self.data_start + raw.offset
        if offset + nbytes > self.file_size:
            raise GGUFError(f"{self.path}: tensor {name!r} data [{offset}, {offset + nbytes}) lies beyond the "
                            f"end of the file ({self.file_size} bytes): truncated?")
        return GGUFTensorInfo(name, ttype, ne, offset, nbytes)

    # ---- metadata --------------------------------------------------------------------------------------------

    @property
    def architecture(self) -> str:
        arch = self.metadata.get("general.architecture")
        if not isinstance(arch, str):
            raise GGUFError(f"{self.path}: general.architecture is missing")
        return arch

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def require(self, key: str, kind: type | tuple[type, ...] = (int, float, str, list, bool)) -> Any:
        if key not in self.metadata:
            raise GGUFError(f"{self.path}: required metadata key {key!r} is missing")
        value = self.metadata[key]
        if not isinstance(value, kind):
            raise GGUFError(f"{self.path}: metadata {key!r} = {value!r} has the wrong kind")
        return value

    def number(self, key: str, default: float | None = None, *, integer: bool = False, lo: float | None = None,
               hi: float | None = None, lo_open: bool = False) -> Any:
        """A numeric metadata value checked where it is read: an int (`integer`) or a finite number, in [lo, hi]
        (lo excluded with `lo_open`); a missing key gives `default` (None: required). Anything else raises GGUFError
        naming the file, the key and the value (rms_eps = NaN, rope.freq_base = 0, a context length past 2^31)."""
        if key not in self.metadata:
            if default is None:
                raise GGUFError(f"{self.path}: required metadata key {key!r} is missing")
            return default
        v = self.metadata[key]
        ok = isinstance(v, int) if integer else isinstance(v, int | float)
        if not ok or isinstance(v, bool) or (isinstance(v, float) and not math.isfinite(v)):
            want = "an integer" if integer else "a finite number"
            raise GGUFError(f"{self.path}: metadata {key!r} = {v!r} is not {want}")
        if (lo is not None and (v <= lo if lo_open else v < lo)) or (hi is not None and v > hi):
            left = "(" if lo_open else "["
            raise GGUFError(f"{self.path}: metadata {key!r} = {v!r} is outside {left}{lo}, {hi}]")
        return v

    def data(self, name: str) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """The raw bytes of one tensor (a read-only view of the memory map; GGUFError when the file was truncated
        since it was opened: `check_mapping`)."""
        info = self.tensors[name]
        self.check_mapping()
        return self.mapped()[info.offset : info.offset + info.nbytes]

    def read(self, name: str, offset: int = 0, size: int | None = None, into: Bytes | None = None
             ) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """The raw bytes of one tensor (bytes [offset, offset + size) of its data; default: all) read into new
        memory, or into the front of `into` (a uint8 array the caller reuses), from the file this object mapped (its
        kept descriptor, so a file renamed over it since is not read): what a copy out of the file wants (a
        repacked or device buffer), faster than faulting the mapping's pages in one by one, and without making them
        part of the process's memory. GGUFError naming the file when it ends early."""
        info = self.tensors[name]
        n = info.nbytes - offset if size is None else size
        if offset < 0 or n < 0 or offset + n > info.nbytes:
            raise GGUFError(f"{self.path}: bytes [{offset}, {offset + n}) are outside tensor {name!r} "
                            f"({info.nbytes} bytes)")
        if into is not None and into.size < n:
            raise ValueError(f"a {into.size}-byte array cannot take {n} bytes of tensor {name!r}")
        f = self._container.file
        if f is None:  # a container without a kept descriptor: a copy of the mapping
            if into is None:
                return np.array(self.data(name)[offset : offset + n])
            into[:n] = self.data(name)[offset : offset + n]
            return into[:n]
        return f.read(info.offset + offset, n, into)

    def check_mapping(self) -> None:
        """GGUFError naming the file when it is now shorter than when it was mapped (another process truncated or
        rewrote it): reading the mapping past the file's end would kill the process with SIGBUS. One fstat; buffers
        that map the file run it before each compute or read (`load_weights`)."""
        if self._container.file is not None:
            self._container.file.check()

    def stat(self) -> os.stat_result:
        """The status of the file this object mapped (not of one renamed over its path since)."""
        f = self._container.file
        if f is None:
            return os.stat(self.path)
        return f.stat()

    def content_digest(self) -> str:
        """SHA-256 (hex) of the file's bytes before the tensor data (header, metadata, tensor table) and of the first
        and last 4 KiB of every tensor's data: a cheap check that a file with the same name, size and time holds the
        same weights (a cache keyed on it: `pyggml.weight_cache`). Computed once; the data is read, not mapped, so
        its pages do not count as this process's memory."""
        if self._digest is None:
            self.check_mapping()
            h = hashlib.sha256(self.mapped()[: self.data_start].data)
            for info in sorted(self.tensors.values(), key=lambda i: i.offset):
                n = min(info.nbytes, 4096)
                h.update(self.read(info.name, 0, n).data)
                h.update(self.read(info.name, info.nbytes - n, n).data)
            self._digest = h.hexdigest()
        return self._digest

    def mapped(self) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """The whole file, memory-mapped read-only."""
        return self._container.mapped

    def __iter__(self) -> Iterator[GGUFTensorInfo]:
        return iter(self.tensors.values())


# ---- placement ---------------------------------------------------------------------------------------------

TensorPlacer = Callable[[GGUFTensorInfo], BufferType]

_LAYER = re.compile(r"^blk\.(\d+)\.")


def layer_of(name: str) -> int | None:
    """The block index of a tensor named `blk.<i>....`, else None (embeddings, output, norms)."""
    m = _LAYER.match(name)
    return int(m.group(1)) if m else None


def place_by_layers(n_layers: int, bufts: Sequence[BufferType], shares: Sequence[float] | None = None,
                    host: BufferType | None = None) -> TensorPlacer:
    """Consecutive blocks per buffer type in proportion to `shares` (llama.cpp's --tensor-split with
    --split-mode layer); tensors outside blocks (embeddings, output) go to `host` or the last buft."""
    if not bufts:
        raise GGUFError("place_by_layers needs at least one buffer type")
    weights = list(shares) if shares is not None else [1.0] * len(bufts)
    if len(weights) != len(bufts) or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise GGUFError(f"tensor split {list(weights)} does not fit {len(bufts)} devices")
    total = sum(weights)
    bounds: list[int] = []
    acc = 0.0
    for w in weights:
        acc += w
        bounds.append(round(n_layers * acc / total))
    rest = host if host is not None else bufts[-1]

    def place(info: GGUFTensorInfo) -> BufferType:
        layer = layer_of(info.name)
        if layer is None:
            return rest
        for i, b in enumerate(bounds):
            if layer < b:
                return bufts[i]
        return bufts[-1]

    return place


def with_overrides(base: TensorPlacer, overrides: Sequence[tuple[str, BufferType]]) -> TensorPlacer:
    """Tensor-name regex overrides checked first (llama.cpp's -ot PATTERN=BUFT)."""
    compiled = [(re.compile(p), b) for p, b in overrides]

    def place(info: GGUFTensorInfo) -> BufferType:
        for rx, b in compiled:
            if rx.search(info.name):
                return b
        return base(info)

    return place


def with_extra_buffer_types(base: TensorPlacer, matmul_only: Callable[[str], bool]) -> TensorPlacer:
    """Weights that only MUL_MAT reads (`matmul_only(name)`, as the model knows) go to the first extra buffer type
    of their device that takes them (`Device.extra_buffer_types`: the cpu device's cpu_repack, say); the rest as
    `base` places them (llama.cpp's loader makes the same choice with its extra buffer types)."""

    def place(info: GGUFTensorInfo) -> BufferType:
        buft = base(info)
        if buft.device is not None and matmul_only(info.name):
            for extra in buft.device.extra_buffer_types():
                if extra.takes_weight(info.type, info.ne):
                    return extra
        return buft

    return place


@dataclass
class Weights:
    """Tensors of a GGUF file placed in buffers. Mapped host tensors share the file's memory map."""

    file: GGUFFile
    ctx: Context
    tensors: dict[str, Tensor]
    buffers: list[Buffer] = field(default_factory=list)
    mapped: bool = False
    """Some tensors stay in the file's memory map (host buffers with use_mmap)."""

    def check_mapping(self) -> None:
        """GGUFError naming the file when tensors stay in its memory map and the file shrank since it was opened
        (`GGUFFile.check_mapping`; the buffers check it too, before each compute or read)."""
        if self.mapped:
            self.file.check_mapping()

    def __getitem__(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise GGUFError(f"{self.file.path}: tensor {name!r} is missing") from None

    def get(self, name: str) -> Tensor | None:
        return self.tensors.get(name)

    def free(self) -> None:
        for b in self.buffers:
            b.free()
        self.buffers.clear()


FILL_CHUNK = 16 << 20
"""Bytes of a tensor read and written at a time when a buffer is filled from the file: the memory a load needs beside
its buffers (the largest tensor, a 150k-token embedding say, would otherwise be read whole first)."""
FILL_THREADS = min(4, os.cpu_count() or 1)
"""Threads filling a buffer whose type allows it (`BufferType.concurrent_set_tensor`); each holds up to FILL_CHUNK
bytes of the file at a time."""


def _fill_step(info: GGUFTensorInfo) -> int:
    """FILL_CHUNK rounded down to whole groups of eight rows (the unit of the cpu device's repacked layout, whose
    set_tensor converts such a range at once; whole rows where the rows are not a multiple of eight), at least one
    group; the whole tensor when it is smaller."""
    rows = info.ne[1] * info.ne[2] * info.ne[3]
    group = info.nbytes // rows * (8 if rows % 8 == 0 else 1)
    return max(group, FILL_CHUNK // group * group) if info.nbytes > FILL_CHUNK else max(info.nbytes, 1)


def load_weights(gf: GGUFFile, placement: TensorPlacer | BufferType, *, use_mmap: bool = True,
                 names: Sequence[str] | None = None, cache: WeightCache | None = None,
                 copy_below: int = 0) -> Weights:
    """Create a tensor per GGUF tensor (same name, type, ne) and place its data per `placement`. On host buffer
    types with use_mmap the data stays in the file's memory map (no copy), but for tensors of fewer than
    `copy_below` bytes (a loader that leaves most of the file unread passes 1 MiB: a small tensor read from the
    map would map the pages around it too, whole large folios of the page cache, counted as the process's memory);
    elsewhere one WEIGHTS buffer per buffer type is allocated and filled. A buffer type with a layout of its own
    (`CachedLayout`: the cpu device's cpu_repack) maps its converted bytes from `cache` (`pyggml.weight_cache`),
    which converts and writes them the first time. On failure every buffer made so far is freed."""
    from pyggml.alloc.weights import plan_ranges

    place: TensorPlacer = placement if callable(placement) else (lambda info, b=placement: b)  # type: ignore[misc]
    selected = [gf.tensors[n] for n in names] if names is not None else list(gf.tensors.values())
    ctx = Context(no_alloc=True)
    tensors: dict[str, Tensor] = {}
    by_buft: dict[int, tuple[BufferType, list[tuple[Tensor, GGUFTensorInfo]]]] = {}
    for info in selected:
        t = Tensor(info.type, info.ne, op=Op.NONE, ctx=ctx)
        t.name = info.name
        ctx.add_tensor(t)
        tensors[info.name] = t
        buft = place(info)
        by_buft.setdefault(id(buft), (buft, []))[1].append((t, info))
    weights = Weights(gf, ctx, tensors)
    try:
        for buft, items in by_buft.values():
            if use_mmap and buft.is_host and isinstance(buft, HostBufferType):
                mapped = [(t, info) for t, info in items if info.nbytes >= copy_below]
                items = [(t, info) for t, info in items if info.nbytes < copy_below]
                if mapped:
                    buf = buft.wrap(gf.mapped(), guard=gf.check_mapping)
                    buf.usage = BufferUsage.WEIGHTS
                    weights.buffers.append(buf)
                    weights.mapped = True
                    for t, info in mapped:
                        t.buffer = buf
                        t.offset = info.offset
                        buf.init_tensor(t)
            elif cache is not None and isinstance(buft, CachedLayout):
                ranges = plan_ranges([t for t, _ in items], buft)
                if len(ranges) == 1:
                    weights.buffers.append(cache.load(gf, buft, ranges[0][0], ranges[0][1], partial(_fill, gf, items)))
                    continue
            if items:
                weights.buffers += _alloc_and_fill(gf, buft, items)
    except Exception:
        weights.free()
        raise
    for t in tensors.values():
        if t.view_src is not None:
            init_view(t)
    return weights


def _alloc_and_fill(gf: GGUFFile, buft: BufferType, items: list[tuple[Tensor, GGUFTensorInfo]]) -> list[Buffer]:
    from pyggml.alloc import alloc_ctx_tensors

    sub = Context(no_alloc=True)
    for t, _ in items:
        t.ctx = sub
        sub.add_tensor(t)
    buf = alloc_ctx_tensors(sub, buft)
    if buf is None:
        return []
    buf.usage = BufferUsage.WEIGHTS
    try:
        _fill(gf, items)
    except Exception:
        buf.free()
        raise
    return [buf]


def _fill(gf: GGUFFile, items: list[tuple[Tensor, GGUFTensorInfo]]) -> None:
    """Write each tensor's data from the file into its buffer, FILL_CHUNK bytes at a time (`_fill_step`): tensor by
    tensor, or FILL_THREADS tensors at once where their buffer type allows (`concurrent_set_tensor`: the cpu
    device's repacked layout, whose conversion is most of a first load)."""
    owners = {id(t.buffer): t.buffer for t, _ in items}
    threads = FILL_THREADS if len(items) > 1 and all(b is not None and b.buft.concurrent_set_tensor
                                                     for b in owners.values()) else 1
    need = max((_fill_step(info) for _, info in items), default=0)  # a step is never more than its tensor (or 1)
    spaces: SimpleQueue[Bytes] = SimpleQueue()
    for _ in range(threads):
        spaces.put(np.empty(need, dtype=np.uint8))
    if threads > 1:
        with ThreadPoolExecutor(threads, thread_name_prefix="pyggml load") as pool:
            for done in [pool.submit(_fill_tensor, gf, t, info, spaces) for t, info in items]:
                done.result()
        return
    for t, info in items:
        _fill_tensor(gf, t, info, spaces)


def _fill_tensor(gf: GGUFFile, t: Tensor, info: GGUFTensorInfo, spaces: SimpleQueue[Bytes]) -> None:
    """Write `t`'s data from the file in steps of `_fill_step`, each read into an array taken from `spaces` for the
    while (reused: new memory costs a page clearing per page; set_tensor is synchronous, so the buffer has the
    bytes when it returns)."""
    owner = t.buffer
    assert owner is not None
    step = _fill_step(info)
    space = spaces.get()
    try:
        for off in range(0, info.nbytes, step):
            owner.set_tensor(t, gf.read(info.name, off, min(step, info.nbytes - off), space), off)
    finally:
        spaces.put(space)
