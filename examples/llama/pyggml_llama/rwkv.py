"""RWKV v6 ("Finch", llama.cpp's `rwkv6`) and RWKV v7 ("Goose", `rwkv7`) GGUF models on pyggml, with the recurrent
state of recurrent.py: per layer the token-shift state (the previous token's normalised input of the time mix and of
the channel mix, [n_embd, 2]) and the WKV state (per head an S x S matrix, S = wkv.head_size).

Per layer, as llama.cpp's graphs: LayerNorm -> time mix -> residual -> LayerNorm -> channel mix -> residual; the
embeddings go through LayerNorm first (token_embd_norm), the output through output_norm. Both time mixes start
from token-shift lerps (x + (x_prev - x) * mix, fused weights for all the mixes), end in a GroupNorm per head
(eps 64e-5) and the output matrix.
- v6: the mixes' amounts are data-dependent (a low-rank tanh projection, time_mix_w1 / w2, plus the lerp
  weights); receptance, key, value, a SiLU gate, a decay w = exp(-exp(decay + w2 tanh(w1 xw))), RWKV_WKV6 with
  time_first u. Channel mix: sigmoid(receptance) * value(relu(key)^2). The residual stream is halved every
  `rescale_every_n_layers` layers.
- v7: fixed mixes; a decay w = exp(-0.606531 sigmoid(w0 + w2 tanh(w1 xw))), an in-context learning rate a =
  sigmoid(a0 + a2 a1 xa), the first layer's value mixed into later layers' (v0 / v1 / v2), a normalised key kk,
  RWKV_WKV7 with (-kk, kk a), a bonus term v (r . k r_k) per head, a sigmoid-LoRA gate (g1 / g2). Channel mix:
  value(relu(key)^2).

Only the fused lerp layout (`time_mix_lerp_fused`, what llama.cpp's converter writes) is built; files with the
older separate lerp weights, the Qwen2 / ARWKV hybrids and any file with tensors the builder does not use are
refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyggml as gg
from pyggml import ops
from pyggml.backend.protocol import BufferType
from pyggml.errors import GGUFError
from pyggml.gguf import GGUFFile, Weights
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_llama.model import GRAPH_SIZE, refuse_unused
from pyggml_llama.recurrent import RecurrentArch, RecurrentGraph, RecurrentHParams, RecurrentSession, RecurrentState

F32_SIZE = 4
GROUP_NORM_EPS = 64e-5
"""llama.cpp's GroupNorm epsilon after WKV6 (the HF model's head_size_divisor**2 * 1e-5 with divisor 8)."""
N_MIX = 5
"""v6's data-dependent lerps, in the order of time_mix_w1's blocks: w, k, v, r, g."""
N_MIX7 = 6
"""v7's lerps, in the order of time_mix_lerp_fused's blocks: r, w, k, v, a, g."""
W7_SCALE = -0.606531
"""v7's decay scale, -exp(-0.5) as llama.cpp writes it: w = exp(W7_SCALE * sigmoid(...))."""


@dataclass(frozen=True)
class RwkvHParams(RecurrentHParams):
    n_ff: int
    head_size: int
    time_mix_extra_dim: int = 0
    """v6: rank of the mixes' projection."""
    time_decay_extra_dim: int = 0
    """v6: rank of the decay's projection."""
    rescale_every_n_layers: int = 0
    """v6: halve the residual stream after every n-th layer (0: never)."""
    lora: tuple[int, int, int, int] = (0, 0, 0, 0)
    """v7: ranks of the decay, in-context learning rate, value residual mix and gate projections."""

    @property
    def n_head(self) -> int:
        return self.n_embd // self.head_size

    @classmethod
    def from_gguf(cls, gf: GGUFFile) -> RwkvHParams:
        arch = gf.architecture
        if arch not in ("rwkv6", "rwkv7"):
            raise GGUFError(f"{gf.path}: architecture {arch!r} is not RWKV ('rwkv6', 'rwkv7')")

        def key(name: str) -> int:
            return int(gf.require(f"{arch}.{name}", int))

        shifts = int(gf.get(f"{arch}.token_shift_count", 2))
        if shifts != 2:
            raise GGUFError(f"{gf.path}: {arch}.token_shift_count is {shifts}; RWKV shifts 2 (llama.cpp asserts)")
        vocab = gf.get(f"{arch}.vocab_size") or len(gf.get("tokenizer.ggml.tokens", []))
        common = dict(arch=arch, n_layer=key("block_count"), n_embd=key("embedding_length"), n_vocab=int(vocab),
                      n_ff=key("feed_forward_length"), head_size=key("wkv.head_size"),
                      norm_eps=float(gf.number(f"{arch}.attention.layer_norm_epsilon", lo=0, lo_open=True)))
        if arch == "rwkv6":
            hp = cls(**common, time_mix_extra_dim=key("time_mix_extra_dim"),  # type: ignore[arg-type]
                     time_decay_extra_dim=key("time_decay_extra_dim"),
                     rescale_every_n_layers=int(gf.get("rwkv6.rescale_every_n_layers", 0)))
            ranks: tuple[int, ...] = (hp.time_mix_extra_dim, hp.time_decay_extra_dim)
        else:
            ranks = tuple(key(f"attention.{k}_lora_rank") for k in ("decay", "iclr", "value_residual_mix", "gate"))
            hp = cls(**common, lora=ranks)  # type: ignore[arg-type]
        if min(hp.n_layer, hp.n_embd, hp.n_vocab, hp.n_ff, hp.head_size, *ranks) < 1 or hp.rescale_every_n_layers < 0:
            raise GGUFError(f"{gf.path}: RWKV hyper-parameters out of range: {hp}")
        if hp.n_embd % hp.head_size:
            raise GGUFError(f"{gf.path}: embedding_length {hp.n_embd} is not a multiple of wkv.head_size "
                            f"{hp.head_size}")
        return hp


class RwkvState(RecurrentState):
    """Per layer the token-shift state [n_embd, 2] (time mix, channel mix) and the WKV state [S*S*H, 1], F32, in one
    buffer of `buft`; zero means an empty history."""

    def __init__(self, hp: RwkvHParams, buft: BufferType) -> None:
        ctx = gg.Context(no_alloc=True)
        self.shift = [ctx.new_tensor(GGMLType.F32, hp.n_embd, 2, name=f"cache_r_l{il}") for il in range(hp.n_layer)]
        self.wkv = [ctx.new_tensor(GGMLType.F32, hp.n_embd * hp.head_size, 1, name=f"cache_s_l{il}")
                    for il in range(hp.n_layer)]
        super().__init__(ctx, buft)


def _layer_shapes(hp: RwkvHParams, il: int) -> dict[str, tuple[int, ...]]:
    """Every tensor of layer il by its name after `blk.N.`, with its ne."""
    e, s, ff = hp.n_embd, hp.head_size, hp.n_ff
    shapes: dict[str, tuple[int, ...]] = {
        "attn_norm.weight": (e,), "attn_norm.bias": (e,), "attn_norm_2.weight": (e,), "attn_norm_2.bias": (e,),
        "time_mix_key.weight": (e, e), "time_mix_value.weight": (e, e), "time_mix_receptance.weight": (e, e),
        "time_mix_ln.weight": (e,), "time_mix_ln.bias": (e,), "time_mix_output.weight": (e, e),
        "channel_mix_lerp_k.weight": (e,), "channel_mix_key.weight": (e, ff), "channel_mix_value.weight": (ff, e)}
    if hp.arch == "rwkv6":
        dm, dd = hp.time_mix_extra_dim, hp.time_decay_extra_dim
        return shapes | {
            "time_mix_w1.weight": (e, dm * N_MIX), "time_mix_w2.weight": (dm, e, N_MIX),
            "time_mix_lerp_x.weight": (e,), "time_mix_lerp_fused.weight": (e, 1, 1, N_MIX),
            "time_mix_first.weight": (s, hp.n_head), "time_mix_decay.weight": (e,),
            "time_mix_decay_w1.weight": (e, dd), "time_mix_decay_w2.weight": (dd, e),
            "time_mix_gate.weight": (e, e), "channel_mix_lerp_r.weight": (e,),
            "channel_mix_receptance.weight": (e, e)}
    decay, iclr, vmix, gate = hp.lora
    vmix = iclr if il == 0 else vmix  # llama.cpp loads layer 0's (unused) value mix at the iclr rank
    return shapes | {
        "time_mix_lerp_fused.weight": (e, 1, 1, N_MIX7), "time_mix_w0.weight": (e,),
        "time_mix_w1.weight": (e, decay), "time_mix_w2.weight": (decay, e), "time_mix_a0.weight": (e,),
        "time_mix_a1.weight": (e, iclr), "time_mix_a2.weight": (iclr, e), "time_mix_v0.weight": (e,),
        "time_mix_v1.weight": (e, vmix), "time_mix_v2.weight": (vmix, e), "time_mix_g1.weight": (e, gate),
        "time_mix_g2.weight": (gate, e), "time_mix_k_k.weight": (e,), "time_mix_k_a.weight": (e,),
        "time_mix_r_k.weight": (e,)}


class RwkvModel:
    def __init__(self, hp: RwkvHParams, weights: Weights) -> None:
        self.hp = hp
        self.weights = weights
        e = hp.n_embd
        top = {"token_embd.weight": (e, hp.n_vocab), "token_embd_norm.weight": (e,), "token_embd_norm.bias": (e,),
               "output_norm.weight": (e,), "output_norm.bias": (e,), "output.weight": (e, hp.n_vocab)}
        shapes = [_layer_shapes(hp, il) for il in range(hp.n_layer)]
        expect = top | {f"blk.{il}.{name}": ne for il in range(hp.n_layer) for name, ne in shapes[il].items()}
        refuse_unused(weights, expect, hp.arch)
        for name, ne in expect.items():
            t = weights[name]
            if t.ne[: len(ne)] != ne or any(n != 1 for n in t.ne[len(ne):]):
                raise GGUFError(f"{weights.file.path}: tensor {name!r} has ne={list(t.ne)}, expected {list(ne)}")
        self.top = {name.removesuffix(".weight"): weights[name] for name in top}
        self.layers = [{name.removesuffix(".weight"): weights[f"blk.{il}.{name}"] for name in shapes[il]}
                       for il in range(hp.n_layer)]
        """Per layer its tensors by name after `blk.N.`, without `.weight` (biases keep `.bias`)."""

    def build_graph(self, n_tokens: int, n_outputs: int, state: RwkvState) -> RecurrentGraph:
        """The graph of `n_tokens` new tokens of one sequence after the history held in `state`, with logits for
        the last `n_outputs` rows; computing it also writes the state after the last token."""
        hp, top = self.hp, self.top
        ctx = gg.Context(no_alloc=True)
        with ctx:
            tokens = ctx.new_tensor(GGMLType.I32, n_tokens, name="inp_tokens").set_input()
            out_ids = None
            if n_outputs != n_tokens:
                out_ids = ctx.new_tensor(GGMLType.I32, n_outputs, name="inp_out_ids").set_input()
            graph = gg.Graph(GRAPH_SIZE)
            x = ops.get_rows(top["token_embd"], tokens)
            x = _layer_norm(x, top["token_embd_norm"], top["token_embd_norm.bias"], hp.norm_eps)
            v_first: list[Tensor] = []  # v7: the first layer's value, mixed into the later layers'
            for il, lw in enumerate(self.layers):
                x = self._block(il, lw, x, state, graph, out_ids if il == hp.n_layer - 1 else None, v_first)
            x = _layer_norm(x, top["output_norm"], top["output_norm.bias"], hp.norm_eps).set_name("result_norm")
            logits = ops.mul_mat(top["output"], x).set_name("result_output")
            logits.set_output()
            graph.build_forward_expand(logits)
        return RecurrentGraph(n_tokens, n_outputs, ctx, graph, tokens, out_ids, logits)

    def _block(self, il: int, lw: dict[str, Tensor], x: Tensor, state: RwkvState, graph: gg.Graph,
               out_ids: Tensor | None, v_first: list[Tensor]) -> Tensor:
        hp = self.hp
        e, n = hp.n_embd, x.ne[1]
        # a copy of the shift state first: the store below overwrites it before the channel mix reads its half
        shift = ops.cont(state.shift[il])
        att = _layer_norm(x, lw["attn_norm"], lw["attn_norm.bias"], hp.norm_eps, il).set_name(f"attn_norm-{il}")
        att_prev = _shifted(ops.view(shift, (e, 1), (shift.nb[1],), 0), att)
        if hp.arch == "rwkv6":
            mixed = self._time_mix6(il, lw, att, att_prev, state)
        else:
            mixed = self._time_mix7(il, lw, att, att_prev, state, v_first)
        x = ops.add(self._wkv_out(il, lw, mixed, state, graph), x).set_name(f"ffn_inp-{il}")
        ffn = _layer_norm(x, lw["attn_norm_2"], lw["attn_norm_2.bias"], hp.norm_eps, il).set_name(f"ffn_norm-{il}")
        ffn_prev = _shifted(ops.view(shift, (e, 1), (shift.nb[1],), e * F32_SIZE), ffn)
        last = ops.concat(_row(att, n - 1), _row(ffn, n - 1), 1)                # [n_embd, 2]
        graph.build_forward_expand(ops.cpy(last, state.shift[il]))
        if out_ids is not None:
            x, ffn, ffn_prev = ops.get_rows(x, out_ids), ops.get_rows(ffn, out_ids), ops.get_rows(ffn_prev, out_ids)
        x = ops.add(self._channel_mix(lw, ffn, ffn_prev), x)
        if hp.rescale_every_n_layers and (il + 1) % hp.rescale_every_n_layers == 0:
            x = ops.scale(x, 0.5)
        return x.set_name(f"l_out-{il}")

    def _time_mix6(self, il: int, lw: dict[str, Tensor], cur: Tensor, prev: Tensor, state: RwkvState
                    ) -> _Mixed:
        hp = self.hp
        e, n, s, h, dm = hp.n_embd, cur.ne[1], hp.head_size, hp.n_head, hp.time_mix_extra_dim
        sx = ops.sub(prev, cur)
        xxx = ops.add(ops.mul(sx, lw["time_mix_lerp_x"]), cur)
        xxx = ops.reshape(ops.tanh(ops.mul_mat(lw["time_mix_w1"], xxx)), dm, 1, N_MIX, n)
        xxx = ops.cont(ops.permute(xxx, 0, 1, 3, 2))                             # [dm, 1, n, 5]
        xxx = ops.mul_mat(ops.reshape(lw["time_mix_w2"], dm, e, 1, N_MIX), xxx)  # [e, 1, n, 5]
        sx3, cur3 = ops.reshape(sx, e, 1, n), ops.reshape(cur, e, 1, n)
        xxx = ops.add(ops.mul(ops.add(xxx, lw["time_mix_lerp_fused"]), sx3), cur3)
        xw, xk, xv, xr, xg = (ops.view(xxx, (e, n), (xxx.nb[1],), j * e * n * F32_SIZE) for j in range(N_MIX))
        r = ops.mul_mat(lw["time_mix_receptance"], xr)
        k = ops.mul_mat(lw["time_mix_key"], xk)
        v = ops.mul_mat(lw["time_mix_value"], xv)
        g = ops.silu(ops.mul_mat(lw["time_mix_gate"], xg))
        w = ops.mul_mat(lw["time_mix_decay_w2"], ops.tanh(ops.mul_mat(lw["time_mix_decay_w1"], xw)))
        w = ops.exp(ops.neg(ops.exp(ops.add(w, lw["time_mix_decay"]))))
        shape = (s, h, n)
        out = ops.rwkv_wkv6(ops.reshape(k, *shape), ops.reshape(v, *shape), ops.reshape(r, *shape),
                            lw["time_mix_first"], ops.reshape(w, *shape), state.wkv[il])
        return _Mixed(out, g, None)

    def _time_mix7(self, il: int, lw: dict[str, Tensor], cur: Tensor, prev: Tensor, state: RwkvState,
                   v_first: list[Tensor]) -> _Mixed:
        hp = self.hp
        e, n, s, h = hp.n_embd, cur.ne[1], hp.head_size, hp.n_head
        sx, fused = ops.sub(prev, cur), lw["time_mix_lerp_fused"]
        xr, xw, xk, xv, xa, xg = (ops.add(ops.mul(sx, ops.view(fused, (e,), offset=j * e * F32_SIZE)), cur)
                                  for j in range(N_MIX7))                      # the six lerps, as llama.cpp's fused one

        def lora(x: Tensor, name: str, act: str | None = None) -> Tensor:
            y = ops.mul_mat(lw[f"time_mix_{name}1"], x)
            y = ops.tanh(y) if act == "tanh" else ops.sigmoid(y) if act == "sigmoid" else y
            return ops.mul_mat(lw[f"time_mix_{name}2"], y)

        r = ops.mul_mat(lw["time_mix_receptance"], xr)
        w = ops.exp(ops.scale(ops.sigmoid(ops.add(lora(xw, "w", "tanh"), lw["time_mix_w0"])), W7_SCALE))
        k = ops.mul_mat(lw["time_mix_key"], xk)
        v = ops.mul_mat(lw["time_mix_value"], xv)
        if not v_first:
            v_first.append(v)
        else:
            mix = ops.sigmoid(ops.add(lora(xv, "v"), lw["time_mix_v0"]))
            v = ops.add(v, ops.mul(ops.sub(v_first[0], v), mix))
        g = lora(xg, "g", "sigmoid")
        a = ops.sigmoid(ops.add(lora(xa, "a"), lw["time_mix_a0"]))
        kk = ops.l2_norm(ops.reshape(ops.mul(k, lw["time_mix_k_k"]), s, h, n), 1e-12)
        ka = ops.mul(k, lw["time_mix_k_a"])
        k = ops.add(k, ops.sub(ops.mul(a, ka), ka))
        shape = (s, h, n)
        r, k, v = ops.reshape(r, *shape), ops.reshape(k, *shape), ops.reshape(v, *shape)
        out = ops.rwkv_wkv7(r, ops.reshape(w, *shape), k, v, ops.neg(kk), ops.mul(kk, ops.reshape(a, *shape)),
                            state.wkv[il])
        rk = ops.sum_rows(ops.mul(ops.mul(k, r), ops.reshape(lw["time_mix_r_k"], s, h)))  # [1, h, n]
        return _Mixed(out, g, ops.reshape(ops.mul(v, rk), e, n))

    def _wkv_out(self, il: int, lw: dict[str, Tensor], mixed: _Mixed, state: RwkvState, graph: gg.Graph) -> Tensor:
        """The WKV op's outputs through the per-head GroupNorm, v7's bonus, the gate and the output matrix; its
        final state copied back."""
        hp, out, g, bonus = self.hp, mixed.out, mixed.g, mixed.bonus
        e, s, h = hp.n_embd, hp.head_size, hp.n_head
        n = out.ne[1] - s
        final = ops.view(out, (e * s,), offset=e * n * F32_SIZE)
        graph.build_forward_expand(ops.cpy(final, ops.reshape(state.wkv[il], e * s)))
        y = ops.view(out, (e * n,), offset=0)
        y = ops.reshape(ops.norm(ops.reshape(y, s, h, n), GROUP_NORM_EPS), e, n)  # GroupNorm, a group per head
        y = ops.add(ops.mul(y, lw["time_mix_ln"]), lw["time_mix_ln.bias"])
        if bonus is not None:
            y = ops.add(y, bonus)
        return ops.mul_mat(lw["time_mix_output"], ops.mul(y, g)).set_name(f"time_mix_out-{il}")

    def _channel_mix(self, lw: dict[str, Tensor], cur: Tensor, prev: Tensor) -> Tensor:
        sx = ops.sub(prev, cur)
        xk = ops.add(ops.mul(sx, lw["channel_mix_lerp_k"]), cur)
        k = ops.sqr(ops.relu(ops.mul_mat(lw["channel_mix_key"], xk)))
        if self.hp.arch == "rwkv7":
            return ops.mul_mat(lw["channel_mix_value"], k)
        xr = ops.add(ops.mul(sx, lw["channel_mix_lerp_r"]), cur)
        r = ops.sigmoid(ops.mul_mat(lw["channel_mix_receptance"], xr))
        return ops.mul(r, ops.mul_mat(lw["channel_mix_value"], k))


@dataclass(frozen=True)
class _Mixed:
    out: Tensor
    """The WKV op's result: outputs [S*H, n] then the final state."""
    g: Tensor
    bonus: Tensor | None
    """v7's v (r . k r_k) per head, added after the GroupNorm."""


def _layer_norm(x: Tensor, w: Tensor, b: Tensor, eps: float, il: int = -1) -> Tensor:
    """LayerNorm, its steps named as llama.cpp's build_norm names them (compare_llama_cpp.py matches names)."""
    sfx = f"-{il}" if il >= 0 else ""
    return ops.add(ops.mul(ops.norm(x, eps).set_name(f"norm{sfx}"), w).set_name(f"norm_w{sfx}"), b)


def _row(x: Tensor, i: int) -> Tensor:
    return ops.view(x, (x.ne[0], 1), (x.nb[1],), i * x.nb[1])


def _shifted(first: Tensor, x: Tensor) -> Tensor:
    """Each token's predecessor: `first` (the state's row) then x's rows but the last."""
    n = x.ne[1]
    if n == 1:
        return first
    return ops.concat(first, ops.view(x, (x.ne[0], n - 1), (x.nb[1],), 0), 1)


class RwkvSession(RecurrentSession[RwkvHParams, RwkvState]):
    """An RWKV v6 GGUF on one device (plus the CPU for what it cannot run), its recurrent state carried between
    calls (recurrent.py)."""

    arch = RecurrentArch(RwkvHParams.from_gguf, RwkvModel, RwkvState)
