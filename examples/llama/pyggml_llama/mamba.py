"""Mamba GGUF models on pyggml (llama.cpp's architectures `mamba`, Mamba 1, and `mamba2`): a recurrent state per
layer instead of a KV cache, carried from one call to the next, so a prompt can be fed in micro-batches and decoding
costs one token.

Per layer, as llama.cpp's graph: RMS norm -> ssm_in -> a causal depthwise conv over the last d_conv - 1 inputs kept
in the conv state, then the new ones (SSM_CONV, bias, SiLU) -> the selective scan (SSM_SCAN) starting from the
layer's SSM state -> y + x D, gated by SiLU(z) -> ssm_out, added to the residual.
- Mamba 1: ssm_in gives x and the gate z; the conv runs over x; ssm_x gives dt's low-rank input, B and C; dt =
  ssm_dt dt + bias; A is [d_state, d_inner] (a decay per state element, d_inner heads of one channel).
- Mamba 2: ssm_in gives z, x|B|C (the conv runs over all three) and dt per head (+ bias); A and D are one scalar
  per head (head_dim = d_inner / n_head); B and C come in n_group groups; y * SiLU(z) goes through an RMS norm per
  group (ssm_norm) before ssm_out.
The graph ends with copies of the conv window's last d_conv - 1 columns and of the scan's final state back into the
state tensors, which the next call reads (llama.cpp's recurrent memory with one sequence). FalconMamba's B/C/dt RMS
norms (`ssm.dt_b_c_rms`) are not built: such a file is refused rather than run wrongly.
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
from pyggml_llama.model import GRAPH_SIZE, TakenWeights, refuse_unused
from pyggml_llama.recurrent import RecurrentArch, RecurrentGraph, RecurrentHParams, RecurrentSession, RecurrentState

F32_SIZE = 4


@dataclass(frozen=True)
class MambaHParams(RecurrentHParams):
    d_conv: int
    d_inner: int
    d_state: int
    dt_rank: int
    """Mamba 1: the rank of dt's projection; Mamba 2: the number of heads (llama.cpp keeps both in this key)."""
    n_group: int = 1
    """Mamba 2's B/C groups (and ssm_norm groups)."""

    @property
    def conv_dim(self) -> int:
        """Channels of the conv: x (Mamba 1), or x, B and C (Mamba 2)."""
        return self.d_inner if self.arch == "mamba" else self.d_inner + 2 * self.n_group * self.d_state

    @property
    def n_head(self) -> int:
        return self.d_inner if self.arch == "mamba" else self.dt_rank

    @classmethod
    def from_gguf(cls, gf: GGUFFile) -> MambaHParams:
        arch = gf.architecture
        if arch not in ("mamba", "mamba2"):
            raise GGUFError(f"{gf.path}: architecture {arch!r} is not Mamba ('mamba', 'mamba2')")
        if gf.get(f"{arch}.ssm.dt_b_c_rms", False):
            raise GGUFError(f"{gf.path}: {arch}.ssm.dt_b_c_rms (FalconMamba's B/C/dt RMS norms) is not supported")

        def key(name: str) -> int:
            return int(gf.require(f"{arch}.{name}", int))

        vocab = gf.get(f"{arch}.vocab_size") or len(gf.get("tokenizer.ggml.tokens", []))
        hp = cls(arch=arch, n_layer=key("block_count"), n_embd=key("embedding_length"), n_vocab=int(vocab),
                 d_conv=key("ssm.conv_kernel"), d_inner=key("ssm.inner_size"), d_state=key("ssm.state_size"),
                 dt_rank=key("ssm.time_step_rank"),
                 norm_eps=float(gf.number(f"{arch}.attention.layer_norm_rms_epsilon", lo=0, lo_open=True)),
                 n_group=key("ssm.group_count") if arch == "mamba2" else 1)
        if min(hp.n_layer, hp.n_embd, hp.n_vocab, hp.d_conv, hp.d_inner, hp.d_state, hp.dt_rank, hp.n_group) < 1:
            raise GGUFError(f"{gf.path}: Mamba hyper-parameters must be positive: {hp}")
        if arch == "mamba" and hp.d_inner != 2 * hp.n_embd:  # llama.cpp refuses any other expansion factor too
            raise GGUFError(f"{gf.path}: mamba.ssm.inner_size {hp.d_inner} is not 2 * embedding_length {hp.n_embd}")
        if arch == "mamba2" and (hp.d_inner % hp.n_head or hp.n_head % hp.n_group):
            raise GGUFError(f"{gf.path}: mamba2's inner_size {hp.d_inner}, {hp.n_head} heads (time_step_rank) and "
                            f"{hp.n_group} groups do not divide evenly")
        return hp


@dataclass
class MambaLayer:
    norm: Tensor
    w_in: Tensor
    conv: Tensor
    conv_b: Tensor
    dt_b: Tensor
    a: Tensor
    d: Tensor
    w_out: Tensor
    w_x: Tensor | None = None
    """Mamba 1 only: x -> dt's low-rank input, B, C."""
    w_dt: Tensor | None = None
    """Mamba 1 only: dt's up-projection."""
    ssm_norm: Tensor | None = None
    """Mamba 2 only: the grouped RMS norm's weights [d_inner / n_group, n_group]."""


class MambaState(RecurrentState):
    """Per layer the conv state [d_conv - 1, conv_dim] (the last inputs of the conv window) and the SSM state
    [d_state, d_inner] (Mamba 2: [d_state, head_dim * n_head]), F32, in one buffer of `buft`; zero means an empty
    history."""

    def __init__(self, hp: MambaHParams, buft: BufferType) -> None:
        ctx = gg.Context(no_alloc=True)
        self.conv = [ctx.new_tensor(GGMLType.F32, hp.d_conv - 1, hp.conv_dim, name=f"cache_r_l{il}")
                     for il in range(hp.n_layer)]
        self.ssm = [ctx.new_tensor(GGMLType.F32, hp.d_state, hp.d_inner, name=f"cache_s_l{il}")
                    for il in range(hp.n_layer)]
        super().__init__(ctx, buft)


class MambaModel:
    def __init__(self, hp: MambaHParams, weights: Weights) -> None:
        self.hp = hp
        self.weights = weights
        self._taken = TakenWeights(weights)
        self.tok_embd, self.output_norm, self.output = self._taken.embd_and_output()
        self.layers = [self._layer(il) for il in range(hp.n_layer)]
        self._check_shapes()
        refuse_unused(weights, self._taken.names, hp.arch)

    def _layer(self, il: int) -> MambaLayer:
        p, w = f"blk.{il}.", self._taken.take
        lw = MambaLayer(w(p + "attn_norm.weight"), w(p + "ssm_in.weight"), w(p + "ssm_conv1d.weight"),
                        w(p + "ssm_conv1d.bias"), w(p + "ssm_dt.bias"), w(p + "ssm_a"), w(p + "ssm_d"),
                        w(p + "ssm_out.weight"))
        if self.hp.arch == "mamba":
            lw.w_x, lw.w_dt = w(p + "ssm_x.weight"), w(p + "ssm_dt.weight")
        else:
            lw.ssm_norm = w(p + "ssm_norm.weight")
        return lw

    def _check_shapes(self) -> None:
        hp = self.hp
        e, di, ds, nh, cd = hp.n_embd, hp.d_inner, hp.d_state, hp.n_head, hp.conv_dim
        v1 = hp.arch == "mamba"
        expect: list[tuple[str, Tensor | None, tuple[int, ...]]] = [
            ("token_embd.weight", self.tok_embd, (e, hp.n_vocab)), ("output.weight", self.output, (e, hp.n_vocab)),
            ("output_norm.weight", self.output_norm, (e,))]
        for il, lw in enumerate(self.layers):
            p = f"blk.{il}."
            expect += [(p + "attn_norm.weight", lw.norm, (e,)),
                       (p + "ssm_in.weight", lw.w_in, (e, 2 * di if v1 else di + cd + nh)),
                       (p + "ssm_conv1d.weight", lw.conv, (hp.d_conv, cd)), (p + "ssm_conv1d.bias", lw.conv_b, (cd,)),
                       (p + "ssm_x.weight", lw.w_x, (di, hp.dt_rank + 2 * ds)),
                       (p + "ssm_dt.weight", lw.w_dt, (hp.dt_rank, di)), (p + "ssm_dt.bias", lw.dt_b, (nh,)),
                       (p + "ssm_a", lw.a, (ds, di) if v1 else (1, nh)), (p + "ssm_d", lw.d, (di,) if v1 else (1, nh)),
                       (p + "ssm_norm.weight", lw.ssm_norm, (di // hp.n_group, hp.n_group)),
                       (p + "ssm_out.weight", lw.w_out, (di, e))]
        for name, t, ne in expect:
            if t is not None and t.ne != (*ne, *(1,) * (4 - len(ne))):
                raise GGUFError(f"{self.weights.file.path}: tensor {name!r} has ne={list(t.ne)}, expected {list(ne)}")
        f32 = [(n, t) for n, t, _ in expect
               if t is not None and n.endswith(("ssm_conv1d.weight", "ssm_a")) and t.type != GGMLType.F32]
        if f32:  # SSM_CONV and SSM_SCAN take F32 only
            raise GGUFError(f"{self.weights.file.path}: tensor {f32[0][0]!r} is {f32[0][1].type}, SSM ops need F32")

    def build_graph(self, n_tokens: int, n_outputs: int, state: MambaState) -> RecurrentGraph:
        """The graph of `n_tokens` new tokens of one sequence after the history held in `state`, with logits for
        the last `n_outputs` rows; computing it also writes the state after the last token."""
        hp = self.hp
        ctx = gg.Context(no_alloc=True)
        with ctx:
            tokens = ctx.new_tensor(GGMLType.I32, n_tokens, name="inp_tokens").set_input()
            ids = ctx.new_tensor(GGMLType.I32, 1, name="inp_s_copy").set_input()
            out_ids = None
            if n_outputs != n_tokens:
                out_ids = ctx.new_tensor(GGMLType.I32, n_outputs, name="inp_out_ids").set_input()
            graph = gg.Graph(GRAPH_SIZE)
            x = ops.get_rows(self.tok_embd, tokens).set_name("inp_embd")
            for il, lw in enumerate(self.layers):
                h = ops.mul(ops.rms_norm(x, hp.norm_eps), lw.norm).set_name(f"attn_norm-{il}")
                mixer = self._mixer1 if hp.arch == "mamba" else self._mixer2
                h = mixer(il, lw, h, state, ids, graph).set_name(f"ssm_out-{il}")
                if il == hp.n_layer - 1 and out_ids is not None:
                    h, x = ops.get_rows(h, out_ids), ops.get_rows(x, out_ids)
                x = ops.add(h, x).set_name(f"l_out-{il}")
            x = ops.mul(ops.rms_norm(x, hp.norm_eps), self.output_norm).set_name("result_norm")
            logits = ops.mul_mat(self.output, x).set_name("result_output")
            logits.set_output()
            graph.build_forward_expand(logits)
        return RecurrentGraph(n_tokens, n_outputs, ctx, graph, tokens, out_ids, logits, ids)

    def _conv(self, il: int, lw: MambaLayer, xbc: Tensor, state: MambaState, graph: gg.Graph) -> Tensor:
        """SiLU(conv(xbc) + bias) over [conv state | new inputs]; the window's last d_conv - 1 columns become the
        conv state. xbc [conv_dim, n] -> [conv_dim, n]."""
        conv_state, n = state.conv[il], xbc.ne[1]
        window = ops.concat(conv_state, ops.transpose(xbc), 0)                  # [d_conv - 1 + n, conv_dim]
        last = ops.view(window, (self.hp.d_conv - 1, xbc.ne[0]), (window.nb[1],), n * F32_SIZE)
        graph.build_forward_expand(ops.cpy(last, conv_state))
        out = ops.reshape(ops.ssm_conv(window, lw.conv), xbc.ne[0], n)
        return ops.silu(ops.add(out, lw.conv_b)).set_name(f"conv_out-{il}")

    def _scan(self, il: int, lw: MambaLayer, x: Tensor, dt: Tensor, b: Tensor, c: Tensor, state: MambaState,
              ids: Tensor, graph: gg.Graph) -> Tensor:
        """The selective scan from the layer's SSM state, whose final value is copied back; y [head_dim, n_head,
        n] (a view of the scan's result)."""
        ssm_state, hp = state.ssm[il], self.hp
        hd, nh, n = x.ne[0], x.ne[1], x.ne[2]
        s = ops.reshape(ssm_state, hp.d_state, hd, nh, 1)
        scan = ops.ssm_scan(s, x, dt, lw.a, b, c, ids)
        final = ops.view(scan, (hp.d_state * hd * nh,), offset=x.nelements() * F32_SIZE)
        graph.build_forward_expand(ops.cpy(final, ops.reshape(ssm_state, hp.d_state * hd * nh)))
        return ops.view(scan, (hd, nh, n), (hd * F32_SIZE, hd * nh * F32_SIZE), 0)

    def _mixer1(self, il: int, lw: MambaLayer, h: Tensor, state: MambaState, ids: Tensor, graph: gg.Graph
                ) -> Tensor:
        hp, f = self.hp, F32_SIZE
        n, di, ds, r = h.ne[1], hp.d_inner, hp.d_state, hp.dt_rank
        assert lw.w_x is not None and lw.w_dt is not None
        xz = ops.mul_mat(lw.w_in, h)                                             # [2 d_inner, n]
        xc = self._conv(il, lw, ops.view(xz, (di, n), (xz.nb[1],), 0), state, graph)
        xdb = ops.mul_mat(lw.w_x, xc)                                            # [dt_rank + 2 d_state, n]
        dt = ops.cont(ops.view(xdb, (r, n), (xdb.nb[1],), 0))
        b = ops.view(xdb, (ds, 1, n, 1), (ds * f, xdb.nb[1], xdb.nb[1] * n), r * f)
        c = ops.view(xdb, (ds, 1, n, 1), (ds * f, xdb.nb[1], xdb.nb[1] * n), (r + ds) * f)
        dt = ops.add(ops.mul_mat(lw.w_dt, dt), lw.dt_b)                         # [d_inner, n]
        y = self._scan(il, lw, ops.reshape(xc, 1, di, n, 1), ops.reshape(dt, di, n, 1), b, c, state, ids, graph)
        y = ops.add(ops.reshape(y, di, n), ops.mul(xc, lw.d))
        z = ops.view(xz, (di, n), (xz.nb[1],), di * f)
        return ops.mul_mat(lw.w_out, ops.swiglu(ops.cont(z), y))               # silu(z) * y

    def _mixer2(self, il: int, lw: MambaLayer, h: Tensor, state: MambaState, ids: Tensor, graph: gg.Graph
                ) -> Tensor:
        hp, f = self.hp, F32_SIZE
        n, di, ds, nh, ng, cd = h.ne[1], hp.d_inner, hp.d_state, hp.n_head, hp.n_group, hp.conv_dim
        hd = di // nh
        assert lw.ssm_norm is not None
        zxbcdt = ops.mul_mat(lw.w_in, h)                                         # [d_inner + conv_dim + n_head, n]
        row = zxbcdt.nb[1]
        xbc = self._conv(il, lw, ops.view(zxbcdt, (cd, n), (row,), di * f), state, graph)
        x = ops.view(xbc, (hd, nh, n, 1), (hd * f, xbc.nb[1], xbc.nb[1] * n), 0)
        b = ops.view(xbc, (ds, ng, n, 1), (ds * f, xbc.nb[1], xbc.nb[1] * n), di * f)
        c = ops.view(xbc, (ds, ng, n, 1), (ds * f, xbc.nb[1], xbc.nb[1] * n), (di + ng * ds) * f)
        dt = ops.add(ops.cont(ops.view(zxbcdt, (nh, n), (row,), (di + cd) * f)), lw.dt_b)
        y = self._scan(il, lw, x, ops.reshape(dt, nh, n, 1), b, c, state, ids, graph)
        y = ops.add(y, ops.mul(x, lw.d))                                         # D [1, n_head] over head_dim
        z = ops.view(zxbcdt, (hd, nh, n), (hd * f, row), 0)
        y = ops.reshape(ops.swiglu(ops.cont(z), y), di // ng, ng, n)
        y = ops.mul(ops.rms_norm(y, hp.norm_eps), lw.ssm_norm)
        return ops.mul_mat(lw.w_out, ops.reshape(y, di, n))


class MambaSession(RecurrentSession[MambaHParams, MambaState]):
    """A Mamba GGUF on one device (plus the CPU for what it cannot run), its recurrent state carried between calls
    (recurrent.py)."""

    arch = RecurrentArch(MambaHParams.from_gguf, MambaModel, MambaState)
