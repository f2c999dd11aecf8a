"""GGUF files a hostile writer makes (issue 19): overlapping tensor data, and metadata numbers that are not numbers
a model can use (NaN eps, zero frequency base, a context length past 2^31) refused with GGUFError naming file and
key, through GGUFFile.number."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyggml.errors import GGUFError
from pyggml.gguf import GGUFFile
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
