"""GGUF reading: metadata and tensor infos of the real SmolLM2 file, zero-copy mapping, and bad files."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyggml.backend.host import HostBufferType
from pyggml.errors import GGUFError
from pyggml.gguf import GGUFFile, layer_of, load_weights, place_by_layers, with_overrides
from pyggml.types import GGMLType


def _small_gguf(path: Path) -> Path:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_string("general.name", "tiny")
    w.add_tensor("token_embd.weight", np.arange(64, dtype=np.float32).reshape(2, 32))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(32, dtype=np.float32))
    w.add_tensor("blk.1.attn_norm.weight", np.full(32, 2.0, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return _small_gguf(tmp_path / "tiny.gguf")


def test_reads_metadata_and_tensors(tiny: Path) -> None:
    gf = GGUFFile(tiny)
    assert gf.architecture == "llama" and gf.get("general.name") == "tiny"
    info = gf.tensors["token_embd.weight"]
    assert info.type is GGMLType.F32 and info.ne == (32, 2, 1, 1) and info.nbytes == 256


def test_mapped_weights_share_the_file(tiny: Path) -> None:
    gf = GGUFFile(tiny)
    w = load_weights(gf, HostBufferType("host"))
    t = w["token_embd.weight"]
    assert np.array_equal(t.numpy(), np.arange(64, dtype=np.float32).reshape(2, 32))
    host = t.buffer.host_array() if t.buffer else None
    assert host is not None and np.shares_memory(host, gf.mapped())  # no copy
    with pytest.raises(GGUFError, match="tensor 'nope' is missing"):
        w["nope"]


def test_tensors_below_copy_below_are_copied_and_reads_take_ranges(tiny: Path) -> None:
    gf = GGUFFile(tiny)
    w = load_weights(gf, HostBufferType("host"), copy_below=200)
    big, small = w["token_embd.weight"], w["blk.1.attn_norm.weight"]
    assert big.buffer is not None and small.buffer is not None and big.buffer is not small.buffer
    assert np.shares_memory(big.buffer.host_array(), gf.mapped()) and w.mapped
    assert not np.shares_memory(small.buffer.host_array(), gf.mapped())
    np.testing.assert_array_equal(small.numpy(), np.full(32, 2.0, dtype=np.float32))
    np.testing.assert_array_equal(gf.read("token_embd.weight", 128, 8).view(np.float32), [32.0, 33.0])
    with pytest.raises(GGUFError, match=r"bytes \[250, 258\) are outside tensor 'token_embd.weight'"):
        gf.read("token_embd.weight", 250, 8)
    space = np.zeros(16, dtype=np.uint8)  # a load's reused array: the bytes land at its front
    got = gf.read("token_embd.weight", 128, 8, space)
    assert np.shares_memory(got, space) and got.size == 8
    np.testing.assert_array_equal(space[:8].view(np.float32), [32.0, 33.0])
    with pytest.raises(ValueError, match=r"a 16-byte array cannot take 24 bytes of tensor 'token_embd\.weight'"):
        gf.read("token_embd.weight", 0, 24, space)


def test_placement_by_layers_and_overrides() -> None:
    a, b, host = HostBufferType("a"), HostBufferType("b"), HostBufferType("host")
    place = place_by_layers(4, [a, b], [3, 1], host=host)
    from pyggml.gguf import GGUFTensorInfo

    def info(name: str) -> GGUFTensorInfo:
        return GGUFTensorInfo(name, GGMLType.F32, (1, 1, 1, 1), 0, 4)

    assert [place(info(f"blk.{i}.x")).name for i in range(4)] == ["a", "a", "a", "b"]
    assert place(info("token_embd.weight")) is host
    assert with_overrides(place, [(r"blk\.0\.", b)])(info("blk.0.ffn_up.weight")) is b
    assert layer_of("blk.17.attn_q.weight") == 17 and layer_of("output.weight") is None
    with pytest.raises(GGUFError, match="does not fit 2 devices"):
        place_by_layers(4, [a, b], [1])


def test_truncated_and_foreign_files(tiny: Path, tmp_path: Path) -> None:
    data = tiny.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) - 100])
    with pytest.raises(GGUFError, match=r"cut\.gguf"):
        GGUFFile(cut)
    other = tmp_path / "other.bin"
    other.write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(GGUFError, match="not a GGUF file"):
        GGUFFile(other)
    forged = tmp_path / "forged.gguf"
    forged.write_bytes(data[:8] + (1 << 60).to_bytes(8, "little") + data[16:])
    with pytest.raises(GGUFError, match="header claims"):
        GGUFFile(forged)
    with pytest.raises(GGUFError, match="cannot open"):
        GGUFFile(tmp_path / "missing.gguf")


@settings(max_examples=60, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_fuzz_mutated_headers(tiny: Path, data: st.DataObject) -> None:
    """Any mutation of the first 600 bytes either parses or raises GGUFError: never another exception."""
    raw = bytearray(tiny.read_bytes())
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, min(600, len(raw)) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    path = tiny.parent / "mutated.gguf"
    path.write_bytes(bytes(raw))
    try:
        gf = GGUFFile(path)
    except GGUFError:
        return
    for info in gf:  # whatever parsed is self-consistent
        assert info.offset + info.nbytes <= gf.file_size
