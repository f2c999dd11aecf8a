"""Issue 21's first slice: ADD_ID (ggml's grid of experts, experts used, row lengths and tokens; F16, strided a,
ids as a strided view), UNARY XIELU (ggml's parameters and another set, types, strided, permuted, in place) and
GLU SWIGLU_OAI / SWIGLU_CLAMP (alpha and limit as test-backend-ops, fused / swapped / split, strided, and ggml's
wide input range [-150, 150]). EXPM1 has no params: it runs in the unary family with the other sub-ops."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.ops.elementwise import GluOp, UnaryOp
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F16, F32, FLOATS, I32, unique, varied_input
from pyggml_conformance.inputs import distinct_ids, integers, uniform

XIELU_PARAMS = ((4.0, 20.0, 0.5, 1e-7), (0.8, 0.8, 0.5, -1e-6))
"""(alpha_n, alpha_p, beta, eps): test-backend-ops' values, and a model-like set with a negative eps."""


def add_id_case(ta: GGMLType, tb: GGMLType, n_embd: int, n_mats: int, n_used: int, n_token: int,
                v: int = 0) -> Case:
    """a [n_embd, n_used, n_token] + b [n_embd, n_mats] rows picked by ids [n_used, n_token]. v bits: 1 a
    strided, 2 ids a view of a wider [n_mats, n_token] tensor (test-backend-ops' layout)."""
    params = fmt_params(type_a=ta, type_b=tb, n_embd=n_embd, n_mats=n_mats, n_used=n_used, n_token=n_token, v=v)

    def build(b: CaseBuilder) -> Tensor:
        ne_a = (n_embd, n_used, n_token)
        a = b.strided(ta, ne_a, pad=(3, 1, 0, 0)) if v & 1 else b.input(ta, ne_a)
        bias = b.input(tb, (n_embd, n_mats))
        if v & 2:
            ids = b.sub_view(b.input(I32, (n_mats, n_token), distinct_ids(n_mats)), (n_used, n_token))
        else:
            ids = b.input(I32, (n_used, n_token), integers(0, n_mats))
        return ops.add_id(a, bias, ids)

    return Case(Op.ADD_ID, params, build)


def xielu_case(t: GGMLType, ne: Sequence[int], prm: tuple[float, float, float, float], v: int = 0,
               inplace: bool = False, lo: float = -1.0, hi: float = 1.0) -> Case:
    an, ap, beta, eps = prm
    params = fmt_params(op=UnaryOp.XIELU, type=t, ne=ne, v=v, inplace=inplace, alpha_n=an, alpha_p=ap, beta=beta,
                        eps=eps) + f",range=[{lo:g},{hi:g}]"

    def build(b: CaseBuilder) -> Tensor:
        return ops.xielu(varied_input(b, t, ne, v, lo, hi), an, ap, beta, eps, inplace=inplace)

    return Case(Op.UNARY, params, build, sub=UnaryOp.XIELU.name)


def swiglu_case(gop: GluOp, t: GGMLType, ne: Sequence[int], alpha: float, limit: float, v: int = 0,
                mode: str = "split", lo: float = -150.0, hi: float = 150.0) -> Case:
    """mode: 'split' (two inputs), 'fused' or 'swapped' (one input of twice ne[0])."""
    extra = {"alpha": alpha} if gop is GluOp.SWIGLU_OAI else {}
    params = fmt_params(op=gop, type=t, ne=ne, v=v, mode=mode, **extra, limit=limit) + f",range=[{lo:g},{hi:g}]"

    def build(b: CaseBuilder) -> Tensor:
        init = uniform(lo, hi)
        split = mode == "split"
        ne_in = list(ne) if split else [2 * ne[0], *ne[1:]]
        a = b.strided(t, ne_in, pad=(4, 1, 0, 0), init=init) if v else b.input(t, ne_in, init)
        other = None
        if split:
            other = b.strided(t, ne, pad=(2, 0, 1, 0), init=init) if v else b.input(t, ne, init)
        sw = mode == "swapped"
        if gop is GluOp.SWIGLU_OAI:
            return ops.swiglu_oai(a, other, alpha, limit, swapped=sw)
        return ops.swiglu_clamp(a, other, limit, swapped=sw)

    return Case(Op.GLU, params, build, sub=gop.name)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for n_mats, n_used, n_embd, n_token in product((4, 8), (1, 2, 4), (32, 129), (1, 32, 129)):
        out.append(add_id_case(F32, F32, n_embd, n_mats, n_used, n_token, v=2 if n_used != n_mats else 0))
    for ta, tb, v in ((F16, F32, 0), (F32, F16, 1), (F16, F16, 3), (F32, F32, 1)):
        out.append(add_id_case(ta, tb, 65, 8, 3, 7, v))
    for t, prm in product(FLOATS, XIELU_PARAMS):
        for ne, v in product(((10, 5, 4, 3), (512, 16, 1, 1)), (0, 1, 2)):
            out.append(xielu_case(t, ne, prm, v))
        out.append(xielu_case(t, (128, 2, 2, 2), prm, lo=-8.0, hi=8.0))
    for t in (F32, F16):
        out.append(xielu_case(t, (128, 2, 2, 2), XIELU_PARAMS[0], v=1, inplace=True))
    for t, v, mode in product(FLOATS, (0, 1), ("split", "fused", "swapped")):
        for alpha, limit in product((0.5, 1.702), (2.0, 7.0)):
            out.append(swiglu_case(GluOp.SWIGLU_OAI, t, (128, 2, 2, 2), alpha, limit, v, mode))
        for limit in (2.0, 10.0):
            out.append(swiglu_case(GluOp.SWIGLU_CLAMP, t, (128, 2, 2, 2), 0.0, limit, v, mode))
    for gop in (GluOp.SWIGLU_OAI, GluOp.SWIGLU_CLAMP):
        out.append(swiglu_case(gop, F32, (5, 7, 11, 13), 1.702, 7.0, 0, "fused", -8.0, 8.0))
    return unique(out)


def perf_cases() -> list[Case]:
    return [add_id_case(F32, F32, 2880, 32, 4, 128), swiglu_case(GluOp.SWIGLU_OAI, F32, (2880, 512, 1, 1), 1.702,
                                                                  7.0)]
