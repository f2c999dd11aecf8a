"""The emulator's compiler: spirv-cross's MSL as C++20 for g++, against the shim in shim/ and the fiber runtime.

The MSL text is kept as it is except for what has no C++ spelling, each rewritten in one place here:
- function constants (`constant uint TA_tmp [[function_constant(0)]];`) become reads of the dispatch's constants
  (`pyg_spec(0)`), and the global constants derived from them become macros, evaluated where used;
- `threadgroup` variables declared in the kernel become `static thread_local` (shared by the fibers of a group, which
  run on one OS thread);
- spirv-cross's spvUnsafeArray (one overload per address space, identical once address spaces are gone) is the
  shim's;
- spirv-cross's helpers for NoContraction arithmetic (spvFMul, spvFAdd, ...: templates marked clang::optnone) are
  the shim's (plain float operations; the emulator is compiled with -ffp-contract=off, so nothing is fused);
- floating literals get an `f` suffix: MSL has no double, an unsuffixed literal is a float there, a double in C++;
- the read swizzles .xy/.xyz become calls (.pyg_xy()), C++ having no swizzle members;
- the kernel's `[[...]]` attributes go, and a wrapper per kernel calls it once per Metal thread with the builtins
  (thread/threadgroup positions) and the bound buffers, by the MSL indices of the layout.
"""

from __future__ import annotations

import re

from pyggml_metal.mslgen import FUNC_CONST, split_params, uses_group_sync

BUILTINS = {
    "threadgroup_position_in_grid": "uint3(gx, gy, gz)",
    "threadgroups_per_grid": "uint3(L->dims->groups[0], L->dims->groups[1], L->dims->groups[2])",
    "thread_position_in_threadgroup": "uint3(lx, ly, lz)",
    "threads_per_threadgroup": "uint3(L->dims->local[0], L->dims->local[1], L->dims->local[2])",
    "thread_position_in_grid": "uint3(gx * L->dims->local[0] + lx, gy * L->dims->local[1] + ly, "
                               "gz * L->dims->local[2] + lz)",
    "thread_index_in_threadgroup": "uint(lx + L->dims->local[0] * (ly + L->dims->local[1] * lz))",
    "thread_index_in_simdgroup": "uint((lx + L->dims->local[0] * (ly + L->dims->local[1] * lz)) % 32u)",
    "simdgroup_index_in_threadgroup": "uint((lx + L->dims->local[0] * (ly + L->dims->local[1] * lz)) / 32u)",
    "threads_per_simdgroup": "uint(32u)",
    "thread_execution_width": "uint(32u)",
    "simdgroups_per_threadgroup": "uint((L->dims->local[0] * L->dims->local[1] * L->dims->local[2] + 31u) / 32u)",
}
"""Metal's thread-position attributes; simdgroups are 32 lanes (Apple GPUs' execution width)."""
ADDRESS_SPACES = ("device", "constant", "threadgroup", "thread")

_DROP = re.compile(r"^(#pragma clang.*|#include <metal_stdlib>|#include <simd/simd.h>|#include <metal_atomic>|"
                   r"using namespace metal;)\s*$", re.M)
_UNSAFE_ARRAY = re.compile(r"template<typename T, size_t Num>\nstruct spvUnsafeArray\n\{.*?\n\};\n", re.S)
_SPV_HELPER = re.compile(r"^template<[^\n]*>\n\[\[clang::optnone\]\][^\n]*\n\{\n.*?^\}\n", re.S | re.M)
_FLOAT_LIT = re.compile(r"(?<![\w.])(\d+\.\d*(?:e[+-]?\d+)?)(?![\w.])")
_SWIZZLE = re.compile(r"\.(xyz|xy)\b")
_GLOBAL_CONST = re.compile(r"^constant ([\w:]+) (\w+)(?: \[\[maybe_unused\]\])? = (.*);$", re.M)
_SHARED = re.compile(r"^([ \t]+)threadgroup ([^&()\n]+;)$", re.M)
_KERNEL = re.compile(r"^kernel void main0\((.*)\)\s*$", re.M)
_ATTR = re.compile(r"\s*\[\[(\w+)(?:\((\d+)\))?\]\]")


class EmuccError(Exception):
    """The MSL holds something the emulator's translation does not handle."""


def _bare_type(decl: str) -> tuple[str, str]:
    """('const A_F32&', '_517') from 'const device A_F32& _517', address spaces dropped."""
    words = [w for w in decl.replace("&", "& ").replace("*", "* ").split() if w not in ADDRESS_SPACES]
    name = words[-1]
    return " ".join(words[:-1]).replace(" &", "&").replace(" *", "*"), name


def _argument(ctype: str, index: int) -> str:
    slot = f"L->buf[{index}]"
    if ctype.endswith("&"):
        return f"*({ctype[:-1].strip()}*){slot}"
    if ctype.endswith("*"):
        return f"({ctype}){slot}"
    raise EmuccError(f"a buffer argument passed by value ({ctype}) is not handled")


def translate(name: str, msl: str) -> str:
    """The C++ translation unit of kernel `name`: extern "C" int pyg_run_<name>(const pyg_launch*)."""
    text = _DROP.sub("", msl)
    text = _UNSAFE_ARRAY.sub("", text)
    text = _SPV_HELPER.sub("", text)
    text = _FLOAT_LIT.sub(r"\1f", text)
    text = _SWIZZLE.sub(r".pyg_\1()", text)
    text = FUNC_CONST.sub(lambda m: f"#define {m.group(2)} (({m.group(1)})pyg_spec({m.group(3)}))", text)

    def global_const(m: re.Match[str]) -> str:
        ctype, ident, expr = m.groups()
        if "spvUnsafeArray" in ctype or "{" in expr:
            return m.group(0).replace("constant ", "static const ", 1)
        return f"#define {ident} ({ctype}({expr}))"

    text = re.sub(r"^constant (spvUnsafeArray<[^;]*;)$", r"static const \1", text, flags=re.M)
    text = _GLOBAL_CONST.sub(global_const, text)
    text = _SHARED.sub(r"\1PYG_SHARED \2", text)
    m = _KERNEL.search(text)
    if m is None:
        raise EmuccError(f"{name}: no `kernel void main0(...)`")
    params, args = [], []
    for p in split_params(m.group(1)):
        attr = _ATTR.search(p)
        if attr is None:
            raise EmuccError(f"{name}: kernel parameter {p!r} has no attribute")
        decl = _ATTR.sub("", p)
        ctype, ident = _bare_type(decl)
        params.append(f"{ctype} {ident}")
        kind, idx = attr.group(1), attr.group(2)
        if kind == "buffer":
            args.append(_argument(ctype, int(idx)))
        elif kind in BUILTINS:
            args.append(BUILTINS[kind])
        else:
            raise EmuccError(f"{name}: kernel parameter {p!r}: builtin [[{kind}]] is not emulated")
    text = text[:m.start()] + f"static void main0({', '.join(params)})" + text[m.end():]
    barriers = int(uses_group_sync(msl))
    return f"""// generated by pyggml_metal_sim.emucc from spirv-cross's MSL of {name}.comp: do not edit
#include <metal_stdlib>
#include "pyg_launch.h"
namespace pyg_{name} {{
using namespace metal;
{text}
static void pyg_thread(const void* l, uint gx, uint gy, uint gz, uint lx, uint ly, uint lz) {{
    const pyg_launch* L = static_cast<const pyg_launch*>(l);
    main0({", ".join(args)});
}}
}}  // namespace pyg_{name}
extern "C" int pyg_run_{name}(const pyg_launch* L) {{
    return pyg_dispatch(pyg_{name}::pyg_thread, L, L->dims, {barriers});
}}
"""
