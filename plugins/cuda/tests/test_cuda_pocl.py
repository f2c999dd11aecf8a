"""The CUDA plugin's plans run on PoCL (see pyggml_cuda_testing.pocl): the conformance suite's quantised MUL_MAT
cases through the dp4a fast paths, prompts over F16 and K-type weights through the tensor-core kernel's portable
fragments, a case of every other op through the shared rules, all compared with the numpy
reference by the suite's own runner. Skipped without an OpenCL device (PoCL)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from pyggml.types import GGMLType
from pyggml_cuda.ops.matmul_q import INTEGER
from pyggml_cuda_testing.pocl import PoclCudaDevice
from pyggml_testing.devices import devices_or_skip

T = GGMLType


@pytest.fixture(scope="module")
def target():  # type: ignore[no-untyped-def]
    from pyggml_conformance.runner import Target
    from pyggml_opencl.registry import OpenCLRegistry

    devs = devices_or_skip(OpenCLRegistry(), "no OpenCL device to run the kernel texts on")
    dev = PoclCudaDevice(devs[0])
    return Target(dev.name, dev)


@pytest.fixture(scope="module")
def reference():  # type: ignore[no-untyped-def]
    from pyggml_conformance.runner import REFERENCE, open_target

    return open_target(REFERENCE)


def _run(cases, target, reference) -> list[str]:  # type: ignore[no-untyped-def]
    from pyggml_conformance.runner import Status, compare_case

    bad = []
    for case in cases:
        (r,) = compare_case(case, [target], reference)
        if r.status is not Status.PASS:
            bad.append(f"{case.name}: {r.status} {r.error}")
    return bad


def _quant_mul_mat_cases() -> Iterator:  # type: ignore[type-arg]
    from pyggml_conformance.cases import all_cases

    names = {str(t) for t in INTEGER}
    for c in all_cases():
        m = re.match(r"type_a=(\w+),", c.params)
        if c.op.name == "MUL_MAT" and m and m.group(1) in names:
            yield c


def test_quantised_mul_mat_cases_through_the_integer_kernels(target, reference) -> None:  # type: ignore[no-untyped-def]
    """dp4a mat-vec and tiles below 32 columns, 8-bit tensor-core fragments from there (the suite's n = 64 and 128
    cases, and the batches of transposed and permuted srcs); Q4_K and Q5_K through the tiles past decode."""
    cases = list(_quant_mul_mat_cases())
    assert len(cases) > 300
    assert _run(cases, target, reference) == []
    assert target.backend.launches > 1.5 * len(cases)  # most with their activations' quantising launch


def test_one_case_of_every_op(target, reference) -> None:  # type: ignore[no-untyped-def]
    """The shared rules through CudaLaunchBuilder: grids, blocks and argument order reach the kernels intact."""
    from pyggml_conformance.cases import all_cases
    from pyggml_conformance.runner import first_unsupported, realize

    picked: dict[str, object] = {}
    for c in all_cases():
        key = c.sub or c.op.name
        if key not in picked and first_unsupported(realize(c).graph, target.device) is None:
            picked[key] = c
    assert len(picked) > 60
    assert _run(list(picked.values()), target, reference) == []


@pytest.mark.parametrize("wt", [T.IQ4_NL, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K])
@pytest.mark.parametrize("n", [1, 7, 9, 31, 32, 70, 130])
def test_integer_kernels_tile_edges_and_broadcast(target, reference, wt: GGMLType, n: int) -> None:  # type: ignore[no-untyped-def]
    """Rows not a multiple of the tile, columns across the mat-vec / tiled boundary, src0 broadcast over two
    batches, IQ4_NL (not in the suite's MUL_MAT cases), the K types' sub-blocks over two super-blocks."""
    from pyggml import ops
    from pyggml_conformance.case import Case

    k = 512 if wt in (T.Q4_K, T.Q5_K) else 96

    def build(b):  # type: ignore[no-untyped-def]
        a = b.input(wt, [k, 67, 1, 1])
        x = b.input(T.F32, [k, n, 2, 1])
        return ops.mul_mat(a, x)

    assert _run([Case(ops.Op.MUL_MAT, f"wt={wt},n={n}", build)], target, reference) == []


MMA_SHAPES = (
    # (m, n, k, batches of src0, broadcast, layout bits of mul_mat_case)
    (83, 45, 512, (1, 1), (1, 1), 0),     # rows and columns not multiples of the 64 x 64 tile
    (64, 64, 256, (2, 1), (2, 1), 0),     # src0 broadcast over src1's batches
    (17, 130, 256, (1, 1), (1, 1), 4),    # src1 transposed (its k strided)
    (70, 33, 256, (1, 1), (1, 1), 1),     # src0 rows strided
)


@pytest.mark.parametrize("wt", [T.F16, T.Q2_K, T.Q3_K, T.Q6_K])
def test_prompts_through_the_tensor_core_kernel(target, reference, wt: GGMLType) -> None:  # type: ignore[no-untyped-def]
    """k_mul_mat_mma in its portable form: weights decoded to F16 a 16-element run (the K types' own decoders), src1
    rounded to F16, tile edges, batches, strides; F16 weights also with k off the 32-element stage and F16 src1."""
    from pyggml.ops.base import Op
    from pyggml_conformance.cases.matmul import mul_mat_case
    from pyggml_conformance.runner import realize
    from pyggml_cuda.launch import CudaLaunchBuilder
    from pyggml_cuda.op_table import build_launches

    cases = [mul_mat_case(wt, T.F32, m, n, k, bs, nr, v=v) for m, n, k, bs, nr, v in MMA_SHAPES]
    if wt == T.F16:
        cases += [mul_mat_case(T.F16, T.F32, 40, 37, 80), mul_mat_case(T.F16, T.F16, 66, 64, 65, (3, 2), (1, 2))]
    for c in cases:
        g = realize(c).graph
        kernels = [la.kernel for la in build_launches(g.nodes, CudaLaunchBuilder()) if la.node.op is Op.MUL_MAT]
        assert kernels == ["k_mul_mat_mma"], (c.name, kernels)
    assert _run(cases, target, reference) == []


@pytest.mark.parametrize("wt", [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.IQ4_NL, T.Q4_K, T.Q5_K])
def test_integer_tensor_core_tiles_give_the_dp4a_tiles_numbers(target, wt: GGMLType) -> None:  # type: ignore[no-untyped-def]
    """k_mmq_mma sums each block exactly and scales it as k_mmq does, blocks in the same order: the same bits."""
    import numpy as np

    from pyggml import ops
    from pyggml.context import Context
    from pyggml.graph import build_graph
    from pyggml.quants import quantize
    from pyggml_conformance.placement import GuardedArena

    rng = np.random.default_rng(7)
    ctx = Context(no_alloc=True)
    k = 512 if wt in (T.Q4_K, T.Q5_K) else 320
    w, x = ctx.new_tensor(wt, k, 83, name="w"), ctx.new_tensor(T.F32, k, 70, 2, name="x")
    g = build_graph(ops.mul_mat(w, x))
    pl = GuardedArena(g, target.device.buffer_type())
    try:
        w.buffer.set_tensor(w, quantize(rng.standard_normal((83, k)).astype(np.float32), wt).view(np.uint8))
        x.buffer.set_tensor(x, rng.standard_normal(x.nelements()).astype(np.float32).view(np.uint8))
        out = []
        for mma in (True, False):
            target.backend.mma = mma
            target.backend.graph_compute(g)
            out.append(np.frombuffer(g.nodes[-1].buffer.get_tensor(g.nodes[-1]), np.float32).copy())
    finally:
        target.backend.mma = True
        pl.free()
    assert np.array_equal(out[0], out[1])
    assert np.abs(out[0]).max() > 1


def test_out_of_range_ids_raise_and_name_the_node(target) -> None:  # type: ignore[no-untyped-def]
    """The dialect's CHECK_INDEX through the CUDA plan: the status word and the node's code reach the kernel."""
    import numpy as np

    from pyggml import ops
    from pyggml.context import Context
    from pyggml.errors import ComputeError
    from pyggml.graph import build_graph
    from pyggml_conformance.placement import GuardedArena

    ctx = Context(no_alloc=True)
    out = ops.get_rows(ctx.new_tensor(T.F32, 8, 5, name="table"), ids := ctx.new_tensor(T.I32, 3, name="ids"))
    out.set_name("rows")
    g = build_graph(out)
    pl = GuardedArena(g, target.device.buffer_type())
    try:
        ids.buffer.set_tensor(ids, np.array([0, 7, 1], np.int32).view(np.uint8))
        with pytest.raises(ComputeError, match=r"node 'rows' \(GET_ROWS.*a row id outside 0\.\.4"):
            target.backend.graph_compute(g)
    finally:
        pl.free()
