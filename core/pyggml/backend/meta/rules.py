"""How a computed tensor's split state follows from its srcs' states: one rule per op, in `RULES`.

A rule gets the node and its srcs' states (None for empty slots; srcs are taken as synchronised, so a src that is
reduced before use shows as MIRRORED) and `sync`: whether the caller wants the value after any pending reduction
(MUL_MAT of two AXIS_0 slices is PARTIAL before its allreduce and MIRRORED after it). A rule returns a state or
raises SplitRuleError naming the op, the node and its srcs' states. An op without a rule is refused, never guessed.

PARTIAL inputs pass only through ops that are linear in them (sums, scaling, copies, views, row selection,
products with a MIRRORED factor); anything else must see reduced values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyggml.backend.meta.layout import map_by_elements, map_by_strides
from pyggml.backend.meta.state import MIRRORED, PARTIAL, Axis, SplitState, describe_state, partial, same_extents, split
from pyggml.errors import ShapeError, UnsupportedOpError
from pyggml.ops.base import Op
from pyggml.tensor import Tensor

States = Sequence[SplitState | None]
Rule = Callable[[Tensor, States, bool], SplitState]


class SplitRuleError(UnsupportedOpError):
    """A node cannot be computed under tensor split with its srcs' states (or its op has no rule)."""


def fail(node: Tensor, states: States, why: str) -> SplitRuleError:
    srcs = ", ".join(f"'{s.name}' {describe_state(st)}" for s, st in zip(node.src, states, strict=False)
                     if s is not None and st is not None)
    return SplitRuleError(f"tensor split: {node.op.name} node '{node.name}' ne={list(node.ne)}: {why} "
                          f"(srcs: {srcs or 'none'})")


# ---- rule families ------------------------------------------------------------------------------------------


def _srcs(node: Tensor, states: States) -> list[SplitState]:
    return [st for s, st in zip(node.src, states, strict=False) if s is not None and st is not None]


def _agree(node: Tensor, states: States, *, allow_split: bool = True, linear: bool = False) -> SplitState:
    """Every src has the same state (same axis and per-device extents): the result has it too."""
    got = _srcs(node, states)
    if not got:
        return MIRRORED
    first = got[0]
    if first.axis == Axis.PARTIAL and all(st.axis == Axis.PARTIAL for st in got):
        if not linear:
            raise fail(node, states, "the op is not linear: a PARTIAL src must be reduced first")
        if any(not st.segments for st in got):
            return PARTIAL
        return partial([int(any(st.contributes(j) for st in got)) for j in range(first.n_devices)])
    if any(not same_extents(first, st) for st in got[1:]):
        raise fail(node, states, "srcs must share one split state")
    if first.is_split and not allow_split:
        raise fail(node, states, "the op needs whole tensors (MIRRORED srcs)")
    return first


def elementwise(node: Tensor, states: States, sync: bool) -> SplitState:
    return _agree(node, states)


def whole_only(node: Tensor, states: States, sync: bool) -> SplitState:
    return _agree(node, states, allow_split=False)


def no_srcs(node: Tensor, states: States, sync: bool) -> SplitState:
    return MIRRORED


def scale(node: Tensor, states: States, sync: bool) -> SplitState:
    st = states[0]
    assert st is not None
    if st.axis == Axis.PARTIAL and node.params.b != 0:
        raise fail(node, states, "SCALE with a bias adds it once per device: reduce the PARTIAL src first")
    return _agree(node, states, linear=True)


def fill(node: Tensor, states: States, sync: bool) -> SplitState:
    st = states[0]
    assert st is not None
    return MIRRORED if st.axis == Axis.PARTIAL else st


def per_row(node: Tensor, states: States, sync: bool) -> SplitState:
    """Rows (dimension 0) are processed whole: src0 must not be split on axis 0."""
    st = states[0]
    assert st is not None
    if st.axis == Axis.AXIS_0:
        raise fail(node, states, "rows are processed whole; src0 must not be split on axis 0")
    if node.op in (Op.SUM_ROWS, Op.MEAN, Op.CUMSUM):
        return _agree(node, states, linear=True)
    if node.op is Op.ARGMAX and st.is_split:
        if st.axis != Axis.AXIS_1:
            raise fail(node, states, "ARGMAX of a tensor split beyond axis 1")
        return st.with_axis(Axis.AXIS_0)  # result ne[0] is src's ne[1]
    if node.op is Op.GROUP_NORM and st.axis in (Axis.AXIS_1, Axis.AXIS_2):
        raise fail(node, states, "groups span dimensions 0-2; only axis 3 may be split")
    return _agree(node, states)


def bin_bcast(node: Tensor, states: States, sync: bool) -> SplitState:
    """ADD/SUB/MUL/DIV: src1 is broadcast over src0."""
    s0, s1 = states[0], states[1]
    b = node.src[1]
    assert s0 is not None and s1 is not None and b is not None
    if s0.is_split and s1.axis == Axis.MIRRORED and b.ne[s0.axis] == 1:
        return s0
    scales_only = node.op in (Op.MUL, Op.DIV)
    if s0.axis == Axis.PARTIAL and s1.axis == Axis.MIRRORED and scales_only:
        return s0
    if s0.axis == Axis.MIRRORED and s1.axis == Axis.PARTIAL and node.op is Op.MUL:
        return s1
    return _agree(node, states, linear=node.op in (Op.ADD, Op.SUB))


def soft_max(node: Tensor, states: States, sync: bool) -> SplitState:
    s0 = states[0]
    assert s0 is not None
    if s0.axis == Axis.AXIS_0 or s0.axis == Axis.PARTIAL:
        raise fail(node, states, "SOFT_MAX needs whole rows of reduced values")
    mask, sinks = node.src[1] if len(node.src) > 1 else None, node.src[2] if len(node.src) > 2 else None
    if mask is not None:
        sm = states[1]
        assert sm is not None
        if not (sm.axis == Axis.MIRRORED and (not s0.is_split or mask.ne[s0.axis] == 1)) and \
                not same_extents(sm, s0):
            raise fail(node, states, "the mask must be MIRRORED (broadcast along the split) or split like src0")
    if sinks is not None:
        ss = states[2]
        assert ss is not None
        heads_split = s0.axis == Axis.AXIS_2
        if (heads_split and (ss.axis != Axis.AXIS_0 or ss.extents() != s0.extents())) or \
                (not heads_split and ss.axis != Axis.MIRRORED):
            raise fail(node, states, "sinks must be split like the heads (axis 2) of src0, or MIRRORED")
    return s0


def glu(node: Tensor, states: States, sync: bool) -> SplitState:
    if len(node.src) > 1 and node.src[1] is not None:
        return _agree(node, states)
    s0 = states[0]
    assert s0 is not None
    if s0.axis != Axis.AXIS_0:
        return _agree(node, states)
    # one src holding both halves along dimension 0: every device must hold equal halves of its own
    segs = s0.segments
    if len(segs) == 1 and segs[0].nr % 2 == 0:
        return split(Axis.AXIS_0, segs[0].ne, segs[0].nr // 2)
    if len(segs) % 2 == 0 and segs[: len(segs) // 2] == segs[len(segs) // 2 :]:
        return SplitState(Axis.AXIS_0, segs[: len(segs) // 2])
    raise fail(node, states, "a fused GLU split on axis 0 needs a segmented state that gives every device both "
                             "halves (e.g. gate/up as one segment repeated twice)")


def add_id(node: Tensor, states: States, sync: bool) -> SplitState:
    """a + b[ids]: a and b split alike on axis 0 (each device adds its slice of the bias rows) with whole ids keep
    that split; anything else needs whole tensors."""
    sa, sb, si = states[0], states[1], states[2]
    if (sa is not None and sb is not None and si is not None and sa.axis == Axis.AXIS_0
            and sb.axis == Axis.AXIS_0 and same_extents(sa, sb) and not si.is_split and si.axis != Axis.PARTIAL):
        return sa
    return whole_only(node, states, sync)


def repeat(node: Tensor, states: States, sync: bool) -> SplitState:
    s0, a = states[0], node.src[0]
    assert s0 is not None and a is not None
    if s0.is_split and node.ne[s0.axis] != a.ne[s0.axis]:
        raise fail(node, states, "REPEAT along the split dimension")
    return s0


def concat(node: Tensor, states: States, sync: bool) -> SplitState:
    s0, s1 = states[0], states[1]
    assert s0 is not None and s1 is not None
    dim = node.params.dim
    if s0.is_split and s0.axis == s1.axis == dim:
        return SplitState(s0.axis, s0.segments + s1.segments)  # each device concatenates its own slices
    if s0.is_split and s0.axis == dim:
        raise fail(node, states, "CONCAT along the split dimension needs both srcs split on it")
    return _agree(node, states, linear=True)


def pad(node: Tensor, states: States, sync: bool) -> SplitState:
    s0 = states[0]
    assert s0 is not None
    if s0.is_split and (node.params.lp[s0.axis] or node.params.rp[s0.axis]):
        raise fail(node, states, "PAD along the split dimension")
    return _agree(node, states, linear=True)


def mul_mat(node: Tensor, states: States, sync: bool) -> SplitState:
    """W (src0) times X (src1): the four cases of tensor parallelism, plus batches split alike."""
    sw, sx = states[0], states[1]
    w, x = node.src[0], node.src[1]
    assert sw is not None and sx is not None and w is not None and x is not None
    if node.op is Op.MUL_MAT_ID:
        si = states[2]
        if si is None or si.axis != Axis.MIRRORED:
            raise fail(node, states, "expert ids must be MIRRORED")
    if sw.axis == Axis.MIRRORED and sx.axis == Axis.MIRRORED:
        return MIRRORED
    if sw.axis == Axis.AXIS_1 and sx.axis == Axis.MIRRORED:
        return sw.with_axis(Axis.AXIS_0)  # column parallel: output rows follow W's columns
    if sw.axis == Axis.MIRRORED and sx.axis == Axis.AXIS_1:
        return sx
    if sw.axis == Axis.AXIS_0 and sx.axis == Axis.AXIS_0:
        if sw.extents() != sx.extents():
            raise fail(node, states, "row parallel: W and X must be split alike along the shared dimension")
        return partial(sw.extents())  # row parallel: every device holds a partial sum
    if Axis.PARTIAL in (sw.axis, sx.axis) and Axis.MIRRORED in (sw.axis, sx.axis):
        return PARTIAL
    if node.op is Op.MUL_MAT and sx.axis in (Axis.AXIS_2, Axis.AXIS_3):
        k = sx.axis
        if (sw.axis == Axis.MIRRORED and w.ne[k] == 1) or (same_extents(sw, sx) and w.ne[k] == x.ne[k]):
            return sx
    raise fail(node, states, "unsupported combination of split states for a matrix product")


def get_rows(node: Tensor, states: States, sync: bool) -> SplitState:
    s0, si = states[0], states[1]
    assert s0 is not None and si is not None
    if si.axis != Axis.MIRRORED:
        raise fail(node, states, "row ids must be MIRRORED")
    if s0.axis in (Axis.MIRRORED, Axis.AXIS_0, Axis.PARTIAL):
        return s0
    raise fail(node, states, "rows are selected along dimension 1: src0 must be MIRRORED or split on axis 0")


def set_rows(node: Tensor, states: States, sync: bool) -> SplitState:
    sd, sr, si = states[0], states[1], states[2]
    assert sd is not None and sr is not None and si is not None
    if si.axis != Axis.MIRRORED:
        raise fail(node, states, "row ids must be MIRRORED")
    if sd.axis not in (Axis.MIRRORED, Axis.AXIS_0) or not same_extents(sd, sr):
        raise fail(node, states, "destination and rows must be split alike on axis 0 (or both MIRRORED)")
    return sd


def rope(node: Tensor, states: States, sync: bool) -> SplitState:
    s0 = states[0]
    assert s0 is not None
    if any(st is not None and st.axis != Axis.MIRRORED for st in states[1:]):
        raise fail(node, states, "positions and frequency factors must be MIRRORED")
    if s0.axis in (Axis.AXIS_0, Axis.PARTIAL):
        raise fail(node, states, "ROPE rotates pairs inside whole rows of reduced values")
    return s0


def flash_attn_ext(node: Tensor, states: States, sync: bool) -> SplitState:
    """q [d, n, heads], k/v [d, n_kv, kv_heads], mask, sinks [heads] -> [dv, heads, n]."""
    sq, sk, sv = states[0], states[1], states[2]
    q, k = node.src[0], node.src[1]
    assert sq is not None and sk is not None and sv is not None and q is not None and k is not None
    mask = states[3] if len(states) > 3 else None
    sinks = states[4] if len(states) > 4 else None
    if mask is not None and mask.axis != Axis.MIRRORED:
        raise fail(node, states, "the mask must be MIRRORED")
    if sq.axis == Axis.MIRRORED:
        if any(st is not None and st.axis != Axis.MIRRORED for st in (sk, sv, sinks)):
            raise fail(node, states, "with a MIRRORED q, k, v and sinks must be MIRRORED")
        return MIRRORED
    if sq.axis != Axis.AXIS_2:
        raise fail(node, states, "q must be split by heads (axis 2) or MIRRORED")
    if sk.axis == sv.axis == Axis.AXIS_2:
        if sk.extents() != sv.extents() or any(
                eq * k.ne[2] != ek * q.ne[2] for eq, ek in zip(sq.extents(), sk.extents(), strict=True)):
            raise fail(node, states, "every device needs the KV heads of its query heads (whole GQA groups)")
    elif not (sk.axis == sv.axis == Axis.MIRRORED):
        raise fail(node, states, "k and v must be split by heads (axis 2) like q, or MIRRORED")
    if sinks is not None and (sinks.axis != Axis.AXIS_0 or sinks.extents() != sq.extents()):
        raise fail(node, states, "sinks must be split like the query heads (axis 0)")
    return sq.with_axis(Axis.AXIS_1)


# ---- layout ops ---------------------------------------------------------------------------------------------


def _wrap(node: Tensor, states: States, fn: Callable[[], SplitState]) -> SplitState:
    try:
        return fn()
    except ShapeError as e:
        raise fail(node, states, str(e)) from e


def reshape(node: Tensor, states: States, sync: bool) -> SplitState:
    s0, a = states[0], node.src[0]
    assert s0 is not None and a is not None
    return _wrap(node, states, lambda: map_by_elements(a.ne, node.ne, s0, "reshape"))


def view(node: Tensor, states: States, sync: bool) -> SplitState:
    s0, a = states[0], node.src[0]
    assert s0 is not None and a is not None
    rel = node.view_offs - a.view_offs
    if rel == 0 and node.nelements() == a.nelements() and node.is_contiguous() and a.is_contiguous():
        return reshape(node, states, sync)
    return _wrap(node, states, lambda: map_by_strides(node, a, s0, rel, "view"))


def permute(node: Tensor, states: States, sync: bool) -> SplitState:
    s0 = states[0]
    assert s0 is not None
    if not s0.is_split:
        return s0
    axes = (1, 0, 2, 3) if node.op is Op.TRANSPOSE else node.params.axes
    return s0.with_axis(axes[s0.axis])


def cont(node: Tensor, states: States, sync: bool) -> SplitState:
    s0, a = states[0], node.src[0]
    assert s0 is not None and a is not None
    return _wrap(node, states, lambda: map_by_elements(a.ne, node.ne, s0, "copy"))


def cpy(node: Tensor, states: States, sync: bool) -> SplitState:
    s0, sd, a, d = states[0], states[1], node.src[0], node.src[1]
    assert s0 is not None and sd is not None and a is not None and d is not None
    mapped = _wrap(node, states, lambda: map_by_elements(a.ne, d.ne, s0, "copy"))
    if not same_extents(mapped, sd):
        raise fail(node, states, "the destination must be split like the copied values")
    return sd


RULES: dict[Op, Rule] = {
    Op.DUP: cont, Op.CONT: cont, Op.CPY: cpy,
    Op.RESHAPE: reshape, Op.VIEW: view, Op.PERMUTE: permute, Op.TRANSPOSE: permute,
    Op.ADD: bin_bcast, Op.SUB: bin_bcast, Op.MUL: bin_bcast, Op.DIV: bin_bcast,
    Op.SQR: elementwise, Op.SQRT: elementwise, Op.LOG: elementwise, Op.SIN: elementwise, Op.COS: elementwise,
    Op.CLAMP: elementwise, Op.LEAKY_RELU: elementwise, Op.UNARY: elementwise, Op.SCALE: scale, Op.FILL: fill,
    Op.GLU: glu, Op.REPEAT: repeat, Op.CONCAT: concat, Op.PAD: pad,
    Op.SUM_ROWS: per_row, Op.MEAN: per_row, Op.CUMSUM: per_row, Op.ARGMAX: per_row, Op.ARGSORT: per_row,
    Op.TOP_K: per_row, Op.NORM: per_row, Op.RMS_NORM: per_row, Op.L2_NORM: per_row, Op.GROUP_NORM: per_row,
    Op.SOFT_MAX: soft_max, Op.ROPE: rope, Op.FLASH_ATTN_EXT: flash_attn_ext,
    Op.MUL_MAT: mul_mat, Op.MUL_MAT_ID: mul_mat,
    Op.GET_ROWS: get_rows, Op.SET_ROWS: set_rows,
    Op.SUM: whole_only, Op.COUNT_EQUAL: whole_only, Op.OUT_PROD: whole_only, Op.ADD1: whole_only,
    Op.SET: whole_only, Op.ACC: whole_only, Op.DIAG: whole_only, Op.DIAG_MASK_INF: whole_only,
    Op.DIAG_MASK_ZERO: whole_only, Op.ARANGE: no_srcs, Op.ADD_ID: add_id,
    # training: the gradients of element-wise and row ops split as their forward op; the rest (the loss reduces
    # every row, the optimiser steps write state in place, the tile and row sums gather across the tensor) whole
    Op.SILU_BACK: elementwise, Op.RMS_NORM_BACK: per_row, Op.SOFT_MAX_BACK: per_row,
    **{op: whole_only for op in (Op.REPEAT_BACK, Op.GET_ROWS_BACK, Op.ROPE_BACK, Op.CROSS_ENTROPY_LOSS,
                                 Op.CROSS_ENTROPY_LOSS_BACK, Op.OPT_STEP_ADAMW, Op.OPT_STEP_SGD)},
    # the gradients of IM2COL and POOL_2D gather across the windows, as their forward ops
    Op.IM2COL_BACK: whole_only, Op.POOL_2D_BACK: whole_only,
    # spatial ops (windows, taps and reflections reach across rows and planes) and the DeepSeek-family ops
    **{op: whole_only for op in (Op.POOL_1D, Op.POOL_2D, Op.UPSCALE, Op.PAD_REFLECT_1D, Op.ROLL,
                                 Op.TIMESTEP_EMBEDDING, Op.WIN_PART, Op.WIN_UNPART, Op.GET_REL_POS, Op.ADD_REL_POS,
                                 Op.LIGHTNING_INDEXER, Op.DSV4_HC_COMB, Op.DSV4_HC_PRE, Op.DSV4_HC_POST)},
    # the recurrences pack outputs and states of every head into one result: no split keeps that layout
    **{op: whole_only for op in (Op.TRI, Op.SOLVE_TRI, Op.SSM_CONV, Op.SSM_SCAN, Op.RWKV_WKV6,
                                 Op.GATED_LINEAR_ATTN, Op.RWKV_WKV7, Op.GATED_DELTA_NET)},
    # convolutions: kernel windows reach across rows and planes, channels are summed into every output
    **{op: whole_only for op in (Op.IM2COL, Op.IM2COL_3D, Op.COL2IM_1D, Op.CONV_TRANSPOSE_1D, Op.CONV_2D,
                                 Op.CONV_3D, Op.CONV_2D_DW, Op.CONV_TRANSPOSE_2D)},
    # a custom op's callable sees whole host tensors (and device backends refuse it anyway)
    Op.MAP_CUSTOM1: whole_only, Op.MAP_CUSTOM2: whole_only, Op.MAP_CUSTOM3: whole_only, Op.CUSTOM: whole_only,
}
"""The rule of every op the meta device can split; an op missing here is refused."""


def derive(node: Tensor, states: States, sync: bool) -> SplitState:
    """The state of computed tensor `node` (its op's rule, then a check that a split covers the dimension). With
    sync, a partial sum counts as reduced: a node's PARTIAL result is reduced once, after it (or its delay)."""
    rule = RULES.get(node.op)
    if rule is None:
        raise fail(node, states, "the op has no split rule; it cannot run on a meta device")
    st = rule(node, states, sync)
    if sync and st.axis == Axis.PARTIAL:
        return MIRRORED  # the value after its allreduce
    if st.is_split and st.total != node.ne[st.axis]:
        raise fail(node, states, f"derived state {describe_state(st)} does not cover dimension {int(st.axis)}")
    return st
