"""Type lists and small helpers shared by the case families."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder
from pyggml_conformance.inputs import uniform

T = GGMLType
F32, F16, BF16, I32 = T.F32, T.F16, T.BF16, T.I32
FLOATS = (F32, F16, BF16)
HALF = (F32, F16)
QUANTS = (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K)
"""Every quantised type the suite covers for MUL_MAT, MUL_MAT_ID, GET_ROWS, CPY and SET_ROWS."""
ALL_TYPES = (*FLOATS, *QUANTS)
LEGACY_QUANTS = QUANTS[:5]
K_QUANTS = QUANTS[5:]

def unique(cases: Iterable[Case]) -> list[Case]:
    """Cases with distinct names (the first of each), in order; overlapping grids may produce a case twice."""
    seen: set[str] = set()
    out: list[Case] = []
    for c in cases:
        if c.name not in seen:
            seen.add(c.name)
            out.append(c)
    return out


def varied_input(b: CaseBuilder, t: GGMLType, ne: Sequence[int], v: int, lo: float = -1.0, hi: float = 1.0
                 ) -> Tensor:
    """An input of type t and shape ne, uniform in [lo, hi], laid out as variant v asks: 0 contiguous, 1 strided
    rows and planes, 2 permuted (dims 1 and 2 swapped in memory). The element-wise families (unary, xielu) and the
    spatial one run cases on all three, so a kernel that assumes contiguous rows fails."""
    init = uniform(lo, hi)
    if v == 1:
        return b.strided(t, ne, pad=(3, 1, 1, 0), init=init)
    if v == 2:
        return b.permuted(t, ne, (0, 2, 1, 3), init)
    return b.input(t, ne, init)


def ne4(ne: Sequence[int]) -> tuple[int, int, int, int]:
    full = tuple(ne) + (1,) * (4 - len(ne))
    return full[0], full[1], full[2], full[3]


def mul(ne: Sequence[int], nr: Sequence[int]) -> list[int]:
    """ne * nr element-wise (the broadcast target of a src of shape ne repeated nr times)."""
    a, b = ne4(ne), ne4(nr)
    return [a[i] * b[i] for i in range(4)]


QUANT_BITS: dict[GGMLType, int] = {T.Q4_0: 4, T.Q4_1: 4, T.Q5_0: 5, T.Q5_1: 5, T.Q8_0: 8, T.Q2_K: 2, T.Q3_K: 3,
                                   T.Q4_K: 4, T.Q5_K: 5, T.Q6_K: 6}


def quant_threshold(t: GGMLType, n_values: int, src: GGMLType = F32) -> float | None:
    """NMSE allowed when a backend quantises n_values values in [-1, 1] (CPY / SET_ROWS into block type t):
    about one value off by one quantisation step (four for k-quants, whose scale search may round
    differently; four times more again for F16/BF16 sources). None for non-block types (default threshold)."""
    bits = QUANT_BITS.get(t)
    if bits is None:
        return None
    step = 2.0 / 2**bits
    slack = (4.0 if t in K_QUANTS else 1.0) * (4.0 if src != F32 else 1.0)
    return float(slack * step * step / (0.25 * max(n_values, 1)))
