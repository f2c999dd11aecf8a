"""Where the shaders are: `SHADER_DIR` holds one `<name>.comp` per kernel family (the name a rule dispatches) and
the `*.glsl` files they include (common.glsl: bindings, push-constant layout, typed loads and stores,
dequantisation; quant.glsl and kquant.glsl: the quantisers; act.glsl: activations). The backends compile them with
their own tools: pyggml-vulkan to SPIR-V (glslangValidator), pyggml-metal to SPIR-V and then MSL (spirv-cross).
"""

from __future__ import annotations

from pathlib import Path

SHADER_DIR = Path(__file__).resolve().parent / "shaders"


def shader_names() -> list[str]:
    """Every shader's name (`SHADER_DIR/<name>.comp`), sorted."""
    return sorted(p.stem for p in SHADER_DIR.glob("*.comp"))
