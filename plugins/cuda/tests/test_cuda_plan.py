"""Plan building without a device: grids, argument packing, signatures, and every conformance case traced."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.backend.op_table import OpTable
from pyggml.context import Context
from pyggml.errors import ComputeError, UnsupportedOpError
from pyggml.graph import build_graph
from pyggml.ops.base import Op
from pyggml.types import GGMLType
from pyggml_cuda.launch import CudaLaunchBuilder, DevPtr, check_signature, grid_of, pack
from pyggml_cuda.op_table import CUDA_RULES, TABLE, build_launches, supports
from pyggml_dialect.rules import RULES

SHARED = OpTable("dialect", *RULES)
"""The dialect rules alone (pyggml-opencl's table is exactly these)."""


def test_grid_is_global_over_local() -> None:
    assert grid_of((256, 3, 2), (64, 1, 1), "x") == ((4, 3, 2), (64, 1, 1))
    assert grid_of((96,), None, "x") == ((3, 1, 1), (32, 1, 1))
    with pytest.raises(ComputeError, match="not a multiple"):
        grid_of((100,), (64,), "node 'n'")
    with pytest.raises(ComputeError, match="exceeds CUDA's 1024"):
        grid_of((2048, 2), (1024, 2), "x")
    with pytest.raises(UnsupportedOpError, match="grid"):
        grid_of((64, 70000), (64, 1), "x")


def test_pack_gives_struct_codes() -> None:
    fmt, vals = pack([DevPtr(4096), np.int64(3), np.int32(-1), np.float32(0.5)], "x")
    assert fmt == "Pqif" and vals == (4096, 3, -1, 0.5)
    with pytest.raises(ComputeError, match="argument 1 is float"):
        pack([DevPtr(0), 1.5], "node 'n'")


def test_table_is_the_shared_one_with_cuda_fast_paths() -> None:
    assert set(TABLE) == set(SHARED)
    for op, rule in TABLE.rules.items():
        assert rule.accepts is SHARED.rules[op].accepts  # support is decided once, by the shared rules
        assert (rule.build is SHARED.rules[op].build) == (op not in CUDA_RULES)


def _mul_mat(wt: GGMLType, n: int, batch: int = 1, k: int = 64):  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(wt, k, 40, batch, 1, name="w")
    b = ctx.new_tensor(GGMLType.F32, k, n, batch, 1, name="x")
    return build_graph(ops.mul_mat(a, b))


@pytest.mark.parametrize(("n", "mma", "kernel", "grid"), [
    (1, True, "k_mmvq", (10, 1, 2)), (8, True, "k_mmvq", (10, 1, 2)), (9, True, "k_mmq", (1, 1, 2)),
    (31, True, "k_mmq", (1, 1, 2)), (32, True, "k_mmq_mma", (1, 1, 2)), (130, True, "k_mmq_mma", (1, 3, 2)),
    (130, False, "k_mmq", (1, 3, 2))])
def test_quantised_mul_mat_uses_the_integer_kernels(n: int, mma: bool, kernel: str, grid: tuple[int, int, int]
                                                    ) -> None:
    """dp4a mat-vec, dp4a tiles, or (prompts, unless the backend's `mma` option is off) 8-bit tensor-core tiles."""
    g = _mul_mat(GGMLType.Q4_0, n, batch=2)
    b = CudaLaunchBuilder(mma=mma)
    q, mm = build_launches(g.nodes, b)
    assert (q.kernel, q.spec.file) == ("k_quantize_act", "matmul_q.cl")
    assert dict(q.spec.defines)["QA_SIZE"] == "36"  # the q8_1 layout the dp4a kernels read
    assert (mm.kernel, mm.spec.file, mm.grid) == (kernel, "mmq.cu", grid)
    t = "P" + "q" * 9
    assert mm.fmt == (t * 2 + "Pq" + t * 2 + "qqi" if kernel == "k_mmvq" else t + "Pq" + t + "qq")
    assert len(b.scratch_mems) == 1


@pytest.mark.parametrize(("k", "kernel"), [(64, "k_mul_mat_vec_short"), (512, "k_mul_mat_vec")])
def test_float_mul_mat_keeps_the_shared_kernels(k: int, kernel: str) -> None:
    (la,) = build_launches(_mul_mat(GGMLType.F16, 4, k=k).nodes, CudaLaunchBuilder())
    assert (la.kernel, la.spec.file) == (kernel, "matmul.cl")


@pytest.mark.parametrize(("wt", "n", "mma", "kernel"), [
    (GGMLType.F16, 32, True, "k_mul_mat_mma"), (GGMLType.Q3_K, 130, True, "k_mul_mat_mma"),
    (GGMLType.Q4_K, 130, True, "k_mmq_mma"), (GGMLType.Q5_K, 130, False, "k_mmq"),
    (GGMLType.F16, 31, True, "k_mul_mat_tiled"), (GGMLType.Q6_K, 130, False, "k_mul_mat_tiled"),
    (GGMLType.F32, 130, True, "k_mul_mat_tiled"), (GGMLType.BF16, 130, True, "k_mul_mat_tiled")])
def test_prompts_over_f16_and_k_types_take_the_tensor_cores(wt: GGMLType, n: int, mma: bool, kernel: str) -> None:
    """From MMA_MIN_COLS columns on, unless the backend's `mma` option is off; never for F32 or BF16 weights; Q4_K
    and Q5_K through the integer tiles."""
    la = build_launches(_mul_mat(wt, n, batch=3, k=256).nodes, CudaLaunchBuilder(mma=mma))[-1]
    assert la.kernel == kernel
    if kernel == "k_mul_mat_mma":
        assert (la.spec.file, la.grid, la.block) == ("mma.cu", (1, -(-n // 64), 3), (128, 1, 1))


@pytest.mark.parametrize("keep_norm", [False, True])
def test_rms_norm_and_its_weight_run_as_one_kernel(keep_norm: bool) -> None:
    """The dialect's fusion through the graph's use counts: one k_norm launch writing the MUL's result, unless the
    norm's own result is wanted (an output), or no use counts are given."""
    ctx = Context(no_alloc=True)
    x, w = ctx.new_tensor(GGMLType.F32, 64, 3, name="x"), ctx.new_tensor(GGMLType.F32, 64, name="w")
    y = ops.rms_norm(x, 1e-5)
    if keep_norm:
        y.set_output()
    out = ops.mul(y, w)
    g = build_graph(out)
    launches = build_launches(g.nodes, CudaLaunchBuilder(), uses=g.use_count)
    assert [la.kernel for la in launches] == (["k_norm", "k_binary"] if keep_norm else ["k_norm"])
    assert launches[0].args[-1] == int(not keep_norm)  # has_w
    assert launches[-1].node is out
    assert [la.kernel for la in build_launches(g.nodes, CudaLaunchBuilder())] == ["k_norm", "k_binary"]


@pytest.mark.parametrize(("wt", "n", "first", "kept", "kernels"), [
    (GGMLType.Q4_0, 1, False, False, ["k_quantize_act", "k_mmvq"]),
    (GGMLType.Q4_0, 1, True, False, ["k_quantize_act", "k_mmvq"]),
    (GGMLType.Q6_K, 3, False, False, ["k_mul_mat_vec"]),
    (GGMLType.Q4_K, 3, False, False, ["k_mul_mat_vec"]),
    (GGMLType.Q4_0, 9, False, False, ["k_quantize_act", "k_mmq", "k_binary"]),
    (GGMLType.F16, 8, False, False, ["k_mul_mat_tiled", "k_binary"]),
    (GGMLType.Q6_K, 1, False, True, ["k_mul_mat_vec", "k_binary"])])
def test_a_mat_vec_adds_the_residual_as_it_stores(wt: GGMLType, n: int, first: bool, kept: bool,
                                                  kernels: list[str]) -> None:
    """MUL_MAT then ADD (a residual, either src) in one mat-vec launch (has_add), not for tiles, nor where the
    product is wanted (an output)."""
    ctx = Context(no_alloc=True)
    w, x = ctx.new_tensor(wt, 512, 40, name="w"), ctx.new_tensor(GGMLType.F32, 512, n, name="x")
    r = ctx.new_tensor(GGMLType.F32, 40, n, name="r")
    y = ops.mul_mat(w, x)
    if kept:
        y.set_output()
    out = ops.add(r, y) if first else ops.add(y, r)
    g = build_graph(out)
    launches = build_launches(g.nodes, CudaLaunchBuilder(), uses=g.use_count)
    assert [la.kernel for la in launches] == kernels
    if kernels[-1] != "k_binary":
        assert launches[-1].node is out and launches[-1].args[-1] == 1  # has_add, writing the ADD's result


@pytest.mark.parametrize(("wt", "swapped", "kernels"), [
    (GGMLType.Q4_0, False, ["k_quantize_act", "k_mmvq"]), (GGMLType.Q6_K, False, ["k_mul_mat_vec"]),
    (GGMLType.Q5_K, False, ["k_mul_mat_vec"]),
    (GGMLType.Q4_0, True, ["k_quantize_act", "k_mmvq", "k_mmvq", "k_glu"])])
def test_gate_up_and_their_glu_run_as_one_mat_vec(wt: GGMLType, swapped: bool, kernels: list[str]) -> None:
    """A feed-forward block's gate and up products and the SWIGLU of both in one launch (epi EPI_SWIGLU, the up
    weights as a2), the activations quantised once; a swapped GLU is not fused."""
    ctx = Context(no_alloc=True)
    x = ctx.new_tensor(GGMLType.F32, 512, 1, name="x")
    wg, wu = ctx.new_tensor(wt, 512, 40, name="wg"), ctx.new_tensor(wt, 512, 40, name="wu")
    out = ops.swiglu(ops.mul_mat(wg, x), ops.mul_mat(wu, x), swapped=swapped)
    g = build_graph(out)
    launches = build_launches(g.nodes, CudaLaunchBuilder(), uses=g.use_count)
    assert [la.kernel for la in launches] == kernels
    if not swapped:
        la = launches[-1]
        assert la.node is out and la.args[-1] == 2  # EPI_SWIGLU


def test_unsupported_node_is_named() -> None:
    g = _mul_mat(GGMLType.IQ2_XXS, 1, k=256)
    node = g.nodes[-1]
    node.set_name("ffn_out")
    assert not supports(node)
    with pytest.raises(UnsupportedOpError, match="'ffn_out' MUL_MAT -> f32"):
        build_launches(g.nodes, CudaLaunchBuilder())


def test_signature_check_catches_drift() -> None:
    (la,) = build_launches(_mul_mat(GGMLType.F32, 1).nodes, CudaLaunchBuilder())
    params = ["u64"] * 50 + ["u32"]
    check_signature(la, params, "k")
    with pytest.raises(ComputeError, match="takes 50 parameters"):
        check_signature(la, params[:50], "k")
    with pytest.raises(ComputeError, match=r"parameter 3 is \.f32"):
        check_signature(la, [*params[:3], "f32", *params[4:]], "k")
    with pytest.raises(ComputeError, match="not in its compiled module"):
        check_signature(la, None, "k")


def test_every_conformance_case_plans_without_a_device() -> None:
    """The dry trace `--check` compiles from: every supported node of every test case gets valid launches."""
    from pyggml_cuda_testing.check import catalog

    cat = catalog(["test"])
    assert cat.problems == []
    assert cat.graphs > 1000
    files = {s.file for s in cat.specs()}
    assert {"elementwise.cl", "rows.cl", "matmul.cl", "matmul_q.cl", "mmq.cu", "norm.cl", "rope.cl",
            "attention.cl", "layout.cl", "reduce.cl"} <= files
    kernels = {k for _, k, _ in cat.launches}
    assert {"k_mmvq", "k_mmq", "k_flash_attn", "k_flash_attn_merge", "k_soft_max", "k_rope", "k_get_rows",
            "k_set_rows_q"} <= kernels
    assert "k_mul_mat_q" not in kernels  # replaced by the dp4a kernels
    ops_seen = {la.node.op for la in cat.launches.values()}
    assert Op.FLASH_ATTN_EXT in ops_seen and Op.MUL_MAT_ID in ops_seen
