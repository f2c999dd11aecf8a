"""GLSL -> SPIR-V with glslangValidator: at build time (setup.py loads this file by path, so it needs nothing but
the standard library, and hands it the folder of pyggml-glsl's shaders) and at first use when a shader's .spv is
missing or stale (editable installs, shader edits): then the shaders are pyggml-glsl's (`pyggml_glsl.source`).

A .spv is current when the `.sha` file next to it holds the hash of the shader's source and every include.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

try:
    from pyggml.errors import PyGGMLError as _Base
except ImportError:  # pragma: no cover - setup.py runs before pyggml may be importable
    _Base = Exception  # type: ignore[misc,assignment]

SPV_DIR = Path(__file__).resolve().parent / "spv"
"""The SPIR-V built with the package (into a wheel, or into the sources by an editable install), with .sha stamps."""
TARGET_ENV = "vulkan1.2"


class ShaderBuildError(_Base):
    """A compute shader failed to compile; the message holds the compiler output and the GLSL around it."""


def glslang() -> str:
    named = os.environ.get("GLSLANG_VALIDATOR")
    exe = shutil.which(named) if named else shutil.which("glslangValidator")
    if not exe:
        where = f"GLSLANG_VALIDATOR={named} is not an executable" if named else "glslangValidator not found"
        raise ShaderBuildError(f"{where}: install glslang-tools (apt-get install glslang-tools) "
                               "or set GLSLANG_VALIDATOR to its path")
    return exe


def shader_dir() -> Path:
    """pyggml-glsl's shaders (imported here, not at module level: the build step has no pyggml-glsl to import)."""
    from pyggml_glsl.source import SHADER_DIR

    return SHADER_DIR


def source_hash(name: str, shader_dir: Path) -> str:
    h = hashlib.sha256(TARGET_ENV.encode())
    h.update((shader_dir / f"{name}.comp").read_bytes())
    for inc in sorted(shader_dir.glob("*.glsl")):
        h.update(inc.name.encode())
        h.update(inc.read_bytes())
    return h.hexdigest()[:20]


def _excerpt(src: str, log: str) -> str:
    lines = src.splitlines()
    nums = sorted({int(m) for m in re.findall(r":(\d+):", log)} | {int(m) for m in re.findall(r"\((\d+)\)", log)})
    picked = [n for n in nums if 1 <= n <= len(lines)] or list(range(1, min(len(lines), 40) + 1))
    show: set[int] = set()
    for n in picked:
        show.update(range(max(1, n - 3), min(len(lines), n + 3) + 1))
    return "\n".join(f"{i:4d}{'>' if i in picked else ' '} {lines[i - 1]}" for i in sorted(show))


def compile_file(src: Path, dst: Path, defines: dict[str, str] | None = None) -> None:
    """Compile one .comp to `dst`; on failure raise ShaderBuildError with compiler output and GLSL lines."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    args = [glslang(), "-V", "--target-env", TARGET_ENV, f"-I{src.parent}"]
    args += [f"-D{k}={v}" for k, v in (defines or {}).items()]
    with tempfile.NamedTemporaryFile(dir=dst.parent, suffix=".spv.tmp", delete=False) as tmp:
        tmp_path = Path(tmp.name)
    try:
        proc = subprocess.run([*args, "-o", str(tmp_path), str(src)], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            out = (proc.stdout + proc.stderr).strip()
            text = src.read_text()
            raise ShaderBuildError(f"compiling {src.name} failed ({' '.join(args[:4])}):\n{out}\n"
                                   f"--- GLSL {src} ---\n{_excerpt(text, out)}")
        os.replace(tmp_path, dst)
    finally:
        tmp_path.unlink(missing_ok=True)


def compile_all(out_dir: Path, shader_dir: Path) -> list[Path]:
    """Build step: every shader_dir/*.comp into out_dir/<name>.spv with its .sha stamp."""
    made = []
    for src in sorted(shader_dir.glob("*.comp")):
        name = src.stem
        dst = out_dir / f"{name}.spv"
        compile_file(src, dst)
        (out_dir / f"{name}.sha").write_text(source_hash(name, shader_dir))
        made.append(dst)
    return made


def spirv(name: str, cache_dir: Path) -> bytes:
    """The SPIR-V of shader `name`: the built one when current, else compiled now into `cache_dir`
    (`VulkanOptions.cache_dir`)."""
    shaders = shader_dir()
    src = shaders / f"{name}.comp"
    if not src.exists():
        raise ShaderBuildError(f"no shader named {name!r} in {shaders}")
    digest = source_hash(name, shaders)
    built = SPV_DIR / f"{name}.spv"
    stamp = SPV_DIR / f"{name}.sha"
    if built.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return built.read_bytes()
    cached = cache_dir / f"{name}-{digest}.spv"
    if not cached.exists():
        compile_file(src, cached)
    return cached.read_bytes()
