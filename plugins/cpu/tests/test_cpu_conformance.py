"""The conformance suite's cases on the cpu backend, on the SIMD and on the portable kernels.

The whole suite runs with `pyggml conformance --backend cpu` (and with PYGGML_CPU_PORTABLE=1); here a
deterministic sample of every op's cases keeps the test run short."""

from __future__ import annotations

import pytest

pytest.importorskip("pyggml_conformance")

from pyggml_conformance.runner import REFERENCE, Status, compare_case, open_target
from pyggml_conformance.suite import Options, load_cases

OPS = ["ADD", "MUL", "SCALE", "UNARY", "GLU", "RMS_NORM", "NORM", "SOFT_MAX", "ROPE", "FLASH_ATTN_EXT", "MUL_MAT",
       "MUL_MAT_ID", "GET_ROWS", "SET_ROWS", "CPY", "CONT", "CONCAT", "REPEAT", "SUM_ROWS", "ARGSORT", "TOP_K",
       "OUT_PROD", "PAD", "ACC", "GROUP_NORM", "CUMSUM", "ARGMAX",
       "REPEAT_BACK", "SILU_BACK", "RMS_NORM_BACK", "GET_ROWS_BACK", "SOFT_MAX_BACK", "ROPE_BACK", "CROSS_ENTROPY_LOSS",
       "CROSS_ENTROPY_LOSS_BACK", "OPT_STEP_ADAMW", "OPT_STEP_SGD", "IM2COL_BACK", "POOL_2D_BACK"]
PER_OP = 24


def _sample(op: str) -> list[object]:
    cases = load_cases(Options(ops=[op]))
    step = max(1, len(cases) // PER_OP)
    return cases[::step][:PER_OP]


@pytest.fixture(scope="module")
def targets() -> tuple[object, object]:
    return open_target("cpu"), open_target(REFERENCE)


@pytest.mark.parametrize("op", OPS)
def test_op_matches_reference(op: str, simd: str, targets: tuple[object, object]) -> None:
    cpu, ref = targets
    failures = []
    ran = 0
    for case in _sample(op):
        for r in compare_case(case, [cpu], ref):  # type: ignore[arg-type]
            if r.status == Status.PASS:
                ran += 1
            elif r.status != Status.UNSUPPORTED:
                failures.append(f"{r.name}: {r.status.value} {r.error or ''} nmse={r.nmse}")
    assert not failures, f"{op} on {simd} kernels:\n" + "\n".join(failures)
    assert ran > 0, f"no {op} case ran on the cpu backend"
