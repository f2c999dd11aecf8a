"""The one table of what the C kernels run: per pyggml op, whether a node is supported (types, layouts) and how
it becomes a node descriptor (C op id, sub-op, int and float params), as rules of core's `OpTable`.
`supports_op` and the plan builder both read this table, so support and dispatch cannot drift apart.

C op ids and sub-op numbers are read from the compiled extension (`lib.PGC_OP_*`, `PGC_U_*`, `PGC_G_*`: the enums
of `csrc/pgc.h` are in the cffi cdef), so they cannot drift from the C side.
"""

from __future__ import annotations

from collections.abc import Callable

from pyggml.backend.op_table import OpTable, Rule, srcs
from pyggml.ops import GluOp, UnaryOp
from pyggml.ops.base import Op
from pyggml.ops.conv import op_words
from pyggml.ops.custom import CUSTOM_OPS
from pyggml.ops.elementwise import SwigluClampParams, SwigluOaiParams, XieluParams
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_cpu._pgc import lib

T = GGMLType
FLOAT = frozenset({T.F32, T.F16, T.BF16})
F32 = frozenset({T.F32})
QUANT_DOT = frozenset({T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K})
"""Block types with a dot product against their activation partner (MUL_MAT, GET_ROWS, dequantising CPY)."""
QUANT_STORE = QUANT_DOT
"""Block types the kernels can quantise into (CPY, SET_ROWS destinations), with ggml's reference quantisers."""
LEGACY_QUANT = frozenset({T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0})
KV_QUANT = LEGACY_QUANT
PLAIN = frozenset({T.F32, T.F16, T.BF16, T.I8, T.I16, T.I32, T.I64, T.F64})
CONVERTIBLE = frozenset({T.F32, T.F16, T.BF16, T.I32})
INT32_MAX = 2**31 - 1

UNARY_SUB = {u: getattr(lib, f"PGC_U_{u.name}") for u in (
    UnaryOp.ABS, UnaryOp.SGN, UnaryOp.NEG, UnaryOp.STEP, UnaryOp.TANH, UnaryOp.ELU, UnaryOp.RELU,
    UnaryOp.SIGMOID, UnaryOp.GELU, UnaryOp.GELU_QUICK, UnaryOp.GELU_ERF, UnaryOp.SILU, UnaryOp.HARDSWISH,
    UnaryOp.HARDSIGMOID, UnaryOp.EXP, UnaryOp.SOFTPLUS, UnaryOp.FLOOR, UnaryOp.CEIL, UnaryOp.ROUND, UnaryOp.TRUNC,
    UnaryOp.EXPM1, UnaryOp.XIELU)}
MATH_SUB = {op: getattr(lib, f"PGC_U_{op.name}") for op in (Op.SQR, Op.SQRT, Op.LOG, Op.SIN, Op.COS)}
GLU_SUB = {g: getattr(lib, f"PGC_G_{g.name}") for g in GluOp}
BINARY_SUB = {Op.ADD: 0, Op.SUB: 1, Op.MUL: 2, Op.DIV: 3}

Params = tuple[int, list[int], list[float]]
"""(sub-op, int params, float params) of a descriptor."""


class Descriptors:
    """What a cpu rule builds into: one (node, C op id, params) per node, packed into C descriptors by the plan."""

    def __init__(self) -> None:
        self.node: Tensor | None = None
        self.rows: list[tuple[Tensor, int, Params]] = []
        self.host: list[int] = []
        """Rows that Python computes between C runs (custom ops): NOP descriptors the executor never hands to C."""

    def add(self, c_op: int, params: Params) -> None:
        assert self.node is not None
        self.rows.append((self.node, c_op, params))

    def add_host(self) -> None:
        """The current node runs in Python (a custom op's callable), between the C runs of the rows around it."""
        self.host.append(len(self.rows))
        self.add(lib.PGC_OP_NOP, (0, [], []))


def _entry(c_op: int, accepts: Callable[[Tensor], bool], params: Callable[[Tensor], Params]) -> Rule[Descriptors]:
    """The rule of an op that becomes one descriptor of C op `c_op` with `params(node)`."""
    return Rule(accepts, lambda node, b: b.add(c_op, params(node)))


def _types_in(allowed: frozenset[GGMLType]) -> Callable[[Tensor], bool]:
    """Every src and the result have a type in `allowed`."""
    return lambda t: t.type in allowed and all(s.type in allowed for s in srcs(t))


def _rows(t: Tensor) -> bool:
    return t.is_contiguous_rows()


def _no(t: Tensor) -> Params:
    return 0, [], []


def _sub(value: int) -> Callable[[Tensor], Params]:
    return lambda t: (value, [], [])


def _mul_mat_ok(t: Tensor) -> bool:
    a, b = t.src[0], t.src[1]
    assert a is not None and b is not None
    return (a.type in FLOAT or a.type in QUANT_DOT) and _rows(a) and b.type in FLOAT and _rows(t)


def _mul_mat_id_ok(t: Tensor) -> bool:
    ids = t.src[2]
    return _mul_mat_ok(t) and ids is not None and ids.type == T.I32


def _out_prod_ok(t: Tensor) -> bool:
    a, b = t.src[0], t.src[1]
    assert a is not None and b is not None
    return (a.type in FLOAT or (a.type in QUANT_DOT and _rows(a))) and b.type in FLOAT


def _cpy_ok(t: Tensor) -> bool:
    a = t.src[0]
    assert a is not None
    if a.type == t.type:
        return a.type in PLAIN or (a.is_contiguous() and t.is_contiguous())
    src_ok = a.type in CONVERTIBLE or (a.type in QUANT_DOT and a.is_contiguous())
    dst_ok = t.type in CONVERTIBLE or (t.type in QUANT_STORE and t.is_contiguous())
    return src_ok and dst_ok


def _get_rows_ok(t: Tensor) -> bool:
    a, ids = t.src[0], t.src[1]
    assert a is not None and ids is not None
    if a.type in QUANT_DOT:
        return _rows(a) and t.type == T.F32
    return a.type in CONVERTIBLE and t.type in (T.F32, T.I32)


def _set_rows_ok(t: Tensor) -> bool:
    return (t.type in FLOAT or t.type in QUANT_STORE) and _rows(t)


def _flash_ok(t: Tensor) -> bool:
    q, k, v = t.src[0], t.src[1], t.src[2]
    assert q is not None and k is not None and v is not None
    kv_ok = all(x.type in FLOAT or x.type in KV_QUANT for x in (k, v))
    return q.type == T.F32 and kv_ok and _rows(k) and _rows(v)


def _concat_ok(t: Tensor) -> bool:
    ins = srcs(t)
    if t.type in QUANT_DOT:  # whole blocks move as bytes, row by row (legacy and K-quants alike)
        return all(_rows(x) for x in (t, *ins))
    return _plain_same(t)


def _set_ok(t: Tensor) -> bool:
    p = t.params
    fits = all(0 <= x <= INT32_MAX for x in (p.nb1, p.nb2, p.nb3, p.offset))
    return fits and _types_in(FLOAT)(t) and t.is_contiguous()


def _rope_params(t: Tensor) -> Params:
    p = t.params
    return 0, [p.n_dims, p.mode, p.n_ctx_orig], [p.freq_base, p.freq_scale, p.ext_factor, p.attn_factor,
                                                 p.beta_fast, p.beta_slow]


def _pad_params(t: Tensor) -> Params:
    return 0, [*t.params.lp, *t.params.rp], []


def _set_params(sub: int) -> Callable[[Tensor], Params]:
    def params(t: Tensor) -> Params:
        p = t.params
        return sub, [p.nb1, p.nb2, p.nb3, p.offset], []

    return params


def _unary_params(t: Tensor) -> Params:
    p = t.params
    if isinstance(p, XieluParams):
        return UNARY_SUB[p.op], [], [p.alpha_n, p.alpha_p, p.beta, p.eps]
    return UNARY_SUB[p.op], [], []


def _glu_params(t: Tensor) -> Params:
    p = t.params
    if isinstance(p, SwigluOaiParams):
        fp = [p.alpha, p.limit]
    elif isinstance(p, SwigluClampParams):
        fp = [0.0, p.limit]
    else:
        fp = []
    return GLU_SUB[p.op], [int(p.swapped)], fp


def _add_id_ok(t: Tensor) -> bool:
    a, b, ids = t.src[0], t.src[1], t.src[2]
    return a is not None and b is not None and ids is not None and ids.type == T.I32 and \
        all(x.type in FLOAT for x in (t, a, b))


def _float_params(*names: str) -> Callable[[Tensor], Params]:
    return lambda t: (0, [], [float(getattr(t.params, n)) for n in names])


_float = _types_in(FLOAT)
_f32 = _types_in(F32)
_plain_same = _types_in(PLAIN)

RULES: dict[Op, Rule[Descriptors]] = {
    **{op: _entry(lib.PGC_OP_BINARY, _float, _sub(BINARY_SUB[op])) for op in BINARY_SUB},
    Op.ADD1: _entry(lib.PGC_OP_ADD1, _float, _no),
    **{op: _entry(lib.PGC_OP_UNARY, _float, _sub(sub)) for op, sub in MATH_SUB.items()},
    Op.UNARY: _entry(lib.PGC_OP_UNARY, _float, _unary_params),
    Op.ADD_ID: _entry(lib.PGC_OP_ADD_ID, _add_id_ok, _no),
    Op.CLAMP: _entry(lib.PGC_OP_CLAMP, _float, _float_params("min", "max")),
    Op.LEAKY_RELU: _entry(lib.PGC_OP_LEAKY, _float, _float_params("negative_slope")),
    Op.FILL: _entry(lib.PGC_OP_FILL, _float, _float_params("value")),
    Op.SCALE: _entry(lib.PGC_OP_SCALE, _float, _float_params("s", "b")),
    Op.GLU: _entry(lib.PGC_OP_GLU, _float, _glu_params),
    Op.NORM: _entry(lib.PGC_OP_NORM, _f32, lambda t: (0, [], [t.params.eps])),
    Op.RMS_NORM: _entry(lib.PGC_OP_NORM, _f32, lambda t: (1, [], [t.params.eps])),
    Op.L2_NORM: _entry(lib.PGC_OP_NORM, _f32, lambda t: (2, [], [t.params.eps])),
    Op.GROUP_NORM: _entry(lib.PGC_OP_GROUP_NORM, _f32, lambda t: (0, [t.params.n_groups], [t.params.eps])),
    Op.SOFT_MAX: _entry(lib.PGC_OP_SOFT_MAX, lambda t: t.type == T.F32, _float_params("scale", "max_bias")),
    Op.ROPE: _entry(lib.PGC_OP_ROPE, lambda t: t.type in (T.F32, T.F16) and t.params.mode in (0, 2), _rope_params),
    Op.ROPE_BACK: _entry(lib.PGC_OP_ROPE, lambda t: t.type in (T.F32, T.F16) and t.params.mode in (0, 2),
                         lambda t: (1, *_rope_params(t)[1:])),  # sub 1: the sine negated
    Op.DIAG_MASK_INF: _entry(lib.PGC_OP_DIAG_MASK, _f32, lambda t: (0, [t.params.n_past], [])),
    Op.DIAG_MASK_ZERO: _entry(lib.PGC_OP_DIAG_MASK, _f32, lambda t: (1, [t.params.n_past], [])),
    Op.FLASH_ATTN_EXT: _entry(lib.PGC_OP_FLASH_ATTN, _flash_ok, _float_params("scale", "max_bias", "logit_softcap")),
    Op.MUL_MAT: _entry(lib.PGC_OP_MUL_MAT, _mul_mat_ok, _no),
    Op.MUL_MAT_ID: _entry(lib.PGC_OP_MUL_MAT_ID, _mul_mat_id_ok, _no),
    Op.OUT_PROD: _entry(lib.PGC_OP_OUT_PROD, _out_prod_ok, _no),
    Op.CPY: _entry(lib.PGC_OP_CPY, _cpy_ok, _no),
    Op.CONT: _entry(lib.PGC_OP_CPY, _cpy_ok, _no),
    Op.DUP: _entry(lib.PGC_OP_CPY, _cpy_ok, _no),
    Op.GET_ROWS: _entry(lib.PGC_OP_GET_ROWS, _get_rows_ok, _no),
    Op.SET_ROWS: _entry(lib.PGC_OP_SET_ROWS, _set_rows_ok, _no),
    Op.REPEAT: _entry(lib.PGC_OP_REPEAT, lambda t: t.type in PLAIN, _no),
    Op.CONCAT: _entry(lib.PGC_OP_CONCAT, _concat_ok, lambda t: (0, [t.params.dim], [])),
    Op.PAD: _entry(lib.PGC_OP_PAD, _f32, _pad_params),
    Op.SET: _entry(lib.PGC_OP_SET, _set_ok, _set_params(0)),
    Op.ACC: _entry(lib.PGC_OP_SET, _set_ok, _set_params(1)),
    Op.DIAG: _entry(lib.PGC_OP_DIAG, _f32, _no),
    Op.ARANGE: _entry(lib.PGC_OP_ARANGE, lambda t: t.type == T.F32, _float_params("start", "stop", "step")),
    Op.SUM: _entry(lib.PGC_OP_SUM, _float, _no),
    Op.SUM_ROWS: _entry(lib.PGC_OP_SUM_ROWS, _f32, _no),
    Op.MEAN: _entry(lib.PGC_OP_SUM_ROWS, _f32, _sub(1)),
    Op.CUMSUM: _entry(lib.PGC_OP_CUMSUM, _f32, _no),
    Op.ARGMAX: _entry(lib.PGC_OP_ARGMAX, lambda t: t.src[0] is not None and t.src[0].type == T.F32, _no),
    Op.COUNT_EQUAL: _entry(lib.PGC_OP_COUNT_EQUAL, lambda t: all(s.type == T.I32 for s in srcs(t)), _no),
    Op.ARGSORT: _entry(lib.PGC_OP_ARGSORT, lambda t: t.src[0] is not None and t.src[0].type == T.F32,
                      lambda t: (t.params.order.value, [0], [])),
    Op.TOP_K: _entry(lib.PGC_OP_ARGSORT, lambda t: t.src[0] is not None and t.src[0].type == T.F32,
                    lambda t: (1, [t.params.k], [])),
}

TRAIN_OPS: dict[Op, tuple[int, Callable[[Tensor], bool], Callable[[Tensor], Params]]] = {
    Op.REPEAT_BACK: (lib.PGC_OP_REPEAT_BACK, _f32, _no),
    Op.SILU_BACK: (lib.PGC_OP_SILU_BACK, _types_in(frozenset({T.F32, T.F16})), _no),
    Op.RMS_NORM_BACK: (lib.PGC_OP_RMS_NORM_BACK, _f32, _float_params("eps")),
    Op.GET_ROWS_BACK: (lib.PGC_OP_GET_ROWS_BACK, lambda t: t.type == T.F32, _no),
    Op.SOFT_MAX_BACK: (lib.PGC_OP_SOFT_MAX_BACK, _f32, _float_params("scale")),
    Op.CROSS_ENTROPY_LOSS: (lib.PGC_OP_CROSS_ENTROPY_LOSS, _f32, _no),
    Op.CROSS_ENTROPY_LOSS_BACK: (lib.PGC_OP_CROSS_ENTROPY_LOSS_BACK, _f32, _no),
    Op.OPT_STEP_ADAMW: (lib.PGC_OP_OPT_STEP_ADAMW, _f32, _no),
    Op.OPT_STEP_SGD: (lib.PGC_OP_OPT_STEP_SGD, _f32, _no),
}
"""backward.c's ops (pgc_k_train): the types ggml's CPU kernels take (the shape rules admit no others but
GET_ROWS_BACK's F16 gradient, which it reads too); any layout, since every source is read through its strides."""
RULES.update({op: _entry(c_op, ok, params) for op, (c_op, ok, params) in TRAIN_OPS.items()})

SPATIAL_WORDS: dict[Op, Callable[[Tensor], list[int]]] = {
    Op.POOL_1D: lambda t: [t.params.op.value, t.params.k0, t.params.s0, t.params.p0],
    Op.POOL_2D: lambda t: [t.params.op.value, t.params.k0, t.params.k1, t.params.s0, t.params.s1, t.params.p0,
                           t.params.p1],
    Op.UPSCALE: lambda t: [t.params.mode],
    Op.PAD_REFLECT_1D: lambda t: [t.params.p0, t.params.p1],
    Op.ROLL: lambda t: list(t.params.shifts),
    Op.TIMESTEP_EMBEDDING: lambda t: [t.params.dim, t.params.max_period],
    Op.WIN_PART: lambda t: [t.params.npx, t.params.npy, t.params.w],
    Op.WIN_UNPART: lambda t: [t.params.w],
    Op.GET_REL_POS: lambda t: [],
    Op.ADD_REL_POS: lambda t: [],
}
"""spatial.c's ops: one C op (PGC_OP_SPATIAL), the ggml op as sub-op PGC_SP_<name>, ggml's op_params words as int
params. The shape rules admit only the types it reads (F32, F16 pool input, F16 GET_REL_POS); any layout, since
it reads every source through its strides."""


def _spatial_ok(t: Tensor) -> bool:
    """Every word fits the descriptor's int32 (a huge padding would wrap in C)."""
    return all(-INT32_MAX <= v <= INT32_MAX for v in SPATIAL_WORDS[t.op](t))


def _spatial(op: Op) -> Rule[Descriptors]:
    sub, words = getattr(lib, f"PGC_SP_{op.name}"), SPATIAL_WORDS[op]
    return _entry(lib.PGC_OP_SPATIAL, _spatial_ok, lambda t: (sub, words(t), []))


RULES.update({op: _spatial(op) for op in SPATIAL_WORDS})


def _indexer_ok(t: Tensor) -> bool:
    """deepseek.c converts K rows with the plain loads or the dequantisers (whole contiguous rows)."""
    k = t.src[1]
    return k is not None and (k.type in FLOAT or (k.type in QUANT_DOT and _rows(k)))


# deepseek.c's ops: F32 everywhere but LIGHTNING_INDEXER's K and F16 mask, as the shape rules admit
RULES.update({
    Op.LIGHTNING_INDEXER: _entry(lib.PGC_OP_LIGHTNING_INDEXER, _indexer_ok, _no),
    Op.DSV4_HC_COMB: _entry(lib.PGC_OP_DSV4_HC, lambda t: True, lambda t: (0, [t.params.n_iter], [t.params.eps])),
    Op.DSV4_HC_PRE: _entry(lib.PGC_OP_DSV4_HC, lambda t: True,
                           lambda t: (1, [int(t.params.gated)], [t.params.scale])),
    Op.DSV4_HC_POST: _entry(lib.PGC_OP_DSV4_HC, lambda t: True, _sub(2)),
})

SEQ_PARAMS: dict[Op, tuple[int, Callable[[Tensor], Params]]] = {
    Op.TRI: (lib.PGC_OP_TRI, lambda t: (0, [int(t.params.tri_type)], [])),
    Op.SOLVE_TRI: (lib.PGC_OP_SOLVE_TRI, _no),
    Op.SSM_CONV: (lib.PGC_OP_SSM_CONV, _no),
    Op.SSM_SCAN: (lib.PGC_OP_SSM_SCAN, lambda t: (0, [t.params.k], [])),
    Op.RWKV_WKV6: (lib.PGC_OP_RWKV_WKV6, _no),
    Op.GATED_LINEAR_ATTN: (lib.PGC_OP_GLA, lambda t: (0, [], [t.params.scale])),
    Op.RWKV_WKV7: (lib.PGC_OP_RWKV_WKV7, _no),
    Op.GATED_DELTA_NET: (lib.PGC_OP_GATED_DELTA_NET, lambda t: (0, [t.params.k], [])),
}
"""seq.c's ops (C op id, descriptor params)."""
SEQ_STATE_SLOT = {Op.RWKV_WKV6: 5, Op.GATED_LINEAR_ATTN: 4, Op.RWKV_WKV7: 6}
"""The linear-attention ops' state src, which seq.c reads as one dense block per sequence."""
NSLOT_SRCS = 7
"""The srcs a descriptor carries (PGC_NSLOT - 1 in csrc/pgc.h)."""


def _seq_ok(t: Tensor) -> bool:
    """F32 everywhere (SSM_SCAN's ids I32), rows of adjacent elements in every src (seq.c steps rows by nb[1..3]),
    a contiguous dst (seq.c writes it as flat parts) and a dense linear-attention state."""
    ins = srcs(t)
    if len(t.src) > NSLOT_SRCS or not t.is_contiguous():
        return False
    for i, x in enumerate(ins):
        want = T.I32 if t.op is Op.SSM_SCAN and i == 6 else T.F32
        if x.type != want or not _rows(x):
            return False
    state = SEQ_STATE_SLOT.get(t.op)
    return state is None or ins[state].is_contiguous()


RULES.update({op: _entry(c_op, _seq_ok, params) for op, (c_op, params) in SEQ_PARAMS.items()})

CONV_OPS = (Op.IM2COL, Op.IM2COL_3D, Op.COL2IM_1D, Op.CONV_TRANSPOSE_1D, Op.CONV_2D, Op.CONV_3D, Op.CONV_2D_DW,
            Op.CONV_TRANSPOSE_2D)
"""conv.c's ops: every float type and any strides (the kernels read and write through them); ip holds ggml's
op_params words (pyggml.ops.conv.op_words; the shape rules keep each within int32)."""

RULES.update({op: _entry(getattr(lib, f"PGC_OP_{op.name}"), _float, lambda t: (0, op_words(t.params), []))
              for op in CONV_OPS})


def _pool_words_ok(t: Tensor) -> bool:
    return all(-INT32_MAX <= v <= INT32_MAX for v in SPATIAL_WORDS[Op.POOL_2D](t))


# back2.c's ops (the gradients of IM2COL and POOL_2D): the types the shape rules admit (F32 gradient, any float
# kernel, F32 / F16 pool input), any strides; ip holds ggml's op_params words (IM2COL's, POOL_2D's)
RULES.update({
    Op.IM2COL_BACK: _entry(lib.PGC_OP_IM2COL_BACK, _float, lambda t: (0, op_words(t.params), [])),
    Op.POOL_2D_BACK: _entry(lib.PGC_OP_POOL_2D_BACK, _pool_words_ok, lambda t: (0, SPATIAL_WORDS[Op.POOL_2D](t), [])),
})

MIN_BLAS_BATCH = 32
"""The blas backend takes a MUL_MAT only when every dimension is at least this (as ggml's BLAS backend)."""


def _blas_ok(t: Tensor) -> bool:
    a, b = t.src[0], t.src[1]
    assert a is not None and b is not None
    big = t.ne[0] >= MIN_BLAS_BATCH and t.ne[1] >= MIN_BLAS_BATCH and b.ne[0] >= MIN_BLAS_BATCH
    aligned = a.nb[1] % 4 == 0 and b.nb[1] % 4 == 0 and t.nb[1] % 4 == 0
    return big and aligned and a.type in FLOAT and _rows(a) and b.type in FLOAT and t.is_contiguous()


HOST_RULES: dict[Op, Rule[Descriptors]] = {op: Rule(lambda t: True, lambda node, b: b.add_host()) for op in CUSTOM_OPS}
"""Custom ops (MAP_CUSTOM1/2/3, CUSTOM): their callable runs in Python between two C runs of the graph (see
executor.py for why the graph is split rather than called back into from the C threads)."""

TABLE: OpTable[Descriptors] = OpTable("cpu", RULES, HOST_RULES)
BLAS_TABLE: OpTable[Descriptors] = OpTable("blas", {Op.MUL_MAT: _entry(lib.PGC_OP_MUL_MAT_BLAS, _blas_ok, _no)})
