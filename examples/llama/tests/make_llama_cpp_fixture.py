"""Regenerate llama_cpp_greedy.json: llama.cpp's greedy tokens for a few prompts on the SmolLM2 GGUF, and at each
step the two largest logits as "id=value id=value" (float32 values exactly, as float.hex) that the tokens came from.

    python examples/llama/tests/make_llama_cpp_fixture.py   # needs llama-cpp-python (see `make bench`)

Made with llama-cpp-python built for generic x86-64 with AVX2/FMA/F16C and without AVX-512 (the build whose CPU
arithmetic pyggml's cpu kernels follow; see the example's README).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from llama_cpp import Llama

from pyggml_llama.session import default_model_path

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time, in a small village,"]
N_PREDICT = 32


def top2(llm: Llama) -> tuple[int, str]:
    """The greedy token (the first of the largest logits) and the step's two largest logits."""
    logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
    ids = np.argsort(-logits, kind="stable")[:2]
    return int(ids[0]), " ".join(f"{int(i)}={float(logits[i]).hex()}" for i in ids)


def main() -> None:
    llm = Llama(model_path=str(default_model_path()), n_ctx=512, n_threads=2, verbose=False)
    cases = []
    for prompt in PROMPTS:
        toks = llm.tokenize(prompt.encode(), add_bos=False)
        llm.reset()
        llm.eval(toks)
        out: list[int] = []
        steps: list[str] = []
        while len(out) < N_PREDICT:
            tok, best = top2(llm)
            steps.append(best)
            out.append(tok)
            llm.eval([tok])
        cases.append({"prompt": prompt, "prompt_tokens": list(map(int, toks)), "tokens": out,
                      "text": llm.detokenize(out).decode(errors="replace"), "top2": steps})
    path = Path(__file__).with_name("llama_cpp_greedy.json")
    import llama_cpp

    meta = {"model": default_model_path().name, "llama_cpp_python": llama_cpp.__version__, "cases": cases}
    path.write_text(json.dumps(meta, indent=1) + "\n")
    print(path.read_text())


if __name__ == "__main__":
    main()
