"""RWKV v6 and v7 (llama.cpp's `rwkv6`, `rwkv7`) on tiny GGUFs written here with llama.cpp's keys and tensor names:
pyggml's logits against a float64 numpy forward pass, the token-shift and WKV states carried across micro-batches
and decode steps, files the builder cannot run refused by name, and pyggml against llama.cpp on the same file
(teacher-forced mean KL divergence at llama.cpp's noise floor, the same top token) where llama-cpp-python is
importable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pyggml.errors import GGUFError
from pyggml_llama.rwkv import RwkvSession
from pyggml_llama.rwkv_synthetic import RWKV6, RWKV7, rwkv6_forward, tiny_rwkv6_weights, write_tiny_rwkv6
from pyggml_testing.recurrent import Family, RecurrentFamilyTests

pytest.importorskip("gguf")

RWKV = Family({"rwkv6": RWKV6, "rwkv7": RWKV7}, tiny_rwkv6_weights, write_tiny_rwkv6, rwkv6_forward, RwkvSession)


class TestRwkv(RecurrentFamilyTests):
    family = RWKV


def test_unsupported_files_are_refused_by_name(tmp_path: Path) -> None:
    weights = tiny_rwkv6_weights(RWKV6, np.random.default_rng(0))
    unfused = {k: a for k, a in weights.items() if k != "blk.0.time_mix_lerp_fused.weight"}
    unfused["blk.0.time_mix_lerp_w.weight"] = np.zeros((1, 1, RWKV6.n_embd), np.float32)
    with pytest.raises(GGUFError, match=r"does not use the tensors blk\.0\.time_mix_lerp_w\.weight"):
        RwkvSession(write_tiny_rwkv6(tmp_path / "unfused.gguf", RWKV6, unfused), ["numpy"])
    extra = weights | {"blk.1.time_mix_key.bias": np.zeros(RWKV6.n_embd, np.float32)}
    with pytest.raises(GGUFError, match=r"does not use the tensors blk\.1\.time_mix_key\.bias"):
        RwkvSession(write_tiny_rwkv6(tmp_path / "extra.gguf", RWKV6, extra), ["numpy"])
