"""pyggml's GLSL compute shaders and their op rules, shared by the Vulkan plugin (which compiles them to SPIR-V) and
the Metal plugin (which translates that SPIR-V to MSL).

This distribution is public API for backend plugins, as pyggml-dialect is for OpenCL and CUDA: a plugin that
implements `pyggml_glsl.builder.Builder` (a `typing.Protocol`: `dispatch`, `scratch`, `cpu_emulated`, `node`) and
runs the shaders of `pyggml_glsl.source.SHADER_DIR` gets every op the rules cover, through
`pyggml_glsl.rules.table(name)`. The modules: `builder` (the protocol and the binding layout), `source` (where
the shaders are), `rules` (the families, listed once), `ops/` (one `RuleSet` per family; `ops/common.py`:
type sets, the push-constant layout, grids, the lavapipe loop budget). It imports no GPU driver.
"""

__version__ = "0.1.0"
