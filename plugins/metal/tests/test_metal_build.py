"""The build path on this machine: every Vulkan shader to MSL through SPIR-V, its binding layout, the emulator
compiling every kernel as C++, and the MSL specialised for a real Metal pipeline still valid."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from pyggml_metal import mslgen
from pyggml_metal.driver import KernelLayout
from pyggml_metal.options import MetalOptions
from pyggml_metal_sim import build, emucc

OPTS = MetalOptions.from_env()


def test_every_shader_translates_with_a_layout() -> None:
    folder = mslgen.msl_dir(OPTS.cache_dir, OPTS.shader_dir)
    names = mslgen.shader_names()
    assert len(names) >= 20
    for n in names:
        msl = (folder / f"{n}.metal").read_text()
        assert "kernel void main0(" in msl
        lay = KernelLayout.load(folder / f"{n}.json")
        assert lay.push_index is not None, f"{n}: push constants must reach Metal in a bound buffer"
        indices = sorted([i for i, _ in lay.bindings] + [lay.push_index])
        assert indices == list(range(len(indices))), f"{n}: MSL buffer indices {indices} are not dense"
        assert all(0 <= b <= 6 for _, b in lay.bindings)  # common.glsl: sources 0-4, destination 5, status 6
        x, y, z = lay.threads(())
        assert x * y * z <= 1024  # Metal's threadgroup limit
        assert lay.n_buffers <= 31  # Metal binds at most 31 buffers per kernel


def test_layout_maps_alias_and_block_arguments() -> None:
    msl = ("kernel void main0(const device void* spvBufferAliasSet0Binding1 [[buffer(0)]], constant PC& pc "
           "[[buffer(1)]], device D_F32& _9 [[buffer(2)]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])\n"
           "{ threadgroup_barrier(mem_flags::mem_threadgroup); }\n")
    reflect = {"ssbos": [{"name": "D_F32", "binding": 5}], "push_constants": [{"name": "pc"}],
               "entryPoints": [{"workgroup_size": [128, 1, 1]}]}
    lay = mslgen.layout_of(msl, reflect)
    assert lay["buffers"] == [[0, "binding", 1], [1, "push", 0], [2, "binding", 5]]
    assert lay["local_size_spec"] == [False, False, False]
    assert lay["local_size"] == [128, 1, 1] and lay["barriers"]
    with pytest.raises(mslgen.MslBuildError, match="matches no storage buffer"):
        mslgen.layout_of(msl.replace("D_F32&", "X_F32&"), reflect)


LINUX_ONLY = pytest.mark.skipif(sys.platform != "linux", reason="the emulator is built and checked on Linux")


@LINUX_ONLY
def test_the_emulator_compiles_every_kernel() -> None:
    lib = build.build(OPTS)
    assert lib.failed == {}
    assert set(lib.kernels) == set(mslgen.shader_names())


def test_specialised_msl_fixes_function_constants() -> None:
    msl = (mslgen.msl_dir(OPTS.cache_dir, OPTS.shader_dir) / "binary.metal").read_text()
    decls = mslgen.FUNC_CONST.findall(msl)
    assert len(decls) == 4
    text = mslgen.specialize(msl, (0, 1, 0, 2))
    assert not mslgen.FUNC_CONST.search(text) and "is_function_constant_defined" not in text
    for ctype, name, idx in decls:
        value = (0, 1, 0, 2)[int(idx)]
        assert re.search(rf"^constant {ctype} {name} = {value}u;$", text, re.M), name
    assert "as_type<float>(1069547520u)" in mslgen.specialize("constant float X [[function_constant(0)]];", (1.5,))
    unset = mslgen.specialize("constant bool B_tmp [[function_constant(3)]];\n"
                              "constant bool B = is_function_constant_defined(B_tmp) ? B_tmp : true;", (1,))
    assert "constant bool B = false ? B_tmp : true;" in unset  # a constant not given keeps its default


@LINUX_ONLY
@pytest.mark.parametrize("kernel,spec", [("binary", (0, 1, 0, 2)), ("soft_max", (1, 1, 0)),
                                         ("mul_mat", (8, 0, 1, 32, 0))])
def test_specialised_msl_is_still_valid_msl(kernel: str, spec: tuple[int, ...], tmp_path) -> None:  # type: ignore[no-untyped-def]
    """What a Mac's pipeline gets, checked as far as this machine can: through the emulator's C++ translation."""
    text = mslgen.specialize((mslgen.msl_dir(OPTS.cache_dir, OPTS.shader_dir) / f"{kernel}.metal").read_text(), spec)
    cpp = tmp_path / f"{kernel}.cpp"
    cpp.write_text(emucc.translate(kernel, text))
    proc = subprocess.run([build.cxx(), *build.CXXFLAGS, f"-I{build.SHIM}", "-fsyntax-only", str(cpp)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_emucc_refuses_what_it_cannot_emulate() -> None:
    msl = "kernel void main0(uint q [[quadgroup_index_in_threadgroup]])\n{\n}\n"
    with pytest.raises(emucc.EmuccError, match="quadgroup_index_in_threadgroup"):
        emucc.translate("x", msl)
    with pytest.raises(emucc.EmuccError, match="no `kernel void main0"):
        emucc.translate("x", "void f() {}\n")


def test_local_size_from_a_constant() -> None:
    """ssm_scan's work group is `local_size_x_id = 0`: the pipeline's threads come from its constant 0."""
    lay = KernelLayout.load(mslgen.msl_dir(OPTS.cache_dir, OPTS.shader_dir) / "ssm_scan.json")
    assert lay.local_spec == (True, False, False)
    assert lay.threads((32, 1)) == (32, 1, 1) and lay.threads(()) == (1, 1, 1)


def test_array_sizing_constants_are_compile_time() -> None:
    """spirv-cross makes a constant that sizes an array a macro: specialising defines it before the default."""
    msl = ("#ifndef SPIRV_CROSS_CONSTANT_ID_1\n#define SPIRV_CROSS_CONSTANT_ID_1 64u\n#endif\n"
           "constant uint LANES = SPIRV_CROSS_CONSTANT_ID_1;\n")
    assert mslgen.array_constants(msl) == [1]
    assert mslgen.array_defines(msl, (0, 32)) == {"SPIRV_CROSS_CONSTANT_ID_1": "32u"}
    assert mslgen.specialize(msl, (0, 32)).startswith("#define SPIRV_CROSS_CONSTANT_ID_1 32u\n#ifndef")
    assert mslgen.array_defines(msl, (0,)) == {}  # not given: the default


def test_layouts_are_current_json(tmp_path) -> None:  # type: ignore[no-untyped-def]
    made = mslgen.generate("cpy", tmp_path)
    d = json.loads(made.layout.read_text())
    assert d["hash"] == mslgen.source_hash("cpy") and mslgen.current("cpy", tmp_path, mslgen.shader_dir())
