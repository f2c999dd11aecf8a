"""The CUDA devices' options (`pyggml.backend.options`), read once, when the registry enumerates the devices.
`CUDA_VISIBLE_DEVICES` is the driver's (it applies it), not one of these."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyggml.backend.env import cache_option
from pyggml.backend.options import Options, option


@dataclass(frozen=True)
class CudaOptions(Options):
    """Read when the CUDA devices are enumerated; a backend takes its own `graphs` and `mma`
    (`init_backend("graphs=0")`)."""

    label = "CUDA"
    graphs: bool = option(True, env="PYGGML_CUDA_GRAPHS", per_backend=True,
                          doc="capture a replayed graph's launches into a CUDA graph and relaunch it with one call")
    mma: bool = option(True, env="PYGGML_CUDA_MMA", per_backend=True,
                       doc="prompts multiplied on the tensor cores: F16, Q2_K, Q3_K and Q6_K weights as F16 "
                           "fragments, 32-element block types, Q4_K and Q5_K as 8-bit ones (off: the tiled float and "
                           "dp4a kernels)")
    nccl: bool = option(True, env="PYGGML_CUDA_NCCL",
                        doc="the meta device's allreduce over CUDA devices through NCCL where it loads (else peer "
                            "copies)")
    nvcc: str | None = option(None, env="PYGGML_NVCC", parse=str.strip, default_doc="nvcc on PATH, else "
                              "$CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin",
                              doc="the nvcc that compiles the kernels")
    cache_dir: Path = cache_option("cuda")
