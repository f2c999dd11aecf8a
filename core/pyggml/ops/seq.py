"""Sequence-model ops: Mamba's SSM_CONV / SSM_SCAN, RWKV's WKV6 / WKV7, GATED_LINEAR_ATTN, GATED_DELTA_NET and the
triangular helpers TRI / SOLVE_TRI, with ggml's src order, op_params and result layouts (llama.cpp 0.3.36).

The recurrent ops return one F32 tensor holding the per-token outputs followed by the recurrent state(s) after the
last token, as ggml does: a model then takes views of the two parts (docs/op-semantics.md, "Sequence models").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from pyggml.errors import ShapeError
from pyggml.ops.base import Op, check_types, define, fail, need, record
from pyggml.tensor import Ne, Tensor
from pyggml.types import GGMLType

Srcs = tuple[Tensor | None, ...]
F32 = frozenset({GGMLType.F32})
I32 = frozenset({GGMLType.I32})
INT32_MAX = 2**31 - 1


class TriType(IntEnum):
    """enum ggml_tri_type: which triangle TRI keeps (rows are ne[1], columns ne[0])."""

    UPPER_DIAG = 0
    UPPER = 1
    LOWER_DIAG = 2
    LOWER = 3


def _srcs(op: Op, srcs: Srcs, names: tuple[str, ...]) -> list[Tensor]:
    """Every named src present and F32 (ids excepted: the caller checks I32 slots itself)."""
    out = []
    for i, name in enumerate(names):
        t = need(srcs[i] if i < len(srcs) else None, op, f"src{i} ({name})")
        if name != "ids":
            check_types(op, t, F32, f"src{i} ({name})")
        out.append(t)
    return out


def _same(op: Op, want: tuple[int, ...], t: Tensor, name: str, *ref: Tensor) -> None:
    if t.ne[: len(want)] != want or any(n != 1 for n in t.ne[len(want):]):
        raise fail(op, f"{name} must be {list(want)}", t, *ref)


def _snapshots(op: Op, k: object) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= INT32_MAX:
        raise ShapeError(f"{op.name}: K (state snapshot slots) must be an int in [1, 2^31), got {k!r}")
    return k


# ---- TRI, SOLVE_TRI --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TriParams:
    tri_type: TriType


def _tri(srcs: Srcs, params: TriParams) -> tuple[GGMLType, Ne]:
    (a,) = _srcs(Op.TRI, srcs, ("a",))
    if not isinstance(params, TriParams) or not isinstance(params.tri_type, TriType):
        raise ShapeError(f"TRI: params must be TriParams with a TriType, got {params!r}")
    if a.ne[0] != a.ne[1]:
        raise fail(Op.TRI, "src0 must be square in ne[0], ne[1]", a)
    return GGMLType.F32, a.ne


def _solve_tri(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a, b = _srcs(Op.SOLVE_TRI, srcs, ("A", "B"))
    if a.ne[0] != a.ne[1]:
        raise fail(Op.SOLVE_TRI, "A must be square [n, n, ...]", a)
    if b.ne[1] != a.ne[1] or b.ne[2:] != a.ne[2:]:
        raise fail(Op.SOLVE_TRI, "B must be [k, n, ...] with A's n rows and batch dims", a, b)
    return GGMLType.F32, b.ne


define(Op.TRI, (1, 1), _tri, TriParams)
define(Op.SOLVE_TRI, (2, 2), _solve_tri)


def tri(a: Tensor, tri_type: TriType) -> Tensor:
    """ggml_tri: a copy of the square F32 matrices of a with zeros outside one triangle. Row i (ne[1]) keeps
    column j (ne[0]) where j < i (LOWER), j <= i (LOWER_DIAG), j > i (UPPER) or j >= i (UPPER_DIAG)."""
    return record(Op.TRI, (a,), TriParams(TriType(tri_type)))


def solve_tri(a: Tensor, b: Tensor, *, left: bool = True, lower: bool = True, uni: bool = False) -> Tensor:
    """ggml_solve_tri: X with A X = B for each batch (ne[2], ne[3]), A [n, n] lower triangular (its entries above
    the diagonal are not read), B and X [k, n] (k right-hand sides as columns). ggml implements only left, lower,
    non-unit (it keeps no op_params): the other variants are refused here. A zero on A's diagonal gives inf/NaN."""
    if not (left and lower and not uni):
        raise ShapeError("SOLVE_TRI: only left=True, lower=True, uni=False is defined (as in ggml)")
    return record(Op.SOLVE_TRI, (a, b))


# ---- SSM_CONV, SSM_SCAN ------------------------------------------------------------------------------------------


def _ssm_conv(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    sx, c = _srcs(Op.SSM_CONV, srcs, ("sx", "c"))
    if sx.ne[3] != 1:
        raise fail(Op.SSM_CONV, "sx must be 3-D [d_conv - 1 + n_t, d_inner, n_s]", sx)
    if c.ne[2] != 1 or c.ne[3] != 1 or c.ne[0] < 1:
        raise fail(Op.SSM_CONV, "c must be a matrix [d_conv >= 1, d_inner]", c)
    if sx.ne[1] != c.ne[1]:
        raise fail(Op.SSM_CONV, "sx and c must have the same d_inner (ne[1])", sx, c)
    n_t = sx.ne[0] - c.ne[0] + 1
    if n_t < 0:
        raise fail(Op.SSM_CONV, f"the kernel (d_conv={c.ne[0]}) is longer than sx's rows plus one", sx, c)
    return GGMLType.F32, (c.ne[1], n_t, sx.ne[2], 1)


@dataclass(frozen=True, slots=True)
class SsmScanParams:
    k: int = 1
    """State snapshot slots (op_params word 0): slot 0 the final state, slot s the state s tokens back."""


def _ssm_scan(srcs: Srcs, params: SsmScanParams) -> tuple[GGMLType, Ne]:
    op = Op.SSM_SCAN
    s, x, dt, a, b, c, ids = _srcs(op, srcs, ("s", "x", "dt", "A", "B", "C", "ids"))
    check_types(op, ids, I32, "src6 (ids)")
    k = _snapshots(op, params.k if isinstance(params, SsmScanParams) else params)
    d_state, head_dim, n_head, n_tok, n_seqs = s.ne[0], x.ne[0], x.ne[1], x.ne[2], x.ne[3]
    _same(op, (n_head, n_tok, n_seqs), dt, "dt", x)
    if s.ne[1] != head_dim or s.ne[2] != n_head:
        raise fail(op, "s must be [d_state, head_dim, n_head, n_seqs+] (x is [head_dim, n_head, ...])", s, x)
    if b.ne != c.ne:
        raise fail(op, "B and C must have the same shape", b, c)
    if b.ne[0] != d_state or b.ne[2] != n_tok or b.ne[3] != n_seqs:
        raise fail(op, "B must be [d_state, n_group, n_seq_tokens, n_seqs]", b, s, x)
    if b.ne[1] < 1 or n_head % b.ne[1]:
        raise fail(op, "n_head must be a whole multiple of n_group (B's ne[1])", b, x)
    _same(op, (n_seqs,), ids, "ids", x)
    if a.ne[1] != n_head or a.ne[2] != 1 or a.ne[3] != 1 or a.ne[0] not in (1, d_state):
        raise fail(op, "A must be [1, n_head] (Mamba-2) or [d_state, n_head] (Mamba-1)", a, s)
    if a.ne[0] != 1 and k != 1:
        raise fail(op, f"K={k} snapshots need Mamba-2's scalar A [1, n_head]", a)
    return GGMLType.F32, (x.nelements() + k * d_state * head_dim * n_head * n_seqs, 1, 1, 1)


define(Op.SSM_CONV, (2, 2), _ssm_conv)
define(Op.SSM_SCAN, (7, 7), _ssm_scan, SsmScanParams)


def ssm_conv(sx: Tensor, c: Tensor) -> Tensor:
    """ggml_ssm_conv (Mamba's causal depthwise conv1d, sliding window of d_conv): sx [d_conv - 1 + n_t, d_inner,
    n_s] (the conv state's d_conv - 1 columns then the n_t new ones, per channel row), c [d_conv, d_inner];
    dst [d_inner, n_t, n_s] with dst[ch, t, s] = sum_k sx[t + k, ch, s] * c[k, ch]. F32 only."""
    return record(Op.SSM_CONV, (sx, c))


def ssm_scan(s: Tensor, x: Tensor, dt: Tensor, a: Tensor, b: Tensor, c: Tensor, ids: Tensor, k: int = 1) -> Tensor:
    """ggml_ssm_scan, the selective scan of Mamba 1 (A [d_state, n_head], head_dim 1) and Mamba 2 (A [1, n_head]).

    s [d_state, head_dim, n_head, >= n_seqs] initial states, picked per sequence by ids [n_seqs] (I32); x
    [head_dim, n_head, n_tok, n_seqs]; dt [n_head, n_tok, n_seqs] (before softplus); B, C [d_state, n_group,
    n_tok, n_seqs], head h using group h / (n_head / n_group). Per token: dt' = softplus(dt[h]) (dt above 20 kept
    as is), S = S * exp(dt' A[h]) + B x dt' (A per state element for Mamba 1), y = S . C. The 1-D F32 result holds
    y [head_dim, n_head, n_tok, n_seqs] then K state blocks of [d_state, head_dim, n_head, n_seqs]: slot 0 the final
    states, slot j (K > 1, Mamba 2 only) the states j tokens before the end; slots j >= n_tok are not written."""
    return record(Op.SSM_SCAN, (s, x, dt, a, b, c, ids), SsmScanParams(k))


# ---- RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7 ---------------------------------------------------------------------


def _linear_state(op: Op, shaped: list[Tensor], names: tuple[str, ...], state: Tensor) -> Ne:
    """The [S, H, T] token tensors agree, state holds S*S*H per sequence and T splits evenly over them."""
    first = shaped[0]
    size, heads, n_tok = first.ne[0], first.ne[1], first.ne[2]
    for t, name in zip(shaped, names, strict=True):
        _same(op, (size, heads, n_tok), t, name, first)
    n_seqs = state.ne[1]
    if n_seqs < 1 or state.nelements() != size * size * heads * n_seqs:
        raise fail(op, f"state must hold S*S*H = {size * size * heads} values per sequence, n_seqs in ne[1]",
                   state, first)
    if n_tok % n_seqs:
        raise fail(op, f"the {n_tok} tokens must split evenly over the state's {n_seqs} sequences", first, state)
    return size * heads, n_tok + size * n_seqs, 1, 1


def _wkv6(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    k, v, r, tf, td, state = _srcs(Op.RWKV_WKV6, srcs, ("k", "v", "r", "tf", "td", "state"))
    _same(Op.RWKV_WKV6, (k.ne[0], k.ne[1]), tf, "tf (time_first, u)", k)
    return GGMLType.F32, _linear_state(Op.RWKV_WKV6, [k, v, r, td], ("k", "v", "r", "td"), state)


@dataclass(frozen=True, slots=True)
class GlaParams:
    scale: float


def _gla(srcs: Srcs, params: GlaParams) -> tuple[GGMLType, Ne]:
    k, v, q, g, state = _srcs(Op.GATED_LINEAR_ATTN, srcs, ("k", "v", "q", "g", "state"))
    return GGMLType.F32, _linear_state(Op.GATED_LINEAR_ATTN, [k, v, q, g], ("k", "v", "q", "g"), state)


def _wkv7(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    names = ("r", "w", "k", "v", "a", "b")
    *tok, state = _srcs(Op.RWKV_WKV7, srcs, (*names, "state"))
    return GGMLType.F32, _linear_state(Op.RWKV_WKV7, tok, names, state)


define(Op.RWKV_WKV6, (6, 6), _wkv6)
define(Op.GATED_LINEAR_ATTN, (5, 5), _gla, GlaParams)
define(Op.RWKV_WKV7, (7, 7), _wkv7)

_LINEAR_LAYOUT = """Token tensors are [S, H, T] (T = n_seqs * tokens per sequence, sequence after sequence); state
    holds per sequence H matrices of S x S (ggml: [S*S*H, n_seqs]). The F32 result [S*H, T + S*n_seqs] holds the
    outputs (T rows) then the final states in the state's layout."""


def rwkv_wkv6(k: Tensor, v: Tensor, r: Tensor, tf: Tensor, td: Tensor, state: Tensor) -> Tensor:
    """ggml_rwkv_wkv6 (RWKV v6's time mixing). Per head, with S[i][j] (i over k, j over v, stored row i):
    y[j] = sum_i r[i] (tf[i] k[i] v[j] + S[i][j]); then S[i][j] = S[i][j] td[i] + k[i] v[j]. tf (time_first, u) is
    [S, H]; td the per-token decay, already exp(-exp(w)). """
    return record(Op.RWKV_WKV6, (k, v, r, tf, td, state))


def gated_linear_attn(k: Tensor, v: Tensor, q: Tensor, g: Tensor, state: Tensor, scale: float) -> Tensor:
    """ggml_gated_linear_attn. Per head, S[i][j] (i over k, j over v): S[i][j] = S[i][j] g[i] + k[i] v[j], then
    y[j] = scale * sum_i q[i] S[i][j] (the updated state, unlike WKV6). scale is op_params word 0 (f32)."""
    return record(Op.GATED_LINEAR_ATTN, (k, v, q, g, state), GlaParams(float(scale)))


def rwkv_wkv7(r: Tensor, w: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, state: Tensor) -> Tensor:
    """ggml_rwkv_wkv7 (RWKV v7's generalised delta rule). Per head, S[i][j] (i over v, j over k, stored row i):
    sa[i] = sum_j a[j] S[i][j]; S[i][j] = S[i][j] w[j] + v[i] k[j] + sa[i] b[j]; y[i] = sum_j S[i][j] r[j]."""
    return record(Op.RWKV_WKV7, (r, w, k, v, a, b, state))


for _f in (rwkv_wkv6, gated_linear_attn, rwkv_wkv7):
    _f.__doc__ = f"{_f.__doc__}\n\n    {_LINEAR_LAYOUT}"


# ---- GATED_DELTA_NET -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GatedDeltaNetParams:
    k: int = 1
    """State snapshot slots (op_params word 0), as SSM_SCAN's."""


def _gdn(srcs: Srcs, params: GatedDeltaNetParams) -> tuple[GGMLType, Ne]:
    op = Op.GATED_DELTA_NET
    q, k, v, g, beta, state = _srcs(op, srcs, ("q", "k", "v", "g", "beta", "state"))
    kk = _snapshots(op, params.k if isinstance(params, GatedDeltaNetParams) else params)
    s_v, heads, n_tok, n_seqs = v.ne
    for t, name in ((q, "q"), (k, "k")):
        if t.ne[0] != s_v or t.ne[2] != n_tok:
            raise fail(op, f"{name} must be [S_v, H_k, n_tokens, n_seqs_k] like v's S_v and n_tokens", t, v)
        if t.ne[1] < 1 or heads % t.ne[1] or t.ne[3] < 1 or n_seqs % t.ne[3]:
            raise fail(op, f"v's heads and sequences must be whole multiples of {name}'s (ne[1], ne[3])", t, v)
    if g.ne[0] not in (1, s_v) or g.ne[1:] != (heads, n_tok, n_seqs):
        raise fail(op, "g must be [1 or S_v, H, n_tokens, n_seqs]", g, v)
    _same(op, (1, heads, n_tok, n_seqs), beta, "beta", v)
    _same(op, (s_v, s_v, heads, n_seqs), state, "state", v)
    return GGMLType.F32, (s_v * heads, n_tok * n_seqs + kk * s_v * n_seqs, 1, 1)


define(Op.GATED_DELTA_NET, (6, 6), _gdn, GatedDeltaNetParams)


def gated_delta_net(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor, k_slots: int = 1
                    ) -> Tensor:
    """ggml_gated_delta_net (Qwen3-Next / Kimi linear attention). v [S_v, H, T, n_seqs]; q, k [S_v, H_k, T, n_seqs_k]
    (head h reads q/k head h % H_k, sequence s reads s / (n_seqs / n_seqs_k)); g [1, H, T, n_seqs] (scalar gate) or
    [S_v, H, T, n_seqs] (per key element, KDA); beta [1, H, T, n_seqs]; state [S_v, S_v, H, n_seqs] holds S[i][j]
    (i over k, j over v) at ne index (i, j). Per token: S *= exp(g) (row i by exp(g[i]) for KDA);
    d[j] = beta (v[j] - sum_i S[i][j] k[i]); S[i][j] += k[i] d[j]; y[j] = sum_i S[i][j] q[i] / sqrt(S_v).
    The F32 result [S_v*H, T*n_seqs + K*S_v*n_seqs] holds y [S_v, H, T, n_seqs] then K state blocks like `state`:
    slot 0 the final states, slot j the states j tokens before the end (slots j >= T are not written)."""
    return record(Op.GATED_DELTA_NET, (q, k, v, g, beta, state), GatedDeltaNetParams(k_slots))
