"""RWKV v6 and v7 (llama.cpp's `rwkv6`, `rwkv7`) on tiny GGUFs written here with llama.cpp's keys and tensor names:
pyggml's logits against a float64 numpy forward pass, the token-shift and WKV states carried across micro-batches
and decode steps, files the builder cannot run refused by name, and pyggml against llama.cpp on the same file
(teacher-forced mean KL divergence at llama.cpp's noise floor, the same top token) where llama-cpp-python is
importable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyggml.errors import GGUFError
from pyggml_llama.agreement import NOISE_FLOOR_KLD, agreement
from pyggml_llama.rwkv import RwkvSession
from pyggml_llama.rwkv_synthetic import RWKV7, TinyRwkv6, rwkv6_forward, tiny_rwkv6_weights, write_tiny_rwkv6
from pyggml_llama.session import has_device
from pyggml_testing.llama_cpp_ref import llama_cpp_module

pytest.importorskip("gguf")

CFG = TinyRwkv6()
CONFIGS = {"rwkv6": CFG, "rwkv7": RWKV7}
TOKENS = [int(t) for t in np.random.default_rng(11).integers(0, CFG.n_vocab, 19)]
Tiny = tuple[TinyRwkv6, Path, dict[str, Any]]


DEVICES = ["numpy", "cpu", "OpenCL0", "Vulkan0"]


@pytest.fixture(scope="module", params=list(CONFIGS))
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    cfg = CONFIGS[request.param]
    weights = tiny_rwkv6_weights(cfg, np.random.default_rng(0))
    return cfg, write_tiny_rwkv6(tmp_path_factory.mktemp(cfg.arch) / "tiny.gguf", cfg, weights), weights


@pytest.mark.parametrize("device", DEVICES)
def test_logits_match_the_numpy_forward_pass(tiny: Tiny, device: str) -> None:
    cfg, path, weights = tiny
    if not has_device(device):
        pytest.skip(f"no {device} device here")
    got = RwkvSession(path, [device]).eval(TOKENS, all_logits=True)
    np.testing.assert_allclose(got, rwkv6_forward(cfg, weights, TOKENS), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_the_state_carries_over_micro_batches_and_decode_steps(tiny: Tiny, device: str) -> None:
    cfg, path, weights = tiny
    if not has_device(device):
        pytest.skip(f"no {device} device here")
    want = rwkv6_forward(cfg, weights, TOKENS)
    s = RwkvSession(path, [device], n_batch=4)
    parts = [s.eval(TOKENS[:10], all_logits=True), *(s.eval([t]) for t in TOKENS[10:])]
    np.testing.assert_allclose(np.concatenate(parts), want, rtol=1e-4, atol=1e-4)
    s.reset()
    np.testing.assert_allclose(s.eval(TOKENS[:7])[0], want[6], rtol=1e-4, atol=1e-4)


def test_unsupported_files_are_refused_by_name(tmp_path: Path) -> None:
    weights = tiny_rwkv6_weights(CFG, np.random.default_rng(0))
    unfused = {k: a for k, a in weights.items() if k != "blk.0.time_mix_lerp_fused.weight"}
    unfused["blk.0.time_mix_lerp_w.weight"] = np.zeros((1, 1, CFG.n_embd), np.float32)
    with pytest.raises(GGUFError, match=r"does not use the tensors blk\.0\.time_mix_lerp_w\.weight"):
        RwkvSession(write_tiny_rwkv6(tmp_path / "unfused.gguf", CFG, unfused), ["numpy"])
    extra = weights | {"blk.1.time_mix_key.bias": np.zeros(CFG.n_embd, np.float32)}
    with pytest.raises(GGUFError, match=r"does not use the tensors blk\.1\.time_mix_key\.bias"):
        RwkvSession(write_tiny_rwkv6(tmp_path / "extra.gguf", CFG, extra), ["numpy"])


@pytest.mark.parametrize("qtype", ["F32", "Q8_0"])
@pytest.mark.parametrize("arch", list(CONFIGS))
def test_pyggml_agrees_with_llama_cpp_on_the_same_file(tmp_path: Path, arch: str, qtype: str) -> None:
    """Teacher-forced over 96 tokens: one batch, and micro-batches of 16 then single tokens, against llama.cpp."""
    llama_cpp = llama_cpp_module()
    cfg = CONFIGS[arch]
    path = write_tiny_rwkv6(tmp_path / f"tiny-{qtype}.gguf", cfg, tiny_rwkv6_weights(cfg, np.random.default_rng(2)),
                            qtype)
    tokens = [int(t) for t in np.random.default_rng(3).integers(0, CFG.n_vocab, 96)]
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_batch=512, n_threads=2, logits_all=True, verbose=False)
    llm.eval(tokens)
    ref = np.array(llm.scores[: len(tokens)], dtype=np.float32)
    batch = RwkvSession(path, ["cpu"]).eval(tokens, all_logits=True)
    stepped = RwkvSession(path, ["cpu"], n_batch=16)
    parts = [stepped.eval(tokens[:64], all_logits=True), *(stepped.eval([t]) for t in tokens[64:])]
    for got in (batch, np.concatenate(parts)):
        a = agreement(ref, got)
        assert a.mean_kld <= NOISE_FLOOR_KLD and a.same_top1 >= 0.95, a
