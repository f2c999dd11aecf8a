"""GGUF files a hostile writer makes (issue 19): overlapping tensor data, and metadata numbers that are not numbers
a model can use (NaN eps, zero frequency base, a context length past 2^31) refused with GGUFError naming file and
key, through GGUFFile.number; a file truncated after it was mapped refused before its mapping is read (issue 33)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pyggml.backend.host import HostBufferType, hold_buffers
from pyggml.errors import GGUFError
from pyggml.gguf import GGUFFile, load_weights
from pyggml.gguf_reader import ValueType as V
from pyggml_testing.gguf import ARCH, gguf_bytes, kv, tinfo


def test_overlapping_tensors_are_refused(tmp_path: Path) -> None:
    p = tmp_path / "overlap.gguf"
    p.write_bytes(gguf_bytes([ARCH], [tinfo("a", (16,)), tinfo("b", (16,), offset=32)], bytes(128)))
    with pytest.raises(GGUFError, match=r"overlap.gguf: tensors 'a' \[.*\) and 'b' \[.*\) overlap"):
        GGUFFile(p)
    ok = tmp_path / "ok.gguf"
    ok.write_bytes(gguf_bytes([ARCH], [tinfo("a", (8,)), tinfo("b", (8,), offset=32)], bytes(64)))
    assert set(GGUFFile(ok).tensors) == {"a", "b"}


def _file(tmp_path: Path, *kvs: bytes) -> GGUFFile:
    p = tmp_path / "m.gguf"
    p.write_bytes(gguf_bytes([ARCH, *kvs]))
    return GGUFFile(p)


@pytest.mark.parametrize(("vt", "value", "kw", "match"), [
    (V.FLOAT32, float("nan"), {"lo": 0, "lo_open": True}, "is not a finite number"),
    (V.FLOAT32, float("inf"), {}, "is not a finite number"),
    (V.FLOAT32, 0.0, {"lo": 0, "lo_open": True}, r"outside \(0, None\]"),
    (V.UINT32, 2**32 - 1, {"integer": True, "lo": 1, "hi": 2**31 - 1}, r"outside \[1, 2147483647\]"),
    (V.STRING, "1e-5", {}, "is not a finite number"),
    (V.BOOL, True, {}, "is not a finite number"),
    (V.FLOAT32, 2.5, {"integer": True}, "is not an integer"),
])
def test_bad_numbers_are_refused(tmp_path: Path, vt: V, value: object, kw: dict[str, object], match: str) -> None:
    gf = _file(tmp_path, kv("llama.x", vt, value))
    with pytest.raises(GGUFError, match=r"m.gguf: metadata 'llama.x' = .*" + match):
        gf.number("llama.x", **kw)  # type: ignore[arg-type]


def test_numbers_in_range_and_defaults(tmp_path: Path) -> None:
    gf = _file(tmp_path, kv("llama.eps", V.FLOAT32, 1e-5), kv("llama.ctx", V.UINT32, 4096))
    assert gf.number("llama.eps", lo=0, lo_open=True) == pytest.approx(1e-5)
    assert gf.number("llama.ctx", integer=True, lo=1, hi=2**31 - 1) == 4096
    assert gf.number("llama.missing", 10000.0) == 10000.0
    with pytest.raises(GGUFError, match=r"required metadata key 'llama\.missing'"):
        gf.number("llama.missing")


def test_a_file_truncated_after_mapping_is_refused_not_read(tmp_path: Path) -> None:
    """Reading a mapped page past the end of a truncated file raises SIGBUS (issue 33). The file stays open; mapped
    weights, `data()` and `check_mapping()` check its size first (one fstat) and raise GGUFError naming it, and
    weights copied out of the map do not depend on it."""
    p = tmp_path / "t.gguf"
    data = np.arange(2048, dtype=np.float32).tobytes()
    p.write_bytes(gguf_bytes([ARCH], [tinfo("a", (1024,)), tinfo("b", (1024,), offset=4096)], data))
    gf = GGUFFile(p)
    mapped = load_weights(gf, HostBufferType("host"))
    copied = load_weights(gf, HostBufferType("host"), use_mmap=False)
    assert mapped.mapped and not copied.mapped
    np.testing.assert_array_equal(mapped["b"].numpy(), np.arange(1024, 2048, dtype=np.float32))
    os.truncate(p, gf.data_start + 64)
    match = rf"t.gguf: the file is now {gf.data_start + 64} bytes, shorter than the {gf.file_size} bytes mapped"
    uses = (mapped.check_mapping, gf.check_mapping, lambda: gf.data("b"), lambda: hold_buffers(mapped.buffers),
            mapped["b"].numpy)  # in this order: a guard missing fails the test before a read would crash it
    for use in uses:
        with pytest.raises(GGUFError, match=match):
            use()
    copied.check_mapping()  # nothing of it is in the map
    np.testing.assert_array_equal(copied["b"].numpy(), np.arange(1024, 2048, dtype=np.float32))
