"""The weight cache's files (`pyggml.weight_cache.store`, `tidy`): written whole or not at all, refused when they
do not match, and the folder kept bounded. (A Session over the cache: examples/llama/tests/test_weight_cache.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from pyggml.weight_cache.store import HEAD, CorruptEntry, open_entry, read_meta, write_entry
from pyggml.weight_cache.tidy import clear, entries, tidy

KEY = bytes(range(32))


def write(path: Path, data: bytes, meta: dict[str, object] | None = None) -> None:
    write_entry(path, KEY, meta or {"path": "/nowhere"}, np.frombuffer(data, np.uint8))


def test_an_entry_reads_back_read_only_and_checks_its_key_and_size(tmp_path: Path) -> None:
    p = tmp_path / "a.pgw"
    data = os.urandom(300_000)
    write(p, data, {"path": "/m.gguf", "x": 1})
    e = open_entry(p, KEY, len(data))
    assert e is not None and e.data.tobytes() == data and not e.data.flags.writeable
    assert e.data.ctypes.data % 4096 == 0 and read_meta(p) == {"path": "/m.gguf", "x": 1}
    e.guard()
    assert open_entry(tmp_path / "missing.pgw", KEY, 1) is None
    with pytest.raises(CorruptEntry, match="key differs"):
        open_entry(p, bytes(32), len(data))
    with pytest.raises(CorruptEntry, match="not the 5 expected"):
        open_entry(p, KEY, 5)


def test_a_write_that_fails_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, data: object, at: int) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(OSError, match="No space"):
        write_entry(tmp_path / "a.pgw", KEY, {}, np.zeros(1000, np.uint8))
    assert list(tmp_path.iterdir()) == []


def test_a_zeroed_page_fails_the_checksum(tmp_path: Path) -> None:
    p = tmp_path / "a.pgw"
    data = os.urandom(1 << 20)
    write(p, data)
    raw = bytearray(p.read_bytes())
    off = len(raw) - len(data)
    raw[off + (1 << 16) : off + (1 << 16) + 4096] = bytes(4096)  # a page a crash lost
    p.write_bytes(bytes(raw))
    with pytest.raises(CorruptEntry, match="checksum"):
        open_entry(p, KEY, len(data))
    p.write_bytes(bytes(raw[: HEAD.size - 1]))
    with pytest.raises(CorruptEntry, match="too short"):
        open_entry(p, KEY, len(data))


def test_tidy_drops_stale_orphaned_and_least_recently_used_entries(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    names = ["m-slot-old.pgw", "m-slot-new.pgw", "gone-a-b.pgw", "lru-a-b.pgw", "keep-a-b.pgw"]
    for i, n in enumerate(names):
        write(tmp_path / n, bytes(5000), {"path": str(model if not n.startswith("gone") else tmp_path / "no")})
        os.utime(tmp_path / n, (1000 + i, 1000 + i))
    os.utime(tmp_path / "lru-a-b.pgw", (10, 10))  # used longest ago
    (tmp_path / ".x.pgw.1.ab.tmp").write_bytes(b"")
    os.utime(tmp_path / ".x.pgw.1.ab.tmp", (10, 10))  # a writer that died
    size = (tmp_path / "keep-a-b.pgw").stat().st_size
    tidy(tmp_path / "m-slot-new.pgw", "m-slot-", max_bytes=2 * size)
    assert sorted(p.name for p in tmp_path.glob("*.pgw")) == ["keep-a-b.pgw", "m-slot-new.pgw"]
    assert not list(tmp_path.glob("*.tmp"))
    rows = entries(tmp_path)
    assert [r["model"] for r in rows] == [str(model)] * 2 and json.dumps(rows)
    assert clear(tmp_path) == (2, 2 * size) and entries(tmp_path) == []


def test_pages_reports_how_a_mapping_is_paged(tmp_path: Path) -> None:
    """`pages.huge_fraction` reads the mapping holding an address from /proc/self/smaps: a fraction for a mapped
    file's resident bytes, None for an address nothing maps; `file_maps_huge` says True, False or None (unknown),
    never raises, for a file of 8 MiB (2 MiB pages where the file system keeps large folios) and a missing one."""
    from pyggml.weight_cache.pages import HUGE_PAGE, file_maps_huge, huge_fraction

    p = tmp_path / "a.pgw"
    data = os.urandom(4 * HUGE_PAGE)
    write(p, data)
    e = open_entry(p, KEY, len(data))
    assert e is not None
    f = huge_fraction(e.data.ctypes.data)
    if not Path("/proc/self/smaps").exists():
        assert f is None
        return
    assert f is not None and 0.0 <= f <= 1.0
    assert huge_fraction(0) is None
    assert file_maps_huge(p) in (True, False, None)
    assert file_maps_huge(tmp_path / "missing") is None


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")
def test_an_entry_writer_yields_the_cores_and_only_its_own() -> None:
    import threading

    from pyggml.weight_cache import _yield_to_compute

    seen: list[int] = []

    def writer() -> None:
        _yield_to_compute()
        seen.append(os.sched_getscheduler(0))

    before = os.sched_getscheduler(0)
    t = threading.Thread(target=writer)
    t.start()
    t.join()
    assert seen == [os.SCHED_IDLE]  # the writer runs where the model's compute threads leave a core idle
    assert os.sched_getscheduler(0) == before  # ... and the rest of the process keeps its scheduling
