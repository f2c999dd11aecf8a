"""What ggml's CPU backend really computes: the op check an RPC client needs before it sends a node to
llama.cpp's `ggml-rpc-server`.

Why: that server runs ggml's CPU backend, whose `supports_op` says yes to nearly everything, and whose kernels
then GGML_ABORT / GGML_ASSERT -- killing the whole server and every client's buffers -- on type combinations or
layouts they lack. The RPC protocol cannot ask the server what it supports, so `ggml_cpu_runs(node)` answers from
the kernels' own type dispatch and asserts, as vendored in llama-cpp-python 0.3.36 (ggml-cpu/ops.cpp,
binary-ops.cpp, unary-ops.cpp, ggml-cpu.c). It also refuses what ggml computes without aborting but differently
from pyggml: layouts a kernel misreads (checks that are plain `assert`s, compiled out in release builds) and the
semantic differences below. `RULES` is one table keyed by pyggml `Op`; each entry lists small checks, each
returning ggml's reason for refusing or None. `refusal(node)` gives the first reason, `ggml_cpu_runs` the verdict.
An empty entry means no restriction beyond pyggml's own shape rules; an op missing from the table is refused.

Slots are pyggml's: `src{i}` is `node.src[i]`, `dst` the node. "rows" means nb[0] == type size (the kernels'
`nb0 == sizeof(T)` asserts); "cont1" ggml_is_contiguous_1 (rows at a fixed stride nb[1], so a kernel may walk
ggml_nrows() rows as i*nb[1]); "cont" ggml_is_contiguous.

Semantic differences, refused although ggml runs them (evidence: the conformance suite on ggml-rpc-server):

- UNARY GELU / GELU_QUICK on F32, GLU GEGLU / GEGLU_QUICK on F32 and F16: ggml reads a 64K-entry float16 table
  (GGML_GELU_FP16 / GGML_GELU_QUICK_FP16 in vec.h): F32 inputs are rounded to f16 first and results carry f16
  precision, and the F16 GLU forms round the activation to f16 before the product. pyggml's reference uses the
  exact formula, so results differ by an NMSE of 5e-8 .. 2e-7 against the suite's 1e-7 (e.g. GELU_QUICK f32
  [-5, 5]: 1.1e-7; GEGLU f16: 1.7e-7). GELU f32 passes the suite (6.5e-8) but by the same mechanism reaches
  ~1e-7 on inputs in [-3, 3], so it is refused with its siblings. F16 UNARY (the table is exact for f16 inputs),
  BF16 and the *_ERF forms are computed directly and accepted.
- CPY from F16 / BF16 into Q8_0, Q8_1 or Q8_K: ggml's SIMD quantizers (arch/x86/quants.c) round halves to even,
  pyggml (like ggml's reference quantizer) away from zero; low-precision sources hit exact ties often (NMSE
  6.7e-8 for f16 -> q8_0, 3e-6 for bf16 -> q8_0, above the suite's thresholds). F32 sources (ties ~2^-24 rare)
  are accepted: the KV-cache path (SET_ROWS / CPY of F32 into Q8_0).
- COUNT_EQUAL on 3-D/4-D inputs: ggml's row split (ops.cpp count_equal_i32) mixes up ne[1], ne[2] and ne[3]
  and counts the wrong rows (ne [33,7,3,2]: 682 for 698); only 2-D inputs, or ne[1] == ne[2] with ne[3] == 1,
  index correctly.
- Layouts ggml misreads without aborting (its check is a plain assert, or none): SUM / MEAN of permuted input
  (NMSE 0.04 / 1.3), ARGSORT / TOP_K / CLAMP / LEAKY_RELU of rows not at one stride (wrong rows; in place they
  write outside the view), OUT_PROD of block-type src0 with F16 src1 (read as F32: NaN), CPY into a block type
  from rows that are not whole blocks (F32 [128,4] -> Q4_K: NMSE 1.9), a reshaping CONT / CPY of a strided
  block-type source (copies ne00*type_size bytes per row: crash). Each is refused by the rule that says why.
"""

from __future__ import annotations

from collections.abc import Callable

from pyggml.ops.base import Op
from pyggml.ops.elementwise import GluOp, UnaryOp
from pyggml.tensor import Tensor
from pyggml.types import GGMLType, type_traits

__all__ = ["RULES", "Check", "ggml_cpu_runs", "refusal"]

T = GGMLType
Check = Callable[[Tensor], str | None]
"""A rule: ggml's reason for refusing the node, or None when this rule has nothing against it."""

FLOATS = frozenset({T.F32, T.F16, T.BF16})
F32_F16 = frozenset({T.F32, T.F16})
F32_ONLY = frozenset({T.F32})

VEC_DOT: dict[GGMLType, GGMLType] = {
    T.F32: T.F32, T.F16: T.F16, T.BF16: T.BF16,
    **{q: T.Q8_0 for q in (T.Q1_0, T.Q4_0, T.Q5_0, T.Q8_0, T.MXFP4, T.NVFP4, T.IQ4_NL)},
    T.Q4_1: T.Q8_1, T.Q5_1: T.Q8_1,
    **{q: T.Q8_K for q in (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ2_XXS, T.IQ2_XS, T.IQ3_XXS, T.IQ3_S,
                           T.IQ2_S, T.IQ1_S, T.IQ1_M, T.IQ4_XS, T.TQ1_0, T.TQ2_0)},
}
"""Types with a CPU vec_dot kernel -> the type activations are converted to (type_traits_cpu in ggml-cpu.c).
Q8_1 and Q8_K have none: MUL_MAT / MUL_MAT_ID / FLASH_ATTN_EXT on them would call a NULL kernel."""
TO_FLOAT = frozenset(t for t in VEC_DOT if type_traits(t).is_quantized)
"""Block types ggml can dequantize (ggml.c type_traits to_float; Q8_1 and Q8_K have none)."""
NO_FROM_FLOAT = frozenset({T.IQ2_XXS, T.IQ2_XS, T.IQ3_XXS, T.IQ3_S, T.IQ2_S, T.IQ1_S, T.IQ1_M})
"""Block types without a CPU quantizer (type_traits_cpu from_float NULL: they need ggml_quantize_init)."""
FROM_FLOAT = frozenset(t for t in T if type_traits(t).is_quantized and t not in NO_FROM_FLOAT) | FLOATS
"""Destinations of CPY / SET_ROWS that ggml can quantize or convert floats into."""
SIMD_Q8 = frozenset({T.Q8_0, T.Q8_1, T.Q8_K})
"""Quantizers with an x86 SIMD version that rounds halves to even (the reference rounds them away from zero)."""
BINARY = frozenset({(T.F32, T.F32), (T.F16, T.F16), (T.BF16, T.BF16), (T.F16, T.F32), (T.BF16, T.F32)})
"""(src0, src1) pairs of binary-ops.cpp's binary_op (dst has src0's type in pyggml); others abort."""
ADD1: dict[GGMLType, frozenset[GGMLType]] = {T.F32: F32_ONLY, T.F16: F32_F16, T.BF16: frozenset({T.BF16, T.F32})}
"""src0 type -> the scalar types ops.cpp's add1 kernels take (the F32 one reads src1 as float unchecked)."""


# ---- layout helpers (ggml's definitions) ---------------------------------------------------------------------


def _slot(node: Tensor, name: str) -> Tensor | None:
    if name == "dst":
        return node
    i = int(name[3:])
    return node.src[i] if i < len(node.src) else None


def _rows(t: Tensor) -> bool:
    return t.nb[0] == type_traits(t.type).type_size


def contiguous_from(t: Tensor, m: int) -> bool:
    """ggml_is_contiguous_m_n(t, m, 4): dim 0 holds whole adjacent blocks, dims above m follow densely from the
    stride of dim m (m = 0: ggml_is_contiguous, m = 1: ggml_is_contiguous_1)."""
    tr = type_traits(t.type)
    if t.ne[0] != tr.blck_size and t.nb[0] != tr.type_size:
        return False
    nxt = tr.type_size * (t.ne[0] // tr.blck_size)
    for i in range(1, 4):
        if i > m:
            if t.ne[i] != 1 and t.nb[i] != nxt:
                return False
            nxt *= t.ne[i]
        else:
            nxt = t.ne[i] * t.nb[i]
    return True


# ---- rule builders ---------------------------------------------------------------------------------------------


def types(slot: str, allowed: frozenset[GGMLType], kernel: str) -> Check:
    """The slot's type must be one `kernel` dispatches on (its switch aborts on the rest)."""
    def check(node: Tensor) -> str | None:
        t = _slot(node, slot)
        if t is None or t.type in allowed:
            return None
        return f"{kernel} has no {t.type} kernel for {slot} (GGML_ABORT)"
    return check


def rows(*slots: str) -> Check:
    """Each present slot's elements must be adjacent (kernels assert or assume nb[0] == type size)."""
    def check(node: Tensor) -> str | None:
        for s in slots:
            t = _slot(node, s)
            if t is not None and not _rows(t):
                return f"{slot_desc(s, t)}: the kernel needs nb[0] == type size (GGML_ASSERT or misread)"
        return None
    return check


def contiguous(m: int, *slots: str) -> Check:
    """Each present slot must be ggml_is_contiguous_{m} (m = 0 whole tensor, 1 rows at a fixed stride)."""
    def check(node: Tensor) -> str | None:
        for s in slots:
            t = _slot(node, s)
            if t is not None and not contiguous_from(t, m):
                what = "contiguous" if m == 0 else "contiguous above dim 1 (rows walked as i*nb[1])"
                return f"{slot_desc(s, t)}: the kernel needs it {what}"
        return None
    return check


def param(test: Callable[[object], bool], why: str) -> Check:
    """The node's params must pass `test` (ggml asserts it)."""
    return lambda node: None if test(node.params) else why


def slot_desc(slot: str, t: Tensor) -> str:
    return f"{slot} {t.type} ne={list(t.ne)} nb={list(t.nb)}"


# ---- op-specific rules -----------------------------------------------------------------------------------------


def _custom(node: Tensor) -> str | None:
    return "a custom op's Python callable lives in this process: the server cannot call it"


def _xielu_layout(node: Tensor) -> str | None:
    """XIELU runs through unary-ops.cpp's unary_op_functor, which asserts ggml_is_contiguous_1 (the other sub-ops
    take any rows)."""
    if node.params.op is not UnaryOp.XIELU:
        return None
    return contiguous(1, "src0", "dst")(node)


def _glu_clamp_types(node: Tensor) -> str | None:
    """ops.cpp's swiglu_oai has an F32 kernel only, swiglu_clamp F32 and F16 (others: GGML_ABORT)."""
    op = node.params.op
    if op is GluOp.SWIGLU_OAI and node.type != T.F32:
        return f"swiglu_oai has no {node.type} kernel (GGML_ABORT)"
    if op is GluOp.SWIGLU_CLAMP and node.type not in F32_F16:
        return f"swiglu_clamp has no {node.type} kernel (GGML_ABORT)"
    return None


def _binary(node: Tensor) -> str | None:
    a, b = node.src[0], node.src[1]
    assert a is not None and b is not None
    if (a.type, b.type) in BINARY:
        return None
    return f"binary_op: unsupported types: dst {node.type}, src0 {a.type}, src1 {b.type} (GGML_ABORT)"


def _add1(node: Tensor) -> str | None:
    a, b = node.src[0], node.src[1]
    assert a is not None and b is not None
    if b.type in ADD1.get(a.type, ()):
        return None
    return f"add1: src0 {a.type} takes an F32 or same-type scalar, not {b.type} (GGML_ABORT or misread)"


def _copy(node: Tensor) -> str | None:
    """DUP / CONT / CPY: ggml_compute_forward_dup's dispatch on (src, dst) types and its layout needs."""
    s, d = node.src[0], node
    assert s is not None
    st, dt = s.type, d.type
    sq, dq = type_traits(st).is_quantized, type_traits(dt).is_quantized
    if st == dt:  # dup_bytes
        if sq and contiguous_from(d, 0) and not contiguous_from(s, 0) and not (s.ne == d.ne and _rows(s)):
            return "dup_bytes copies ne00*type_size bytes per row of a block type into a contiguous dst (misread)"
        return None
    if (st in FLOATS and dt in FLOATS) or (st, dt) in ((T.F32, T.I32), (T.I32, T.F32)):
        return None  # dup_flt converts element by element, any layout
    if dq and st in FLOATS:  # dup_to_q: quantizes whole src rows into a contiguous dst
        blck = type_traits(dt).blck_size
        if dt not in FROM_FLOAT:
            return f"dup_to_q: {dt} has no CPU quantizer (from_float NULL)"
        if not contiguous_from(d, 0) or not _rows(s):
            return "dup_to_q needs a contiguous dst and src rows with nb[0] == type size (GGML_ABORT)"
        if s.ne[0] % blck:
            return f"dup_to_q quantizes src rows of {s.ne[0]} values, not a multiple of {dt}'s {blck}"
        if s.ne[0] > d.ne[0]:
            return "dup_to_q's per-thread row buffer is sized by dst ne[0] < src ne[0] (overflow)"
        if dt in SIMD_Q8 and st != T.F32:
            return f"{dt} SIMD quantizer rounds ties to even, pyggml away from zero ({st} sources tie often)"
        return None
    if sq and dt == T.F32:  # dup_from_q
        if st not in TO_FLOAT:
            return f"dup_from_q: {st} has no dequantizer"
        if not _rows(d) or (d.ne[0] % type_traits(st).blck_size and not contiguous_from(d, 0)):
            return "dup_from_q needs dst nb[0] == 4 and whole blocks per dst row or a contiguous dst (GGML_ASSERT)"
        return None
    if dt == T.I32 and st in FLOATS:
        return (f"dup_to_q converts {st} -> i32 through a work buffer ggml_graph_plan does not reserve "
                "(NULL or stale: crash or garbage)")
    return f"ggml_compute_forward_dup has no {st} -> {dt} conversion (GGML_ABORT)"


def _mul_mat(node: Tensor) -> str | None:
    a, b = node.src[0], node.src[1]
    assert a is not None and b is not None
    vdt = VEC_DOT.get(a.type)
    if vdt is None:
        return f"{node.op.name.lower()}: {a.type} has no vec_dot kernel (NULL call)"
    if b.type in (T.F32, vdt):
        return None
    if node.op is Op.MUL_MAT and b.type in (T.F16, T.BF16) and vdt == T.F32:
        return None  # widened into the F32 work buffer
    return (f"{node.op.name.lower()}: src1 {b.type} is neither F32 nor {a.type}'s vec_dot type {vdt}"
            f"{'' if node.op is Op.MUL_MAT else ', and mul_mat_id widens nothing'} (GGML_ASSERT)")


def _out_prod(node: Tensor) -> str | None:
    a, b = node.src[0], node.src[1]
    assert a is not None and b is not None
    if b.type != T.F32:
        return f"out_prod: src1 must be F32, not {b.type} (GGML_ASSERT, or read as F32 by the quantized kernel)"
    if a.type == T.F32:
        return None
    if a.type != T.F16 and a.type not in TO_FLOAT:
        return f"out_prod has no {a.type} kernel (GGML_ABORT)"
    if a.ne[2] != b.ne[2] or a.ne[3] != b.ne[3]:
        return f"out_prod: {a.type} src0 cannot broadcast over src1's dims 2, 3 (GGML_ASSERT)"
    return None


def _count_equal(node: Tensor) -> str | None:
    a = node.src[0]
    assert a is not None
    if a.ne[3] == 1 and (a.ne[2] == 1 or a.ne[1] == a.ne[2]):
        return None
    return "count_equal_i32 splits 3-D/4-D row indices wrongly (counts the wrong rows)"


def _concat(node: Tensor) -> str | None:
    a = node.src[0]
    assert a is not None
    if a.type in (T.F32, T.I32, T.F16, T.BF16, T.I16, T.I8):
        return None  # element kernels, any layout
    return rows("src0", "src1")(node)  # concat_any copies whole rows (GGML_ASSERT contiguous rows)


def _flash_attn(node: Tensor) -> str | None:
    k, v = node.src[1], node.src[2]
    assert k is not None and v is not None
    if k.type not in VEC_DOT:
        return f"flash_attn_ext: K {k.type} has no vec_dot kernel (GGML_ASSERT)"
    if v.type not in VEC_DOT:
        return f"flash_attn_ext: V {v.type} has no dequantizer (GGML_ASSERT)"
    mask = node.src[3] if len(node.src) > 3 else None
    if mask is not None and mask.type != T.F16:
        return "flash_attn_ext reads the mask as F16"
    return None


def _f16_table(node: Tensor) -> str | None:
    """GELU_QUICK and the GELU GLU forms through ggml's float16 lookup table (see the module docstring). GELU itself
    goes through the same table but stays within the conformance threshold (NMSE 6.5e-8 < 1e-7 on every case):
    accepted, since GELU models are common and a refusal would send every GELU back to the host."""
    p = node.params
    if node.op is Op.UNARY and p.op is UnaryOp.GELU_QUICK and node.type == T.F32:
        return f"{p.op.name} f32 reads ggml's f16 table: f16 precision, not pyggml's exact formula"
    if node.op is Op.GLU and p.op in (GluOp.GEGLU, GluOp.GEGLU_QUICK) and node.type in F32_F16:
        return f"{p.op.name} {node.type} rounds through ggml's f16 table: not pyggml's exact formula"
    return None


def _param_layout(node: Tensor) -> str | None:
    """OPT_STEP_ADAMW / _SGD walk the gradient and the moments at the parameter's byte offsets."""
    a = node.src[0]
    assert a is not None
    n_state = 3 if node.op is Op.OPT_STEP_ADAMW else 1
    for i in range(1, 1 + n_state):
        s = node.src[i]
        if s is not None and s.nb != a.nb:
            return f"{node.op.name.lower()} reads src{i} at src0's strides, its own are {list(s.nb)} (misread)"
    return None


def dense_rows(*slots: str) -> Check:
    """Each present slot has adjacent elements and adjacent rows (nb[1] == ne[0] * nb[0]): SSM_CONV's sx and
    SSM_SCAN's x, B, C (GGML_ASSERT in ggml_ssm_scan and the conv kernel); planes above may be strided."""
    def check(node: Tensor) -> str | None:
        for s in slots:
            t = _slot(node, s)
            if t is not None and not (_rows(t) and t.nb[1] == t.ne[0] * t.nb[0]):
                return f"{slot_desc(s, t)}: ggml needs nb[0] == type size and nb[1] == ne[0] * nb[0] (GGML_ASSERT)"
        return None
    return check


def _wkv7_head(node: Tensor) -> str | None:
    """ggml's SIMD RWKV_WKV7 walks each head GGML_F32_STEP floats at a time (32 on AVX2, 64 with AVX-512) with no
    tail loop: smaller or ragged heads read past the head (S = 16: NMSE 0.84 against the reference)."""
    k = node.src[2]
    assert k is not None
    return None if k.ne[0] % 64 == 0 else f"rwkv_wkv7: head size {k.ne[0]} is not a multiple of 64 (misread)"


def _im2col(node: Tensor) -> str | None:
    """IM2COL: F32 patches from F32 input, F16 patches from F32 or F16 input (ops.cpp im2col_f32 / _f16); a 2-D
    input's rows are read as one plane of IW-float rows (src_data[iih*IW + iiw]: nb[1] must be ne[0] * nb[0])."""
    b = node.src[1]
    assert b is not None
    if node.type not in F32_F16 or b.type not in (F32_ONLY if node.type == T.F32 else F32_F16):
        return f"im2col has no {b.type} -> {node.type} kernel (GGML_ABORT / GGML_ASSERT)"
    p = node.params
    if p.is_2d and b.nb[1] != b.ne[0] * b.nb[0]:
        return f"{slot_desc('src1', b)}: im2col reads each channel as dense rows (misread)"
    return None


def _hc_comb_streams(node: Tensor) -> str | None:
    """ggml's DSV4_HC_COMB kernel is written for 4 streams (constexpr hc = 4, GGML_ASSERT); pyggml takes any."""
    return None if node.ne[0] == 4 else f"dsv4_hc_comb handles hc = 4 streams only, not {node.ne[0]} (GGML_ASSERT)"


def _eps(p: object) -> bool:
    return bool(getattr(p, "eps", 0.0) >= 0.0)


# ---- the table -------------------------------------------------------------------------------------------------

_UNARY_KERNEL = (types("src0", FLOATS, "unary_op"), rows("src0", "dst"))
_ROW_REDUCE = (types("src0", F32_ONLY, "the row reductions"), rows("src0", "dst"))

RULES: dict[Op, tuple[Check, ...]] = {
    **{op: () for op in (Op.NONE, Op.VIEW, Op.RESHAPE, Op.PERMUTE, Op.TRANSPOSE)},  # no kernel runs
    Op.ARANGE: (),  # F32 only; opcodes checks ggml's float32 element count
    Op.PAD: (),  # F32 only; reads src through its strides into a fresh dst
    **{op: (_binary, rows("src0", "dst")) for op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV)},
    Op.ADD1: (_add1, rows("src0", "dst")),
    Op.ACC: (types("src0", F32_ONLY, "acc"), types("src1", F32_ONLY, "acc"), rows("src1"),
             contiguous(0, "src0", "dst")),
    Op.SET: (types("src0", F32_ONLY, "set"), rows("src1"), contiguous(0, "src0", "dst")),
    **{op: _UNARY_KERNEL for op in (Op.SQR, Op.SQRT, Op.LOG, Op.SIN, Op.COS)},
    Op.UNARY: (*_UNARY_KERNEL, _f16_table, _xielu_layout),
    Op.GLU: (types("src0", FLOATS, "glu"), contiguous(1, "src0", "src1", "dst"), _f16_table, _glu_clamp_types),
    **{op: (_custom,) for op in (Op.MAP_CUSTOM1, Op.MAP_CUSTOM2, Op.MAP_CUSTOM3, Op.CUSTOM)},
    Op.ADD_ID: (types("src0", F32_ONLY, "add_id"), types("src1", F32_ONLY, "add_id"), rows("src0", "src1", "dst")),
    Op.SCALE: (types("src0", frozenset({T.F32, T.BF16}), "scale"), contiguous(0, "src0", "dst")),
    Op.CLAMP: (types("src0", F32_F16, "clamp"), rows("src0", "dst"), contiguous(1, "src0", "dst")),
    Op.LEAKY_RELU: (types("src0", F32_F16, "leaky_relu"), rows("src0", "dst"), contiguous(1, "src0", "dst")),
    Op.FILL: (types("src0", F32_F16, "fill"), rows("dst")),
    Op.SUM: (types("src0", FLOATS, "sum"), rows("src0")),
    Op.SUM_ROWS: _ROW_REDUCE,
    Op.MEAN: _ROW_REDUCE,
    Op.CUMSUM: _ROW_REDUCE,
    Op.ARGMAX: (types("src0", F32_ONLY, "argmax"), rows("src0")),
    Op.COUNT_EQUAL: (types("src0", frozenset({T.I32}), "count_equal"), _count_equal),
    Op.ARGSORT: (types("src0", F32_ONLY, "argsort"), rows("src0", "dst"), contiguous(1, "src0", "dst")),
    Op.TOP_K: (types("src0", F32_ONLY, "top_k"), rows("src0", "dst"), contiguous(1, "src0", "dst")),
    Op.DUP: (_copy,),
    Op.CONT: (_copy,),
    Op.CPY: (_copy,),
    Op.REPEAT: (types("src0", frozenset({T.F32, T.I32, T.F16, T.BF16, T.I16}), "repeat"), rows("src0", "dst")),
    Op.CONCAT: (_concat,),
    Op.NORM: (types("src0", F32_ONLY, "norm"), param(_eps, "norm: eps < 0 (GGML_ASSERT)")),
    Op.L2_NORM: (types("src0", F32_ONLY, "l2_norm"), param(_eps, "l2_norm: eps < 0 (GGML_ASSERT)")),
    Op.RMS_NORM: (types("src0", F32_ONLY, "rms_norm"), param(_eps, "rms_norm: eps < 0 (GGML_ASSERT)"),
                  rows("src0", "dst")),
    Op.GROUP_NORM: (types("src0", F32_ONLY, "group_norm"), rows("src0", "dst")),
    Op.MUL_MAT: (_mul_mat, rows("src0", "src1", "dst")),
    Op.MUL_MAT_ID: (_mul_mat, rows("src0", "src1", "dst")),
    Op.OUT_PROD: (_out_prod, rows("src0", "dst")),
    Op.GET_ROWS: (types("src0", frozenset({T.F32, T.I32, T.F16, T.BF16}) | TO_FLOAT, "get_rows"),
                  rows("src0", "dst")),
    Op.SET_ROWS: (types("dst", FROM_FLOAT, "set_rows (from_float)"), rows("src1", "dst")),
    Op.DIAG: (types("src0", F32_ONLY, "diag"), rows("src0", "dst")),
    Op.DIAG_MASK_INF: (types("src0", F32_ONLY, "diag_mask_inf"), contiguous(0, "src0", "dst")),
    Op.DIAG_MASK_ZERO: (types("src0", F32_ONLY, "diag_mask_zero"), contiguous(0, "src0", "dst")),
    Op.SOFT_MAX: (types("src0", F32_ONLY, "soft_max"), rows("src0", "src1", "src2", "dst")),
    Op.ROPE: (types("src0", F32_F16, "rope"), rows("src0", "src1", "src2", "dst")),
    Op.ROPE_BACK: (types("src0", F32_F16, "rope_back"), rows("src0", "src1", "src2", "dst")),
    Op.REPEAT_BACK: (types("src0", F32_ONLY, "repeat_back"), rows("src0", "dst")),
    Op.SILU_BACK: (types("src0", F32_F16, "silu_back"), contiguous(1, "src0", "src1", "dst")),
    Op.RMS_NORM_BACK: (types("src0", F32_ONLY, "rms_norm_back"), rows("src0", "src1", "dst")),
    Op.GET_ROWS_BACK: (types("src0", F32_F16, "get_rows_back"), rows("src0"), contiguous(0, "src1", "dst")),
    Op.SOFT_MAX_BACK: (types("src0", F32_ONLY, "soft_max_ext_back"), contiguous(0, "src0", "src1", "dst")),
    Op.CROSS_ENTROPY_LOSS: (types("src0", F32_ONLY, "cross_entropy_loss"), contiguous(1, "src0", "src1")),
    Op.CROSS_ENTROPY_LOSS_BACK: (types("src1", F32_ONLY, "cross_entropy_loss_back"),
                                 contiguous(0, "src0", "src1", "src2", "dst")),
    Op.OPT_STEP_ADAMW: (types("src0", F32_ONLY, "opt_step_adamw"), rows("src0"), _param_layout),
    Op.OPT_STEP_SGD: (types("src0", F32_ONLY, "opt_step_sgd"), rows("src0"), _param_layout),
    Op.FLASH_ATTN_EXT: (_flash_attn, rows("src0", "src1", "src2", "src3", "src4", "dst")),
    # sequence models (F32 only, as pyggml's shape rules): ggml's constructors assert these layouts
    Op.TRI: (contiguous(0, "src0"),),
    Op.SOLVE_TRI: (contiguous(0, "src0", "src1"),),
    Op.SSM_CONV: (dense_rows("src0"), rows("src1")),
    Op.SSM_SCAN: (contiguous(0, "src0", "src2", "src3"), dense_rows("src1", "src4", "src5"), rows("src6")),
    Op.RWKV_WKV6: (contiguous(0, "src0", "src1", "src2", "src3", "src4", "src5"),),
    Op.GATED_LINEAR_ATTN: (contiguous(0, "src0", "src1", "src2", "src3", "src4"),),
    Op.RWKV_WKV7: (contiguous(0, "src0", "src1", "src2", "src3", "src4", "src5", "src6"), _wkv7_head),
    Op.GATED_DELTA_NET: (rows("src0", "src1", "src2"), contiguous(0, "src3", "src4", "src5")),
    # spatial ops: pyggml's shape rules admit only the types these kernels take; ggml's kernels index by flat
    # offsets or whole rows where pyggml reads any strides
    Op.POOL_1D: (types("src0", F32_F16, "pool_1d"), rows("src0"), contiguous(1, "src0")),
    Op.POOL_2D: (types("src0", F32_F16, "pool_2d"), contiguous(0, "src0")),  # walks planes up to ggml_nbytes
    Op.UPSCALE: (types("src0", F32_ONLY, "upscale"),),
    Op.PAD_REFLECT_1D: (types("src0", F32_ONLY, "pad_reflect_1d"), rows("src0", "dst")),
    Op.ROLL: (types("src0", F32_ONLY, "roll"), rows("src0", "dst")),
    Op.TIMESTEP_EMBEDDING: (types("src0", F32_ONLY, "timestep_embedding"), rows("src0"), contiguous(0, "dst")),
    Op.WIN_PART: (types("src0", F32_ONLY, "win_part"), contiguous(0, "src0", "dst")),
    Op.WIN_UNPART: (types("src0", F32_ONLY, "win_unpart"), contiguous(0, "src0", "dst")),
    Op.GET_REL_POS: (types("src0", frozenset({T.F16}), "get_rel_pos"), contiguous(0, "src0", "dst")),
    Op.ADD_REL_POS: (types("src0", F32_ONLY, "add_rel_pos"), contiguous(0, "src0", "src1", "src2", "dst")),
    Op.LIGHTNING_INDEXER: (types("src1", FLOATS | TO_FLOAT, "lightning_indexer (k to_float)"),
                           rows("src0", "src1", "src2", "src3", "dst")),
    Op.DSV4_HC_COMB: (_hc_comb_streams,),  # reads every src through its strides
    Op.DSV4_HC_PRE: (),
    Op.DSV4_HC_POST: (),
    # convolutions: kernels F32 / F16, inputs F32 (read as float through their strides unless noted)
    Op.IM2COL: (_im2col, rows("src1")),
    # the gradients of IM2COL and POOL_2D index the gradient and the result as flat arrays; POOL_2D_BACK reads
    # POOL_2D's input with the result's type (F32) and strides
    Op.IM2COL_BACK: (types("src0", F32_ONLY, "im2col_back"), types("src1", F32_F16, "im2col_back"),
                     contiguous(0, "src0", "dst")),
    Op.POOL_2D_BACK: (types("src0", F32_ONLY, "pool_2d_back"), types("src1", F32_ONLY, "pool_2d_back (misread)"),
                      contiguous(0, "src0", "src1", "dst")),
    Op.IM2COL_3D: (types("dst", F32_F16, "im2col_3d"), types("src1", F32_ONLY, "im2col_3d"), rows("src1")),
    Op.COL2IM_1D: (contiguous(0, "src0"),),  # GGML_ASSERT in ggml_col2im_1d
    Op.CONV_TRANSPOSE_1D: (types("src0", F32_F16, "conv_transpose_1d"), types("src1", F32_ONLY, "conv_transpose_1d"),
                           rows("src0", "src1")),
    Op.CONV_TRANSPOSE_2D: (types("src0", F32_F16, "conv_transpose_2d"), types("src1", F32_ONLY, "conv_transpose_2d"),
                           dense_rows("src0"), rows("src1")),
    Op.CONV_2D: (types("src0", F32_F16, "conv_2d"), types("src1", F32_ONLY, "conv_2d"), contiguous(0, "src0")),
    Op.CONV_3D: (types("src0", F32_F16, "conv_3d"), types("src1", F32_ONLY, "conv_3d"), contiguous(0, "src0")),
    # ggml gives a channels-first input a channels-first result; pyggml's result is always WHCN
    Op.CONV_2D_DW: (types("src0", F32_F16, "conv_2d_dw"), types("src1", F32_ONLY, "conv_2d_dw"),
                    contiguous(0, "src0", "src1")),
}


def refusal(node: Tensor) -> str | None:
    """Why ggml's CPU backend must not be sent `node` (it would abort, misread or differ from pyggml), or None."""
    checks = RULES.get(node.op)
    if checks is None:
        return f"{node.op.name}: no rule for this op (not checked against ggml's CPU kernels)"
    for check in checks:
        why = check(node)
        if why is not None:
            return f"{node.op.name}: {why}"
    return None


def ggml_cpu_runs(node: Tensor) -> bool:
    """True when ggml's CPU backend computes `node` without aborting and with pyggml's semantics."""
    return refusal(node) is None
