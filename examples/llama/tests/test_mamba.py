"""Mamba 1 and Mamba 2 (llama.cpp's `mamba`, `mamba2`) on tiny GGUFs written here with llama.cpp's keys and tensor
names: pyggml's logits against a float64 numpy forward pass, the recurrent state carried across micro-batches and
decode steps, files the builder cannot run refused by name, and, where llama-cpp-python is importable, pyggml's
logits against llama.cpp's run of the same file, teacher-forced (mean KL divergence at llama.cpp's noise floor, the
same top token)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyggml.errors import GGUFError
from pyggml_llama.agreement import NOISE_FLOOR_KLD, agreement
from pyggml_llama.mamba import MambaSession
from pyggml_llama.mamba_synthetic import MAMBA2, TinyMamba, mamba_forward, tiny_mamba_weights, write_tiny_mamba
from pyggml_llama.session import has_device
from pyggml_testing.llama_cpp_ref import llama_cpp_module

pytest.importorskip("gguf")

MAMBA1 = TinyMamba()
CONFIGS = {"mamba": MAMBA1, "mamba2": MAMBA2}
TOKENS = [int(t) for t in np.random.default_rng(11).integers(0, MAMBA1.n_vocab, 19)]
DEVICES = ["numpy", "cpu", "OpenCL0", "Vulkan0"]
Tiny = tuple[TinyMamba, Path, dict[str, Any]]


def _session(path: Path, device: str, **kw: Any) -> MambaSession:
    if not has_device(device):
        pytest.skip(f"no {device} device here")
    return MambaSession(path, [device], **kw)


@pytest.fixture(scope="module", params=list(CONFIGS))
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    cfg = CONFIGS[request.param]
    weights = tiny_mamba_weights(cfg, np.random.default_rng(0))
    return cfg, write_tiny_mamba(tmp_path_factory.mktemp(cfg.arch) / "tiny.gguf", cfg, weights), weights


@pytest.mark.parametrize("device", DEVICES)
def test_logits_match_the_numpy_forward_pass(tiny: Tiny, device: str) -> None:
    cfg, path, weights = tiny
    got = _session(path, device).eval(TOKENS, all_logits=True)
    np.testing.assert_allclose(got, mamba_forward(cfg, weights, TOKENS), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_the_state_carries_over_micro_batches_and_decode_steps(tiny: Tiny, device: str) -> None:
    """A prompt in micro-batches of 4 (the conv window spans a batch boundary), then one token per call: the
    logits of one pass over the whole sequence; after reset the history is gone."""
    cfg, path, weights = tiny
    want = mamba_forward(cfg, weights, TOKENS)
    s = _session(path, device, n_batch=4)
    prompt = s.eval(TOKENS[:10], all_logits=True)
    steps = [s.eval([t]) for t in TOKENS[10:]]
    np.testing.assert_allclose(np.concatenate([prompt, *steps]), want, rtol=1e-4, atol=1e-4)
    assert s.n_past == len(TOKENS) and s.graph_builds == 3  # 4 tokens, 2 tokens, 1 token (last-only logits)
    s.reset()
    np.testing.assert_allclose(s.eval(TOKENS[:7])[0], want[6], rtol=1e-4, atol=1e-4)


def test_greedy_generation_feeds_back_its_tokens(tiny: Tiny) -> None:
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
    odd = TinyMamba(arch="mamba2", dt_rank=8, n_group=3)
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


# ---- against llama.cpp ---------------------------------------------------------------------------------------------


def _llama_cpp_logits(path: Path, tokens: list[int]) -> np.ndarray[Any, Any]:
    """llama.cpp's logits of every position, the sequence in one batch (llama-cpp-python, 2 threads)."""
    llama_cpp = llama_cpp_module()
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=max(256, len(tokens)), n_batch=512, n_threads=2,
                          logits_all=True, verbose=False)
    llm.eval(tokens)
    return np.array(llm.scores[: len(tokens)], dtype=np.float32)


@pytest.mark.parametrize("qtype", ["F32", "Q8_0", "Q4_0"])
@pytest.mark.parametrize("arch", list(CONFIGS))
def test_pyggml_agrees_with_llama_cpp_on_the_same_file(tmp_path: Path, arch: str, qtype: str) -> None:
    """Teacher-forced over 96 tokens: the prompt in one batch, and the same prompt fed in micro-batches of 16
    then one token at a time (the recurrent state carried by pyggml), both against llama.cpp's single batch."""
    cfg = CONFIGS[arch]
    path = write_tiny_mamba(tmp_path / f"tiny-{qtype}.gguf", cfg, tiny_mamba_weights(cfg, np.random.default_rng(2)),
                            qtype)
    tokens = [int(t) for t in np.random.default_rng(3).integers(0, cfg.n_vocab, 96)]
    ref = _llama_cpp_logits(path, tokens)
    batch = MambaSession(path, ["cpu"]).eval(tokens, all_logits=True)
    stepped = MambaSession(path, ["cpu"], n_batch=16)
    parts = [stepped.eval(tokens[:64], all_logits=True), *(stepped.eval([t]) for t in tokens[64:])]
    for got in (batch, np.concatenate(parts)):
        a = agreement(ref, got)
        assert a.mean_kld <= NOISE_FLOOR_KLD and a.same_top1 >= 0.95, a
