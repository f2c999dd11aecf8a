"""Mamba 1 and Mamba 2 (llama.cpp's `mamba`, `mamba2`) on tiny GGUFs written here with llama.cpp's keys and tensor
names: pyggml's logits against a float64 numpy forward pass, the recurrent state carried across micro-batches and
decode steps, files the builder cannot run refused by name, and, where llama-cpp-python is importable, pyggml's
logits against llama.cpp's run of the same file, teacher-forced (mean KL divergence at llama.cpp's noise floor, the
same top token)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyggml.errors import GGUFError
from pyggml_llama.mamba import MambaHParams, MambaSession
from pyggml_llama.mamba_synthetic import MAMBA1, MAMBA2, mamba_forward, tiny_mamba_weights, write_tiny_mamba
from pyggml_testing.recurrent import TOKENS_SEED, Family, RecurrentFamilyTests

pytest.importorskip("gguf")

MAMBA = Family({"mamba": MAMBA1, "mamba2": MAMBA2}, tiny_mamba_weights, write_tiny_mamba, mamba_forward, MambaSession)
TOKENS = MAMBA.tokens(TOKENS_SEED, 19)
Tiny = tuple[MambaHParams, Path, dict[str, Any]]


class TestMamba(RecurrentFamilyTests):
    family = MAMBA
    qtypes = ("F32", "Q8_0", "Q4_0")

    def test_greedy_generation_feeds_back_its_tokens(self, tiny: Tiny) -> None:
        cfg, path, weights = tiny
        out = list(MambaSession(path, ["numpy"]).generate(TOKENS[:5], 6))
        seq = TOKENS[:5]
        for tok in out:  # each generated token is the argmax after the sequence so far
            assert tok == int(np.argmax(mamba_forward(cfg, weights, seq)[-1]))
            seq = [*seq, tok]


def test_a_separate_output_matrix_is_used(tmp_path: Path) -> None:
    weights = tiny_mamba_weights(MAMBA1, np.random.default_rng(1), output=True)
    path = write_tiny_mamba(tmp_path / "out.gguf", MAMBA1, weights)
    got = MambaSession(path, ["numpy"]).eval(TOKENS, all_logits=True)
    np.testing.assert_allclose(got, mamba_forward(MAMBA1, weights, TOKENS), rtol=1e-4, atol=1e-4)


def test_unsupported_files_are_refused_by_name(tmp_path: Path) -> None:
    weights = tiny_mamba_weights(MAMBA1, np.random.default_rng(0))
    extra = weights | {"blk.1.ssm_dt_norm.weight": np.ones(MAMBA1.dt_rank, np.float32)}
    with pytest.raises(GGUFError, match=r"does not use the tensors blk\.1\.ssm_dt_norm\.weight"):
        MambaSession(write_tiny_mamba(tmp_path / "extra.gguf", MAMBA1, extra), ["numpy"])
    short = weights | {"blk.0.ssm_d": np.ones(1, np.float32)}
    with pytest.raises(GGUFError, match=r"tensor 'blk\.0\.ssm_d' has ne=\[1, 1, 1, 1\], expected \[64\]"):
        MambaSession(write_tiny_mamba(tmp_path / "short.gguf", MAMBA1, short), ["numpy"])
    odd = replace(MAMBA2, n_group=3)
    odd_path = write_tiny_mamba(tmp_path / "odd.gguf", odd, tiny_mamba_weights(MAMBA2, np.random.default_rng(0)))
    with pytest.raises(GGUFError, match=r"8 heads \(time_step_rank\) and 3 groups do not divide evenly"):
        MambaSession(odd_path, ["numpy"])
    with pytest.raises(GGUFError, match="architecture 'llama' is not Mamba"):
        MambaSession(_llama_file(tmp_path), ["numpy"])


def _llama_file(tmp_path: Path) -> Path:
    import gguf

    w = gguf.GGUFWriter(str(tmp_path / "llama.gguf"), "llama")
    w.add_tensor("token_embd.weight", np.zeros((4, 4), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tmp_path / "llama.gguf"
