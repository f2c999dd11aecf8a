"""The weight cache (`pyggml.weight_cache`) under a llama Session on the cpu device: the first load writes the
repacked weights, the next maps them (same logits as a fresh conversion), a changed model file misses, a bad cache
file is rebuilt with a warning naming it, two processes loading at once agree, and the cache can be turned off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from pyggml.errors import PyGGMLError
from pyggml.weight_cache import WeightCache, WeightCacheWarning
from pyggml.weight_cache.store import HEAD
from pyggml_testing.llama import TINY, tiny_llama_gguf, tiny_values, write_llama_gguf

pytest.importorskip("pyggml_cpu")
pytest.importorskip("gguf")

from pyggml_cpu.repack import RepackBuffer
from pyggml_llama.session import Session

TOKENS = [3, 14, 15, 9, 26]


def logits(model: Path, cache: WeightCache | None) -> tuple[npt.NDArray[np.float32], Session]:
    s = Session(model, ["cpu"], n_ctx=32, n_batch=8, n_threads=1, weight_cache=cache)
    out = s.eval(TOKENS, all_logits=True)
    if cache is not None:
        cache.flush()  # a first load's entry is written by a thread while the model runs
    return out, s


def repacked(s: Session) -> list[RepackBuffer]:
    return [b for b in s.weights.buffers if isinstance(b, RepackBuffer)]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    m = tiny_llama_gguf(tmp_path / "tiny.gguf")
    _, s = logits(m, None)
    if not repacked(s):
        pytest.skip("the kernel level in use has no R8 kernels: cpu_repack takes no weights")
    return m


def entries(d: Path) -> list[Path]:
    return sorted(d.glob("*.pgw"))


def test_second_load_maps_the_entry_and_gives_a_fresh_conversions_logits(model: Path, tmp_path: Path) -> None:
    fresh, _ = logits(model, None)
    cache = WeightCache(tmp_path / "cache")
    first, s1 = logits(model, cache)
    assert (cache.stats.writes, cache.stats.hits) == (1, 0) and len(entries(cache.directory)) == 1
    second, s2 = logits(model, cache)
    assert (cache.stats.writes, cache.stats.hits) == (1, 1)
    np.testing.assert_array_equal(first, fresh)
    np.testing.assert_array_equal(second, fresh)
    for s in (s1, s2):  # read-only: the memory the entry was written from (s1), the entry's mapping (s2)
        (buf,) = repacked(s)
        assert not buf.array.flags.writeable
        assert buf.repacked  # tensors hold the R8 layout
        t = next(iter(buf.repacked.values())).tensor
        with pytest.raises(PyGGMLError, match="read-only"):
            t.buffer.set_tensor(t, np.zeros(t.nbytes(), np.uint8))  # type: ignore[union-attr]


def test_a_changed_model_file_misses_and_replaces_its_entry(model: Path, tmp_path: Path) -> None:
    cache = WeightCache(tmp_path / "cache")
    logits(model, cache)
    old = entries(cache.directory)
    st = model.stat()
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # touched
    logits(model, cache)
    assert cache.stats.writes == 2 and len(entries(cache.directory)) == 1 and entries(cache.directory) != old
    vals = {name: v for name, (_, _, v) in tiny_values(TINY, seed=7).items()}
    write_llama_gguf(model, TINY, vals)  # rewritten in place, same size and header, other weights
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # even with the same time
    got, _ = logits(model, cache)
    assert cache.stats.writes == 3 and cache.stats.hits == 0
    np.testing.assert_array_equal(got, logits(model, None)[0])


@pytest.mark.parametrize("damage", ["truncate", "data", "magic", "empty"])
def test_a_bad_entry_is_rebuilt_with_a_warning_naming_it(model: Path, tmp_path: Path, damage: str) -> None:
    cache = WeightCache(tmp_path / "cache")
    want, _ = logits(model, cache)
    (path,) = entries(cache.directory)
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        raw = raw[:-100]
    elif damage == "data":
        raw[-1] ^= 0xFF  # the checksum samples every entry's last bytes
    elif damage == "magic":
        raw[:8] = b"NOTACACH"
    else:
        raw = raw[: HEAD.size // 2]
    path.write_bytes(bytes(raw))
    with pytest.warns(WeightCacheWarning, match=path.name):
        got, _ = logits(model, cache)
    np.testing.assert_array_equal(got, want)
    assert cache.stats.rebuilt == 1 and cache.stats.writes == 2
    again, _ = logits(model, cache)  # rebuilt whole
    assert cache.stats.hits == 1
    np.testing.assert_array_equal(again, want)


def test_an_unwritable_folder_loads_without_the_cache(model: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    cache = WeightCache(tmp_path / "file" / "cache")
    with pytest.warns(WeightCacheWarning, match="cannot write"):
        got, s = logits(model, cache)
    np.testing.assert_array_equal(got, logits(model, None)[0])
    assert repacked(s)[0].array.flags.writeable  # converted into memory of its own


def test_two_processes_loading_at_once_agree(model: Path, tmp_path: Path) -> None:
    d = tmp_path / "cache"
    script = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from pyggml.weight_cache import WeightCache
        from pyggml_llama.session import Session
        s = Session(Path({str(model)!r}), ["cpu"], n_ctx=32, n_batch=8, n_threads=1,
                    weight_cache=WeightCache(Path({str(d)!r})))
        print(json.dumps(s.eval({TOKENS!r}, all_logits=True).tolist()))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    want = logits(model, None)[0]
    for out in outs:
        np.testing.assert_array_equal(np.array(json.loads(out), dtype=np.float32), want)
    assert len(entries(d)) == 1 and not [p for p in d.iterdir() if p.suffix != ".pgw"]  # no temporary left
    cache = WeightCache(d)
    np.testing.assert_array_equal(logits(model, cache)[0], want)
    assert cache.stats.hits == 1


def test_the_environment_turns_it_off_or_moves_it(model: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    assert WeightCache.from_env({"PYGGML_REPACK_CACHE": "0"}) is None
    c = WeightCache.from_env({"PYGGML_CACHE_DIR": "/x", "XDG_CACHE_HOME": "/y"})
    assert c is not None and c.directory == Path("/x/weights")
    c = WeightCache.from_env({"XDG_CACHE_HOME": "/y", "PYGGML_REPACK_CACHE_MAX_GB": "0.5"})
    assert c is not None and c.directory == Path("/y/pyggml/weights") and c.max_bytes == 1 << 29
    with pytest.raises(PyGGMLError, match="PYGGML_REPACK_CACHE_MAX_GB"):
        WeightCache.from_env({"PYGGML_REPACK_CACHE_MAX_GB": "lots"})
    monkeypatch.setenv("PYGGML_CACHE_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("PYGGML_REPACK_CACHE", "0")
    s = Session(model, ["cpu"], n_ctx=32, n_threads=1)
    assert s.weight_cache is None and not (tmp_path / "env").exists()
    monkeypatch.delenv("PYGGML_REPACK_CACHE")
    s = Session(model, ["cpu"], n_ctx=32, n_threads=1)
    assert s.weight_cache is not None
    s.weight_cache.flush()
    assert len(entries(tmp_path / "env" / "weights")) == 1


def test_the_cli_lists_and_clears_it(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pyggml.cli import main

    cache = WeightCache(tmp_path / "cache")
    logits(model, cache)
    assert main(["cache", "info", "--dir", str(cache.directory), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    (row,) = info["files"]
    assert row["model"] == str(model.resolve()) and row["buffer_type"] == "cpu_repack" and row["tensors"] == 14
    assert main(["cache", "clear", "--dir", str(cache.directory)]) == 0
    assert "removed 1 files" in capsys.readouterr().out and not entries(cache.directory)


def test_another_layout_misses(model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout id hashes the conversion itself (a changed csrc/repack.c changes it): an entry of another layout is
    not used, and is replaced."""
    from pyggml_cpu.repack import RepackBufferType, layout_fingerprint

    cache = WeightCache(tmp_path / "cache")
    logits(model, cache)
    assert len(layout_fingerprint()) == 16
    monkeypatch.setattr(RepackBufferType, "layout_id", property(lambda self: "pgc-r8/1/0000000000000000"))
    got, _ = logits(model, cache)
    assert cache.stats.writes == 2 and cache.stats.hits == 0 and len(entries(cache.directory)) == 1
    np.testing.assert_array_equal(got, logits(model, None)[0])


def test_an_entry_on_small_pages_is_rewritten_for_the_next_load(model: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry whose page cache holds it in 4 KiB folios (found by /proc/self/smaps: pretended here, the tiny
    entry being below the size that counts) is written anew in the background, so that the next load maps 2 MiB
    pages; the load itself runs on the mapping it has. Where a freshly written entry maps small pages too (no large
    folios on that file system), the folder is marked and no entry is rewritten again."""
    import pyggml.weight_cache as wc
    from pyggml.weight_cache import store
    from pyggml.weight_cache.pages import SMALL_PAGES_MARK

    cache = WeightCache(tmp_path / "cache")
    want, _ = logits(model, cache)
    (path,) = entries(cache.directory)
    before = path.stat().st_ino
    monkeypatch.setattr(store, "SMALL_PAGES_MIN", 0)
    monkeypatch.setattr(store, "_on_small_pages", lambda mapped: True)
    monkeypatch.setattr(wc, "file_maps_huge", lambda p: True)
    got, _ = logits(model, cache)
    np.testing.assert_array_equal(got, want)
    assert (cache.stats.hits, cache.stats.repaged, cache.stats.writes) == (1, 1, 2)
    assert entries(cache.directory) == [path] and path.stat().st_ino != before  # renamed over, whole
    monkeypatch.setattr(wc, "file_maps_huge", lambda p: False)
    logits(model, cache)
    assert cache.stats.repaged == 2 and (cache.directory / SMALL_PAGES_MARK).exists()
    got, _ = logits(model, cache)
    np.testing.assert_array_equal(got, want)
    assert cache.stats.repaged == 2 and cache.stats.hits == 3  # marked: not rewritten again
    from pyggml.weight_cache import clear

    clear(cache.directory)
    assert not (cache.directory / SMALL_PAGES_MARK).exists()


def test_a_first_load_converts_tensors_in_threads_to_the_same_bytes(model: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """cpu_repack allows concurrent set_tensor, so a load converts several tensors at once (gguf.FILL_THREADS):
    the bytes are those of one tensor at a time."""
    from pyggml import gguf

    monkeypatch.setattr(gguf, "FILL_THREADS", 1)
    _, one = logits(model, None)
    monkeypatch.setattr(gguf, "FILL_THREADS", 4)
    _, four = logits(model, None)
    (a,), (b,) = repacked(one), repacked(four)
    assert a.buft.concurrent_set_tensor and len(a.repacked) > 1
    for off, rec in a.repacked.items():  # the tensors' bytes (not the alignment gaps between them)
        np.testing.assert_array_equal(a.array[off : off + rec.nbytes], b.array[off : off + rec.nbytes])
