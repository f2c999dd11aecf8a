"""Regenerate llama_cpp_greedy.json: llama.cpp's greedy tokens for a few prompts on the SmolLM2 GGUF.

    python examples/llama/tests/make_llama_cpp_fixture.py   # needs llama-cpp-python (see `make bench`)
"""

from __future__ import annotations

import json
from pathlib import Path

from llama_cpp import Llama

from pyggml_llama.session import default_model_path

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time, in a small village,"]
N_PREDICT = 32


def main() -> None:
    llm = Llama(model_path=str(default_model_path()), n_ctx=512, n_threads=2, verbose=False)
    cases = []
    for prompt in PROMPTS:
        toks = llm.tokenize(prompt.encode(), add_bos=False)
        llm.reset()
        out: list[int] = []
        for tok in llm.generate(toks, top_k=1, temp=0.0, repeat_penalty=1.0):
            out.append(int(tok))
            if len(out) == N_PREDICT:
                break
        cases.append({"prompt": prompt, "prompt_tokens": list(map(int, toks)), "tokens": out,
                      "text": llm.detokenize(out).decode(errors="replace")})
    path = Path(__file__).with_name("llama_cpp_greedy.json")
    import llama_cpp

    meta = {"model": default_model_path().name, "llama_cpp_python": llama_cpp.__version__, "cases": cases}
    path.write_text(json.dumps(meta, indent=1) + "\n")
    print(path.read_text())


if __name__ == "__main__":
    main()
