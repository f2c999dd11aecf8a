"""pyggml's dialect kernels: the kernel texts the OpenCL and the CUDA plugin both compile (`kernelsrc/`), their
source assembly (`source`), the type sets they handle (`types`) and their op rules (`rules`, `ops/`).

This distribution is public API for GPU backend plugins: a plugin that implements `pyggml_dialect.types.Builder`
(`pyggml.backend.launch.LaunchBuilder` over `ProgramSpec`) and compiles `source.source_of(spec)` gets every op the
rules cover. It imports no GPU driver.
"""

__version__ = "0.1.0"
