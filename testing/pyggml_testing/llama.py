"""A tiny random llama (two layers, Q8_0 weights) run through the scheduler step by step, for the tests of the
llama example's tensor split on fake devices and on OpenCL devices; and the greedy prompts whose tokens a split
run must reproduce. Imports the llama example (pyggml-llama)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import numpy.typing as npt

import pyggml as gg
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import Backend, BufferType, BufferUsage
from pyggml.backend.sched import Scheduler
from pyggml.gguf import Weights
from pyggml.types import GGMLType
from pyggml_llama import model as llama
from pyggml_llama.hparams import HParams

TINY = HParams(arch="llama", n_layer=2, n_embd=96, n_head=6, n_head_kv=3, n_ff=128, n_vocab=50, n_ctx_train=64,
               head_dim=16, rope_dims=16, rope_type=0, rope_freq_base=10000.0, rope_freq_scale=1.0, norm_eps=1e-5)
Q = GGMLType.Q8_0


def tiny_values(hp: HParams, seed: int = 0) -> dict[str, tuple[GGMLType, tuple[int, ...], npt.NDArray[np.float32]]]:
    """name -> (type, ne, values) of every weight of a random llama of `hp` (norms near 1, the rest N(0, 0.3))."""
    rng = np.random.default_rng(seed)
    shapes = {"token_embd.weight": (Q, (hp.n_embd, hp.n_vocab)), "output_norm.weight": (GGMLType.F32, (hp.n_embd,))}
    for il in range(hp.n_layer):
        p = f"blk.{il}."
        shapes |= {
            p + "attn_norm.weight": (GGMLType.F32, (hp.n_embd,)),
            p + "attn_q.weight": (Q, (hp.n_embd, hp.n_head * hp.head_dim)),
            p + "attn_k.weight": (Q, (hp.n_embd, hp.n_embd_kv)),
            p + "attn_v.weight": (Q, (hp.n_embd, hp.n_embd_kv)),
            p + "attn_output.weight": (Q, (hp.n_head * hp.head_dim, hp.n_embd)),
            p + "ffn_norm.weight": (GGMLType.F32, (hp.n_embd,)),
            p + "ffn_gate.weight": (Q, (hp.n_embd, hp.n_ff)),
            p + "ffn_up.weight": (Q, (hp.n_embd, hp.n_ff)),
            p + "ffn_down.weight": (Q, (hp.n_ff, hp.n_embd)),
        }
    out = {}
    for name, (t, ne) in shapes.items():
        scale = 1.0 if "norm" in name else 0.3
        v = rng.standard_normal(tuple(reversed(ne))) * scale + (1.0 if "norm" in name else 0.0)
        out[name] = (t, ne, v.astype(np.float32))
    return out


class TinyKV:
    """A KV cache of F16 tensors named as the llama table names them (cache_k_lN, cache_v_lN), zeroed."""

    def __init__(self, hp: HParams, n_ctx: int, buft: BufferType, v_trans: bool) -> None:
        ctx = gg.Context(no_alloc=True)
        self.n_ctx = n_ctx
        self.v_trans = v_trans
        v_ne = (n_ctx, hp.n_embd_kv) if v_trans else (hp.n_embd_kv, n_ctx)
        self.k = [ctx.new_tensor(GGMLType.F16, hp.n_embd_kv, n_ctx, name=f"cache_k_l{i}") for i in range(hp.n_layer)]
        self.v = [ctx.new_tensor(GGMLType.F16, *v_ne, name=f"cache_v_l{i}") for i in range(hp.n_layer)]
        buf = alloc_ctx_tensors(ctx, buft)
        assert buf is not None
        buf.usage = BufferUsage.ANY
        buf.clear(0)


def run_tiny(backends: list[Backend], buft: BufferType, steps: list[list[int]], flash_attn: bool = True,
             hp: HParams = TINY) -> list[npt.NDArray[np.float32]]:
    """The logits of every step ([n_tokens, n_vocab] each) of the tiny llama on `backends`, weights in `buft`."""
    ctx = gg.Context(no_alloc=True)
    vals = tiny_values(hp)
    tensors = {name: ctx.new_tensor(t, *ne, name=name) for name, (t, ne, _) in vals.items()}
    buf = alloc_ctx_tensors(ctx, buft)
    assert buf is not None
    buf.usage = BufferUsage.WEIGHTS
    for name, (_, _, v) in vals.items():
        tensors[name].set(v)
    model = llama.LlamaModel(hp, Weights(SimpleNamespace(path="<tiny>"), ctx, tensors))  # type: ignore[arg-type]
    n_ctx = 32
    kv = TinyKV(hp, n_ctx, buft, v_trans=not flash_attn)
    sched = Scheduler(backends, graph_size=4096)
    out, n_past = [], 0
    for toks in steps:
        n = len(toks)
        g = model.build_graph(llama.GraphKey(n, n_ctx, n), kv, flash_attn=flash_attn)
        sched.reset()
        sched.alloc_graph(g.graph)
        pos = np.arange(n_past, n_past + n, dtype=np.int32)
        g.tokens.set(np.asarray(toks, dtype=np.int32))
        g.set_positions(pos, n_ctx)
        cols = np.arange(n_ctx)[None, :]
        g.mask.set(np.where(cols <= pos[:, None], 0.0, -np.inf).astype(np.float32))
        sched.graph_compute(g.graph)
        out.append(g.logits.numpy().reshape(n, hp.n_vocab))
        n_past += n
    return out


STEPS = [[3, 14, 15, 9], [26], [5]]
"""Token ids of a prompt and two decode steps."""


PROMPT = "The capital of France is"
GREEDY = [(PROMPT, 5), ("1, 2, 3, 4, 5,", 12)]
"""Prompts and token counts whose greedy choices lead by at least 0.8 logits on one device: the cpu plugin's
quantised activations make tensor-split logits differ from one device's at NMSE ~1e-3 (the summation order of the
partial sums changes some roundings), so a near tie (France, token 6: 0.006) may go either way."""


def write_llama_gguf(path: Path, hp: HParams, values: Mapping[str, npt.NDArray[np.float32]],
                     wtype: GGMLType = Q) -> Path:
    """A llama GGUF of `hp` from weight values (name -> array in numpy order): the norms F32, the matrices in
    `wtype` (Q8_0 or F32), file type set; a letters-only byte-level BPE vocabulary of hp.n_vocab tokens."""
    import gguf

    qtype = gguf.GGMLQuantizationType(wtype.value)
    tokens = [chr(ord("A") + i) for i in range(26)] + [chr(ord("a") + i) for i in range(hp.n_vocab - 27)] + ["AB"]
    w = gguf.GGUFWriter(str(path), hp.arch)
    w.add_block_count(hp.n_layer)
    w.add_context_length(hp.n_ctx_train)
    w.add_embedding_length(hp.n_embd)
    w.add_feed_forward_length(hp.n_ff)
    w.add_head_count(hp.n_head)
    w.add_head_count_kv(hp.n_head_kv)
    w.add_layer_norm_rms_eps(hp.norm_eps)
    w.add_rope_freq_base(hp.rope_freq_base)
    w.add_file_type(FILE_TYPES[wtype])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([1] * hp.n_vocab)
    w.add_token_merges(["A B"])
    for name, v in values.items():
        if "norm" in name or wtype == GGMLType.F32:
            w.add_tensor(name, v)
        else:
            w.add_tensor(name, gguf.quants.quantize(v, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


FILE_TYPES = {GGMLType.F32: 0, GGMLType.Q8_0: 7}
"""general.file_type (llama_ftype) of a file whose matrices are all of one type."""


def tiny_llama_gguf(path: Path, hp: HParams = TINY) -> Path:
    """The tiny llama (tiny_values, Q8_0) as a GGUF file that a pyggml-llama Session loads."""
    return write_llama_gguf(path, hp, {name: v for name, (_, _, v) in tiny_values(hp).items()})
