"""Edge cases every backend must handle as the reference does (issue 19): NaN and infinities in every position of
reductions, sorts, CLAMP and matrix products, and in keys that flash attention's mask drops for some queries; NaN
and infinities quantised into every block type the backends write (CPY, SET_ROWS, and read back by CPY, GET_ROWS
and MUL_MAT: the block holding one is NaN, pyggml.quants.nan_block; issue 33); infinities, NaN and huge values
through every UNARY and GLU activation (limits, not NaN: GELU(-inf) = 0, TANH(+-inf) = +-1); ids out of range
(GET_ROWS, SET_ROWS, MUL_MAT_ID), which must raise a ComputeError everywhere and write nothing outside the
destination; rows of 2^24 elements and more for the reductions (float accumulators and loop limits); zero-size and
one-element tensors.

Parameter strings carry `edge=...` so `--params edge=` selects the family."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import product

import numpy as np

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.ops.elementwise import PARAMS_OF_GLU, GluOp, UnaryOp
from pyggml.ops.reduce import SortOrder
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, Compare, fmt_params
from pyggml_conformance.cases.common import F16, F32, I32, QUANTS, T, quant_threshold, unique
from pyggml_conformance.cases.moe import XIELU_PARAMS
from pyggml_conformance.inputs import UNIFORM, Array, Init, distinct, integers, uniform

NAN, INF = float("nan"), float("inf")
SPECIALS: dict[str, tuple[float, ...]] = {
    "nan": (NAN,), "inf": (INF,), "-inf": (-INF,), "inf,-inf": (INF, -INF), "nan,inf": (NAN, INF),
    "nan,nan": (NAN, NAN), "inf,inf": (INF, INF), "nan,-inf,inf": (NAN, -INF, INF),
}
WHERE = ("first", "mid", "last")
F16_MAX = 65504.0
LONG = (1 << 24) + 3
"""Elements of the long rows: past 2^24 (a float counter's last exact integer) and 128 threads x 65535 loop
iterations (lavapipe's limit per invocation)."""


def planted(special: str, where: str, base: Init = UNIFORM, row: int | None = None) -> Init:
    """base's values with SPECIALS[special] planted in every row (dim 0), or only in row `row` (the flat index of
    rows), at its start, middle or end."""
    vals = SPECIALS[special]

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        x = np.array(base(rng, t), dtype=np.float64)
        flat = x.reshape(-1, x.shape[-1])
        n = flat.shape[1]
        start = {"first": 0, "mid": max(0, (n - len(vals)) // 2), "last": max(0, n - len(vals))}[where]
        rows = range(flat.shape[0]) if row is None else [row]
        for r in rows:
            for j, v in enumerate(vals[: n - start]):
                flat[r, start + j] = v
        return x

    init.__qualname__ = f"planted({special},{where})"
    return init


def bad_id(value: int, n: int) -> Init:
    """Ids in [0, n) with `value` (out of range) as the second id of the first row."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        x = np.array(integers(0, n)(rng, t), dtype=np.int64)
        x.reshape(-1)[min(1, x.size - 1)] = value
        return x

    init.__qualname__ = f"bad_id({value},{n})"
    return init


def _case(op: Op, build: Callable[[CaseBuilder], Tensor], **kw: object) -> Case:
    nan_ok = bool(kw.pop("nan_ok", True))
    expect_error = bool(kw.pop("expect_error", False))
    compare = kw.pop("compare", None)
    assert compare is None or isinstance(compare, Compare)
    threshold = kw.pop("threshold", None)
    assert threshold is None or isinstance(threshold, float)
    return Case(op, fmt_params(**kw), build, nan_ok=nan_ok, expect_error=expect_error, compare=compare,
                threshold=threshold)


# ---- NaN and infinities ------------------------------------------------------------------------------------------

REDUCE: dict[Op, Callable[[Tensor], Tensor]] = {Op.SUM: ops.sum, Op.SUM_ROWS: ops.sum_rows, Op.MEAN: ops.mean,
                                                Op.CUMSUM: ops.cumsum, Op.ARGMAX: ops.argmax}


def special_reduce(op: Op, special: str, where: str, ne: Sequence[int] = (37, 3)) -> Case:
    base = distinct(10.0) if op is Op.ARGMAX else UNIFORM

    def build(b: CaseBuilder) -> Tensor:
        return REDUCE[op](b.input(F32, ne, planted(special, where, base, row=1)))

    return _case(op, build, edge="special", type=F32, ne=list(ne), special=special, where=where)


def special_sort(op: Op, special: str, where: str, n: int, order: SortOrder = SortOrder.ASC) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        a = b.input(F32, (n, 3), planted(special, where, distinct(100.0), row=1))
        return ops.top_k(a, 3) if op is Op.TOP_K else ops.argsort(a, order)

    extra = {"order": order} if op is Op.ARGSORT else {"k": 3}
    return _case(op, build, edge="special", type=F32, n=n, special=special, where=where, **extra)


def special_clamp(special: str, where: str) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.clamp(b.input(F32, (33, 2), planted(special, where)), -0.5, 0.5)

    return _case(Op.CLAMP, build, edge="special", type=F32, special=special, where=where)


def special_mul_mat(ta: GGMLType, special: str, where: str, in_weights: bool = False, nonfinite: bool = False
                    ) -> Case:
    """A special value in column 2 of the activations (or in row 2 of the weights): that column (row) of the
    result is NaN or +-inf, the others finite. `nonfinite` compares y - y instead (NaN where y is not finite, else
    0): where the backends may part from the reference between +-inf and NaN (an infinity in the activations of
    block-type weights), that column must still be non-finite, never a finite number."""

    def build(b: CaseBuilder) -> Tensor:
        if in_weights:
            a = b.input(ta, (256, 4), planted(special, where, row=2))
            x = b.input(F32, (256, 5))
        else:
            a = b.input(ta, (256, 4))
            x = b.input(F32, (256, 5), planted(special, where, row=2))
        y = ops.mul_mat(a, x)
        return ops.sub(y, y) if nonfinite else y

    extra = {"out": "y-y"} if nonfinite else {}
    return _case(Op.MUL_MAT, build, edge="special", type_a=ta, special=special, where=where,
                 side="a" if in_weights else "b", **extra)


QUANT_SPECIALS = ("nan", "inf", "-inf", "nan,-inf,inf")


def special_quantize(td: GGMLType, special: str, where: str, ts: GGMLType = F32) -> Case:
    """Row 1 of three (two blocks each) holds the specials, quantised into td by CPY and read back to F32 on the
    device: every element of a block that held one is NaN, the other blocks are quantised as usual."""
    n = 2 * td.traits.blck_size

    def build(b: CaseBuilder) -> Tensor:
        q = ops.cpy(b.input(ts, (n, 3), planted(special, where, row=1)), b.input(td, (n, 3)))
        return ops.cpy(q, b.input(F32, (n, 3)))

    return _case(Op.CPY, build, edge="special", type_src=ts, type_dst=td, special=special, where=where,
                 threshold=quant_threshold(td, 3 * n, ts))


def special_set_rows(td: GGMLType, special: str) -> Case:
    """SET_ROWS of two rows, the second holding the specials in its middle, into rows 3 and 0 of a block tensor."""
    n = 2 * td.traits.blck_size

    def build(b: CaseBuilder) -> Tensor:
        rows = b.input(F32, (n, 2), planted(special, "mid", row=1))
        return ops.set_rows(b.input(td, (n, 4)), rows, b.input(I32, (2,), fixed((3.0, 0.0))))

    return _case(Op.SET_ROWS, build, edge="special", type_dst=td, special=special,
                 threshold=quant_threshold(td, 2 * n))


def special_get_rows(ta: GGMLType, special: str) -> Case:
    """GET_ROWS from a block tensor whose row 1 holds a NaN block (the reference quantised the specials)."""
    n = 2 * ta.traits.blck_size

    def build(b: CaseBuilder) -> Tensor:
        a = b.input(ta, (n, 3), planted(special, "first", row=1))
        return ops.get_rows(a, b.input(I32, (4,), fixed((1.0, 0.0, 2.0, 1.0))))

    return _case(Op.GET_ROWS, build, edge="special", type=ta, special=special)


def quant_cases() -> list[Case]:
    """Every block type the backends write and read (QUANTS; the reference's rule for the others, which only it
    quantises, is held by core's tests of pyggml.quants)."""
    out: list[Case] = []
    for t in QUANTS:
        for special in QUANT_SPECIALS:
            out += [special_quantize(t, special, w) for w in WHERE]
            out += [special_set_rows(t, special), special_get_rows(t, special)]
        out.append(special_quantize(t, "nan,-inf,inf", "mid", F16))
        for w in WHERE:
            out.append(special_mul_mat(t, "nan", w))  # the activations' dot partner block takes a NaN scale
        out += [special_mul_mat(t, special, "mid", nonfinite=True) for special in ("inf", "-inf", "nan,-inf,inf")]
        out += [special_mul_mat(t, special, "mid", in_weights=True) for special in ("nan", "inf", "-inf")]
    return out


ACT_VALUES: dict[str, tuple[float, ...]] = {
    "inf": (-INF, INF, NAN, 0.0, -0.5, 1.5, -2.0, 3.0),
    "neg": (-3e38, -1e30, -1e4, -100.0, -20.0, -10.5, -9.0, -3.0, -1.0, -0.5),
    "pos": (3e38, 1e30, 1e4, 100.0, 20.0, 10.5, 9.0, 3.0, 1.0, 0.5),
}
"""Activation inputs in three groups, so that NMSE sees each: the infinities and NaN (limits and NaN positions),
huge negatives (the gated activations' tails must be about 0, not an ulp of tanh times x: GELU(-1e30) was -3e22 on
PoCL) and huge positives (kept apart so their squares do not swamp the negatives' errors). In F16 the values past
65504 become infinities."""


def fixed(values: Sequence[float]) -> Init:
    """`values` along every row (dim 0 has their length); past a 16-bit type's range, infinities (what rounding
    gives, without numpy's overflow warning)."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        x = np.array(values, dtype=np.float64)
        if t.type == GGMLType.F16:
            x = np.where(np.abs(x) > F16_MAX, np.copysign(INF, x), x)
        return np.broadcast_to(x, tuple(reversed(t.ne))).copy()

    init.__qualname__ = f"fixed({','.join(f'{v:g}' for v in values)})"
    return init


def special_unary(uop: UnaryOp, t: GGMLType, group: str) -> Case:
    vals = ACT_VALUES[group]

    def build(b: CaseBuilder) -> Tensor:
        x = b.input(t, (len(vals), 2), fixed(vals))
        if uop is UnaryOp.XIELU:  # test-backend-ops' parameters
            return ops.xielu(x, *XIELU_PARAMS[0])
        return ops.unary(x, uop)

    return Case(Op.UNARY, fmt_params(edge="special", op=uop, type=t, values=group), build, sub=uop.name, nan_ok=True)


TANH_SATURATED = (-INF, INF, NAN, -1e30, 1e30, -100.0, 100.0, -20.0, 20.0, -10.5, 10.5)
"""TANH of these is exactly +-1 in float (or NaN): compared exactly (PoCL's tanh gave +-0.99999994 for all of
them, an error NMSE cannot see but 1 + tanh(u) in GELU turns into garbage)."""


def saturated_tanh(t: GGMLType) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.unary(b.input(t, (len(TANH_SATURATED), 2), fixed(TANH_SATURATED)), UnaryOp.TANH)

    return Case(Op.UNARY, fmt_params(edge="special", op=UnaryOp.TANH, type=t, values="saturated"), build,
                sub=UnaryOp.TANH.name, nan_ok=True, compare=Compare.EXACT)


def special_glu(gop: GluOp, t: GGMLType, group: str) -> Case:
    """The activation's input takes the values; the gate is finite (0.5 to 2)."""
    vals = ACT_VALUES[group]

    def build(b: CaseBuilder) -> Tensor:
        x = b.input(t, (len(vals), 2), fixed(vals))
        g = b.input(t, (len(vals), 2), uniform(0.5, 2.0))
        if gop is GluOp.SWIGLU_OAI:
            return ops.swiglu_oai(x, g, 1.702, 7.0)
        if gop is GluOp.SWIGLU_CLAMP:
            return ops.swiglu_clamp(x, g, 7.0)
        return ops.glu(x, gop, g)

    return Case(Op.GLU, fmt_params(edge="special", op=gop, type=t, values=group), build, sub=gop.name, nan_ok=True)


def special_glu_gate(gop: GluOp, t: GGMLType, group: str) -> Case:
    """SWIGLU_OAI / SWIGLU_CLAMP clamp the gate too: the gate takes the values, the activation input is finite."""
    vals = ACT_VALUES[group]

    def build(b: CaseBuilder) -> Tensor:
        x = b.input(t, (len(vals), 2), uniform(-3.0, 3.0))
        g = b.input(t, (len(vals), 2), fixed(vals))
        return ops.swiglu_oai(x, g) if gop is GluOp.SWIGLU_OAI else ops.swiglu_clamp(x, g, 7.0)

    return Case(Op.GLU, fmt_params(edge="special", op=gop, type=t, slot="gate", values=group), build, sub=gop.name,
                nan_ok=True)


def fa_masked(layout: str, rows: int, kv: int) -> Array:
    """Which (query row, key) the flash-attention edge cases mask, by layout: "shadowed": key 5 seen by the last
    row only, key 66 (in the second block of 64 keys) by the first row only; "sequences": two sequences in one batch,
    the first half of the rows seeing the first half of the keys, the other half the others."""
    m = np.zeros((rows, kv), dtype=bool)
    if layout == "shadowed":
        m[:-1, 5] = m[1:, 66] = True
    else:
        m[: rows // 2, kv // 2:] = m[rows // 2:, : kv // 2] = True
    return m


def fa_poisoned_keys(layout: str, kv: int) -> list[int]:
    """The keys whose K or V rows hold a NaN, by layout: masked for all but one query row, or every key of the
    second sequence."""
    return [5, 66] if layout == "shadowed" else list(range(kv // 2, kv))


FA_LAYOUTS = ("shadowed", "sequences")


def fa_mask(layout: str) -> Init:
    """A mask [kv, rows] (uniform in [-1, 1]) with -inf where fa_masked says."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        x = rng.uniform(-1.0, 1.0, tuple(reversed(t.ne)))
        x[..., fa_masked(layout, t.ne[1], t.ne[0])] = -INF
        return x

    init.__qualname__ = f"fa_mask({layout})"
    return init


def fa_poisoned(layout: str) -> Init:
    """K or V [d, kv, heads]: uniform values with a NaN in the middle of the poisoned keys' rows, in every head."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        x = UNIFORM(rng, t)
        x[..., fa_poisoned_keys(layout, t.ne[1]), t.ne[0] // 2] = NAN
        return x

    init.__qualname__ = f"fa_poisoned({layout})"
    return init


def special_flash_attn(tk: GGMLType, tv: GGMLType, layout: str, side: str, hs: int = 64, nr2: int = 2,
                       kv: int = 70, rows: int = 40) -> Case:
    """NaN in K or V of keys that some query rows mask (fa_masked): a query never reads a key it masks (ggml's CPU
    skips it per query), so only the rows that see such a key are NaN (all of a row for K, the NaN's channel
    for V), the others are what finite values give; query rows and heads share blocks of keys in the tiled
    kernels, and many keys over few rows are split between work-groups in the GPU kernels."""

    def build(b: CaseBuilder) -> Tensor:
        poisoned = fa_poisoned(layout)
        q = b.input(F32, (hs, rows, 2 * nr2, 1))
        k = b.input(tk, (hs, kv, 2, 1), poisoned if side == "k" else None)
        v = b.input(tv, (hs, kv, 2, 1), poisoned if side == "v" else None)
        mask = b.input(F16, (kv, rows, 1, 1), fa_mask(layout))
        return ops.flash_attn_ext(q, k, v, mask, 1.0 / hs ** 0.5)

    return _case(Op.FLASH_ATTN_EXT, build, edge="special", type_K=tk, type_V=tv, layout=layout, side=side, hs=hs,
                 nr2=nr2, kv=kv, rows=rows)


def bad_add_id(bad: int) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        a = b.input(F32, (32, 2, 3))
        return ops.add_id(a, b.input(F32, (32, 4)), b.input(I32, (2, 3), bad_id(bad, 4)))

    return _case(Op.ADD_ID, build, edge="bad_id", id=bad, nan_ok=False, expect_error=True)


def special_cases() -> list[Case]:
    out: list[Case] = []
    for op in REDUCE:
        for special in ("nan", "inf", "-inf", "inf,-inf", "nan,inf", "nan,nan", "inf,inf"):
            out += [special_reduce(op, special, w) for w in WHERE]
    for special in ("nan", "nan,nan", "inf", "-inf", "nan,-inf,inf"):
        for w in WHERE:
            out.append(special_clamp(special, w))
            for n in (37, 5000):
                out += [special_sort(Op.ARGSORT, special, w, n, order) for order in SortOrder]
                out.append(special_sort(Op.TOP_K, special, w, n))
    for t in (F32, F16):
        out.append(saturated_tanh(t))
        for group in ACT_VALUES:
            out += [special_unary(uop, t, group) for uop in UnaryOp]
            out += [special_glu(gop, t, group) for gop in GluOp]
            out += [special_glu_gate(gop, t, group) for gop in PARAMS_OF_GLU]
    for w in WHERE:
        for ta in (F32, F16):
            out.append(special_mul_mat(ta, "nan", w))
        for ta in (F32, F16):
            out += [special_mul_mat(ta, "inf", w), special_mul_mat(ta, "nan", w, in_weights=True),
                    special_mul_mat(ta, "-inf", w, in_weights=True)]
    for (tk, tv), layout, side in product(((F16, F16), (F32, F32), (T.Q8_0, T.Q8_0), (T.Q4_0, F16)),
                                          FA_LAYOUTS, ("k", "v")):
        out += [special_flash_attn(tk, tv, layout, side), special_flash_attn(tk, tv, layout, side, 128, 1)]
    for t, side in product((F16, T.Q8_0), ("k", "v")):  # a long context over two rows: the keys split
        out.append(special_flash_attn(t, t, "sequences", side, 64, 1, kv=1100, rows=2))
    return out


# ---- ids out of range --------------------------------------------------------------------------------------------


def bad_get_rows(ta: GGMLType, bad: int) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.get_rows(b.input(ta, (32, 5)), b.input(I32, (3,), bad_id(bad, 5)))

    return _case(Op.GET_ROWS, build, edge="bad_id", type=ta, id=bad, nan_ok=False, expect_error=True)


def bad_set_rows(td: GGMLType, ti: GGMLType, bad: int) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        dst = b.input(td, (32, 4))
        rows = b.input(F32, (32, 2))
        return ops.set_rows(dst, rows, b.input(ti, (2,), bad_id(bad, 4)))

    return _case(Op.SET_ROWS, build, edge="bad_id", type_dst=td, type_idx=ti, id=bad, nan_ok=False,
                 expect_error=True)


def bad_mul_mat_id(ta: GGMLType, bad: int) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        experts = b.input(ta, (32, 6, 4))
        x = b.input(F32, (32, 1, 3))
        return ops.mul_mat_id(experts, x, b.input(I32, (2, 3), bad_id(bad, 4)))

    return _case(Op.MUL_MAT_ID, build, edge="bad_id", type_a=ta, id=bad, nan_ok=False, expect_error=True)


def bad_id_cases() -> list[Case]:
    out: list[Case] = []
    for ta in (F32, F16, T.Q4_0):
        out += [bad_get_rows(ta, bad) for bad in (5, 6, -1, -(1 << 31))]
        out += [bad_mul_mat_id(ta, bad) for bad in (4, -1)]
    out += [bad_add_id(bad) for bad in (4, -1, -(1 << 31))]
    for td in (F32, F16, T.Q8_0):
        out += [bad_set_rows(td, I32, bad) for bad in (4, -1)]
        out += [bad_set_rows(td, T.I64, bad) for bad in (4, -1, 1 << 40, (1 << 32) + 1)]
    return out


# ---- long rows ---------------------------------------------------------------------------------------------------


def peaks(rng: np.random.Generator, t: Tensor) -> Array:
    """Uniform values below 1 with a maximum of 2 at a random place of every row and a tie after it (ARGMAX of
    long rows: the first wins; cheaper to draw than distinct values)."""
    x = rng.uniform(-1.0, 1.0, tuple(reversed(t.ne))).reshape(-1, t.ne[0])
    n = t.ne[0]
    for r in range(x.shape[0]):
        i = int(rng.integers(0, n - 1))
        x[r, i] = x[r, int(rng.integers(i + 1, n))] = 2.0
    return x.reshape(tuple(reversed(t.ne)))


def long_reduce(op: Op, t: GGMLType, n: int = LONG, rows: int = 1) -> Case:
    init = uniform(0.5, 1.5) if op is not Op.ARGMAX else peaks

    def build(b: CaseBuilder) -> Tensor:
        return REDUCE[op](b.input(t, (n, rows), init))

    return _case(op, build, edge="long", type=t, n=n, rows=rows, nan_ok=False)


def long_count_equal(n: int) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.count_equal(b.input(I32, (n,), integers(0, 2)), b.input(I32, (n,), integers(0, 2)))

    return _case(Op.COUNT_EQUAL, build, edge="long", type=I32, n=n, nan_ok=False)


def long_cases() -> list[Case]:
    return [long_reduce(Op.SUM, F32), long_reduce(Op.SUM, F16), long_reduce(Op.SUM_ROWS, F32),
            long_reduce(Op.MEAN, F32), long_reduce(Op.SUM_ROWS, F32, (1 << 23) + 5, 3),
            long_reduce(Op.ARGMAX, F32, (1 << 23) + 5, 3), long_reduce(Op.CUMSUM, F32, (1 << 22) + 3),
            long_count_equal((1 << 24) - 1000)]


# ---- zero-size and one-element tensors ---------------------------------------------------------------------------


def tiny(op: Op, ne: Sequence[int], fn: Callable[[CaseBuilder, Sequence[int]], Tensor]) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return fn(b, ne)

    return _case(op, build, edge="size", ne=list(ne))


TINY: dict[Op, Callable[[CaseBuilder, Sequence[int]], Tensor]] = {
    Op.ADD: lambda b, ne: ops.add(b.input(F32, ne), b.input(F32, ne)),
    Op.SUM: lambda b, ne: ops.sum(b.input(F32, ne)),
    Op.SUM_ROWS: lambda b, ne: ops.sum_rows(b.input(F32, ne)),
    Op.MEAN: lambda b, ne: ops.mean(b.input(F32, ne)),
    Op.CPY: lambda b, ne: ops.cpy(b.input(F32, ne), b.input(F16, ne)),
    Op.SCALE: lambda b, ne: ops.scale(b.input(F32, ne), 2.0),
}
ONE: dict[Op, Callable[[CaseBuilder, Sequence[int]], Tensor]] = {
    **TINY,
    Op.MUL_MAT: lambda b, ne: ops.mul_mat(b.input(F32, ne), b.input(F32, ne)),
    Op.SOFT_MAX: lambda b, ne: ops.soft_max(b.input(F32, ne)),
    Op.RMS_NORM: lambda b, ne: ops.rms_norm(b.input(F32, ne), 1e-6),
    Op.ARGSORT: lambda b, ne: ops.argsort(b.input(F32, ne)),
    Op.TOP_K: lambda b, ne: ops.top_k(b.input(F32, ne), 1),
    Op.ARGMAX: lambda b, ne: ops.argmax(b.input(F32, ne)),
    Op.CUMSUM: lambda b, ne: ops.cumsum(b.input(F32, ne)),
    Op.GET_ROWS: lambda b, ne: ops.get_rows(b.input(F32, ne), b.input(I32, (1,), integers(0, 1))),
}


def size_cases() -> list[Case]:
    out = [tiny(op, ne, fn) for op, fn in TINY.items() for ne in ((0,), (0, 3), (4, 0))]
    out += [tiny(op, (1,), fn) for op, fn in ONE.items()]
    return out


def eval_cases() -> list[Case]:
    return unique([*special_cases(), *quant_cases(), *bad_id_cases(), *long_cases(), *size_cases()])


def perf_cases() -> list[Case]:
    return []
