"""The emulator's fiber runtime on hand-written MSL kernels: a threadgroup barrier makes every thread's write to
threadgroup memory visible to the others, threads that returned early count as arrived, groups do not share
their threadgroup memory's contents, function constants reach the kernel; simdgroup functions see the lanes of
their simdgroup that reach them."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pyggml_metal_sim import build, emucc
from pyggml_metal_sim.driver import _Dims, _Launch, spec_words

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the emulator is built and checked on Linux")

MSL = """#include <metal_stdlib>
using namespace metal;
struct OUT { uint v[1]; };
constant uint SHIFT_tmp [[function_constant(0)]];
constant uint SHIFT = is_function_constant_defined(SHIFT_tmp) ? SHIFT_tmp : 1u;
kernel void main0(device OUT& out [[buffer(0)]], uint3 wg [[threadgroup_position_in_grid]], \
uint3 lid [[thread_position_in_threadgroup]])
{
    threadgroup uint shared_v[64];
    uint t = lid.x;
    if (t >= 60u)
    {
        return;
    }
    shared_v[t] = t * 10u + wg.x * 1000u;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint got = shared_v[(t + SHIFT) % 60u];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    shared_v[t] = 0u;
    out.v[wg.x * 64u + t] = got;
}
"""


SIMD_MSL = """#include <metal_stdlib>
using namespace metal;
struct OUT { float v[1]; };
kernel void main0(device OUT& out [[buffer(0)]], uint t [[thread_index_in_threadgroup]], \
uint lane [[thread_index_in_simdgroup]], uint sg [[simdgroup_index_in_threadgroup]])
{
    if (t >= 40u)
    {
        return;
    }
    float x = float(t);
    out.v[t * 4u] = simd_sum(x);
    out.v[t * 4u + 1u] = simd_shuffle_xor(x, ushort(1));
    out.v[t * 4u + 2u] = simd_is_first() ? 1.0 : 0.0;
    out.v[t * 4u + 3u] = simd_max(x) + float(sg) * 1000.0 + float(lane) * 0.5;
}
"""


def _compile(d: Path, name: str, msl: str):  # type: ignore[no-untyped-def]
    src = d / f"{name}.cpp"
    src.write_text(emucc.translate(name, msl))
    lib = d / f"{name}.so"
    subprocess.run([build.cxx(), *build.CXXFLAGS, f"-I{build.SHIM}", "-shared", str(src), str(build.RUNTIME), "-o",
                    str(lib)], check=True, capture_output=True)
    fn = getattr(ctypes.CDLL(str(lib)), f"pyg_run_{name}")
    fn.argtypes = [ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def _launch(fn, out: np.ndarray, groups: int, local: int, spec: tuple[int, ...] = ()) -> None:  # type: ignore[no-untyped-def]
    dims = _Dims((ctypes.c_uint32 * 3)(groups, 1, 1), (ctypes.c_uint32 * 3)(local, 1, 1), spec_words(spec))
    launch = _Launch(ctypes.pointer(dims))
    launch.buf[0] = out.ctypes.data
    assert fn(ctypes.addressof(launch)) == 0


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return _compile(tmp_path_factory.mktemp("emu"), "k", MSL)


def test_simdgroup_functions_see_their_active_lanes(tmp_path: Path) -> None:
    fn = _compile(tmp_path, "s", SIMD_MSL)
    out = np.full(64 * 4, -1, np.float32)
    _launch(fn, out, 1, 64)
    got = out.reshape(64, 4)
    t = np.arange(40)
    lanes = [np.arange(0, 32), np.arange(32, 40)]  # simdgroup 1: lanes 32..39 active, 40..63 returned early
    for sg, members in enumerate(lanes):
        assert np.all(got[members, 0] == members.sum())
        assert np.all(got[members, 2] == (members == members[0]))
        assert np.all(got[members, 3] == members.max() + sg * 1000 + (members % 32) * 0.5)
    assert np.all(got[t, 1] == (t ^ 1))
    assert np.all(got[40:] == -1)


def test_barriers_share_threadgroup_memory(kernel) -> None:  # type: ignore[no-untyped-def]
    out = np.full(3 * 64, 7, np.uint32)
    for shift in (1, 59):
        _launch(kernel, out, 3, 64, (shift,))
        got = out.reshape(3, 64)
        t = np.arange(60)
        for g in range(3):  # each group reads its own values, written by other threads before the barrier
            assert list(got[g, :60]) == list(((t + shift) % 60) * 10 + g * 1000)
            assert list(got[g, 60:]) == [7] * 4  # returned early: wrote nothing, did not block the barrier
