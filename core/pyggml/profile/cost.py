"""The work one node does, from its shapes and types alone: floating-point operations for the ops whose cost is
their arithmetic (matrix products, attention, output products), bytes moved (sources read + result written) for
every op. The summary turns them into GFLOP/s or GB/s; one place computes them for every backend."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING

from pyggml.ops.base import Op

if TYPE_CHECKING:
    from pyggml.tensor import Tensor


@dataclass(frozen=True, slots=True)
class NodeCost:
    flops: int
    """Floating-point operations (a multiply-add counts 2); 0 for an op whose cost is its memory traffic."""
    nbytes: int
    """Bytes of the sources (each once) and the result."""


def node_cost(node: Tensor) -> NodeCost:
    srcs = {id(s): s for s in node.src if s is not None}
    nbytes = node.nbytes() + sum(s.nbytes() for s in srcs.values())
    return NodeCost(_flops(node), nbytes)


def _flops(node: Tensor) -> int:
    op, src = node.op, node.src
    a = src[0] if src else None
    if a is None:
        return 0
    if op in (Op.MUL_MAT, Op.MUL_MAT_ID):
        return 2 * a.ne[0] * node.nelements()  # each result element is a dot product of length K = ne00
    if op is Op.OUT_PROD:
        b = src[1] if len(src) > 1 else None
        return 2 * (b.ne[1] if b is not None else 1) * node.nelements()
    if op is Op.FLASH_ATTN_EXT:
        k = src[1] if len(src) > 1 else None
        if k is None:
            return 0
        head_dim, n_q, n_heads, n_seq = a.ne
        return 4 * head_dim * k.ne[1] * n_q * n_heads * n_seq  # Q.K^T and P.V, one multiply-add each
    if op is Op.CONV_2D:
        return 2 * prod(a.ne[:3]) * node.nelements()  # kernel a: KW * KH * Cin multiply-adds per output element
    return 0
