"""FLASH_ATTN_EXT: head sizes (equal and different K/V, MLA), mask with -inf (F16 and F32, padded rows),
ALiBi, sinks, logit softcap, GQA ratios, broadcast batch, F16 / F32 / BF16 / quantised K and V (also mixed),
permuted (KV-cache view) K and V, short, odd and long KV lengths."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import BF16, F16, F32, LEGACY_QUANTS, T, unique
from pyggml_conformance.inputs import kq_mask

IDENTITY = (0, 1, 2, 3)
PAIRS = ((40, 40), (64, 64), (72, 72), (80, 80), (96, 96), (128, 128), (192, 128), (256, 256), (576, 512))
BLOCK_PAIRS = tuple(p for p in PAIRS if p[0] % 32 == 0 and p[1] % 32 == 0)


@dataclass(frozen=True)
class Masking:
    mask: bool = True
    sinks: bool = False
    max_bias: float = 0.0
    softcap: float = 0.0
    m_prec: GGMLType = F16
    mask_pad: int = 0


ALL_MASKINGS = (Masking(False), Masking(False, True), Masking(), Masking(sinks=True), Masking(max_bias=8.0),
                Masking(sinks=True, max_bias=8.0))
SOME_MASKINGS = (Masking(False), Masking(), Masking(sinks=True), Masking(sinks=True, max_bias=8.0))


def fa_case(hsk: int, hsv: int, nh: int, nr23: Sequence[int], kv: int, nb: int, m: Masking,
            type_k: GGMLType = F16, type_v: GGMLType = F16, perm: Sequence[int] = IDENTITY,
            v_of_k: bool = False) -> Case:
    """q [hsk, nb, nh*nr2, nr3] (F32), k [hsk, kv, nh], v [hsv, kv, nh] (laid out permuted by perm, or v a view
    of k's first hsv elements), mask [kv, nb + mask_pad, 1, nr3], sinks [nh*nr2]."""
    params = fmt_params(hsk=hsk, hsv=hsv, nh=nh, nr23=nr23, kv=kv, nb=nb, mask=m.mask, sinks=m.sinks,
                        max_bias=m.max_bias, softcap=m.softcap, m_prec=m.m_prec, mask_pad=m.mask_pad,
                        type_K=type_k, type_V=type_v, perm=perm, v_of_k=v_of_k)

    def build(b: CaseBuilder) -> Tensor:
        heads = nh * nr23[0]
        q = b.input(F32, (hsk, nb, heads, nr23[1]))
        k = b.permuted(type_k, (hsk, kv, nh, 1), perm)
        if v_of_k:
            v = ops.view(k, (hsv, kv, nh, 1), k.nb[1:])
        else:
            v = b.permuted(type_v, (hsv, kv, nh, 1), perm)
        mask = b.input(m.m_prec, (kv, nb + m.mask_pad, 1, nr23[1]), kq_mask()) if m.mask else None
        sinks = b.input(F32, (heads,)) if m.sinks else None
        return ops.flash_attn_ext(q, k, v, mask, 1.0 / math.sqrt(hsk), m.max_bias, m.softcap, sinks)

    return Case(Op.FLASH_ATTN_EXT, params, build)


def _f16_grid() -> list[Case]:
    out: list[Case] = []
    for (hsk, hsv), m in product(PAIRS, ALL_MASKINGS):
        maskings = (m, Masking(m.mask, m.sinks, m.max_bias, 10.0)) if hsk == 128 else (m,)
        nr2s = (1, 4, 12) if hsk == 128 else (1, 4)
        nr3s = (1, 3) if hsk <= 64 else (1,)
        nhs = (1, 2) if hsk < 576 else (1,)
        nbs = (1, 3, 16) if hsk < 576 else (1, 3, 16, 32)
        for mm, nh, nr2, nr3, kv, nb in product(maskings, nhs, nr2s, nr3s, (7, 65), nbs):
            out.append(fa_case(hsk, hsv, nh, (nr2, nr3), kv, nb, mm))
    return out


def _type_grid() -> list[Case]:
    out: list[Case] = []
    for t in (F32, BF16, *LEGACY_QUANTS):
        pairs = PAIRS if t in (F32, BF16) else BLOCK_PAIRS
        for (hsk, hsv), m, nh, nr2, nb, perm in product(pairs, SOME_MASKINGS, (1, 2), (1, 4), (1, 8),
                                                        (IDENTITY, (0, 2, 1, 3))):
            out.append(fa_case(hsk, hsv, nh, (nr2, 1), 33, nb, m, t, t, perm))
    return out


def _extras() -> list[Case]:
    out: list[Case] = []
    for (hsk, hsv), m, nr2, nb in product(PAIRS, (Masking(), Masking(sinks=True, max_bias=8.0)), (1, 4), (1, 8)):
        out.append(fa_case(hsk, hsv, 2, (nr2, 1), 65, nb, m, perm=(0, 2, 1, 3)))
        out.append(fa_case(hsk, hsv, 2, (nr2, 1), 65, nb, Masking(m.mask, m.sinks, m.max_bias, m_prec=F32)))
    for hsk, hsv in PAIRS:
        out.append(fa_case(hsk, hsv, 2, (2, 1), 64, 5, Masking(mask_pad=11)))
        out.append(fa_case(hsk, hsv, 2, (2, 1), 64, 5, Masking(sinks=True, mask_pad=59)))
    for (tk, tv), hs, nb in product(((F16, T.Q8_0), (T.Q8_0, F16), (T.Q4_0, T.Q8_0), (F32, F16), (BF16, F16)),
                                    (64, 128), (1, 8)):
        out.append(fa_case(hs, hs, 2, (1, 1), 113, nb, Masking(), tk, tv))
    for kv, hs, nb, t in product((512, 1024, 1025), (64, 128, 256), (1, 2), (F16, T.Q8_0)):
        out.append(fa_case(hs, hs, 1, (2, 1), kv, nb, Masking(), t, t))
    for kv, nb in product((1, 17, 31, 33, 61, 65, 127, 129, 255, 260), (1, 3)):
        out.append(fa_case(128, 128, 4, (1, 1), kv, nb, Masking(sinks=True)))
        out.append(fa_case(64, 64, 2, (2, 1), kv, nb, Masking(max_bias=8.0), T.F32, T.F32))
    for (hsk, hsv, nh, nr2), t in product(((576, 512, 1, 20), (192, 128, 2, 8), (128, 128, 4, 4), (64, 64, 4, 1)),
                                          (F16, T.Q8_0)):
        out.append(fa_case(hsk, hsv, nh, (nr2, 1), 65, 3, Masking(), t, t, v_of_k=True))
    for hsk, hsv, nh, nr2 in ((128, 128, 1, 16), (192, 128, 2, 16), (576, 512, 1, 32), (128, 128, 2, 8)):
        out.append(fa_case(hsk, hsv, nh, (nr2, 1), 65, 1, Masking(sinks=True)))
    return out


def eval_cases() -> list[Case]:
    return unique(_f16_grid() + _type_grid() + _extras())


def perf_cases() -> list[Case]:
    out = [fa_case(128, 128, 8, (4, 1), kv, nb, Masking(), t, t) for kv in (512, 4096) for nb in (1, 512)
           for t in (F16, T.Q8_0)]
    out += [fa_case(64, 64, 32, (1, 1), 4096, 1, Masking(sinks=True)), fa_case(576, 512, 1, (16, 1), 4096, 1,
                                                                                 Masking())]
    return out
