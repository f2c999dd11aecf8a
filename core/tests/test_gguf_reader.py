"""pyggml's GGUF container reader: every value type from hand-encoded bytes, each malformed input a GGUFError
naming the file and the fault, and real files (SmolLM2, llama.cpp's test vocabularies) read exactly as the `gguf`
package's GGUFReader reads them."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyggml.errors import GGUFError
from pyggml.gguf import GGUFFile
from pyggml.gguf_reader import MAX_NESTING, ValueType, read_container
from pyggml_testing.gguf import ARCH, gguf_bytes, kv, s, tinfo
from pyggml_testing.llama_cpp_ref import VOCAB_DIR
from pyggml_testing.models import smollm2_gguf

V = ValueType


@pytest.fixture
def write(tmp_path: Path) -> Iterator[Any]:
    def _write(raw: bytes, name: str = "t.gguf") -> Path:
        p = tmp_path / name
        p.write_bytes(raw)
        return p
    yield _write


# ---- values ------------------------------------------------------------------------------------------------------

def test_every_value_type(write: Any) -> None:
    kvs = [kv("u8", V.UINT8, 255), kv("i8", V.INT8, -128), kv("u16", V.UINT16, 65535), kv("i16", V.INT16, -2),
           kv("u32", V.UINT32, 2**32 - 1), kv("i32", V.INT32, -(2**31)), kv("f32", V.FLOAT32, 0.1),
           kv("bool", V.BOOL, True), kv("no", V.BOOL, False), kv("str", V.STRING, "héllo ✓"),
           kv("u64", V.UINT64, 2**64 - 1), kv("i64", V.INT64, -(2**63)), kv("f64", V.FLOAT64, 0.1),
           kv("floats", V.ARRAY, (V.FLOAT32, [0.5, -1.25, 3.0])), kv("ints", V.ARRAY, (V.INT32, [1, -2, 3])),
           kv("bools", V.ARRAY, (V.BOOL, [True, False])), kv("empty", V.ARRAY, (V.UINT64, [])),
           kv("strs", V.ARRAY, (V.STRING, ["a", "", "ü"])),
           kv("nested", V.ARRAY, (V.ARRAY, [(V.INT8, [1, 2]), (V.STRING, ["x"]), (V.ARRAY, [])]))]
    c = read_container(write(gguf_bytes(kvs)))
    m = c.metadata
    assert list(m) == ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "no", "str", "u64", "i64", "f64",
                       "floats", "ints", "bools", "empty", "strs", "nested"]
    assert (m["u8"], m["i8"], m["u16"], m["i16"], m["u32"], m["i32"]) == (255, -128, 65535, -2, 2**32 - 1, -(2**31))
    assert m["f32"] == float(np.float32(0.1)) and m["f64"] == 0.1 and m["str"] == "héllo ✓"
    assert m["bool"] is True and m["no"] is False and (m["u64"], m["i64"]) == (2**64 - 1, -(2**63))
    assert m["floats"] == [0.5, -1.25, 3.0] and all(type(x) is float for x in m["floats"])
    assert m["ints"] == [1, -2, 3] and all(type(x) is int for x in m["ints"])
    assert m["bools"] == [True, False] and m["empty"] == [] and m["strs"] == ["a", "", "ü"]
    assert m["nested"] == [[1, 2], ["x"], []]
    assert (c.version, c.alignment, c.tensors) == (3, 32, {})


def test_alignment_and_tensor_offsets(write: Any) -> None:
    data = np.arange(8, dtype=np.float32).tobytes() + bytes(32) + np.ones(4, np.float32).tobytes()
    raw = gguf_bytes([kv("general.alignment", V.UINT32, 64), kv("general.architecture", V.STRING, "llama")],
                     [tinfo("a", (8,)), tinfo("b", (2, 2), offset=64)], data, alignment=64, version=2)
    gf = GGUFFile(write(raw))
    assert gf.alignment == 64 and gf.data_start % 64 == 0 and gf.version == 2
    assert gf.tensors["b"].offset == gf.data_start + 64 and gf.tensors["b"].ne == (2, 2, 1, 1)
    assert np.array_equal(gf.data("a").view(np.float32), np.arange(8, dtype=np.float32))
    assert np.array_equal(gf.data("b").view(np.float32), np.ones(4, np.float32))
    with pytest.raises(ValueError, match="read-only"):
        gf.mapped()[0] = 1


# ---- malformed files ---------------------------------------------------------------------------------------------

HUGE = 1 << 62


@pytest.mark.parametrize(("raw", "match"), [
    (b"GGUF" + bytes(10), "too short for a GGUF header"),
    (gguf_bytes([ARCH], version=1), "version 1 is not supported"),
    (gguf_bytes([ARCH, kv("x", V.UINT8, 1)], alignment=1)[: 24 + len(ARCH) + 4], "truncated: the length of key 1"),
    (gguf_bytes([ARCH, kv("x", V.UINT64, 7)], alignment=1)[:-4], r"truncated: metadata key 'x' needs 8 bytes"),
    (gguf_bytes([ARCH, kv("x", V.STRING, "abcdefghijklmnop")], alignment=1)[:-10],
     r"truncated: metadata key 'x' \(16 bytes\)"),
    (gguf_bytes([kv("x", 13, payload=b"\0" * 8)]), "metadata key 'x': bad value type 13"),
    (gguf_bytes([kv("x", V.ARRAY, payload=struct.pack("<IQ", 99, 0))]), "x': array element: bad value type 99"),
    (gguf_bytes([kv("x", V.ARRAY, payload=struct.pack("<IQ", V.FLOAT32, HUGE))]),
     f"truncated: metadata key 'x' claims {HUGE} elements of FLOAT32"),
    (gguf_bytes([kv("x", V.ARRAY, payload=struct.pack("<IQ", V.STRING, HUGE))]), "claims .* elements of STRING"),
    (gguf_bytes([kv("x", V.ARRAY, payload=struct.pack("<IQ", V.STRING, 1) + struct.pack("<Q", HUGE))]),
     "string 0 .* runs past the end of the file"),
    (gguf_bytes([kv("x", V.STRING, payload=struct.pack("<Q", HUGE))]), r"truncated: metadata key 'x' \("),
    (gguf_bytes([kv(b"k\xff", V.UINT8, 1)]), "key 0 is not valid UTF-8"),
    (gguf_bytes([kv("x", V.STRING, payload=s(b"\xc3("))]), "metadata key 'x' is not valid UTF-8"),
    (gguf_bytes([kv("x", V.ARRAY, (V.STRING, [b"ok", b"\xe2\x82"]))]), "'x': string 1 is not valid UTF-8"),
    (gguf_bytes([ARCH, ARCH]), "metadata key 'general.architecture' appears twice"),
    (gguf_bytes([kv("x", V.ARRAY, payload=struct.pack("<IQ", V.ARRAY, 1) * (MAX_NESTING + 1) +
                    struct.pack("<IQ", V.UINT8, 0))]), f"arrays nested deeper than {MAX_NESTING}"),
    (gguf_bytes([kv("general.alignment", V.UINT32, 48)]), "general.alignment = 48 is not a power of two"),
    (gguf_bytes([kv("general.alignment", V.BOOL, True)]), "general.alignment = True is not a power of two"),
    (gguf_bytes([ARCH], [tinfo("w", (4,)), tinfo("w", (4,), offset=32)], bytes(64)), "tensor 'w' appears twice"),
    (gguf_bytes([ARCH], [tinfo("w", (1, 1, 1, 1, 1))], bytes(32)), "tensor 'w' has 5 dims, more than 4"),
    (gguf_bytes([ARCH], [tinfo("w", (4,), offset=8)], bytes(64)), "tensor 'w': data offset 8 is not a multiple"),
    (gguf_bytes([ARCH], [tinfo("w", (4,))], alignment=1)[:-14], r"truncated: tensor 'w': dim 0"),
    (gguf_bytes([ARCH], [tinfo("w", (64,))], bytes(64)), r"tensor 'w' data \[.*\) lies beyond the end"),
    (gguf_bytes([ARCH], [tinfo("w", (0,))], bytes(64)), r"tensor 'w' has invalid dims \[0\]"),
    (gguf_bytes([ARCH], [tinfo("w", (4,), type_id=4)], bytes(64)), "tensor 'w': "),  # Q4_2: removed from ggml
])
def test_malformed_files_name_file_and_fault(write: Any, raw: bytes, match: str) -> None:
    path = write(raw, "bad.gguf")
    with pytest.raises(GGUFError, match=match) as e:
        GGUFFile(path)
    assert str(e.value).startswith(f"{path}: ")


# ---- the same values as the gguf package, on real files ----------------------------------------------------------

def _real_files() -> list[Path]:
    vocabs = Path(os.environ.get("PYGGML_LLAMA_VOCABS", VOCAB_DIR))
    files = sorted(vocabs.glob("ggml-vocab-*.gguf"))
    model = smollm2_gguf()
    return [*files, model] if model is not None else files


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same Python types (a float is not an int, a bool is not an int), lists item by item."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and (a == b or (a != a and b != b))


@pytest.mark.parametrize("path", _real_files(), ids=lambda p: p.name)
def test_real_files_read_as_the_gguf_package_reads_them(path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    ref = gguf.GGUFReader(path)
    gf = GGUFFile(path)
    want = {k: f.contents() for k, f in ref.fields.items() if not k.startswith("GGUF.")}
    assert list(gf.metadata) == list(want)
    for key, value in want.items():
        assert _same(gf.metadata[key], value), key
    assert gf.alignment == ref.alignment and gf.data_start == ref.data_offset
    assert list(gf.tensors) == [t.name for t in ref.tensors]
    for t in ref.tensors:
        info = gf.tensors[t.name]
        assert info.type.value == int(t.tensor_type) and info.offset == t.data_offset and info.nbytes == t.n_bytes
        assert info.ne[: len(t.shape)] == tuple(int(d) for d in t.shape)
        assert np.array_equal(gf.data(t.name), t.data.reshape(-1).view(np.uint8)), t.name
