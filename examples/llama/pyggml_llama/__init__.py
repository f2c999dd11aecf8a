"""Llama-architecture models from GGUF files on pyggml."""

from pyggml_llama.hparams import HParams
from pyggml_llama.tokenizer import Tokenizer

__all__ = ["HParams", "Tokenizer"]
