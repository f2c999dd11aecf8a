"""Where do pyggml's numbers leave llama.cpp's? Runs one prompt through both and compares every tensor that has
the same name in both graphs (attn_norm-0, Qcur-0, kq-0, kq_soft_max-0, ffn_inp-0, ffn_swiglu-0, l_out-0, ...),
in graph order, printing one JSON line per tensor: the largest difference, its size relative to the tensor's
largest value, and how many values differ at all (0: the same bits).

    python examples/llama/compare_llama_cpp.py [--prompt TEXT] [--layers 0,1,29] [--backend cpu]

llama.cpp's tensors come from its graph callback (cb_eval) through llama-cpp-python.
"""

from __future__ import annotations

import argparse
import ctypes
import json
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml_llama.model import GraphKey
from pyggml_llama.session import Session, _causal_mask, default_model_path

F32 = npt.NDArray[np.float32]


class _GGMLTensor(ctypes.Structure):
    """struct ggml_tensor of the ggml that llama-cpp-python 0.3.x bundles (only the fields read here matter)."""

    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64)]


def llama_cpp_tensors(tokens: list[int], n_threads: int) -> dict[str, F32]:
    """The last value llama.cpp's graph gave each name (F32 and F16 tensors), for one batch of tokens."""
    import llama_cpp
    from llama_cpp import Llama
    from llama_cpp._internals import LlamaBatch, LlamaContext

    seen: dict[str, F32] = {}

    def grab(ptr: int, ask: bool, _user: int) -> bool:
        t = ctypes.cast(ptr, ctypes.POINTER(_GGMLTensor)).contents
        if ask or t.type not in (0, 1):  # F32, F16
            return True
        size = 2 if t.type else 4
        ne, nb = list(t.ne), list(t.nb)
        span = sum((ne[i] - 1) * nb[i] for i in range(4)) + size
        raw = bytes((ctypes.c_char * span).from_address(t.data))
        a = np.ndarray(tuple(reversed(ne)), np.float16 if t.type else np.float32, raw, strides=tuple(reversed(nb)))
        seen[t.name.decode()] = a.astype(np.float32)
        return True

    callback = llama_cpp.ggml_backend_sched_eval_callback(grab)
    llm = Llama(model_path=str(default_model_path()), n_ctx=256, n_threads=n_threads, verbose=False)
    llm.context_params.cb_eval = callback
    llm._ctx = LlamaContext(model=llm._model, params=llm.context_params, verbose=False)  # with the callback
    llm._batch = LlamaBatch(n_tokens=llm.n_batch, embd=0, n_seq_max=llm.context_params.n_ctx, verbose=False)
    llm.eval(tokens)
    return seen


def pyggml_tensors(tokens: list[int], backends: list[str], n_threads: int) -> dict[str, F32]:
    """Every named tensor of the same batch through pyggml (all of them kept as outputs)."""
    s = Session(None, backends, n_ctx=256, n_threads=n_threads)
    n, n_kv = len(tokens), 256
    g = s.model.build_graph(GraphKey(n, n_kv, n), s.kv, flash_attn=s.flash_attn)
    named = {t.name: t.set_output() for t in g.graph if t.name}
    s.sched.reset()
    s.sched.alloc_graph(g.graph)
    pos = np.arange(n, dtype=np.int32)
    g.tokens.set(np.asarray(tokens, dtype=np.int32))
    g.set_positions(pos, s.n_ctx)
    g.mask.set(_causal_mask(pos, n_kv))
    s.sched.graph_compute(g.graph)
    return {name: t.numpy().astype(np.float32) for name, t in named.items()}


def compare(name: str, a: F32, b: F32) -> dict[str, Any]:
    a, b = a.reshape(-1), b.reshape(-1)
    if b.size > a.size and b.size % a.size == 0:  # llama.cpp keeps only the last row after the output selection
        b = b[-a.size:]
    if a.size != b.size:
        return {"tensor": name, "error": f"sizes {a.size} (llama.cpp) and {b.size} (pyggml)"}
    d = np.abs(a - b)
    return {"tensor": name, "max_abs": float(np.abs(a).max()), "max_diff": float(d.max()),
            "rel": float(d.max() / max(float(np.abs(a).max()), 1e-30)), "n_differ": int((a != b).sum()),
            "n": int(a.size)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--layers", default="0,1,29", help="comma-separated layer numbers, or 'all'")
    ap.add_argument("--backend", action="append")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    s = Session(None, ["cpu"], n_ctx=16)
    tokens = s.tokenizer.encode(a.prompt)
    theirs = llama_cpp_tensors(tokens, a.threads)
    ours = pyggml_tensors(tokens, a.backend or ["cpu"], a.threads)
    layers = None if a.layers == "all" else {int(x) for x in a.layers.split(",")}
    for name in ours:
        layer = name.rsplit("-", 1)[-1]
        if name in theirs and (layers is None or not layer.isdigit() or int(layer) in layers):
            print(json.dumps(compare(name, theirs[name], ours[name])))


if __name__ == "__main__":
    main()
