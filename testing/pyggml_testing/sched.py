"""Helpers of the scheduler tests: weights and inputs, a small llama model with per-layer weight placement, and its
logits on one numpy backend (the reference of the mixed runs)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import BufferType, BufferUsage
from pyggml.backend.sched import Scheduler
from pyggml.tensor import Tensor
from pyggml_testing.devices import numpy_backend


def weight(buft: BufferType, *ne: int, name: str = "w", usage: BufferUsage = BufferUsage.WEIGHTS) -> Tensor:
    """An F32 tensor of ones in a buffer of its own (of `buft`, marked `usage`)."""
    ctx = gg.Context(no_alloc=True)
    t = ctx.new_tensor(gg.F32, *ne, name=name)
    alloc_ctx_tensors(ctx, buft, usage)
    t.set(np.ones(t.nelements(), dtype=np.float32))
    return t


def inp(*ne: int, name: str = "x") -> Tensor:
    """An unallocated F32 graph input."""
    return gg.Context(no_alloc=True).new_tensor(gg.F32, *ne, name=name).set_input()


@dataclass(frozen=True)
class Shape:
    n_layer: int = 2
    n_embd: int = 32
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 8
    n_ff: int = 48
    n_vocab: int = 40
    n_ctx: int = 16


LAYER_WEIGHTS = ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w_gate", "w_up", "w_down", "k_cache")


@dataclass
class Model:
    """Weights as numpy arrays (fixed seed) and as tensors placed per group: 'embd', 'out', or a layer index."""

    shape: Shape
    values: dict[str, np.ndarray[Any, Any]]
    tensors: dict[str, Tensor] = field(default_factory=dict)


def _weight_shapes(s: Shape) -> dict[str, tuple[int, ...]]:
    q, kv = s.head_dim * s.n_head, s.head_dim * s.n_head_kv
    shapes: dict[str, tuple[int, ...]] = {"tok_embd": (s.n_embd, s.n_vocab), "out_norm": (s.n_embd,),
                                          "output": (s.n_embd, s.n_vocab)}
    for il in range(s.n_layer):
        for name, ne in (("attn_norm", (s.n_embd,)), ("wq", (s.n_embd, q)), ("wk", (s.n_embd, kv)),
                         ("wv", (s.n_embd, kv)), ("wo", (q, s.n_embd)), ("ffn_norm", (s.n_embd,)),
                         ("w_gate", (s.n_embd, s.n_ff)), ("w_up", (s.n_embd, s.n_ff)),
                         ("w_down", (s.n_ff, s.n_embd)), ("k_cache", (kv, s.n_ctx))):
            shapes[f"{il}.{name}"] = ne
    return shapes


def make_model(place: dict[str, BufferType], default: BufferType, shape: Shape = Shape(), seed: int = 1) -> Model:
    """Weights of `shape`; group g ('embd', 'out', '0', '1', ...) goes to place.get(g, default)."""
    rng = np.random.default_rng(seed)
    shapes = _weight_shapes(shape)
    values = {k: (rng.standard_normal(ne[::-1]) * (0.3 if len(ne) > 1 else 1.0) + (1.0 if len(ne) == 1 else 0.0))
              .astype(np.float32) for k, ne in shapes.items()}
    for k in values:
        if k.endswith("k_cache"):
            values[k][:] = 0
    m = Model(shape, values)
    groups: dict[int, tuple[gg.Context, BufferType]] = {}
    for k, ne in shapes.items():
        g = "embd" if k == "tok_embd" else "out" if k in ("out_norm", "output") else k.split(".")[0]
        buft = place.get(g, default)
        ctx = groups.setdefault(id(buft), (gg.Context(no_alloc=True), buft))[0]
        m.tensors[k] = ctx.new_tensor(gg.F32, *ne, name=k)
    for ctx, buft in groups.values():
        alloc_ctx_tensors(ctx, buft)
    for k, t in m.tensors.items():
        t.set(values[k])
    return m


@dataclass
class Run:
    graph: gg.Graph
    tokens: Tensor
    pos: Tensor
    mask: Tensor
    logits: Tensor


def build_graph(m: Model, n_tokens: int = 5, *, with_cache: bool = True) -> Run:
    """A llama decoder over all layers: embeddings, rms_norm, q/k/v, NeoX rope, GQA attention with a causal mask,
    output projection, SwiGLU FFN, residuals, final norm and logits; K is also written into the layer's cache."""
    s = m.shape
    w = m.tensors
    n, d, nh, nkv = n_tokens, s.head_dim, s.n_head, s.n_head_kv
    ctx = gg.Context(no_alloc=True)
    tokens = ctx.new_tensor(gg.I32, n, name="inp_tokens").set_input()
    pos = ctx.new_tensor(gg.I32, n, name="inp_pos").set_input()
    mask = ctx.new_tensor(gg.F32, n, n, name="inp_mask").set_input()
    graph = gg.Graph(1024)
    x = ops.get_rows(w["tok_embd"], tokens).set_name("inp_embd")
    for il in range(s.n_layer):
        def lw(name: str, il: int = il) -> Tensor:
            return w[f"{il}.{name}"]

        h = ops.mul(ops.rms_norm(x, 1e-5), lw("attn_norm")).set_name(f"attn_norm-{il}")
        q = ops.rope(ops.reshape(ops.mul_mat(lw("wq"), h), d, nh, n), pos, d, ops.ROPE_TYPE_NEOX)
        k = ops.rope(ops.reshape(ops.mul_mat(lw("wk"), h), d, nkv, n), pos, d, ops.ROPE_TYPE_NEOX)
        v = ops.reshape(ops.mul_mat(lw("wv"), h), d, nkv, n)
        if with_cache:
            kc = lw("k_cache")
            graph.build_forward_expand(ops.cpy(k, ops.view(kc, (d * nkv * n,))).set_name(f"k_store-{il}"))
        kq = ops.mul_mat(ops.permute(k, 0, 2, 1, 3), ops.permute(q, 0, 2, 1, 3))           # [n, n, nh]
        kq = ops.soft_max(kq, mask, 1.0 / math.sqrt(d)).set_name(f"kq_soft_max-{il}")
        v_t = ops.cont(ops.permute(v, 1, 2, 0, 3))                                         # [n, d, nkv]
        kqv = ops.mul_mat(v_t, kq)                                                         # [d, n, nh]
        attn = ops.cont(ops.permute(kqv, 0, 2, 1, 3), d * nh, n)
        x = ops.add(x, ops.mul_mat(lw("wo"), attn)).set_name(f"ffn_inp-{il}")
        h = ops.mul(ops.rms_norm(x, 1e-5), lw("ffn_norm")).set_name(f"ffn_norm-{il}")
        ff = ops.swiglu(ops.mul_mat(lw("w_gate"), h), ops.mul_mat(lw("w_up"), h))
        x = ops.add(x, ops.mul_mat(lw("w_down"), ff)).set_name(f"l_out-{il}")
    x = ops.mul(ops.rms_norm(x, 1e-5), w["out_norm"]).set_name("result_norm")
    logits = ops.mul_mat(w["output"], x).set_name("result_output").set_output()
    graph.build_forward_expand(logits)
    return Run(graph, tokens, pos, mask, logits)


def set_inputs(r: Run, seed: int = 0, n_vocab: int = 40) -> None:
    rng = np.random.default_rng(seed)
    n = r.tokens.ne[0]
    r.tokens.set(rng.integers(0, n_vocab, n).astype(np.int32))
    r.pos.set(np.arange(n, dtype=np.int32) + int(rng.integers(0, 4)))
    r.mask.set(np.triu(np.full((n, n), -np.inf, dtype=np.float32), 1))


def run_single(seed: int = 0, n_tokens: int = 5, shape: Shape = Shape()) -> np.ndarray[Any, Any]:
    """Logits of the model on one numpy backend alone: the reference of the mixed runs."""
    cpu = numpy_backend()
    m = make_model({}, cpu.device.buffer_type(), shape)
    r = build_graph(m, n_tokens)
    s = Scheduler([cpu])
    s.alloc_graph(r.graph)
    set_inputs(r, seed, shape.n_vocab)
    s.graph_compute(r.graph)
    assert s.n_splits == 1 and s.n_split_inputs == 0
    return r.logits.numpy()
