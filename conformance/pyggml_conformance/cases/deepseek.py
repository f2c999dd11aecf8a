"""The DeepSeek-family ops: DSV4_HC_COMB / PRE / POST as test-backend-ops grids them (its value ranges per input,
token counts, DeepSeek V4's 20 Sinkhorn rounds, hc other than 4, gated PRE, identity POST) with strided inputs, and
LIGHTNING_INDEXER over head counts, key types (F32, F16, BF16, Q8_0, Q4_0), streams with a broadcast mask holding
-inf entries."""

from __future__ import annotations

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import BF16, F16, F32, unique
from pyggml_conformance.inputs import Init, kq_mask, uniform


def _in(b: CaseBuilder, ne: tuple[int, ...], lo: float, hi: float, strided: bool = False,
        t: GGMLType = F32) -> Tensor:
    init: Init = uniform(lo, hi)
    return b.strided(t, ne, pad=(3, 1, 1, 0), init=init) if strided else b.input(t, ne, init)


def hc_comb_case(n_tok: int, n_iter: int, eps: float = 1e-6, hc: int = 4, v: int = 0) -> Case:
    params = fmt_params(n_tokens=n_tok, n_iter=n_iter, eps=eps, hc=hc, v=v)
    dim = (2 + hc) * hc

    def build(b: CaseBuilder) -> Tensor:
        return ops.dsv4_hc_comb(_in(b, (dim, n_tok), -2.0, 2.0, bool(v)), _in(b, (3,), -0.5, 0.5),
                                _in(b, (dim,), -0.25, 0.25), eps, n_iter)

    return Case(Op.DSV4_HC_COMB, params, build)


def hc_pre_case(n_embd: int, hc: int, n_tok: int, gated: bool = False, v: int = 0) -> Case:
    params = fmt_params(n_embd=n_embd, n_hc=hc, n_tokens=n_tok, gated=gated, v=v)

    def build(b: CaseBuilder) -> Tensor:
        x = _in(b, (n_embd, hc, n_tok), -1.0, 1.0, bool(v))
        if gated:
            return ops.dsv4_hc_pre_gated(x, _in(b, (n_embd, hc, n_tok), -4.0, 4.0, bool(v)), 1.0 / hc)
        return ops.dsv4_hc_pre(x, _in(b, (hc, n_tok), 0.0, 1.0, bool(v)))

    return Case(Op.DSV4_HC_PRE, params, build)


def hc_post_case(n_embd: int, n_tok: int, identity: bool = False, hc: int = 4, v: int = 0) -> Case:
    params = fmt_params(n_embd=n_embd, n_tokens=n_tok, identity=identity, hc=hc, v=v)

    def build(b: CaseBuilder) -> Tensor:
        x = _in(b, (n_embd, n_tok), -1.0, 1.0, bool(v))
        res = _in(b, (n_embd, hc, n_tok), -1.0, 1.0, bool(v))
        post = _in(b, (hc, n_tok), 0.0, 2.0)
        comb = None if identity else _in(b, (hc, hc, n_tok), 0.0, 1.0, bool(v))
        return ops.dsv4_hc_post(x, res, post, comb)

    return Case(Op.DSV4_HC_POST, params, build)


def indexer_case(n_embd: int, n_head: int, n_tok: int, n_kv: int, n_str: int = 1, m3: int = 1,
                 tk: GGMLType = F32, v: int = 0) -> Case:
    params = fmt_params(type_k=tk, n_embd=n_embd, n_head=n_head, n_tokens=n_tok, n_kv=n_kv, n_stream=n_str,
                        mask_streams=m3, v=v)

    def build(b: CaseBuilder) -> Tensor:
        q = _in(b, (n_embd, n_head, n_tok, n_str), -1.0, 1.0, bool(v))
        k = _in(b, (n_embd, 1, n_kv, n_str), -1.0, 1.0, bool(v) and tk in (F32, F16, BF16), tk)
        w = _in(b, (n_head, n_tok, 1, n_str), 0.0, 1.0 / n_head, bool(v))
        mask = b.input(F16, (n_kv, n_tok, 1, m3), kq_mask(0.2))
        return ops.lightning_indexer(q, k, w, mask)

    return Case(Op.LIGHTNING_INDEXER, params, build)


def eval_cases() -> list[Case]:
    out: list[Case] = [hc_comb_case(17, 4), hc_comb_case(257, 8), hc_comb_case(17, 20)]
    out += [hc_comb_case(n, 20) for n in (1, 336, 513)]
    out += [hc_comb_case(9, 5, 1e-3, hc) for hc in (1, 2, 3, 5)] + [hc_comb_case(17, 4, v=1)]
    for n_embd, hc, n_tok in ((1, 4, 1), (31, 4, 17), (128, 4, 257), (1024, 4, 21)):
        out += [hc_pre_case(n_embd, hc, n_tok), hc_pre_case(n_embd, hc, n_tok, True)]
    for hc in (1, 2, 3, 5, 8, 65):
        out += [hc_pre_case(128, hc, 17), hc_pre_case(128, hc, 17, True)]
    out += [hc_pre_case(31, 4, 17, False, 1), hc_pre_case(31, 4, 17, True, 1)]
    for n_embd, n_tok in ((1, 1), (31, 17), (128, 257), (1024, 21)):
        out += [hc_post_case(n_embd, n_tok), hc_post_case(n_embd, n_tok, True)]
    out += [hc_post_case(31, 17, False, 3, 1), hc_post_case(31, 17, True, 5, 1)]
    for n_head, n_kv in ((1, 7), (4, 33), (16, 64)):
        out.append(indexer_case(64, n_head, 5, n_kv))
    for tk in (F16, BF16, GGMLType.Q8_0, GGMLType.Q4_0):
        out.append(indexer_case(64, 4, 3, 17, tk=tk))
    out += [indexer_case(32, 4, 6, 19, n_str=4, m3=2), indexer_case(32, 4, 6, 19, n_str=3, m3=1, v=1),
            indexer_case(32, 2, 6, 19, n_str=2, m3=2, tk=F16, v=1)]
    return unique(out)


def perf_cases() -> list[Case]:
    return [hc_comb_case(2048, 20), hc_pre_case(4096, 4, 128, True), hc_post_case(4096, 128),
            indexer_case(128, 64, 16, 2048)]
