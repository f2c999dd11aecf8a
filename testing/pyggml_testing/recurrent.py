"""The tests the llama example's recurrent families (Mamba: test_mamba.py, RWKV: test_rwkv.py) share, run over a
family's tiny GGUFs (RecurrentFamilyTests, for a test module to subclass): pyggml's logits against the family's
float64 numpy forward pass, the state carried across micro-batches and decode steps, and pyggml against llama.cpp on
the same file. Imports the llama example (pyggml-llama)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt
import pytest

from pyggml_llama.agreement import NOISE_FLOOR_KLD, agreement
from pyggml_llama.recurrent import RecurrentHParams, RecurrentSession
from pyggml_llama.session import has_device
from pyggml_testing.llama_cpp_ref import llama_cpp_module

C = TypeVar("C", bound=RecurrentHParams)
F32 = npt.NDArray[np.float32]
Weights = dict[str, F32]
DEVICES = ["numpy", "cpu", "OpenCL0", "Vulkan0"]
"""Where the forward pass is checked (a device this machine lacks is skipped)."""


@dataclass(frozen=True)
class Family(Generic[C]):
    """A recurrent family's tiny configs by architecture name and how its files are made, read and checked."""

    configs: Mapping[str, C]
    weights: Callable[[C, np.random.Generator], Weights]
    """Random weights of a config, numpy arrays by GGUF name."""
    write: Callable[[Path, C, Weights, str], Path]
    """The GGUF of a config's weights, the matrices stored as the type named (F32, Q8_0 ...)."""
    forward: Callable[[C, Weights, list[int]], npt.NDArray[Any]]
    """The float64 numpy forward pass: every position's logits [n, n_vocab]."""
    session: type[RecurrentSession[Any, Any]]

    def tokens(self, seed: int, n: int) -> list[int]:
        """n random token ids (from `seed`) that every config's vocabulary holds."""
        n_vocab = min(c.n_vocab for c in self.configs.values())
        return [int(t) for t in np.random.default_rng(seed).integers(0, n_vocab, n)]

    def tiny(self, arch: str, tmp_path_factory: pytest.TempPathFactory) -> Tiny[C]:
        """The config named `arch`, its F32 file and its weights (seed 0)."""
        cfg = self.configs[arch]
        weights = self.weights(cfg, np.random.default_rng(0))
        return cfg, self.write(tmp_path_factory.mktemp(cfg.arch) / "tiny.gguf", cfg, weights, "F32"), weights

    def on(self, path: Path, device: str, **kw: Any) -> RecurrentSession[Any, Any]:
        """A session of the file on `device` alone; the test is skipped where the device is missing."""
        if not has_device(device):
            pytest.skip(f"no {device} device here")
        return self.session(path, [device], **kw)


Tiny = tuple[C, Path, Weights]
TOKENS_SEED = 11


def check_logits(fam: Family[C], tiny: Tiny[C], device: str) -> None:
    """19 tokens in one batch: every position's logits match the numpy forward pass."""
    cfg, path, weights = tiny
    tokens = fam.tokens(TOKENS_SEED, 19)
    got = fam.on(path, device).eval(tokens, all_logits=True)
    np.testing.assert_allclose(got, fam.forward(cfg, weights, tokens), rtol=1e-4, atol=1e-4)


def check_state_carries(fam: Family[C], tiny: Tiny[C], device: str) -> None:
    """A prompt in micro-batches of 4 (windows and token shifts span a batch boundary), then one token per call:
    the logits of one pass over the whole sequence; after reset the history is gone."""
    cfg, path, weights = tiny
    tokens = fam.tokens(TOKENS_SEED, 19)
    want = fam.forward(cfg, weights, tokens)
    s = fam.on(path, device, n_batch=4)
    parts = [s.eval(tokens[:10], all_logits=True), *(s.eval([t]) for t in tokens[10:])]
    np.testing.assert_allclose(np.concatenate(parts), want, rtol=1e-4, atol=1e-4)
    assert s.n_past == len(tokens) and s.graph_builds == 3  # 4 tokens, 2 tokens, 1 token (last-only logits)
    s.reset()
    np.testing.assert_allclose(s.eval(tokens[:7])[0], want[6], rtol=1e-4, atol=1e-4)


def check_llama_cpp_agreement(fam: Family[C], arch: str, qtype: str, tmp_path: Path) -> None:
    """Teacher-forced over 96 tokens: the prompt in one batch, and the same prompt fed in micro-batches of 16
    then one token at a time (the recurrent state carried by pyggml), both against llama.cpp's single batch (mean
    KL divergence at llama.cpp's noise floor, the same top token)."""
    llama_cpp = llama_cpp_module()
    cfg = fam.configs[arch]
    path = fam.write(tmp_path / f"tiny-{qtype}.gguf", cfg, fam.weights(cfg, np.random.default_rng(2)), qtype)
    tokens = fam.tokens(3, 96)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_batch=512, n_threads=2, logits_all=True, verbose=False)
    llm.eval(tokens)
    ref = np.array(llm.scores[: len(tokens)], dtype=np.float32)
    batch = fam.session(path, ["cpu"]).eval(tokens, all_logits=True)
    stepped = fam.session(path, ["cpu"], n_batch=16)
    parts = [stepped.eval(tokens[:64], all_logits=True), *(stepped.eval([t]) for t in tokens[64:])]
    for got in (batch, np.concatenate(parts)):
        a = agreement(ref, got)
        assert a.mean_kld <= NOISE_FLOOR_KLD and a.same_top1 >= 0.95, a


class RecurrentFamilyTests:
    """The checks above as pytest tests over every config of `family` (`arch`), on every device of DEVICES that is
    here, llama.cpp's agreement at each of `qtypes`. A test module subclasses it (`class TestMamba(
    RecurrentFamilyTests)`), naming its family; its own tests in the subclass may use the `tiny` fixture."""

    family: Family[Any]
    qtypes: tuple[str, ...] = ("F32", "Q8_0")

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "arch" in metafunc.fixturenames:
            metafunc.parametrize("arch", list(self.family.configs), scope="class")
        if "device" in metafunc.fixturenames:
            metafunc.parametrize("device", DEVICES)
        if "qtype" in metafunc.fixturenames:
            metafunc.parametrize("qtype", self.qtypes)

    @pytest.fixture(scope="class")
    @classmethod
    def tiny(cls, arch: str, tmp_path_factory: pytest.TempPathFactory) -> Tiny[Any]:
        return cls.family.tiny(arch, tmp_path_factory)

    def test_logits_match_the_numpy_forward_pass(self, tiny: Tiny[Any], device: str) -> None:
        check_logits(self.family, tiny, device)

    def test_the_state_carries_over_micro_batches_and_decode_steps(self, tiny: Tiny[Any], device: str) -> None:
        check_state_carries(self.family, tiny, device)

    def test_pyggml_agrees_with_llama_cpp_on_the_same_file(self, arch: str, qtype: str, tmp_path: Path) -> None:
        check_llama_cpp_agreement(self.family, arch, qtype, tmp_path)
