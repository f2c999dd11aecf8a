"""The sequence-model ops on seq.cl: TRI, SOLVE_TRI, SSM_CONV, SSM_SCAN (Mamba 1 and 2), RWKV_WKV6,
GATED_LINEAR_ATTN, RWKV_WKV7 and GATED_DELTA_NET, f32 as in ggml. Inputs may have any strides; the destination is
the op's own contiguous result. The S x S recurrences keep one row or column of a head's state per lane in
registers, so heads larger than MAX_HEAD are refused (another backend runs them)."""

from __future__ import annotations

from pyggml.backend.kernel_geometry import MAX_D_STATE, MAX_HEAD, scan_lanes
from pyggml.backend.launch import f32, i32, i64
from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import Builder

rules: RuleSet[Builder] = RuleSet()

FILE = "seq.cl"


def _f32(node: Tensor) -> bool:
    """Every src and the result f32 (I32 ids where the op has them), the result contiguous (the kernels write it
    by flat index)."""
    ok = node.type == GGMLType.F32 and node.is_contiguous()
    for i, s in enumerate(node.src):
        want = GGMLType.I32 if node.op is Op.SSM_SCAN and i == 6 else GGMLType.F32
        ok = ok and s is not None and s.type == want
    return ok


@rules.rule(Op.TRI, accepts=_f32)
def build_tri(node: Tensor, b: Builder) -> None:
    b.launch_1d(ProgramSpec.of(FILE), "k_tri", node.nelements(), *b.tensor(src(node, 0)), *b.tensor(node),
                i32(int(node.params.tri_type)))


@rules.rule(Op.SOLVE_TRI, accepts=_f32)
def build_solve_tri(node: Tensor, b: Builder) -> None:
    """One work-item per right-hand side column and batch."""
    n = node.ne[0] * node.ne[2] * node.ne[3]
    b.launch_1d(ProgramSpec.of(FILE), "k_solve_tri", n, *b.tensor(src(node, 0)), *b.tensor(src(node, 1)),
                *b.tensor(node))


@rules.rule(Op.SSM_CONV, accepts=_f32)
def build_ssm_conv(node: Tensor, b: Builder) -> None:
    b.launch_1d(ProgramSpec.of(FILE), "k_ssm_conv", node.nelements(), *b.tensor(src(node, 0)),
                *b.tensor(src(node, 1)), *b.tensor(node))


def _scan_ok(node: Tensor) -> bool:
    s = node.src[0] if node.src else None
    return _f32(node) and s is not None and s.ne[0] <= MAX_D_STATE


@rules.rule(Op.SSM_SCAN, accepts=_scan_ok)
def build_ssm_scan(node: Tensor, b: Builder) -> None:
    """One work-group per state row (head_dim index, head, sequence); an id past the state's rows is reported."""
    s, x = src(node, 0), src(node, 1)
    lanes = scan_lanes(s.ne[0])
    spec = ProgramSpec.of(FILE, WG=lanes, NS=-(-s.ne[0] // lanes))
    rows = x.ne[0] * x.ne[1] * x.ne[3]
    b.launch(spec, "k_ssm_scan", (rows * lanes,), (lanes,), *(a for i in range(7) for a in b.tensor(src(node, i))),
             *b.tensor(node), i64(node.params.k), *b.error_args(f"a state id outside 0..{s.ne[3] - 1}"))


def head_size(node: Tensor) -> int:
    """S of a linear recurrence: ne[0] of its v (every token tensor has it)."""
    return src(node, 2 if node.op is Op.GATED_DELTA_NET else 1).ne[0]


def _linear_ok(node: Tensor) -> bool:
    """f32; S within MAX_HEAD; the state [S*S*H, n_seqs] of ggml's layout (the kernels index its ne[0])."""
    if not _f32(node) or not 1 <= head_size(node) <= MAX_HEAD:
        return False
    if node.op is Op.GATED_DELTA_NET:
        return True
    st = node.src[-1]
    return st is not None and st.ne[2] == 1 and st.ne[3] == 1


LINEAR = {Op.RWKV_WKV6: "k_rwkv_wkv6", Op.GATED_LINEAR_ATTN: "k_gated_linear_attn", Op.RWKV_WKV7: "k_rwkv_wkv7",
          Op.GATED_DELTA_NET: "k_gated_delta_net"}


@rules.rule(*LINEAR, accepts=_linear_ok)
def build_linear(node: Tensor, b: Builder) -> None:
    """One work-group of S lanes per (head, sequence)."""
    size = head_size(node)
    state = src(node, len(node.src) - 1)
    tail: list[object] = []
    if node.op is Op.GATED_DELTA_NET:
        groups = src(node, 2).ne[1] * state.ne[3]
        tail.append(i64(node.params.k))
    else:
        groups = src(node, 0).ne[1] * state.ne[1]
    if node.op is Op.GATED_LINEAR_ATTN:
        tail.append(f32(node.params.scale))
    b.launch(ProgramSpec.of(FILE, HS=size), LINEAR[node.op], (groups * size,), (size,),
             *(a for i in range(len(node.src)) for a in b.tensor(src(node, i))), *b.tensor(node), *tail)
