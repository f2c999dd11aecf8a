"""Backward ops: the gradient kernels ggml's autodiff (ggml_build_backward_expand) emits, and the cross-entropy
loss with its gradient. Each takes the incoming gradient first, then what the forward op saw, in ggml's src order
(an RPC peer decodes them as ggml's own).

REPEAT_BACK and GET_ROWS_BACK give a result shaped like a tensor they do not read (ggml passes it only to size
the result); pyggml keeps that shape in the params instead of a src, so the graph holds no dependency on it.
IM2COL_BACK and POOL_2D_BACK live next to their forward ops (pyggml.ops.conv, pyggml.ops.spatial).

One ggml op is deliberately not in the table: FLASH_ATTN_BACK (`DEFERRED_OPS` says why).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyggml.ops.attention import SoftMaxParams
from pyggml.ops.base import Op, check_types, define, fail, need, record, tiles
from pyggml.ops.norm import NormParams
from pyggml.ops.rope import RopeParams, _rope
from pyggml.tensor import Ne, Tensor
from pyggml.types import GGMLType

Srcs = tuple[Tensor | None, ...]

F32 = frozenset({GGMLType.F32})
F32_F16 = frozenset({GGMLType.F32, GGMLType.F16})

DEFERRED_OPS: dict[str, str] = {
    "FLASH_ATTN_BACK": (
        "ggml 0.3.36 has no usable semantics for it: its constructor ggml_flash_attn_back aborts on entry "
        "('TODO: adapt to ggml_flash_attn_ext() changes'), and the CPU kernel left behind is the gradient of the "
        "removed FLASH_ATTN op (scale fixed at 1/sqrt(D), an optional causal mask but no mask tensor, softcap, "
        "ALiBi or sinks, v given transposed), not of FLASH_ATTN_EXT; it packs the q, k and v gradients into one "
        "1-D tensor at GGML_MEM_ALIGN-padded offsets (platform-dependent) and, with GQA and ne[3] > 1, strides the "
        "k gradient by q's head count, past its own part. pyggml differentiates FLASH_ATTN_EXT through the ops it "
        "fuses instead (pyggml.autodiff.rules_fused)"),
}
"""ggml ops (by ggml's name) that pyggml leaves out of its op table on purpose, and why."""


@dataclass(frozen=True, slots=True)
class ShapeParams:
    """The result's ne for REPEAT_BACK / GET_ROWS_BACK (ggml keeps it in the result only, no op_params)."""

    ne: Ne


def _pair(op: Op, srcs: Srcs, at: tuple[int, int], names: tuple[str, str], types: frozenset[GGMLType]
          ) -> tuple[Tensor, Tensor]:
    """The srcs at `at`, both present, of `types` and of one shape: a gradient and the forward op's input or output
    it is taken at, or logits and labels. `names` say what errors call them."""
    (i, j), (ni, nj) = at, names
    a, b = need(srcs[i], op, f"src{i} ({ni})"), need(srcs[j], op, f"src{j} ({nj})")
    check_types(op, a, types, f"src{i} ({ni})")
    check_types(op, b, types, f"src{j} ({nj})")
    if a.ne != b.ne:
        raise fail(op, f"{ni} and {nj} must have the same shape", a, b)
    return a, b


def _repeat_back(srcs: Srcs, p: ShapeParams) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.REPEAT_BACK, "src0 (gradient)", F32)
    if not isinstance(p, ShapeParams):
        raise fail(Op.REPEAT_BACK, f"params must be ShapeParams, got {type(p).__name__}", a)
    if not all(tiles(big, small) for big, small in zip(a.ne, p.ne, strict=True)):
        raise fail(Op.REPEAT_BACK, f"the gradient's shape must be a whole multiple of the result's {list(p.ne)} in "
                                   "every dim (ggml_can_repeat)", a)
    return a.type, p.ne


define(Op.REPEAT_BACK, (1, 1), _repeat_back, ShapeParams)


def repeat_back(a: Tensor, like: Tensor) -> Tensor:
    """The gradient of REPEAT: sum every tile of a (the gradient of repeat(x, a)) into one tensor shaped like
    `like` (the x that was repeated; only its shape is used): dst[i] = sum over k of a[i + k * like.ne]."""
    return record(Op.REPEAT_BACK, (a,), ShapeParams(like.ne))


def _silu_back(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    g, x = _pair(Op.SILU_BACK, srcs, (0, 1), ("gradient", "silu's input"), F32_F16)
    if x.type != g.type:
        raise fail(Op.SILU_BACK, "the gradient and silu's input must have the same type", g, x)
    return g.type, g.ne


define(Op.SILU_BACK, (2, 2), _silu_back, can_inplace=True)


def silu_back(grad: Tensor, x: Tensor) -> Tensor:
    """The gradient of SILU at x: dst = grad * s * (1 + x * (1 - s)) with s = sigmoid(x) (ggml_silu_back)."""
    return record(Op.SILU_BACK, (grad, x))


def _rms_norm_back(srcs: Srcs, p: NormParams) -> tuple[GGMLType, Ne]:
    g, _ = _pair(Op.RMS_NORM_BACK, srcs, (0, 1), ("gradient", "rms_norm's input"), F32)
    if not p.eps >= 0.0:
        raise fail(Op.RMS_NORM_BACK, f"eps={p.eps} must be >= 0", g)
    return g.type, g.ne


define(Op.RMS_NORM_BACK, (2, 2), _rms_norm_back, NormParams, can_inplace=True)


def rms_norm_back(grad: Tensor, x: Tensor, eps: float) -> Tensor:
    """The gradient of RMS_NORM(x, eps), row by row over ne[0] (n elements):
    dst = (grad - x * sum(x * grad) / (sum(x * x) + n * eps)) / sqrt(mean(x * x) + eps)."""
    return record(Op.RMS_NORM_BACK, (grad, x), NormParams(float(eps)))


def _get_rows_back(srcs: Srcs, p: ShapeParams) -> tuple[GGMLType, Ne]:
    g = need(srcs[0], Op.GET_ROWS_BACK, "src0 (gradient)", F32_F16)
    rows = need(srcs[1], Op.GET_ROWS_BACK, "src1 (row ids)", frozenset({GGMLType.I32}))
    if not isinstance(p, ShapeParams):
        raise fail(Op.GET_ROWS_BACK, f"params must be ShapeParams, got {type(p).__name__}", g)
    if g.ne[2:] != (1, 1) or rows.ne[1:] != (1, 1, 1):
        raise fail(Op.GET_ROWS_BACK, "the gradient must be a matrix and the row ids a vector", g, rows)
    if rows.ne[0] != g.ne[1]:
        raise fail(Op.GET_ROWS_BACK, "one row id per gradient row (rows.ne[0] == gradient.ne[1])", g, rows)
    if p.ne[2:] != (1, 1) or p.ne[0] != g.ne[0]:
        raise fail(Op.GET_ROWS_BACK, f"the result {list(p.ne)} must be a matrix with the gradient's row length", g)
    return GGMLType.F32, p.ne


define(Op.GET_ROWS_BACK, (2, 2), _get_rows_back, ShapeParams)


def get_rows_back(grad: Tensor, rows: Tensor, like: Tensor) -> Tensor:
    """The gradient of GET_ROWS on a matrix: an F32 matrix shaped like `like` (the matrix rows were taken from;
    only its shape is used), zero but for dst[rows[i]] += grad[i] (repeated ids accumulate)."""
    return record(Op.GET_ROWS_BACK, (grad, rows), ShapeParams(like.ne))


def _soft_max_back(srcs: Srcs, p: SoftMaxParams) -> tuple[GGMLType, Ne]:
    g, _ = _pair(Op.SOFT_MAX_BACK, srcs, (0, 1), ("gradient", "soft_max's output"), F32)
    if p.max_bias != 0.0:
        raise fail(Op.SOFT_MAX_BACK, f"max_bias={p.max_bias}: ggml has no ALiBi gradient (max_bias must be 0)", g)
    if p.scale != p.scale:
        raise fail(Op.SOFT_MAX_BACK, "scale is NaN", g)
    return g.type, g.ne


define(Op.SOFT_MAX_BACK, (2, 2), _soft_max_back, SoftMaxParams, can_inplace=True)


def soft_max_ext_back(grad: Tensor, y: Tensor, scale: float = 1.0, max_bias: float = 0.0) -> Tensor:
    """The gradient of soft_max(x * scale) given its output y, row by row over ne[0]:
    dst = scale * y * (grad - sum(y * grad)) (ggml_soft_max_ext_back; max_bias must be 0)."""
    return record(Op.SOFT_MAX_BACK, (grad, y), SoftMaxParams(float(scale), float(max_bias)))


define(Op.ROPE_BACK, (2, 3), lambda srcs, p: _rope(srcs, p, Op.ROPE_BACK), RopeParams, can_inplace=True)


def rope_back(grad: Tensor, pos: Tensor, params: RopeParams, freq_factors: Tensor | None = None) -> Tensor:
    """The gradient of the ROPE made with `params`, `pos` and `freq_factors` (`rope`'s arguments as its params
    keep them): each pair rotated by minus the forward angle (ROPE with the sine negated, ggml_rope_ext_back),
    scaled by the same magnitude (attn_factor and YaRN's)."""
    return record(Op.ROPE_BACK, (grad, pos, freq_factors), params)


def _cross_entropy_loss(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    logits, _ = _pair(Op.CROSS_ENTROPY_LOSS, srcs, (0, 1), ("logits", "labels"), F32)
    if logits.nelements() == 0:
        raise fail(Op.CROSS_ENTROPY_LOSS, "the logits are empty (the loss averages over their rows)", logits)
    return GGMLType.F32, (1, 1, 1, 1)


define(Op.CROSS_ENTROPY_LOSS, (2, 2), _cross_entropy_loss)


def cross_entropy_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """A scalar: the mean over rows of -sum(labels * log_softmax(logits)) along ne[0] (labels are probabilities,
    e.g. one-hot rows; ggml_cross_entropy_loss)."""
    return record(Op.CROSS_ENTROPY_LOSS, (logits, labels))


def _cross_entropy_loss_back(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.CROSS_ENTROPY_LOSS_BACK
    g = need(srcs[0], op, "src0 (gradient of the loss)", F32)
    if g.ne != (1, 1, 1, 1):
        raise fail(op, "the gradient of the loss must be a scalar", g)
    logits, _ = _pair(op, srcs, (1, 2), ("logits", "labels"), F32)
    return logits.type, logits.ne


define(Op.CROSS_ENTROPY_LOSS_BACK, (3, 3), _cross_entropy_loss_back)


def cross_entropy_loss_back(grad: Tensor, logits: Tensor, labels: Tensor) -> Tensor:
    """The gradient of cross_entropy_loss with respect to the logits: dst = (softmax(logits) - labels) * grad / nr,
    nr the number of rows (grad is the loss's scalar gradient)."""
    return record(Op.CROSS_ENTROPY_LOSS_BACK, (grad, logits, labels))
