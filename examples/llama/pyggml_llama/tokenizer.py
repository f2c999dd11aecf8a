"""GPT-2 style byte-level BPE tokenizer built from a GGUF file's vocab and merges (tokenizers library)."""

from __future__ import annotations

from typing import Any

from tokenizers import Regex, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from pyggml.errors import GGUFError
from pyggml.gguf import GGUFFile

# llama.cpp's pre-tokenizer expressions per `tokenizer.ggml.pre` (facts from its vocab code; written here anew)
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_PRE: dict[str, list[str]] = {
    "gpt2": [_GPT2],
    "smollm": [r"\p{N}", _GPT2],
    "default": [_GPT2],
}
CONTROL = 3
USER_DEFINED = 4


class Tokenizer:
    def __init__(self, gf: GGUFFile) -> None:
        model = gf.get("tokenizer.ggml.model")
        if model != "gpt2":
            raise GGUFError(f"{gf.path}: tokenizer model {model!r} is not supported (only gpt2 byte-level BPE)")
        tokens: list[str] = gf.require("tokenizer.ggml.tokens", list)
        merges: list[str] = gf.require("tokenizer.ggml.merges", list)
        types: list[int] = gf.get("tokenizer.ggml.token_type", [1] * len(tokens))
        self.vocab = tokens
        self.bos_id: int | None = gf.get("tokenizer.ggml.bos_token_id")
        self.eos_id: int | None = gf.get("tokenizer.ggml.eos_token_id")
        self.add_bos: bool = bool(gf.get("tokenizer.ggml.add_bos_token", False))
        self.chat_template: str | None = gf.get("tokenizer.chat_template")
        pre = str(gf.get("tokenizer.ggml.pre", "default"))
        vocab = {t: i for i, t in enumerate(tokens)}
        pairs = [tuple(m.split(" ", 1)) for m in merges]
        specials = [t for t, ty in zip(tokens, types, strict=False) if ty in (CONTROL, USER_DEFINED)]
        self._plain = _build(vocab, pairs, _PRE.get(pre, _PRE["default"]), [])
        self._special = _build(vocab, pairs, _PRE.get(pre, _PRE["default"]), specials)

    def encode(self, text: str, *, add_bos: bool | None = None, parse_special: bool = False) -> list[int]:
        """Token ids of `text`; special-token texts (<|im_start|> ...) are recognised only with parse_special,
        else tokenized as plain text (llama.cpp's `special` flag)."""
        tok = self._special if parse_special else self._plain
        ids = list(tok.encode(text, add_special_tokens=False).ids)
        if (self.add_bos if add_bos is None else add_bos) and self.bos_id is not None:
            ids.insert(0, self.bos_id)
        return ids

    def decode(self, ids: list[int], *, skip_special: bool = False) -> str:
        return str(self._special.decode(ids, skip_special_tokens=skip_special))

    def token_text(self, token_id: int) -> str:
        return self.decode([token_id])

    def apply_chat_template(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        if not self.chat_template:
            raise GGUFError("the model has no tokenizer.chat_template")
        import jinja2

        env = jinja2.Environment(undefined=jinja2.StrictUndefined)
        return env.from_string(self.chat_template).render(messages=messages,
                                                          add_generation_prompt=add_generation_prompt)


def _build(vocab: dict[str, int], merges: list[tuple[str, ...]], exprs: list[str], specials: list[str]) -> HFTokenizer:
    bpe = models.BPE(vocab=vocab, merges=merges, fuse_unk=False)  # type: ignore[arg-type]
    tok = HFTokenizer(bpe)
    splits: list[Any] = [pre_tokenizers.Split(Regex(rx), behavior="isolated") for rx in exprs]
    tok.pre_tokenizer = pre_tokenizers.Sequence([*splits, pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                    use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    if specials:
        tok.add_special_tokens(specials)
    return tok
