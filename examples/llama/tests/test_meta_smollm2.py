"""The whole SmolLM2-135M model (Q4_1 GGUF) with --split-mode tensor against one device: logits of the numpy
reference within NMSE 5e-4 on 2 and 3 devices, greedy tokens identical on the cpu plugin for 2 and 3 devices, uneven
shares (-ts 3,1) and a zero-share device, two allreduces per layer; more devices than KV heads is refused.

The devices are one host device named several times: each name gets its own backend and its own buffers, so the
meta device sees distinct devices (core/tests/test_meta_compute.py covers devices with private memory)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from pyggml.errors import PyGGMLError
from pyggml_testing.compare import nmse
from pyggml_testing.llama import GREEDY, PROMPT

session = pytest.importorskip("pyggml_llama.session")
try:
    MODEL = session.default_model_path()
except PyGGMLError as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"SmolLM2 GGUF not available: {e}", allow_module_level=True)


def logits(names: Sequence[str], mode: str, ts: Sequence[float] | None = None) -> tuple[np.ndarray, object]:
    s = session.Session(MODEL, list(names), n_ctx=64, n_batch=32, split_mode=mode, tensor_split=ts)
    toks = s.tokenizer.encode(PROMPT)[:3]
    return s.eval(toks, all_logits=True), s


def greedy(names: Sequence[str], mode: str, ts: Sequence[float] | None = None) -> tuple[list[list[int]], object]:
    s = session.Session(MODEL, list(names), n_ctx=64, n_batch=32, split_mode=mode, tensor_split=ts)
    out = []
    for prompt, n in GREEDY:
        s.reset()
        out.append(list(s.generate(s.tokenizer.encode(prompt), n)))
    return out, s


@pytest.fixture(scope="module")
def numpy_reference() -> np.ndarray:
    return logits(["numpy"], "none")[0]


@pytest.fixture(scope="module")
def cpu_reference() -> list[list[int]]:
    if not session.has_device("cpu"):
        pytest.skip("the cpu plugin is not installed")
    return greedy(["cpu"], "none")[0]


@pytest.mark.parametrize("n", [2, 3])
def test_logits_match_one_device(numpy_reference: np.ndarray, n: int) -> None:
    got, s = logits(["numpy"] * n, "tensor")
    assert nmse(got, numpy_reference) <= 5e-4
    meta = s.backends[0]  # type: ignore[attr-defined]
    assert meta.last_plan.n_allreduce == 2 * s.hp.n_layer  # type: ignore[attr-defined]


@pytest.mark.parametrize(("n", "ts"), [(2, None), (3, None), (2, (3.0, 1.0)), (3, (1.0, 1.0, 0.0))])
def test_greedy_tokens_match_one_device(cpu_reference: list[list[int]], n: int,
                                        ts: tuple[float, ...] | None) -> None:
    got, s = greedy(["cpu"] * n, "tensor", ts)
    assert got == cpu_reference
    assert s.backends[0].last_plan.n_allreduce == 2 * s.hp.n_layer  # type: ignore[attr-defined]


def test_more_devices_than_kv_heads_is_refused() -> None:
    with pytest.raises(PyGGMLError, match="4 devices but only 3 groups of KV heads"):
        session.Session(MODEL, ["numpy"] * 4, n_ctx=64, split_mode="tensor")
