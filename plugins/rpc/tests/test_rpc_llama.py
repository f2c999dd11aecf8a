"""SmolLM2 over RPC, teacher-forced against the local cpu run (mean KL divergence of next-token distributions at
llama.cpp's noise floor, as `llama-perplexity --kl-divergence`): layers split over llama.cpp's ggml-rpc-server and a
pyggml rpc-server, and the model tensor-split over the two (llama.cpp's -sm tensor over RPC)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyggml_llama", reason="the llama example is not installed (pip install -e examples/llama)")

from pyggml.errors import PyGGMLError
from pyggml_llama.agreement import NOISE_FLOOR_KLD, agreement
from pyggml_llama.cli import add_rpc_servers
from pyggml_llama.session import Session, default_model_path

try:
    MODEL = default_model_path()
except PyGGMLError as e:
    pytest.skip(str(e), allow_module_level=True)

TEXT = ("The graph allocator plans every intermediate's address before anything runs, and the scheduler cuts one "
        "graph into splits across backends, copying inputs between them. Each device driver is a plugin: a remote "
        "device answers over a socket what a local one answers through a function call. In the spring the river "
        "rose over its banks, and the people of the valley moved their animals to the hills. When the water went "
        "down they found the fields covered with a fine grey silt, which made the next harvest the richest anyone "
        "could remember. The old miller said it had happened once before, when he was a boy, and that his father "
        "had planted barley where the wheat had failed.")


@pytest.fixture(scope="module")
def tokens_and_local() -> Iterator[tuple[list[int], np.ndarray[Any, Any], float]]:
    """The text's tokens, the local cpu logits (one batch), and this text's noise floor: the mean KLD between
    the local run in one batch and one token at a time (llama.cpp's own measure of it)."""
    s = Session(None, ["cpu"], n_ctx=256)
    toks = s.tokenizer.encode(TEXT)
    batch = s.eval(toks, all_logits=True)
    seq = Session(None, ["cpu"], n_ctx=256)
    one_by_one = np.concatenate([seq.eval([t], all_logits=True) for t in toks])
    yield toks, batch, max(agreement(batch, one_by_one).mean_kld, NOISE_FLOOR_KLD)


@pytest.fixture(scope="module")
def servers(ggml_server: str, pyggml_server: str) -> list[str]:
    add_rpc_servers(f"{ggml_server},{pyggml_server}")
    from pyggml.backend.registry import get_registry

    names = {d.description.rsplit(" ", 1)[-1]: d.name for d in get_registry("RPC").devices()}
    return [names[ggml_server], names[pyggml_server]]


@pytest.mark.parametrize("split_mode", ["layer", "tensor"])
def test_smollm2_over_two_rpc_servers_agrees_with_local(
        split_mode: str, servers: list[str], tokens_and_local: tuple[list[int], np.ndarray[Any, Any], float]
) -> None:
    toks, local, floor = tokens_and_local
    s = Session(None, servers, n_ctx=256, split_mode=split_mode)
    remote = s.eval(toks, all_logits=True)
    a = agreement(local, remote)
    if split_mode == "layer":  # ggml's CPU (AVX2) and pyggml's cpu sum in the same order: the very same logits
        assert a.mean_kld < 1e-6, a
    else:  # flash attention and partial sums sum in another order: the same split run locally is the yardstick
        local_split = Session(None, ["cpu", "cpu"], n_ctx=256, split_mode="tensor").eval(toks, all_logits=True)
        yardstick = max(floor, agreement(local, local_split).mean_kld)
        assert a.mean_kld <= 1.1 * yardstick, (a, yardstick)
    assert a.same_top1 >= 0.95, a
    s.reset()
    greedy_local = list(Session(None, ["cpu"], n_ctx=256).generate(toks[:6], 12))
    assert list(s.generate(toks[:6], 12)) == greedy_local, a
