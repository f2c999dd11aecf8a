"""nvcc compilation: source assembly, PTX signatures, the disk cache, error reports, and `--check` over every
kernel (the CI gate that every kernel text compiles for sm_80 / sm_90 / compute_90)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pyggml.types import GGMLType
from pyggml_cuda import compile as cc
from pyggml_cuda.compile import KernelBuildError, KernelCache, Toolchain, bundle_source, ptx_signatures, variant
from pyggml_cuda.ops.matmul_q import act_spec
from pyggml_cuda.ops.matmul_q import spec as mmq_spec
from pyggml_cuda.options import CudaOptions
from pyggml_cuda_testing import needs_nvcc
from pyggml_dialect.ops.elementwise import spec as ew_spec

T = GGMLType

PTX = """
.visible .entry k_a__1(
	.param .u64 k_a__1_param_0,
	.param .u64 .ptr .align 1 k_a__1_param_1,
	.param .u32 k_a__1_param_2,
	.param .f32 k_a__1_param_3,
	.param .align 8 .b8 k_a__1_param_4[16]
)
{ ret; }
.visible .entry k_b__1()
{ ret; }
"""


def test_ptx_signatures() -> None:
    assert ptx_signatures(PTX) == {"k_a__1": ["u64", "u64", "u32", "f32", "b8x16"], "k_b__1": []}


def test_variants_are_tagged_by_their_text() -> None:
    a, b = variant(ew_spec(T.F32, T.F32, T.F32)), variant(ew_spec(T.F16, T.F32, T.F32))
    assert a.tag != b.tag and len(a.tag) == 12
    assert a.kernels == ("k_unary", "k_binary", "k_glu", "k_cpy")
    assert "#define UOP_SILU" in a.source  # the OpenCL plugin's op codes come with its text
    assert a.symbol("k_unary") == f"k_unary__{a.tag}"
    q = variant(mmq_spec(T.Q4_0))
    assert q.kernels == ("k_mmvq", "k_mmq", "k_mmq_mma")
    assert "INLINE float elem_q4_0" in q.source and "#define PYGGML_DIALECT_H" in q.source  # includes resolved


def test_bundle_wraps_each_variant() -> None:
    vs = [variant(ew_spec(T.F32, T.F32, T.F32)), variant(ew_spec(T.F16, T.F16, T.F16))]
    src, starts = bundle_source(vs)
    assert src.index("#include <cuda_fp16.h>") < src.index("namespace pgv_")
    for v in vs:
        assert f"namespace pgv_{v.tag}" in src and f"#define k_glu k_glu__{v.tag}" in src
    assert src.count("#undef PYGGML_COMMON_H") == 2  # include guards reset between variants
    assert src.count("#undef T0") == 2
    lines = src.splitlines()
    for line, v in starts:
        assert lines[line - 1] == v.source.splitlines()[0]


def test_toolchain_identity_covers_version_and_targets() -> None:
    t = Toolchain("nvcc", "release 13.0")
    assert t.gencode[-1] == "arch=compute_90,code=[sm_90,compute_90]"
    assert Toolchain("nvcc", "release 12.4").identity != t.identity
    assert t.with_arch("75").identity != t.identity and t.with_arch("80") is t


def test_missing_nvcc_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    named = CudaOptions.from_env({"PYGGML_NVCC": "/nonexistent/nvcc"}).nvcc  # read once, passed down
    with pytest.raises(KernelBuildError, match="/nonexistent/nvcc --version failed"):
        cc.toolchain(named)
    monkeypatch.setattr(cc, "find_nvcc", lambda named=None: None)
    with pytest.raises(KernelBuildError, match="nvcc is not on PATH"):
        cc.toolchain()


@needs_nvcc
def test_compile_once_then_from_the_disk_cache(tmp_path: Path) -> None:
    vs = [variant(act_spec(T.F32)), variant(mmq_spec(T.Q8_0))]
    kc = KernelCache(root=tmp_path)
    got = kc.ensure(vs)
    assert kc.compiled == 2  # two files, two nvcc runs
    b = got[vs[1].tag]
    assert b.image()[:4] == b"\x50\xed\x55\xba"  # a fatbin
    assert b.signatures[vs[1].symbol("k_mmvq")] == (["u64"] * 10 * 2 + ["u64", "u64"] + ["u64"] * 10 * 2
                                                     + ["u64", "u64"] + ["u32"])
    again = KernelCache(root=tmp_path)
    assert again.ensure(vs)[vs[1].tag].key == b.key and again.compiled == 0
    # built by another nvcc: still served at run time, but `--check` (strict) wants its own toolchain's
    other = Toolchain(kc.toolchain.nvcc, "Cuda compilation tools, release 13.0, V13.0.1")
    assert KernelCache(root=tmp_path, tc=other).lookup(vs[1]) == b
    assert KernelCache(root=tmp_path, tc=other, strict=True).lookup(vs[1]) is None


@needs_nvcc
def test_a_compile_error_shows_the_source_and_nvccs_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kdir = tmp_path / "kernelsrc"
    kdir.mkdir()
    shutil.copy(cc.KERNELSRC_DIR / cc.PRELUDE, kdir / cc.PRELUDE)
    (kdir / "broken.cu").write_text('#include "common.h"\nKERNEL void k_x(TENSOR(a)) {\n'
                                    '    undeclared_thing(a_p);\n}\n')
    monkeypatch.setattr(cc, "KERNELSRC_DIR", kdir)
    from pyggml_dialect.source import ProgramSpec

    v = variant(ProgramSpec.of("broken.cu", T0="f32"))
    with pytest.raises(KernelBuildError) as ei:
        KernelCache(root=tmp_path / "cache").compile([v])
    msg = str(ei.value)
    assert "nvcc failed for broken.cu [T0=f32]" in msg
    assert "undeclared_thing(a_p);" in msg and "in broken.cu [T0=f32]" in msg  # the numbered lines around it
    assert "---- nvcc log ----" in msg and "error" in msg and "undeclared_thing" in msg.split("nvcc log")[1]
    assert any((tmp_path / "cache" / "failed").glob("*.cu"))  # the whole unit is kept for reading


@needs_nvcc
def test_check_compiles_every_kernel_and_checks_every_launch() -> None:
    """`python -m pyggml_cuda_testing.check --check`: exit 0 means every program the op table launches for the
    conformance cases compiled for sm_80 + sm_90 + compute_90 and every launch matches its kernel's PTX."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    r = subprocess.run([sys.executable, "-m", "pyggml_cuda_testing.check", "--check", "--json"], capture_output=True,
                       text=True, timeout=1800, env=env)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-8000:]
    import json

    rep = json.loads(r.stdout)
    assert rep["failures"] == []
    assert rep["programs"] > 80 and rep["launches_checked"] > 150
