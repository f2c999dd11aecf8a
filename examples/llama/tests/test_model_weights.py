"""The llama builder on small GGUF files written here: optional weights (attention biases as Qwen2 has, Llama 3.1's
RoPE frequency factors, a separate output matrix) and a mixture-of-experts FFN (Mixtral) change the logits exactly
as a numpy forward pass says, and a file with tensors the builder does not use or an unsupported RoPE scaling is
refused by name."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pyggml.errors import GGUFError, PyGGMLError
from pyggml.types import GGMLType
from pyggml_llama.session import Session

gguf = pytest.importorskip("gguf")

N_EMBD, N_HEAD, N_HEAD_KV, N_FF, N_VOCAB, N_LAYER = 32, 4, 2, 48, 64, 2
HEAD = N_EMBD // N_HEAD
N_EXPERT, N_EXPERT_USED = 4, 2
EPS, BASE = 1e-5, 10000.0
TOKENS = [chr(ord("A") + i) if i < 26 else chr(ord("a") + i - 26) if i < 52 else chr(ord("0") + i - 52)
          for i in range(N_VOCAB - 1)] + ["AB"]


def _weights(rng: np.random.Generator, *, biases: bool, rope_freqs: bool, output: bool, moe: bool = False,
             n_layer: int = N_LAYER) -> dict[str, np.ndarray]:
    def m(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def v(n: int, scale: float = 0.5) -> np.ndarray:
        return (1.0 + scale * rng.standard_normal(n)).astype(np.float32)

    kv = N_HEAD_KV * HEAD
    w = {"token_embd.weight": m(N_VOCAB, N_EMBD), "output_norm.weight": v(N_EMBD)}
    if output:
        w["output.weight"] = m(N_VOCAB, N_EMBD)
    if rope_freqs:
        w["rope_freqs.weight"] = np.linspace(1.0, 8.0, HEAD // 2).astype(np.float32)
    for il in range(n_layer):
        p = f"blk.{il}."
        w |= {p + "attn_norm.weight": v(N_EMBD), p + "attn_q.weight": m(N_EMBD, N_EMBD),
              p + "attn_k.weight": m(kv, N_EMBD), p + "attn_v.weight": m(kv, N_EMBD),
              p + "attn_output.weight": m(N_EMBD, N_EMBD), p + "ffn_norm.weight": v(N_EMBD)}
        if moe:  # experts stacked on the outer dimension, the router [n_embd, n_expert]
            w |= {p + "ffn_gate_inp.weight": m(N_EXPERT, N_EMBD) * 4,
                  p + "ffn_gate_exps.weight": np.stack([m(N_FF, N_EMBD) for _ in range(N_EXPERT)]),
                  p + "ffn_up_exps.weight": np.stack([m(N_FF, N_EMBD) for _ in range(N_EXPERT)]),
                  p + "ffn_down_exps.weight": np.stack([m(N_EMBD, N_FF) for _ in range(N_EXPERT)])}
        else:
            w |= {p + "ffn_gate.weight": m(N_FF, N_EMBD), p + "ffn_up.weight": m(N_FF, N_EMBD),
                  p + "ffn_down.weight": m(N_EMBD, N_FF)}
        if biases:
            w |= {p + "attn_q.bias": v(N_EMBD, 1.0) - 1, p + "attn_k.bias": v(kv, 1.0) - 1,
                  p + "attn_v.bias": v(kv, 1.0) - 1, p + "attn_output.bias": v(N_EMBD, 1.0) - 1}
    return w


def _n_layer(weights: dict[str, np.ndarray]) -> int:
    return sum(name.endswith("attn_norm.weight") for name in weights)


def _write(path: Path, weights: dict[str, np.ndarray], arch: str = "llama", **extra: object) -> Path:
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(_n_layer(weights))
    w.add_context_length(64)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_freq_base(BASE)
    for key, value in extra.items():
        if isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        else:
            w.add_float32(key, float(value))  # type: ignore[arg-type]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(TOKENS)
    w.add_token_types([1] * N_VOCAB)
    w.add_token_merges(["A B"])
    for name, arr in weights.items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _rms(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * g


def _rope(x: np.ndarray, freqs: np.ndarray | None) -> np.ndarray:
    """ggml's normal RoPE: adjacent pairs rotate by pos * base^(-2i/d), divided by the frequency factor i."""
    n, _, d = x.shape
    theta = BASE ** (-np.arange(0, d, 2) / d)
    if freqs is not None:
        theta = theta / freqs
    ang = np.arange(n)[:, None, None] * theta[None, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * np.cos(ang) - b * np.sin(ang)
    out[..., 1::2] = a * np.sin(ang) + b * np.cos(ang)
    return out


def _ffn(w: dict[str, np.ndarray], p: str, exps: str, h: np.ndarray) -> np.ndarray:
    g, u = h @ w[p + "ffn_gate" + exps].T, h @ w[p + "ffn_up" + exps].T
    return (g / (1 + np.exp(-g)) * u) @ w[p + "ffn_down" + exps].T


def _moe(w: dict[str, np.ndarray], p: str, h: np.ndarray) -> np.ndarray:
    """Each token through its N_EXPERT_USED most probable experts, weighted by their renormalised probabilities."""
    logits = h @ w[p + "ffn_gate_inp.weight"].T
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    out = np.zeros_like(h)
    for t in range(len(h)):
        best = np.argsort(-probs[t])[:N_EXPERT_USED]
        share = probs[t, best] / probs[t, best].sum()
        for e, s in zip(best, share, strict=True):
            names = [f"{p}ffn_{k}_exps.weight" for k in ("gate", "up", "down")]
            expert = {name: w[name][e] for name in names}
            out[t] += s * _ffn(expert, p, "_exps.weight", h[t : t + 1])[0]
    return out


def _forward(w: dict[str, np.ndarray], tokens: list[int], no_rope_every: int = 0) -> np.ndarray:
    """The llama forward pass in float64, from the GGUF's arrays (rows are output features)."""
    w = {k: a.astype(np.float64) for k, a in w.items()}
    n = len(tokens)
    x = w["token_embd.weight"][tokens]
    zero = np.zeros(1)
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for il in range(_n_layer(w)):
        p = f"blk.{il}."
        h = _rms(x, w[p + "attn_norm.weight"])
        q = (h @ w[p + "attn_q.weight"].T + w.get(p + "attn_q.bias", zero)).reshape(n, N_HEAD, HEAD)
        k = (h @ w[p + "attn_k.weight"].T + w.get(p + "attn_k.bias", zero)).reshape(n, N_HEAD_KV, HEAD)
        v = (h @ w[p + "attn_v.weight"].T + w.get(p + "attn_v.bias", zero)).reshape(n, N_HEAD_KV, HEAD)
        if not no_rope_every or (il + 1) % no_rope_every:
            q, k = _rope(q, w.get("rope_freqs.weight")), _rope(k, w.get("rope_freqs.weight"))
        k, v = np.repeat(k, N_HEAD // N_HEAD_KV, axis=1), np.repeat(v, N_HEAD // N_HEAD_KV, axis=1)
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(HEAD) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        attn = np.einsum("hqk,khd->qhd", s, v).reshape(n, N_EMBD)
        x = x + attn @ w[p + "attn_output.weight"].T + w.get(p + "attn_output.bias", zero)
        h = _rms(x, w[p + "ffn_norm.weight"])
        x = x + (_moe(w, p, h) if p + "ffn_gate_inp.weight" in w else _ffn(w, p, ".weight", h))
    out = w.get("output.weight", w["token_embd.weight"])
    return _rms(x, w["output_norm.weight"]) @ out.T


@pytest.mark.parametrize("biases,rope_freqs,output", [(False, False, False), (True, False, True),
                                                      (False, True, False), (True, True, True)])
def test_logits_follow_the_optional_weights(tmp_path: Path, biases: bool, rope_freqs: bool, output: bool) -> None:
    weights = _weights(np.random.default_rng(7), biases=biases, rope_freqs=rope_freqs, output=output)
    path = _write(tmp_path / "tiny.gguf", weights)
    tokens = [3, 17, 40, 5, 63, 22, 9]
    s = Session(path, ["numpy"], n_ctx=32, kv_type=GGMLType.F32)
    got = s.eval(tokens, all_logits=True)
    want = _forward(weights, tokens)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_tensor_the_builder_does_not_use_is_refused(tmp_path: Path) -> None:
    weights = _weights(np.random.default_rng(0), biases=False, rope_freqs=False, output=False)
    weights["blk.1.attn_q_norm.weight"] = np.ones(HEAD, np.float32)
    path = _write(tmp_path / "extra.gguf", weights)
    with pytest.raises(GGUFError, match=r"does not use the tensors blk\.1\.attn_q_norm\.weight"):
        Session(path, ["numpy"], n_ctx=32)


def test_mixture_of_experts_logits(tmp_path: Path) -> None:
    weights = _weights(np.random.default_rng(3), biases=False, rope_freqs=False, output=True, moe=True)
    path = _write(tmp_path / "moe.gguf", weights, **{"llama.expert_count": N_EXPERT,
                                                     "llama.expert_used_count": N_EXPERT_USED})
    tokens = [3, 17, 40, 5, 63, 22, 9, 11, 30]
    s = Session(path, ["numpy"], n_ctx=32, kv_type=GGMLType.F32)
    np.testing.assert_allclose(s.eval(tokens, all_logits=True), _forward(weights, tokens), rtol=1e-4, atol=1e-4)
    runs = [(["cpu"], "layer"), (["OpenCL0"], "layer"), (["Vulkan0"], "layer"), (["cpu", "cpu"], "tensor")]
    for names, mode in runs:  # the same graph on the devices this machine has, and split over two by tensors
        try:
            dev = Session(path, names, n_ctx=32, kv_type=GGMLType.F32, split_mode=mode)
        except PyGGMLError:
            continue
        np.testing.assert_allclose(dev.eval(tokens, all_logits=True), _forward(weights, tokens), rtol=1e-4, atol=1e-4)


def test_smollm3_leaves_every_fourth_layer_without_rope(tmp_path: Path) -> None:
    weights = _weights(np.random.default_rng(5), biases=False, rope_freqs=False, output=False, n_layer=4)
    path = _write(tmp_path / "smollm3.gguf", weights, arch="smollm3")
    tokens = [3, 17, 40, 5, 63, 22, 9]
    got = Session(path, ["numpy"], n_ctx=32, kv_type=GGMLType.F32).eval(tokens, all_logits=True)
    np.testing.assert_allclose(got, _forward(weights, tokens, no_rope_every=4), rtol=1e-4, atol=1e-4)
    assert not np.allclose(got, _forward(weights, tokens), rtol=1e-2, atol=1e-2)


def test_a_weight_of_another_shape_is_refused_even_where_it_would_broadcast(tmp_path: Path) -> None:
    weights = _weights(np.random.default_rng(0), biases=True, rope_freqs=False, output=False)
    weights["blk.1.attn_v.bias"] = np.ones(1, np.float32)
    with pytest.raises(GGUFError, match=r"tensor 'blk\.1\.attn_v\.bias' has ne=\[1, 1, 1, 1\], expected \[16\]"):
        Session(_write(tmp_path / "bias.gguf", weights), ["numpy"], n_ctx=32)


@pytest.mark.parametrize("extra,match", [({"llama.expert_count": 8, "llama.expert_used_count": 9}, "does not fit"),
                                         ({"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": 4.0},
                                          "RoPE scaling 'yarn'")])
def test_unsupported_model_kinds_are_refused(tmp_path: Path, extra: dict[str, object], match: str) -> None:
    weights = _weights(np.random.default_rng(0), biases=False, rope_freqs=False, output=False)
    with pytest.raises(GGUFError, match=match):
        Session(_write(tmp_path / "kind.gguf", weights, **extra), ["numpy"], n_ctx=32)


TRUNCATED_EVAL = textwrap.dedent("""
    import os, sys
    from pyggml.errors import GGUFError
    from pyggml.types import GGMLType
    from pyggml_llama.session import Session

    path, backend = sys.argv[1], sys.argv[2]
    # repack=False: repacked, this tiny model's other weights are all under a MiB, copied rather than mapped
    s = Session(path, [backend], n_ctx=32, kv_type=GGMLType.F32, repack=False)
    s.eval([3, 17, 40])
    os.truncate(path, s.gguf.data_start + 64)  # as another process rewriting the file would
    try:
        s.eval([5])
    except GGUFError as e:
        print("refused:", e)
""")


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_eval_after_the_file_was_truncated_raises(tmp_path: Path, backend: str) -> None:
    """Issue 33: a GGUF file truncated after Session mapped it killed the next eval with SIGBUS (a mapped page past
    the file's end). The mapped weights' buffer checks the file's size before each compute and read (one fstat) and
    raises GGUFError naming the file. In a subprocess: a regression kills it."""
    path = _write(tmp_path / "tiny.gguf", _weights(np.random.default_rng(1), biases=False, rope_freqs=False,
                                                   output=False))
    r = subprocess.run([sys.executable, "-c", TRUNCATED_EVAL, str(path), backend], capture_output=True, text=True,
                       timeout=300)
    if r.returncode and "no device named" in r.stderr:
        pytest.skip(f"no {backend} device here")
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    assert f"refused: {path}: the file is now " in r.stdout and "truncated or rewrote it" in r.stdout, r.stdout
