"""The wire table: for each pyggml op, ggml's op number (a literal: it is wire format), where ggml keeps the op's
params in its 16 int32 op_params words, how many srcs ggml gives it, and the few ops whose srcs or params ggml
lays out differently. `pyggml_rpc.opcodes` runs this table in both directions; see its docstring for the
differences. Every number here is checked against ggml.h by plugins/rpc/tests/test_opcodes.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pyggml.ops import (
    ROPE_TYPE_NEOX,
    ROPE_TYPE_NORMAL,
    AccParams,
    ArangeParams,
    ArgsortParams,
    ClampParams,
    ConcatParams,
    ContParams,
    DiagMaskParams,
    FillParams,
    FlashAttnParams,
    GluOp,
    GluParams,
    GroupNormParams,
    LeakyReluParams,
    NormParams,
    Op,
    PadParams,
    PermuteParams,
    RopeParams,
    ScaleParams,
    ShapeParams,
    SoftMaxParams,
    SortOrder,
    SwigluClampParams,
    SwigluOaiParams,
    TopKParams,
    UnaryOp,
    UnaryParams,
    ViewParams,
    XieluParams,
    conv,
)
from pyggml.ops.deepseek import HcCombParams, HcPreParams
from pyggml.ops.seq import GatedDeltaNetParams, GlaParams, SsmScanParams, TriParams, TriType
from pyggml.ops.spatial import (
    PadReflect1DParams,
    Pool1DParams,
    Pool2DParams,
    PoolOp,
    RollParams,
    TimestepEmbeddingParams,
    UpscaleParams,
    WinPartParams,
    WinUnpartParams,
)
from pyggml.tensor import Ne, Tensor
from pyggml.types import GGMLType

Srcs = tuple[Tensor | None, ...]

GGML_OP_COUNT = 101
GGML_MAX_SRC = 10
N_WORDS = 16  # GGML_MAX_OP_PARAMS (64 bytes) / sizeof(int32_t)
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

GGML_OP_NAMES: tuple[str, ...] = (
    "NONE", "DUP", "ADD", "ADD_ID", "ADD1", "ACC", "SUB", "MUL", "DIV", "SQR", "SQRT", "LOG", "SIN", "COS", "SUM",
    "SUM_ROWS", "CUMSUM", "MEAN", "ARGMAX", "COUNT_EQUAL", "REPEAT", "REPEAT_BACK", "CONCAT", "SILU_BACK", "NORM",
    "RMS_NORM", "RMS_NORM_BACK", "GROUP_NORM", "L2_NORM", "MUL_MAT", "MUL_MAT_ID", "OUT_PROD", "SCALE", "SET", "CPY",
    "CONT", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE", "GET_ROWS", "GET_ROWS_BACK", "SET_ROWS", "DIAG",
    "DIAG_MASK_INF", "DIAG_MASK_ZERO", "SOFT_MAX", "SOFT_MAX_BACK", "ROPE", "ROPE_BACK", "CLAMP",
    "CONV_TRANSPOSE_1D", "IM2COL", "IM2COL_BACK", "IM2COL_3D", "COL2IM_1D", "CONV_2D", "CONV_3D", "CONV_2D_DW",
    "CONV_TRANSPOSE_2D", "POOL_1D", "POOL_2D", "POOL_2D_BACK", "UPSCALE", "PAD", "PAD_REFLECT_1D", "ROLL", "ARANGE",
    "TIMESTEP_EMBEDDING", "ARGSORT", "TOP_K", "LEAKY_RELU", "TRI", "FILL", "FLASH_ATTN_EXT", "FLASH_ATTN_BACK",
    "SSM_CONV", "SSM_SCAN", "WIN_PART", "WIN_UNPART", "GET_REL_POS", "ADD_REL_POS", "RWKV_WKV6", "GATED_LINEAR_ATTN",
    "RWKV_WKV7", "SOLVE_TRI", "GATED_DELTA_NET", "LIGHTNING_INDEXER", "DSV4_HC_COMB", "DSV4_HC_PRE", "DSV4_HC_POST",
    "UNARY", "MAP_CUSTOM1", "MAP_CUSTOM2", "MAP_CUSTOM3", "CUSTOM", "CROSS_ENTROPY_LOSS", "CROSS_ENTROPY_LOSS_BACK",
    "OPT_STEP_ADAMW", "OPT_STEP_SGD", "GLU",
)
"""ggml_op in order (index == number); only for naming ops pyggml lacks in messages."""

# ---- sub-op and enum numbers (enum ggml_unary_op, ggml_glu_op, ggml_sort_order, rope modes, ggml_prec) -------------

U = UnaryOp
UNARY_CODES: dict[UnaryOp, int] = {
    U.ABS: 0, U.SGN: 1, U.NEG: 2, U.STEP: 3, U.TANH: 4, U.ELU: 5, U.RELU: 6, U.SIGMOID: 7, U.GELU: 8,
    U.GELU_QUICK: 9, U.SILU: 10, U.HARDSWISH: 11, U.HARDSIGMOID: 12, U.EXP: 13, U.EXPM1: 14, U.SOFTPLUS: 15,
    U.GELU_ERF: 16, U.XIELU: 17, U.FLOOR: 18, U.CEIL: 19, U.ROUND: 20, U.TRUNC: 21,
}
GGML_UNARY_COUNT = 22
UNARY_GGML_ONLY: dict[int, str] = {}

G = GluOp
GLU_CODES: dict[GluOp, int] = {G.REGLU: 0, G.GEGLU: 1, G.SWIGLU: 2, G.SWIGLU_OAI: 3, G.GEGLU_ERF: 4,
                                G.GEGLU_QUICK: 5, G.SWIGLU_CLAMP: 6}
GGML_GLU_COUNT = 7
GLU_GGML_ONLY: dict[int, str] = {}

SORT_CODES: dict[SortOrder, int] = {SortOrder.ASC: 0, SortOrder.DESC: 1}
ROPE_MODES: dict[int, int] = {ROPE_TYPE_NORMAL: 0, ROPE_TYPE_NEOX: 2}
"""pyggml keeps ggml's mode number itself; MROPE 8, VISION 24, IMROPE 40 and mode bit 0 are refused."""
ROPE_GGML_ONLY = {8: "MROPE", 24: "VISION", 40: "IMROPE"}
PREC_VALUES = (0, 10, 15, 20, 30, 40)
"""enum ggml_prec (UNDEFINED, F32, BF16, F16, Q8, Q4): a permission to compute less exactly, which pyggml's exact
kernels always satisfy, so decode accepts and drops it."""
HINT_VALUES = (0, 1)
"""enum ggml_op_hint (NONE, SRC0_IS_HADAMARD): a promise about src0's values; same result either way."""

GGML_TYPE_COUNT = 43
TYPE_GGML_ONLY = {4: "Q4_2 (removed)", 5: "Q4_3 (removed)", 31: "Q4_0_4_4 (removed)", 32: "Q4_0_4_8 (removed)",
                  33: "Q4_0_8_8 (removed)", 36: "IQ4_NL_4_4 (removed)", 37: "IQ4_NL_4_8 (removed)",
                  38: "IQ4_NL_8_8 (removed)", 42: "Q2_0"}
"""ggml type ids below GGML_TYPE_COUNT without a GGMLType: pyggml's ids are ggml's own (pyggml.types)."""


class ParamError(ValueError):
    """A params value the wire cannot carry (or that pyggml cannot take); `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class Field:
    """One params attribute at op_params word `slot`. `name` may index a tuple attribute ('axes[2]').

    kinds: 'i32' (int), 'u64' (int in words slot, slot+1, low word first), 'f32' (float, bit-cast), 'bool' (0/1),
    'enum' (`codes` maps the pyggml value to ggml's number; `missing` names ggml's numbers pyggml lacks)."""

    name: str
    slot: int
    kind: str = "i32"
    lo: float | None = None
    hi: float | None = None
    nan: bool = False
    """f32 only: NaN is a meaningful value (element-wise constants); elsewhere it is refused."""
    finite: bool = False
    codes: Mapping[Any, int] | None = None
    missing: Mapping[int, str] = field(default_factory=dict)

    @property
    def width(self) -> int:
        return 2 if self.kind == "u64" else 1


ToWire = Callable[[Srcs, Any, Tensor], tuple[Srcs, Any]]
"""(pyggml srcs, params, node) -> (srcs in ggml's order, params as ggml states them); may raise ParamError."""
FromWire = Callable[[Srcs, Any, GGMLType, Ne], tuple[Srcs, Any]]
"""(srcs in ggml's order, decoded params, result type, result ne) -> (pyggml srcs, pyggml params)."""
Check = Callable[[Any, Ne], None]
"""Cross-field and shape-carried checks on pyggml params and the result's ne, both directions."""


@dataclass(frozen=True, slots=True)
class Entry:
    code: int
    n_src: tuple[int, int]
    """(required, maximum) srcs in ggml's order."""
    params: type | None = None
    fields: tuple[Field, ...] = ()
    extra: tuple[Field, ...] = ()
    """Words ggml may set that change nothing pyggml computes: decode validates and drops them, encode writes 0."""
    inplace_slot: int | None = None
    """ACC / SET: ggml records in-place-ness in this word (1 when the result is a view of src0)."""
    wire: type | None = None
    """The dataclass `fields` are read from and decoded into when it is not `params`: a class with every word of
    the op's sub-ops (UNARY: XieluParams, GLU: SwigluOaiParams); to_wire / from_wire convert to and from it."""
    to_wire: ToWire | None = None
    from_wire: FromWire | None = None
    check: Check | None = None


# ---- the ops ggml lays out differently ------------------------------------------------------------------------------


def _repeat_to(srcs: Srcs, p: Any, node: Tensor) -> tuple[Srcs, Any]:
    return srcs[:1], p  # ggml_repeat keeps only a; b's shape is the result's ne


def _repeat_from(srcs: Srcs, p: Any, dtype: GGMLType, ne: Ne) -> tuple[Srcs, Any]:
    shape = Tensor(dtype, ne, op=Op.NONE)  # a data-less leaf standing for b: REPEAT reads only its shape
    shape.name = "repeat target shape"
    return (srcs[0], shape), p


def _set_rows_to(srcs: Srcs, p: Any, node: Tensor) -> tuple[Srcs, Any]:
    return (srcs[1], srcs[2], srcs[0]), p  # ggml: rows, ids, destination


def _set_rows_from(srcs: Srcs, p: Any, dtype: GGMLType, ne: Ne) -> tuple[Srcs, Any]:
    return (srcs[2], srcs[0], srcs[1]), p


def _glu_to(srcs: Srcs, p: GluParams, node: Tensor) -> tuple[Srcs, Any]:
    alpha = p.alpha if isinstance(p, SwigluOaiParams) else 0.0
    limit = p.limit if isinstance(p, SwigluOaiParams | SwigluClampParams) else 0.0
    wire = SwigluOaiParams(p.op, p.swapped, alpha, limit)  # every GLU's words: op, swapped, alpha, limit
    if len(srcs) > 1 and srcs[1] is not None and p.swapped:  # ggml's split form has no swap: exchange the srcs
        return (srcs[1], srcs[0]), dataclasses.replace(wire, swapped=False)
    return srcs, wire


def _glu_from(srcs: Srcs, w: SwigluOaiParams, dtype: GGMLType, ne: Ne) -> tuple[Srcs, Any]:
    swapped = w.swapped and not (len(srcs) > 1 and srcs[1] is not None)  # ggml's kernels ignore it when split
    if w.op is GluOp.SWIGLU_OAI:
        return srcs, SwigluOaiParams(w.op, swapped, w.alpha, w.limit)
    if w.alpha != 0:
        raise ParamError("alpha", f"{w.alpha} where {w.op.name} expects 0 (only SWIGLU_OAI has an alpha)")
    if w.op is GluOp.SWIGLU_CLAMP:
        return srcs, SwigluClampParams(w.op, swapped, w.limit)
    if w.limit != 0:
        raise ParamError("limit", f"{w.limit} where {w.op.name} expects 0 (only the SWIGLU_* clamps have a limit)")
    return srcs, GluParams(w.op, swapped)


def _unary_to(srcs: Srcs, p: UnaryParams, node: Tensor) -> tuple[Srcs, Any]:
    if isinstance(p, XieluParams):
        return srcs, p
    return srcs, XieluParams(p.op)  # every UNARY's words: op, then XIELU's four coefficients (0 for the others)


def _unary_from(srcs: Srcs, w: XieluParams, dtype: GGMLType, ne: Ne) -> tuple[Srcs, Any]:
    if w.op is UnaryOp.XIELU:
        return srcs, w
    for name in ("alpha_n", "alpha_p", "beta", "eps"):
        if getattr(w, name) != 0:
            raise ParamError(name, f"{getattr(w, name)} where {w.op.name} expects 0 (only XIELU has it)")
    return srcs, UnaryParams(w.op)


def _no_custom(srcs: Srcs, p: Any, node: Tensor) -> tuple[Srcs, Any]:
    raise ParamError("fn", "a custom op's Python callable cannot travel over RPC (the server runs in another "
                           "process); a host backend of this process runs it")


def _no_custom_from(srcs: Srcs, p: Any, dtype: GGMLType, ne: Ne) -> tuple[Srcs, Any]:
    raise ParamError("fn", "a custom op's function pointer belongs to the client's process; nothing here can call it")


def _top_k_from(srcs: Srcs, p: Any, dtype: GGMLType, ne: Ne) -> tuple[Srcs, Any]:
    if ne[0] < 1:
        raise ParamError("ne[0]", f"TOP_K's k (the result's ne[0]) is {ne[0]}, must be >= 1")
    return srcs, TopKParams(ne[0])


def _top_k_check(p: TopKParams, ne: Ne) -> None:
    if p.k != ne[0]:
        raise ParamError("k", f"k={p.k} differs from the result's ne[0]={ne[0]}, which is all ggml keeps")


def _cont_from(srcs: Srcs, p: Any, dtype: GGMLType, ne: Ne) -> tuple[Srcs, Any]:
    a = srcs[0]
    return srcs, (None if a is not None and a.ne == ne else ContParams(ne))


def _cont_check(p: ContParams | None, ne: Ne) -> None:
    if p is not None and p.ne != ne:
        raise ParamError("ne", f"ContParams.ne={list(p.ne)} differs from the result's ne={list(ne)}")


def _flash_to(srcs: Srcs, p: Any, node: Tensor) -> tuple[Srcs, Any]:
    mask = srcs[3] if len(srcs) > 3 else None
    if mask is not None and mask.type != GGMLType.F16:
        raise ParamError("mask", f"ggml's kernels read the mask as F16, this one is {mask.type}")
    return srcs, p


def _permute_check(p: PermuteParams, ne: Ne) -> None:
    if sorted(p.axes) != [0, 1, 2, 3]:
        raise ParamError("axes", f"axes {list(p.axes)} are not a permutation of 0..3")


def _rope_check(p: RopeParams, ne: Ne) -> None:
    if p.n_dims % 2 or p.n_dims > ne[0]:
        raise ParamError("n_dims", f"n_dims={p.n_dims} must be even and at most ne[0]={ne[0]}")


def ggml_arange_steps(start: float, stop: float, step: float) -> int | None:
    """The length ggml computes, in float32: (int64) ceilf((stop - start) / step); None if not finite."""
    with np.errstate(all="ignore"):
        q = np.ceil((np.float32(stop) - np.float32(start)) / np.float32(step))
    return int(q) if np.isfinite(q) and abs(q) < 2.0**62 else None


def _arange_check(p: ArangeParams, ne: Ne) -> None:
    if p.step == 0:
        raise ParamError("step", "step is 0")
    n = ggml_arange_steps(p.start, p.stop, p.step)
    if n != ne[0] or ne[1:] != (1, 1, 1):
        raise ParamError("ne", f"ggml computes {n} elements for start={p.start}, stop={p.stop}, step={p.step} "
                               f"(in float32), the tensor has ne={list(ne)}")


@dataclass(frozen=True, slots=True)
class UpscaleWord:
    """UPSCALE's one word (ggml_scale_mode | flags): the target shape travels as the result's ne."""

    mode: int


@dataclass(frozen=True, slots=True)
class WinUnpartWord:
    """WIN_UNPART's one word (w): the image size travels as the result's ne."""

    w: int


def _upscale_to(srcs: Srcs, p: UpscaleParams, node: Tensor) -> tuple[Srcs, Any]:
    return srcs, UpscaleWord(p.mode)


def _upscale_from(srcs: Srcs, w: UpscaleWord, dtype: GGMLType, ne: Ne) -> tuple[Srcs, Any]:
    return srcs, UpscaleParams(ne, w.mode)


def _upscale_check(p: UpscaleParams, ne: Ne) -> None:
    if tuple(p.ne) != tuple(ne):
        raise ParamError("ne", f"UpscaleParams.ne={list(p.ne)} differs from the result's ne={list(ne)}")


def _win_unpart_to(srcs: Srcs, p: WinUnpartParams, node: Tensor) -> tuple[Srcs, Any]:
    return srcs, WinUnpartWord(p.w)


def _win_unpart_from(srcs: Srcs, w: WinUnpartWord, dtype: GGMLType, ne: Ne) -> tuple[Srcs, Any]:
    return srcs, WinUnpartParams(w.w, ne[1], ne[2])


def _win_unpart_check(p: WinUnpartParams, ne: Ne) -> None:
    if (p.w0, p.h0) != (ne[1], ne[2]):
        raise ParamError("w0", f"w0={p.w0}, h0={p.h0} differ from the result's ne[1], ne[2] = {ne[1]}, {ne[2]}")


POOL_CODES: dict[PoolOp, int] = {PoolOp.MAX: 0, PoolOp.AVG: 1}
_POOL_OP = Field("op", 0, "enum", codes=POOL_CODES)

def _shape_from(srcs: Srcs, p: Any, dtype: GGMLType, ne: Ne) -> tuple[Srcs, Any]:
    return srcs, ShapeParams(ne)  # REPEAT_BACK / GET_ROWS_BACK: ggml keeps the result's shape only in its ne


def _shape_check(p: ShapeParams, ne: Ne) -> None:
    if tuple(p.ne) != tuple(ne):
        raise ParamError("ne", f"ShapeParams.ne={list(p.ne)} differs from the result's ne={list(ne)}")


# ---- the table --------------------------------------------------------------------------------------------------


def _f32(name: str, slot: int, **kw: Any) -> Field:
    return Field(name, slot, "f32", **kw)


_EPS = (_f32("eps", 0, lo=0.0),)
_ACC = (Field("nb1", 0, lo=0), Field("nb2", 1, lo=0), Field("nb3", 2, lo=0))
def _im2col_back_to(srcs: Srcs, p: conv.Im2colBackParams, node: Tensor) -> tuple[Srcs, Any]:
    return srcs, conv.Im2colParams(p.s0, p.s1, p.p0, p.p1, p.d0, p.d1, p.is_2d)  # IM2COL's words, ne aside


def _im2col_back_from(srcs: Srcs, w: conv.Im2colParams, dtype: GGMLType, ne: Ne) -> tuple[Srcs, Any]:
    return srcs, conv.Im2colBackParams(w.s0, w.s1, w.p0, w.p1, w.d0, w.d1, w.is_2d, ne)


def _im2col_back_check(p: conv.Im2colBackParams, ne: Ne) -> None:
    if tuple(p.ne) != tuple(ne):
        raise ParamError("ne", f"Im2colBackParams.ne={list(p.ne)} differs from the result's ne={list(ne)}")


def _dst_type_from(srcs: Srcs, p: Any, dtype: GGMLType, ne: Ne) -> tuple[Srcs, Any]:
    return srcs, dataclasses.replace(p, dst_type=dtype)  # IM2COL / IM2COL_3D: ggml keeps dst_type as the type


def _spatial(*names: str) -> tuple[Field, ...]:
    """Stride / padding / dilation words in order: strides and dilations from 0 (IM2COL 1-D leaves its second
    ones 0; the shape rules refuse what they cannot use), paddings from 0."""
    return tuple(Field(n, i, lo=0) for i, n in enumerate(names))


_CONV2D = _spatial("s0", "s1", "p0", "p1", "d0", "d1")
_CONV3D = _spatial("s0", "s1", "s2", "p0", "p1", "p2", "d0", "d1", "d2")
_PREC = {v: v for v in PREC_VALUES}
_MATMUL_EXTRA = (Field("acc_prec", 0, "enum", codes=_PREC), Field("hint", 1, "enum", codes={v: v for v in HINT_VALUES}),
                 Field("src0_prec", 2, "enum", codes=_PREC), Field("src1_prec", 3, "enum", codes=_PREC))

ENTRIES: dict[Op, Entry] = {
    Op.DUP: Entry(1, (1, 1)),
    Op.ADD: Entry(2, (2, 2)),
    Op.ADD1: Entry(4, (2, 2)),
    Op.ACC: Entry(5, (2, 2), AccParams, (*_ACC, Field("offset", 3, lo=0)), inplace_slot=4),
    Op.SUB: Entry(6, (2, 2)),
    Op.MUL: Entry(7, (2, 2)),
    Op.DIV: Entry(8, (2, 2)),
    Op.SQR: Entry(9, (1, 1)),
    Op.SQRT: Entry(10, (1, 1)),
    Op.LOG: Entry(11, (1, 1)),
    Op.SIN: Entry(12, (1, 1)),
    Op.COS: Entry(13, (1, 1)),
    Op.SUM: Entry(14, (1, 1)),
    Op.SUM_ROWS: Entry(15, (1, 1)),
    Op.CUMSUM: Entry(16, (1, 1)),
    Op.MEAN: Entry(17, (1, 1)),
    Op.ARGMAX: Entry(18, (1, 1)),
    Op.COUNT_EQUAL: Entry(19, (2, 2)),
    Op.REPEAT: Entry(20, (1, 1), to_wire=_repeat_to, from_wire=_repeat_from),
    Op.CONCAT: Entry(22, (2, 2), ConcatParams, (Field("dim", 0, lo=0, hi=3),)),
    Op.NORM: Entry(24, (1, 1), NormParams, _EPS),
    Op.RMS_NORM: Entry(25, (1, 1), NormParams, _EPS),
    Op.GROUP_NORM: Entry(27, (1, 1), GroupNormParams, (Field("n_groups", 0, lo=1), _f32("eps", 1, lo=0.0))),
    Op.L2_NORM: Entry(28, (1, 1), NormParams, _EPS),
    Op.MUL_MAT: Entry(29, (2, 2), extra=_MATMUL_EXTRA),
    Op.MUL_MAT_ID: Entry(30, (3, 3), extra=_MATMUL_EXTRA),
    Op.OUT_PROD: Entry(31, (2, 2)),
    Op.SCALE: Entry(32, (1, 1), ScaleParams, (_f32("s", 0, nan=True), _f32("b", 1, nan=True))),
    Op.SET: Entry(33, (2, 2), AccParams, (*_ACC, Field("offset", 3, lo=0, hi=(1 << 30) - 1)), inplace_slot=4),
    Op.CPY: Entry(34, (2, 2)),
    Op.CONT: Entry(35, (1, 1), ContParams, from_wire=_cont_from, check=_cont_check),
    Op.RESHAPE: Entry(36, (1, 1)),
    Op.VIEW: Entry(37, (1, 1), ViewParams, (Field("offset", 0, "u64", lo=0, hi=(1 << 63) - 1),)),
    Op.PERMUTE: Entry(38, (1, 1), PermuteParams, tuple(Field(f"axes[{i}]", i, lo=0, hi=3) for i in range(4)),
                      check=_permute_check),
    Op.TRANSPOSE: Entry(39, (1, 1)),
    Op.GET_ROWS: Entry(40, (2, 2)),
    Op.SET_ROWS: Entry(42, (3, 3), to_wire=_set_rows_to, from_wire=_set_rows_from),
    Op.DIAG: Entry(43, (1, 1)),
    Op.DIAG_MASK_INF: Entry(44, (1, 1), DiagMaskParams, (Field("n_past", 0, lo=0),)),
    Op.DIAG_MASK_ZERO: Entry(45, (1, 1), DiagMaskParams, (Field("n_past", 0, lo=0),)),
    Op.SOFT_MAX: Entry(46, (1, 3), SoftMaxParams, (_f32("scale", 0), _f32("max_bias", 1))),
    Op.ROPE: Entry(48, (2, 3), RopeParams, (
        Field("n_dims", 1, lo=1), Field("mode", 2, "enum", codes=ROPE_MODES, missing=ROPE_GGML_ONLY),
        Field("n_ctx_orig", 4, lo=0), _f32("freq_base", 5), _f32("freq_scale", 6), _f32("ext_factor", 7),
        _f32("attn_factor", 8), _f32("beta_fast", 9), _f32("beta_slow", 10),
    ), check=_rope_check),
    Op.CLAMP: Entry(50, (1, 1), ClampParams, (_f32("min", 0), _f32("max", 1))),
    Op.PAD: Entry(64, (1, 1), PadParams, tuple(Field(f"{side}[{i}]", 2 * i + j, lo=0)
                                               for i in range(4) for j, side in enumerate(("lp", "rp")))),
    Op.ARANGE: Entry(67, (0, 0), ArangeParams, (_f32("start", 0, finite=True), _f32("stop", 1, finite=True),
                                                 _f32("step", 2, finite=True)), check=_arange_check),
    Op.ARGSORT: Entry(69, (1, 1), ArgsortParams, (Field("order", 0, "enum", codes=SORT_CODES),)),
    Op.TOP_K: Entry(70, (1, 1), TopKParams, from_wire=_top_k_from, check=_top_k_check),
    Op.LEAKY_RELU: Entry(71, (1, 1), LeakyReluParams, (_f32("negative_slope", 0, nan=True),)),
    Op.FILL: Entry(73, (1, 1), FillParams, (_f32("value", 0, nan=True),)),
    Op.FLASH_ATTN_EXT: Entry(74, (3, 5), FlashAttnParams, (_f32("scale", 0), _f32("max_bias", 1),
                                                             _f32("logit_softcap", 2)),
                             extra=(Field("acc_prec", 3, "enum", codes=_PREC), Field("n_kv_max", 4, lo=0)),
                             to_wire=_flash_to),
    Op.UNARY: Entry(91, (1, 1), UnaryParams, (Field("op", 0, "enum", codes=UNARY_CODES, missing=UNARY_GGML_ONLY),
                                              _f32("alpha_n", 1), _f32("alpha_p", 2), _f32("beta", 3), _f32("eps", 4)),
                    wire=XieluParams, to_wire=_unary_to, from_wire=_unary_from),
    Op.GLU: Entry(100, (1, 2), GluParams, (Field("op", 0, "enum", codes=GLU_CODES, missing=GLU_GGML_ONLY),
                                          Field("swapped", 1, "bool"), _f32("alpha", 2), _f32("limit", 3)),
                  wire=SwigluOaiParams, to_wire=_glu_to, from_wire=_glu_from),
    Op.ADD_ID: Entry(3, (3, 3)),
    Op.CONV_TRANSPOSE_1D: Entry(51, (2, 2), conv.ConvTranspose1dParams, _spatial("s0", "p0", "d0")),
    Op.IM2COL: Entry(52, (2, 2), conv.Im2colParams, (*_CONV2D, Field("is_2d", 6, "bool")), from_wire=_dst_type_from),
    Op.IM2COL_BACK: Entry(53, (2, 2), conv.Im2colBackParams, (*_CONV2D, Field("is_2d", 6, "bool")),
                          wire=conv.Im2colParams, to_wire=_im2col_back_to, from_wire=_im2col_back_from,
                          check=_im2col_back_check),
    Op.IM2COL_3D: Entry(54, (2, 2), conv.Im2col3dParams, (*_CONV3D, Field("ic", 9, lo=1)), from_wire=_dst_type_from),
    Op.COL2IM_1D: Entry(55, (1, 1), conv.Col2im1dParams, _spatial("s0", "oc", "p0")),
    Op.CONV_2D: Entry(56, (2, 2), conv.Conv2dParams, _CONV2D),
    Op.CONV_3D: Entry(57, (2, 2), conv.Conv3dParams, (*_CONV3D, Field("c", 9, lo=1), Field("n", 10, lo=1),
                                                      Field("oc", 11, lo=1))),
    Op.CONV_2D_DW: Entry(58, (2, 2), conv.Conv2dParams, _CONV2D),
    Op.CONV_TRANSPOSE_2D: Entry(59, (2, 2), conv.ConvTranspose2dParams, (Field("stride", 0, lo=0),)),
    Op.TRI: Entry(72, (1, 1), TriParams, (Field("tri_type", 0, "enum", codes={t: int(t) for t in TriType}),)),
    Op.SSM_CONV: Entry(76, (2, 2)),
    Op.SSM_SCAN: Entry(77, (7, 7), SsmScanParams, (Field("k", 0, lo=1),)),
    Op.RWKV_WKV6: Entry(82, (6, 6)),
    Op.GATED_LINEAR_ATTN: Entry(83, (5, 5), GlaParams, (_f32("scale", 0, nan=True),)),
    Op.RWKV_WKV7: Entry(84, (7, 7)),
    Op.SOLVE_TRI: Entry(85, (2, 2)),
    Op.GATED_DELTA_NET: Entry(86, (6, 6), GatedDeltaNetParams, (Field("k", 0, lo=1),)),
    Op.POOL_1D: Entry(60, (1, 1), Pool1DParams, (_POOL_OP, Field("k0", 1, lo=1), Field("s0", 2, lo=1),
                                                  Field("p0", 3, lo=0))),
    Op.POOL_2D: Entry(61, (1, 1), Pool2DParams, (_POOL_OP, *(Field(n, i, lo=1) for i, n in enumerate(
        ("k0", "k1", "s0", "s1"), 1)), Field("p0", 5, lo=0), Field("p1", 6, lo=0))),
    Op.UPSCALE: Entry(63, (1, 1), UpscaleParams, (Field("mode", 0, lo=0),), wire=UpscaleWord, to_wire=_upscale_to,
                      from_wire=_upscale_from, check=_upscale_check),
    Op.PAD_REFLECT_1D: Entry(65, (1, 1), PadReflect1DParams, (Field("p0", 0, lo=0), Field("p1", 1, lo=0))),
    Op.ROLL: Entry(66, (1, 1), RollParams, tuple(Field(f"shifts[{i}]", i) for i in range(4))),
    Op.TIMESTEP_EMBEDDING: Entry(68, (1, 1), TimestepEmbeddingParams, (Field("dim", 0, lo=1),
                                                                       Field("max_period", 1, lo=1))),
    Op.WIN_PART: Entry(78, (1, 1), WinPartParams, (Field("npx", 0, lo=1), Field("npy", 1, lo=1),
                                                   Field("w", 2, lo=1))),
    Op.WIN_UNPART: Entry(79, (1, 1), WinUnpartParams, (Field("w", 0, lo=1),), wire=WinUnpartWord,
                         to_wire=_win_unpart_to, from_wire=_win_unpart_from, check=_win_unpart_check),
    Op.GET_REL_POS: Entry(80, (1, 1)),
    Op.ADD_REL_POS: Entry(81, (3, 3), inplace_slot=0),
    Op.LIGHTNING_INDEXER: Entry(87, (4, 4)),
    Op.DSV4_HC_COMB: Entry(88, (3, 3), HcCombParams, (_f32("eps", 0, finite=True), Field("n_iter", 1, lo=1))),
    Op.DSV4_HC_PRE: Entry(89, (2, 2), HcPreParams, (_f32("scale", 0, finite=True), Field("gated", 1, "bool"))),
    Op.DSV4_HC_POST: Entry(90, (3, 4)),
    **{op: Entry(code, n, to_wire=_no_custom, from_wire=_no_custom_from)
       for op, code, n in ((Op.MAP_CUSTOM1, 92, (1, 1)), (Op.MAP_CUSTOM2, 93, (2, 2)), (Op.MAP_CUSTOM3, 94, (3, 3)),
                           (Op.CUSTOM, 95, (0, GGML_MAX_SRC)))},
}
"""Every pyggml op but NONE (ggml op 0, a leaf)."""
ENTRIES.update({  # training: the backward ops, the loss and the optimiser steps (ggml's srcs and words as they are)
    Op.REPEAT_BACK: Entry(21, (1, 1), ShapeParams, from_wire=_shape_from, check=_shape_check),
    Op.SILU_BACK: Entry(23, (2, 2)),
    Op.RMS_NORM_BACK: Entry(26, (2, 2), NormParams, _EPS),
    Op.GET_ROWS_BACK: Entry(41, (2, 2), ShapeParams, from_wire=_shape_from, check=_shape_check),
    Op.SOFT_MAX_BACK: Entry(47, (2, 2), SoftMaxParams, (_f32("scale", 0), _f32("max_bias", 1))),
    Op.ROPE_BACK: dataclasses.replace(ENTRIES[Op.ROPE], code=49),  # ggml_rope_ext_back: ROPE's words
    Op.POOL_2D_BACK: dataclasses.replace(ENTRIES[Op.POOL_2D], code=62, n_src=(2, 2)),  # POOL_2D's words
    Op.CROSS_ENTROPY_LOSS: Entry(96, (2, 2)),
    Op.CROSS_ENTROPY_LOSS_BACK: Entry(97, (3, 3)),
    Op.OPT_STEP_ADAMW: Entry(98, (5, 5)),
    Op.OPT_STEP_SGD: Entry(99, (3, 3)),
})

BY_CODE: dict[int, Op] = {e.code: op for op, e in ENTRIES.items()}
