"""Build step: pyggml-glsl's GLSL compute shaders -> SPIR-V (glslangValidator) -> MSL (spirv-cross --msl), plus a
layout file per kernel that says what the host binds at each MSL buffer index.

One source for both GPU APIs: the shaders live in pyggml-glsl (`pyggml_glsl.source.SHADER_DIR`, which the Vulkan
plugin compiles too) and are not copied. spirv-cross numbers
the MSL buffer arguments by use, not by Vulkan binding, and turns the push-constant block into one more buffer
argument (`constant PC& pc [[buffer(k)]]`): the push constants reach Metal in an explicitly bound buffer, at the
index the layout names, so no shader changes for Metal. The layout maps each index to a Vulkan binding (by the
block or alias name spirv-cross gives the argument, matched against `spirv-cross --reflect`) or to the push
constants, and carries the work-group size (Metal's threadsPerThreadgroup comes from the host).

setup.py loads this file by path, so it needs only the standard library (it hands `generate_all` the shaders'
folder). The generated MSL is a build output
(pyggml_metal/msl/, ignored by git); an editable install without the tools generates it at first use into the
cache dir (`msl_dir()`, given `MetalOptions.cache_dir` and `shader_dir` by the registry).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

try:
    from pyggml.errors import PyGGMLError as _Base
except ImportError:  # pragma: no cover - setup.py runs before pyggml may be importable
    _Base = Exception  # type: ignore[misc,assignment]

PKG_DIR = Path(__file__).resolve().parent
MSL_DIR = PKG_DIR / "msl"
MSL_VERSION = "20100"
"""MSL 2.1 (macOS 10.14+): what spirv-cross targets."""
log = logging.getLogger(__name__)
TARGET_ENV = "vulkan1.2"
GENERATOR = "5"
"""Bump when the generation changes, so stale outputs are regenerated."""


class MslBuildError(_Base):
    """A shader could not be translated to MSL; the message holds the tool's output."""


def shader_dir(folder: Path | None = None) -> Path:
    """The GLSL to translate: `folder` (`MetalOptions.shader_dir`, PYGGML_METAL_SHADER_DIR) if given, else
    pyggml-glsl's shaders (a dependency of this plugin)."""
    if folder is not None:
        return folder
    try:
        from pyggml_glsl.source import SHADER_DIR
    except ImportError as e:
        raise MslBuildError(f"pyggml-glsl, whose shaders are the Metal kernels, is not importable ({e}): "
                            "pip install pyggml-glsl, or set PYGGML_METAL_SHADER_DIR") from e
    return SHADER_DIR


def _tool(env: str, name: str, package: str) -> str:
    named = os.environ.get(env)
    exe = shutil.which(named) if named else shutil.which(name)
    if not exe:
        where = f"{env}={named} is not an executable" if named else f"{name} not found"
        raise MslBuildError(f"{where}: install {package} (apt-get install {package}; brew install {package}) "
                            f"or set {env} to its path")
    return exe


def shader_names(src: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (src or shader_dir()).glob("*.comp"))


def source_hash(name: str, src: Path | None = None) -> str:
    src = src or shader_dir()
    h = hashlib.sha256(f"{TARGET_ENV} {MSL_VERSION} {GENERATOR}".encode())
    h.update((src / f"{name}.comp").read_bytes())
    for inc in sorted(src.glob("*.glsl")):
        h.update(inc.name.encode())
        h.update(inc.read_bytes())
    return h.hexdigest()[:20]


def _run(args: list[str], what: str) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        raise MslBuildError(f"{what} failed ({' '.join(args)}):\n{(proc.stdout + proc.stderr).strip()}")
    return proc.stdout


_SIGNATURE = re.compile(r"kernel void main0\((.*)\)\s*$", re.M)
_PARAM = re.compile(r"^(?P<decl>.*?)\s*\[\[(?P<attr>\w+)(?:\((?P<idx>\d+)\))?\]\]$")
_ALIAS = re.compile(r"spvBufferAliasSet(\d+)Binding(\d+)$")
ARRAY_CONST = re.compile(r"^#ifndef SPIRV_CROSS_CONSTANT_ID_(\d+)\n#define SPIRV_CROSS_CONSTANT_ID_\1 .*\n#endif$",
                         re.M)
"""A specialisation constant spirv-cross had to make a preprocessor macro (it sizes an array): its value must be
known when the MSL is compiled, so each value is a compilation of its own."""
FUNC_CONST = re.compile(r"^constant (\w+) (\w+) \[\[function_constant\((\d+)\)\]\];$", re.M)
"""spirv-cross's declaration of a function constant (Vulkan's specialisation constant): type, name, index."""


_GROUP_SYNC = re.compile(r"\bthreadgroup_barrier\(|\bsimd_\w+\(")


def uses_group_sync(msl: str) -> bool:
    """The kernel's threads meet: a threadgroup barrier or a simdgroup function (the emulator then runs them as
    fibers)."""
    return _GROUP_SYNC.search(msl) is not None


def split_params(text: str) -> list[str]:
    """The kernel's parameters, split at top-level commas (templates may hold commas)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def layout_of(msl: str, reflect: dict) -> dict:  # type: ignore[type-arg]
    """What the host binds at each MSL buffer index: {"buffers": [[index, "binding", b] | [index, "push", 0]],
    "local_size": [x, y, z], "local_size_spec": [bool] * 3, "barriers": bool}; a local size from a specialisation
    constant (`local_size_x_id`) holds the constant's index, its value then comes with the pipeline's constants."""
    m = _SIGNATURE.search(msl)
    if m is None:
        raise MslBuildError("no `kernel void main0(...)` in spirv-cross's output")
    by_block = {s["name"]: int(s["binding"]) for s in reflect.get("ssbos", [])}
    push_names = {p["name"] for p in reflect.get("push_constants", [])}
    buffers = []
    for param in split_params(m.group(1)):
        pm = _PARAM.match(param)
        if pm is None or pm.group("attr") != "buffer":
            continue
        decl = pm.group("decl")
        name = decl.split()[-1].lstrip("*&")
        idx = int(pm.group("idx"))
        alias = _ALIAS.search(name)
        block = re.sub(r"^(const\s+)?(device|constant)\s+", "", decl).split()[0].rstrip("&*")
        if alias:
            buffers.append([idx, "binding", int(alias.group(2))])
        elif name in push_names:
            buffers.append([idx, "push", 0])
        elif block in by_block:
            buffers.append([idx, "binding", by_block[block]])
        else:
            raise MslBuildError(f"MSL buffer argument {param!r} matches no storage buffer or push constant block")
    ep = reflect["entryPoints"][0]
    by_spec = list(ep.get("workgroup_size_is_spec_constant_id", [False] * 3))
    spec = sorted([int(c["id"]), str(c["type"])] for c in reflect.get("specialization_constants", []))
    return {"buffers": sorted(buffers), "local_size": list(ep["workgroup_size"]), "local_size_spec": by_spec,
            "barriers": uses_group_sync(msl), "spec": spec, "array_spec": array_constants(msl)}


def _literal(ctype: str, value: int | float) -> str:
    if ctype == "bool":
        return "true" if value else "false"
    if ctype == "float":
        bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
        return f"as_type<float>({bits}u)"
    if ctype == "int":
        return str(int(value))
    return f"{int(value) & 0xFFFFFFFF}u"


def array_constants(msl: str) -> list[int]:
    """The indices of the constants that are preprocessor macros in the MSL (ARRAY_CONST)."""
    return sorted(int(m.group(1)) for m in ARRAY_CONST.finditer(msl))


def array_defines(msl: str, spec: tuple[int | float, ...]) -> dict[str, str]:
    """The macro values (`SPIRV_CROSS_CONSTANT_ID_<i>` -> literal) that fix the array-sizing constants to spec."""
    out = {}
    for i in array_constants(msl):
        if i < len(spec):
            m = re.search(rf"^constant (\w+) \w+ = SPIRV_CROSS_CONSTANT_ID_{i};$", msl, re.M)
            out[f"SPIRV_CROSS_CONSTANT_ID_{i}"] = _literal(m.group(1) if m else "uint", spec[i])
    return out


def specialize(msl: str, spec: tuple[int | float, ...]) -> str:
    """The MSL with its function constants fixed to `spec` (constant i = spec[i]; constants past the end keep their
    defaults): what a Metal pipeline would get through MTLFunctionConstantValues, as program-scope constants, so
    the host passes no typed pointers through PyObjC. Each (kernel, spec) is then a library of its own."""
    given: set[str] = set()

    def fix(m: re.Match[str]) -> str:
        ctype, name, idx = m.group(1), m.group(2), int(m.group(3))
        if idx >= len(spec):
            return f"constant {ctype} {name} = {ctype}(0);"
        given.add(name)
        return f"constant {ctype} {name} = {_literal(ctype, spec[idx])};"

    text = FUNC_CONST.sub(fix, msl)
    text = re.sub(r"is_function_constant_defined\((\w+)\)", lambda m: "true" if m.group(1) in given else "false",
                  text)
    defines = "".join(f"#define {k} {v}\n" for k, v in array_defines(msl, spec).items())
    return defines + text


class Generated(NamedTuple):
    msl: Path
    layout: Path


def generate(name: str, out_dir: Path, src: Path | None = None) -> Generated:
    """One shader's MSL and layout into out_dir (<name>.metal, <name>.json with its source hash)."""
    src = src or shader_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    glslang = _tool("GLSLANG_VALIDATOR", "glslangValidator", "glslang-tools")
    cross = _tool("SPIRV_CROSS", "spirv-cross", "spirv-cross")
    with tempfile.TemporaryDirectory(prefix="pyggml-metal-") as tmp:
        spv = Path(tmp) / f"{name}.spv"
        _run([glslang, "-V", "--target-env", TARGET_ENV, f"-I{src}", "-o", str(spv), str(src / f"{name}.comp")],
             f"compiling {name}.comp to SPIR-V")
        msl = _run([cross, str(spv), "--msl", "--msl-version", MSL_VERSION], f"translating {name} to MSL")
        reflect = json.loads(_run([cross, str(spv), "--reflect"], f"reflecting {name}"))
    layout = layout_of(msl, reflect)
    layout["hash"] = source_hash(name, src)
    layout["name"] = name
    metal = out_dir / f"{name}.metal"
    lay = out_dir / f"{name}.json"
    write_atomic(metal, msl)
    write_atomic(lay, json.dumps(layout, indent=1) + "\n")  # last: a current layout means a complete .metal
    return Generated(metal, lay)


def write_atomic(path: Path, text: str) -> None:
    """Write by rename, so another process generating the same file at once never reads half of it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def generate_all(out_dir: Path = MSL_DIR, src: Path | None = None) -> list[Generated]:
    """Every shader that translates; one that does not is left out with a warning (Metal then has no such kernel;
    the op table claims only ops whose kernels passed, and the build test fails on it)."""
    src = src or shader_dir()
    made = []
    for n in shader_names(src):
        try:
            made.append(generate(n, out_dir, src))
        except MslBuildError as e:
            if "not found" in str(e):  # a missing tool fails every shader: say so once
                raise
            log.warning("pyggml-metal: shader %s has no MSL: %s", n, e)
            _failed.add(n)
    return made


_failed: set[str] = set()
"""Shaders whose translation failed in this process (not retried at each msl_dir())."""


def current(name: str, folder: Path, src: Path) -> bool:
    lay = folder / f"{name}.json"
    if not (lay.exists() and (folder / f"{name}.metal").exists()):
        return False
    try:
        return bool(json.loads(lay.read_text()).get("hash") == source_hash(name, src))
    except (OSError, ValueError):
        return False


def msl_dir(cache_dir: Path, shaders: Path | None = None) -> Path:
    """A folder holding current MSL and layouts of every shader (of `shaders`: see `shader_dir`): the built one
    (wheel, or an editable install whose build step ran), else `cache_dir`/msl (`MetalOptions.cache_dir`),
    generated there now where stale."""
    try:
        src = shader_dir(shaders)
    except MslBuildError:
        if any(MSL_DIR.glob("*.metal")):  # a wheel's MSL without the GLSL it came from: use it as built
            return MSL_DIR
        raise
    names = [n for n in shader_names(src) if n not in _failed]
    if all(current(n, MSL_DIR, src) for n in names):
        return MSL_DIR
    out = cache_dir / "msl"
    for n in names:
        if not current(n, out, src):
            try:
                generate(n, out, src)
            except MslBuildError as e:
                if "not found" in str(e):
                    raise
                log.warning("pyggml-metal: shader %s has no MSL: %s", n, e)
                _failed.add(n)
    return out
