"""GPT-2 style byte-level BPE (llama.cpp's `gpt2` vocab type: SmolLM2, Llama 3 GGUFs) on the `tokenizers` library,
with llama.cpp's pre-tokenizer expressions per `tokenizer.ggml.pre`."""

from __future__ import annotations

import threading

from tokenizers import Regex, models, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from pyggml.errors import GGUFError

# llama.cpp's pre-tokenizer expressions per `tokenizer.ggml.pre` (facts from its vocab code), applied in turn, and
# whether a pre-tokenized word that is itself a token skips the merges (Llama 3)
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_TOKENIZERS: dict[str, tuple[list[str], bool]] = {
    "default": ([_GPT2], False),
    "gpt2": ([_GPT2], False),
    "gpt-2": ([_GPT2], False),
    "smollm": ([r"\p{N}", _GPT2], False),
    "llama3": ([_LLAMA3], True),
    "llama-v3": ([_LLAMA3], True),
    "llama-bpe": ([_LLAMA3], True),
    "qwen2": ([_QWEN2], False),
}
ADDS_BOS = {"llama3", "llama-v3", "llama-bpe"}
"""Pre-tokenizers whose models start with BOS when the file does not say (llama.cpp's default for them)."""


def _byte_to_char() -> dict[int, str]:
    """GPT-2's map of the 256 bytes to printable characters: printable Latin-1 maps to itself, the rest to 256+."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1), *range(ord("\xae"), 256)]
    extra = (b for b in range(256) if b not in keep)
    return {b: chr(b) for b in keep} | {b: chr(256 + n) for n, b in enumerate(extra)}


CHAR_TO_BYTE = {c: b for b, c in _byte_to_char().items()}


class BPEModel:
    """The vocab's byte-level BPE. The `tokenizers` model behind `encode` is built on first use (0.1 s for a
    152k-token vocabulary): decoding, and a caller that brings its own token ids, never wait for it."""

    def __init__(self, path: str, tokens: list[str], merges: list[str], pre: str) -> None:
        if pre not in PRE_TOKENIZERS:
            raise GGUFError(f"{path}: pre-tokenizer {pre!r} (tokenizer.ggml.pre) is not supported; known: "
                            f"{', '.join(sorted(PRE_TOKENIZERS))}")
        self.path = path
        self.tokens = tokens
        self.merges = merges
        self.pre = pre
        self._lock = threading.Lock()
        self._built: HFTokenizer | None = None

    def _tokenizer(self) -> HFTokenizer:
        with self._lock:
            if self._built is None:
                self._built = self._build()
            return self._built

    def _build(self) -> HFTokenizer:
        exprs, ignore_merges = PRE_TOKENIZERS[self.pre]
        vocab = dict(zip(self.tokens, range(len(self.tokens)), strict=True))
        pairs = [tuple(m.split(" ", 1)) for m in self.merges]
        try:
            bpe = models.BPE(vocab=vocab, merges=pairs, fuse_unk=False,  # type: ignore[arg-type]
                             ignore_merges=ignore_merges)
        except Exception as e:  # the tokenizers library raises a bare Exception for a merge of unknown tokens
            raise GGUFError(f"{self.path}: tokenizer.ggml.merges do not fit the vocabulary: {e}") from e
        tok = HFTokenizer(bpe)
        splits: list[pre_tokenizers.PreTokenizer] = [
            pre_tokenizers.Split(Regex(rx), behavior="isolated") for rx in exprs]
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [*splits, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        return tok

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer().encode(text, add_special_tokens=False).ids)

    def token_bytes(self, tid: int) -> bytes:
        text = self.tokens[tid]
        try:
            return bytes(CHAR_TO_BYTE[c] for c in text)
        except KeyError:  # not a byte-level text (a token added by hand): its own UTF-8
            return text.encode()
