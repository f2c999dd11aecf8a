"""An F32 copy of a quantised llama GGUF, for the training benchmark: llama.cpp's `llama-finetune` trains float
weights only, so it and pyggml's full fine-tune both start from this file.

Every tensor is dequantised with pyggml's own dequantiser (pyggml.quants) and written as F32; all metadata is
copied as is (general.file_type becomes 0, all F32). A model with tied embeddings gets an `output.weight` of its
own, a copy of `token_embd.weight`: llama.cpp duplicates the tied matrix into a separate `output` tensor and trains
that one while it freezes the token embeddings (llama_opt_init), so with the copy in the file pyggml trains exactly
the same set of tensors. Written with the `gguf` package (a dev dependency): pyggml only reads GGUF.

    python benchmarks/f32_gguf.py SRC.gguf DEST.gguf
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pyggml.gguf import GGUFFile
from pyggml.quants import dequantize
from pyggml.types import GGMLType
from pyggml_testing.gguf_copy import copy_metadata, finish_file

FILE_TYPE_ALL_F32 = 0


def write_f32_copy(src: str | Path, dest: str | Path) -> Path:
    """Write the F32 copy of `src` to `dest` (through a temporary file, so an interrupted run leaves none)."""
    import gguf

    src, dest = Path(src), Path(dest)
    gf = GGUFFile(src)
    tmp = dest.with_suffix(".partial")
    w = gguf.GGUFWriter(tmp, gf.architecture, use_temp_file=False)
    copy_metadata(src, w, {"general.file_type": FILE_TYPE_ALL_F32})
    tied = "output.weight" not in gf.tensors and "token_embd.weight" in gf.tensors
    for info in gf:
        n = int(np.prod(info.ne))
        raw = gf.data(info.name)
        if info.type in (GGMLType.F32, GGMLType.F16):
            values = raw.view(np.float32 if info.type == GGMLType.F32 else np.float16).astype(np.float32)
        else:
            values = dequantize(raw, info.type, n)
        w.add_tensor(info.name, values.reshape(tuple(reversed(info.ne))))
        if tied and info.name == "token_embd.weight":  # the output matrix as a copy of its own
            w.add_tensor("output.weight", values.reshape(tuple(reversed(info.ne))).copy())
    return finish_file(w, tmp, dest)


def f32_copy(src: str | Path, cache: Path) -> Path:
    """The F32 copy of `src` in `cache` (made once)."""
    dest = cache / f"{Path(src).stem}-f32.gguf"
    if not dest.is_file() or dest.stat().st_mtime < Path(src).stat().st_mtime:
        cache.mkdir(parents=True, exist_ok=True)
        write_f32_copy(src, dest)
    return dest


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(write_f32_copy(sys.argv[1], sys.argv[2]))
