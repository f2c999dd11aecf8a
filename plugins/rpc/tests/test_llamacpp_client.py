"""llama.cpp's own RPC client running SmolLM2 on `pyggml rpc-server --device cpu`, against llama.cpp's local run:
teacher-forced with `llama-perplexity --kl-divergence` (llama.cpp's measure), and greedy with `llama-completion`.

Without flash attention the server computes llama.cpp's graph to the very same logits. With it (llama.cpp's default
`-fa auto`), pyggml's FLASH_ATTN_EXT sums in another order than ggml's: the yardstick is then how far llama.cpp's own
flash attention is from its own plain attention on the same text."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyggml_testing.llama_cpp_ref import rpc_tool

pytest.importorskip("pyggml_llama", reason="the llama example (the SmolLM2 locator) is not installed")

from pyggml.errors import PyGGMLError
from pyggml_llama.agreement import NOISE_FLOOR_KLD
from pyggml_llama.session import default_model_path

TEXT = Path(__file__).parent / "data" / "kld_text.txt"
PPL_ARGS = ["-c", "128", "--chunks", "6", "-t", "2"]


def _tool(name: str) -> Path:
    exe = rpc_tool(name)
    if exe is None:
        pytest.skip(f"llama.cpp's {name} is not built (make llama-cpp-ref)")
    return exe


@pytest.fixture(scope="module")
def model() -> Iterator[Path]:
    try:
        yield default_model_path()
    except PyGGMLError as e:
        pytest.skip(str(e))


def _run(args: list[str]) -> str:
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout + p.stderr


def _kld(model: Path, base: Path, extra: list[str], make_base: bool = False) -> tuple[float, float]:
    """(mean KLD, same-top-1 %) of a llama-perplexity run against the logits saved in `base`."""
    exe = str(_tool("llama-perplexity"))
    args = [exe, "-m", str(model), "-f", str(TEXT), *PPL_ARGS, "--kl-divergence-base", str(base), *extra]
    out = _run(args if make_base else [*args, "--kl-divergence"])
    if make_base:
        return 0.0, 100.0
    kld = re.search(r"Mean\s+KLD:\s+(-?[\d.]+)", out)
    top = re.search(r"Same top p:\s+([\d.]+)", out)
    assert kld is not None and top is not None, out[-3000:]
    return float(kld.group(1)), float(top.group(1))


def test_perplexity_through_pyggml_server(model: Path, pyggml_server: str, tmp_path: Path) -> None:
    rpc = ["--rpc", pyggml_server, "-ngl", "99", "-dev", "RPC0"]
    plain, flash = tmp_path / "plain.kld", tmp_path / "flash.kld"
    _kld(model, plain, ["-fa", "off"], make_base=True)
    _kld(model, flash, ["-fa", "on"], make_base=True)
    kld, top = _kld(model, plain, ["-fa", "off", *rpc])
    assert abs(kld) < 1e-5 and top == 100.0, (kld, top)
    # llama.cpp's flash vs plain attention, both local: its own noise floor (on this text 3.2e-3, 93% same top token)
    own_floor, own_top = _kld(model, plain, ["-fa", "on"])
    kld, top = _kld(model, flash, ["-fa", "on", *rpc])
    assert kld <= 1.1 * max(own_floor, NOISE_FLOOR_KLD) and top >= min(95.0, own_top), (kld, own_floor, top, own_top)


def test_greedy_tokens_through_pyggml_server(model: Path, pyggml_server: str) -> None:
    exe = str(_tool("llama-completion"))
    args = [exe, "-m", str(model), "-p", "The capital of France is", "-n", "24", "--temp", "0", "-no-cnv",
            "-fa", "off", "-t", "2"]
    local = subprocess.run(args, capture_output=True, text=True, timeout=600)
    remote = subprocess.run([*args, "--rpc", pyggml_server, "-ngl", "99", "-dev", "RPC0"], capture_output=True,
                            text=True, timeout=600)
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr[-3000:]
    assert "Paris" in local.stdout and remote.stdout == local.stdout
