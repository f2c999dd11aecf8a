"""The llama graph: embeddings, per layer RMS norm -> attention (RoPE, GQA over a KV cache) -> SwiGLU FFN, output.
The FFN is a mixture of experts where the file has them (Mixtral): softmax gating, the top `n_expert_used` experts
per token through MUL_MAT_ID, their outputs summed with the renormalised gate weights, as llama.cpp does.

Optional weights are used where a file has them (attention biases as Qwen2 has, Llama 3.1's RoPE frequency
factors `rope_freqs.weight`, a separate output matrix); a file holding any tensor the builder does not use is
refused, since the graph would compute something other than the model.

One call of `build_graph` records the graph of one micro-batch; the session (session.py) keeps it and replays it
while the shape parameters (n_tokens, n_kv, n_outputs) do not change, only rewriting the input tensors.

Training (finetune.py) records `forward` instead: one sequence attending to itself, no KV cache (writing a cache is
SET_ROWS, which has no gradient), and every dense projection through `LlamaModel.adapters`, where a LoRA adapter
adds its low-rank term."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

import pyggml as gg
from pyggml import ops
from pyggml.errors import GGUFError
from pyggml.gguf import Weights
from pyggml.tensor import Tensor
from pyggml.types import GGMLType, row_size
from pyggml_llama.hparams import HParams

GRAPH_SIZE = 4096


class KVStore(Protocol):
    """What the graph builder needs of a KV cache: per layer K [n_embd_kv, n_ctx] and V, stored per position
    [n_embd_kv, n_ctx] for FLASH_ATTN_EXT or transposed [n_ctx, n_embd_kv] (`v_trans`) for the mul_mat attention,
    which then reads V's rows in place instead of copying the whole cache into that order every step (llama.cpp
    keeps the same two layouts)."""

    n_ctx: int
    v_trans: bool

    @property
    def k(self) -> Sequence[Tensor]: ...

    @property
    def v(self) -> Sequence[Tensor]: ...


@dataclass(frozen=True)
class GraphKey:
    n_tokens: int
    n_kv: int
    n_outputs: int


@dataclass
class BuiltGraph:
    key: GraphKey
    ctx: gg.Context
    graph: gg.Graph
    tokens: Tensor
    positions: Tensor
    kv_index: Tensor
    mask: Tensor
    out_ids: Tensor | None
    """Rows whose logits are computed (None when every row is)."""
    logits: Tensor
    v_index: Tensor | None = None
    """Where each value of the batch goes in a transposed V cache (None: V is stored per position)."""

    def set_positions(self, pos: npt.NDArray[np.int32], n_ctx: int) -> None:
        """Positions of the batch's tokens, which are also their cache cells."""
        self.positions.set(pos)
        cells = pos.astype(np.int64)
        self.kv_index.set(cells)
        if self.v_index is not None:
            n_embd_kv = self.v_index.ne[0] // len(pos)
            self.v_index.set((np.arange(n_embd_kv, dtype=np.int64)[None, :] * n_ctx + cells[:, None]).reshape(-1))


@dataclass
class LayerWeights:
    attn_norm: Tensor
    wq: Tensor
    wk: Tensor
    wv: Tensor
    wo: Tensor
    ffn_norm: Tensor
    w_gate: Tensor
    w_up: Tensor
    w_down: Tensor
    """Dense: [n_embd, n_ff] / [n_ff, n_embd]; mixture of experts: one more dimension, n_expert."""
    gate_inp: Tensor | None = None
    """MoE router [n_embd, n_expert] (None: a dense FFN)."""
    bq: Tensor | None = None
    bk: Tensor | None = None
    bv: Tensor | None = None
    bo: Tensor | None = None


_MATMUL_ONLY = re.compile(r"^(output|blk\.\d+\.(attn_(q|k|v|output)|ffn_(gate|up|down)))\.weight$")


def is_matmul_weight(name: str) -> bool:
    """Whether the graph reads weight `name` only as MUL_MAT's matrix (so a device may keep it in a layout of its
    own, `Session(repack=True)`): the attention and dense FFN projections, and an untied output matrix. Not the
    token embeddings (GET_ROWS; with a tied output also its matrix), norms, biases nor experts (MUL_MAT_ID)."""
    return _MATMUL_ONLY.match(name) is not None


def refuse_unused(weights: Weights, used: Collection[str], arch: str) -> None:
    """GGUFError naming the tensors of `weights` outside `used` (the first eight), where there are any: the `arch`
    graph builder would leave them out and so compute something other than the file's model."""
    unused = sorted(set(weights.tensors) - set(used))
    if unused:
        more = f" and {len(unused) - 8} more" if len(unused) > 8 else ""
        raise GGUFError(f"{weights.file.path}: the {arch} builder does not use the tensors "
                        f"{', '.join(unused[:8])}{more}; it would compute something other than this model")


class TakenWeights:
    """The tensors a graph builder takes from a file's weights by name; `names` those it took (for `refuse_unused`)."""

    def __init__(self, weights: Weights) -> None:
        self.weights = weights
        self.names: set[str] = set()

    def take(self, name: str) -> Tensor:
        """Tensor `name` (a GGUFError where the file lacks it)."""
        self.names.add(name)
        return self.weights[name]

    def maybe(self, name: str) -> Tensor | None:
        """Tensor `name`, or None where the file lacks it."""
        t = self.weights.get(name)
        if t is not None:
            self.names.add(name)
        return t

    def embd_and_output(self) -> tuple[Tensor, Tensor, Tensor]:
        """The token embeddings, the output norm and the output matrix: the token embeddings again where the file
        has no output.weight (tied embeddings)."""
        tok_embd = self.take("token_embd.weight")
        output_norm = self.take("output_norm.weight")
        out = self.maybe("output.weight")
        return tok_embd, output_norm, out if out is not None else tok_embd


class LlamaModel:
    def __init__(self, hp: HParams, weights: Weights) -> None:
        self.hp = hp
        self.weights = weights
        self._taken = TakenWeights(weights)
        self.tok_embd, self.output_norm, self.output = self._taken.embd_and_output()
        self.rope_freqs = self._taken.maybe("rope_freqs.weight")
        self.layers = [self._layer(i) for i in range(hp.n_layer)]
        self.adapters: dict[str, Callable[[Tensor], Tensor]] = {}
        """Weight name -> f(x), a term added to mul_mat(weight, x) before the bias (a LoRA adapter's scaled
        B A x, as llama.cpp's build_lora_mm adds it); dense projections only (q, k, v, output, gate, up, down)."""
        self._check_shapes()
        refuse_unused(weights, self._taken.names, hp.arch)

    def _layer(self, i: int) -> LayerWeights:
        p = f"blk.{i}."
        w = self._taken.take
        b = self._taken.maybe
        ffn = "_exps.weight" if self.hp.n_expert else ".weight"
        return LayerWeights(w(p + "attn_norm.weight"), w(p + "attn_q.weight"), w(p + "attn_k.weight"),
                            w(p + "attn_v.weight"), w(p + "attn_output.weight"), w(p + "ffn_norm.weight"),
                            w(p + "ffn_gate" + ffn), w(p + "ffn_up" + ffn), w(p + "ffn_down" + ffn),
                            w(p + "ffn_gate_inp.weight") if self.hp.n_expert else None,
                            b(p + "attn_q.bias"), b(p + "attn_k.bias"), b(p + "attn_v.bias"),
                            b(p + "attn_output.bias"))

    def _check_shapes(self) -> None:
        """Every weight has the shape the hyper-parameters say (a bias of another length could broadcast)."""
        hp = self.hp
        q, kv, e = hp.n_head * hp.head_dim, hp.n_embd_kv, (hp.n_expert,) if hp.n_expert else ()
        ffn = "_exps" if e else ""
        expect: list[tuple[str, Tensor | None, tuple[int, ...]]] = [
            ("token_embd.weight", self.tok_embd, (hp.n_embd, hp.n_vocab)),
            ("output.weight", self.output, (hp.n_embd, hp.n_vocab)),
            ("rope_freqs.weight", self.rope_freqs, (hp.rope_dims // 2,))]
        for il, lw in enumerate(self.layers):
            p = f"blk.{il}."
            expect += [(p + "attn_q.weight", lw.wq, (hp.n_embd, q)), (p + "attn_k.weight", lw.wk, (hp.n_embd, kv)),
                       (p + "attn_v.weight", lw.wv, (hp.n_embd, kv)), (p + "attn_output.weight", lw.wo, (q, hp.n_embd)),
                       (p + "attn_q.bias", lw.bq, (q,)), (p + "attn_k.bias", lw.bk, (kv,)),
                       (p + "attn_v.bias", lw.bv, (kv,)), (p + "attn_output.bias", lw.bo, (hp.n_embd,)),
                       (p + f"ffn_gate{ffn}.weight", lw.w_gate, (hp.n_embd, hp.n_ff, *e)),
                       (p + f"ffn_up{ffn}.weight", lw.w_up, (hp.n_embd, hp.n_ff, *e)),
                       (p + f"ffn_down{ffn}.weight", lw.w_down, (hp.n_ff, hp.n_embd, *e)),
                       (p + "ffn_gate_inp.weight", lw.gate_inp, (hp.n_embd, hp.n_expert))]
        for name, t, ne in expect:
            if t is not None and t.ne != (*ne, *(1,) * (4 - len(ne))):
                raise GGUFError(f"{self.weights.file.path}: tensor {name!r} has ne={list(t.ne)}, expected {list(ne)}")

    def build_graph(self, key: GraphKey, kv: KVStore, *, flash_attn: bool = True) -> BuiltGraph:
        hp = self.hp
        n, n_kv = key.n_tokens, key.n_kv
        if flash_attn == kv.v_trans:
            raise ValueError(f"flash_attn={flash_attn} needs a KV cache with v_trans={not flash_attn} (flash attention "
                             "reads V per position, the mul_mat attention reads it transposed)")
        ctx = gg.Context(no_alloc=True)
        with ctx:
            tokens = ctx.new_tensor(GGMLType.I32, n, name="inp_tokens").set_input()
            pos = ctx.new_tensor(GGMLType.I32, n, name="inp_pos").set_input()
            kv_index = ctx.new_tensor(GGMLType.I64, n, name="inp_kv_index").set_input()
            v_index = ctx.new_tensor(GGMLType.I64, hp.n_embd_kv * n, name="inp_v_index").set_input() \
                if kv.v_trans else None
            mask = ctx.new_tensor(GGMLType.F16 if flash_attn else GGMLType.F32, n_kv, n,
                                  name="inp_kq_mask").set_input()
            out_ids = None
            if key.n_outputs != n:
                out_ids = ctx.new_tensor(GGMLType.I32, key.n_outputs, name="inp_out_ids").set_input()
            logits = self._logits(tokens, _Inputs(pos, kv_index, v_index, mask), kv, n_kv, out_ids)
            graph = gg.Graph(GRAPH_SIZE).build_forward_expand(logits)
        return BuiltGraph(key, ctx, graph, tokens, pos, kv_index, mask, out_ids, logits, v_index)

    def forward(self, tokens: Tensor, pos: Tensor, mask: Tensor) -> Tensor:
        """The logits [n_vocab, n] of one sequence of n tokens attending only to itself (no KV cache): the
        differentiable graph training records. `pos` I32 [n], `mask` F32 [n, n] (0 or -inf, causal); recorded in
        the current context."""
        n = tokens.ne[0]
        if self.hp.n_expert:
            raise ValueError("forward: training through a mixture of experts (MUL_MAT_ID) is not supported")
        if pos.ne[0] != n or mask.ne[:2] != (n, n) or mask.type != GGMLType.F32:
            raise ValueError(f"forward: {n} tokens need positions [{n}] and an F32 mask [{n}, {n}], got "
                             f"pos ne={list(pos.ne)}, mask {mask.type} ne={list(mask.ne)}")
        return self._logits(tokens, _Inputs(pos, None, None, mask), None, n, None)

    def _logits(self, tokens: Tensor, inp: _Inputs, kv: KVStore | None, n_kv: int, out_ids: Tensor | None
                ) -> Tensor:
        hp = self.hp
        x = ops.get_rows(self.tok_embd, tokens).set_name("inp_embd")
        for il, lw in enumerate(self.layers):
            x = self._layer_graph(il, lw, x, inp, kv, tokens.ne[0], n_kv)
            if il == hp.n_layer - 1 and out_ids is not None:
                x = ops.get_rows(x, out_ids)
        x = ops.mul(ops.rms_norm(x, hp.norm_eps), self.output_norm).set_name("result_norm")
        return ops.mul_mat(self.output, x).set_name("result_output").set_output()

    def _linear(self, w: Tensor, x: Tensor, bias: Tensor | None = None) -> Tensor:
        y = ops.mul_mat(w, x)
        adapter = self.adapters.get(w.name)
        if adapter is not None:
            y = ops.add(y, adapter(x))
        return ops.add(y, bias) if bias is not None else y

    def _layer_graph(self, il: int, lw: LayerWeights, x: Tensor, inp: _Inputs, kv: KVStore | None, n: int,
                     n_kv: int) -> Tensor:
        hp = self.hp
        d, nh, nkv = hp.head_dim, hp.n_head, hp.n_head_kv
        h = ops.mul(ops.rms_norm(x, hp.norm_eps), lw.attn_norm).set_name(f"attn_norm-{il}")
        q = ops.reshape(self._linear(lw.wq, h, lw.bq), d, nh, n)
        k = ops.reshape(self._linear(lw.wk, h, lw.bk), d, nkv, n)
        v = self._linear(lw.wv, h, lw.bv)
        rope = dict(freq_factors=self.rope_freqs, n_ctx_orig=hp.n_ctx_train, freq_base=hp.rope_freq_base,
                    freq_scale=hp.rope_freq_scale)
        if hp.uses_rope(il):
            q = ops.rope(q, inp.pos, hp.rope_dims, hp.rope_type, **rope)  # type: ignore[arg-type]
            k = ops.rope(k, inp.pos, hp.rope_dims, hp.rope_type, **rope)  # type: ignore[arg-type]
        q, k = q.set_name(f"Qcur-{il}"), k.set_name(f"Kcur-{il}")
        scale = 1.0 / math.sqrt(d)
        if kv is None:  # no cache: the batch attends to itself, K [d, n, nkv] and V transposed [n, d, nkv]
            vt = ops.cont(ops.permute(ops.reshape(v, d, nkv, n), 1, 2, 0, 3))
            attn = self._attn_mul_mat(il, ops.permute(k, 0, 2, 1, 3), ops.permute(q, 0, 2, 1, 3), vt, inp.mask,
                                      scale)
            return self._out_and_ffn(il, lw, x, attn, n)
        # write this batch's K and V rows into the cache, then attend over the first n_kv cache rows
        assert inp.kv_index is not None
        kc, vc = kv.k[il], kv.v[il]
        k_store = ops.set_rows(kc, ops.reshape(k, d * nkv, n), inp.kv_index)
        k_all = ops.view(k_store, (d, n_kv, nkv), (kc.nb[1], row_size(kc.type, d)))
        qp = ops.permute(q, 0, 2, 1, 3)                                     # [d, n, nh]
        if inp.v_index is None:  # V per position, for FLASH_ATTN_EXT
            v_store = ops.set_rows(vc, v, inp.kv_index)
            v_all = ops.view(v_store, (d, n_kv, nkv), (vc.nb[1], row_size(vc.type, d)))
            attn = ops.flash_attn_ext(qp, k_all, v_all, inp.mask, scale)    # [d, nh, n]
            attn = ops.reshape(attn, d * nh, n)
        else:  # V transposed: each value lands in its channel's row, one-element rows scattered by v_index
            ts = vc.type.traits.type_size
            cells = ops.reshape(vc, 1, vc.nelements())
            v_store = ops.set_rows(cells, ops.reshape(v, 1, v.nelements()), inp.v_index)
            vt = ops.view(v_store, (n_kv, d, nkv), (kv.n_ctx * ts, d * kv.n_ctx * ts))  # [n_kv, d, nkv]
            attn = self._attn_mul_mat(il, k_all, qp, vt, inp.mask, scale)
        return self._out_and_ffn(il, lw, x, attn, n)

    def _attn_mul_mat(self, il: int, k_all: Tensor, qp: Tensor, vt: Tensor, mask: Tensor, scale: float) -> Tensor:
        """softmax(K^T q * scale + mask) V for K [d, n_kv, nkv], q [d, n, nh], V transposed [n_kv, d, nkv];
        returns [d * nh, n]."""
        d, n, nh = qp.ne[0], qp.ne[1], qp.ne[2]
        kq = ops.mul_mat(k_all, qp).set_name(f"kq-{il}")                    # [n_kv, n, nh]
        kq = ops.soft_max(kq, mask, scale).set_name(f"kq_soft_max-{il}")
        kqv = ops.mul_mat(vt, kq)                                            # [d, n, nh]
        return ops.cont(ops.permute(kqv, 0, 2, 1, 3), d * nh, n)

    def _out_and_ffn(self, il: int, lw: LayerWeights, x: Tensor, attn: Tensor, n: int) -> Tensor:
        """The attention output projection and residual, then the FFN block and its residual."""
        hp = self.hp
        x = ops.add(x, self._linear(lw.wo, attn, lw.bo).set_name(f"attn_out-{il}")).set_name(f"ffn_inp-{il}")
        h = ops.mul(ops.rms_norm(x, hp.norm_eps), lw.ffn_norm).set_name(f"ffn_norm-{il}")
        if lw.gate_inp is not None:
            return ops.add(x, self._moe(il, lw, lw.gate_inp, h, n)).set_name(f"l_out-{il}")
        gate = self._linear(lw.w_gate, h).set_name(f"ffn_gate-{il}")
        up = self._linear(lw.w_up, h).set_name(f"ffn_up-{il}")
        ff = ops.swiglu(gate, up).set_name(f"ffn_swiglu-{il}")
        return ops.add(x, self._linear(lw.w_down, ff).set_name(f"ffn_out-{il}")).set_name(f"l_out-{il}")

    def _moe(self, il: int, lw: LayerWeights, router: Tensor, h: Tensor, n: int) -> Tensor:
        """Mixture of experts: each token through its n_expert_used best experts, weighted by the renormalised
        softmax of the router's logits."""
        n_exp, k = self.hp.n_expert, self.hp.n_expert_used
        probs = ops.soft_max(ops.mul_mat(router, h)).set_name(f"ffn_moe_probs-{il}")     # [n_exp, n]
        chosen = ops.top_k(probs, k).set_name(f"ffn_moe_topk-{il}")                      # [k, n] i32
        weights = ops.reshape(ops.get_rows(ops.reshape(probs, 1, n_exp, n), chosen), k, n)
        weights = ops.div(weights, ops.sum_rows(weights)).set_name(f"ffn_moe_weights-{il}")
        x = ops.reshape(h, h.ne[0], 1, n)
        gate = ops.mul_mat_id(lw.w_gate, x, chosen)                                       # [n_ff, k, n]
        up = ops.mul_mat_id(lw.w_up, x, chosen)
        down = ops.mul_mat_id(lw.w_down, ops.swiglu(gate, up), chosen)                   # [n_embd, k, n]
        down = ops.mul(down, ops.reshape(weights, 1, k, n))
        out = ops.view(down, (down.ne[0], n), (down.nb[2],), 0)
        for e in range(1, k):
            out = ops.add(out, ops.view(down, (down.ne[0], n), (down.nb[2],), e * down.nb[1]))
        return out.set_name(f"ffn_moe_out-{il}")


@dataclass(frozen=True)
class _Inputs:
    pos: Tensor
    kv_index: Tensor | None
    """None: no KV cache (`forward`)."""
    v_index: Tensor | None
    mask: Tensor
