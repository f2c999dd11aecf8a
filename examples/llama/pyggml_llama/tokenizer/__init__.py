"""Tokenizers of a GGUF file's vocab, with llama.cpp's behaviour: `gpt2` byte-level BPE (SmolLM2, Llama 3) and
`llama` SentencePiece-style (Llama 2, Mistral, TinyLlama, Phi-3).

Text is first cut at special tokens, as llama.cpp does: user-defined tokens always, control tokens only when
`parse_special` is set (chat templates); every other fragment goes through the vocab's model. Decoding joins the
tokens' bytes, so a character spread over byte tokens comes out whole (`Detokenizer` streams it).
"""

from __future__ import annotations

import codecs
from typing import Protocol

import numpy as np

from pyggml.errors import GGUFError
from pyggml.gguf import GGUFFile
from pyggml_llama.tokenizer.bpe import ADDS_BOS, BPEModel
from pyggml_llama.tokenizer.spm import SPMModel

NORMAL, UNKNOWN, CONTROL, USER_DEFINED = 1, 2, 3, 4


class _Model(Protocol):
    def encode(self, text: str) -> list[int]: ...

    def token_bytes(self, tid: int) -> bytes: ...


class Tokenizer:
    def __init__(self, gf: GGUFFile) -> None:
        kind = gf.get("tokenizer.ggml.model")
        tokens: list[str] = gf.require("tokenizer.ggml.tokens", list)
        self.types: list[int] = gf.get("tokenizer.ggml.token_type", [NORMAL] * len(tokens))
        self.vocab = tokens
        self.bos_id: int | None = gf.get("tokenizer.ggml.bos_token_id")
        self.eos_id: int | None = gf.get("tokenizer.ggml.eos_token_id")
        self.chat_template: str | None = gf.get("tokenizer.chat_template")
        self.model: _Model
        if kind == "gpt2":
            merges: list[str] = gf.require("tokenizer.ggml.merges", list)
            pre = str(gf.get("tokenizer.ggml.pre", "default"))
            self.model = BPEModel(str(gf.path), tokens, merges, pre)
            self.add_bos: bool = bool(gf.get("tokenizer.ggml.add_bos_token", pre in ADDS_BOS))
            self.add_space_prefix = False
        elif kind == "llama":
            scores: list[float] = gf.require("tokenizer.ggml.scores", list)
            self.model = SPMModel(tokens, scores, self.types, gf.get("tokenizer.ggml.unknown_token_id"))
            self.add_bos = bool(gf.get("tokenizer.ggml.add_bos_token", True))
            self.add_space_prefix = bool(gf.get("tokenizer.ggml.add_space_prefix", True))
        else:
            raise GGUFError(f"{gf.path}: tokenizer model {kind!r} (tokenizer.ggml.model) is not supported; "
                            "known: gpt2 (byte-level BPE), llama (SentencePiece)")
        special = np.isin(np.asarray(self.types, dtype=np.int64), (CONTROL, USER_DEFINED, UNKNOWN))
        specials = [i for i in np.flatnonzero(special).tolist() if tokens[i]]
        self._specials = sorted(specials, key=lambda i: -len(tokens[i]))  # longest first, as llama.cpp

    # ---- encoding -------------------------------------------------------------------------------------------

    def encode(self, text: str, *, add_bos: bool | None = None, parse_special: bool = False) -> list[int]:
        """Token ids of `text`; control-token texts (<|im_start|> ...) are recognised only with parse_special,
        else tokenized as plain text (llama.cpp's `parse_special`)."""
        ids: list[int] = []
        if (self.add_bos if add_bos is None else add_bos) and self.bos_id is not None:
            ids.append(self.bos_id)
        after_special = True
        for piece in self._partition(text, parse_special):
            if isinstance(piece, int):
                ids.append(piece)
                after_special = True
                continue
            if not piece:
                continue
            if self.add_space_prefix and after_special:
                piece = " " + piece
            ids += self.model.encode(piece)
            after_special = False
        return ids

    def _partition(self, text: str, parse_special: bool) -> list[str | int]:
        """`text` cut into plain fragments and special token ids."""
        parts: list[str | int] = [text]
        for tid in self._specials:
            if not parse_special and self.types[tid] != USER_DEFINED:
                continue
            word = self.vocab[tid]
            cut: list[str | int] = []
            for p in parts:
                if isinstance(p, int) or word not in p:
                    cut.append(p)
                    continue
                for k, frag in enumerate(p.split(word)):
                    if k:
                        cut.append(tid)
                    if frag:
                        cut.append(frag)
            parts = cut
        return parts

    # ---- decoding -------------------------------------------------------------------------------------------

    def token_bytes(self, tid: int, *, skip_special: bool = False) -> bytes:
        ty = self.types[tid] if 0 <= tid < len(self.types) else None
        if ty is None:
            raise ValueError(f"token id {tid} is outside the vocab of {len(self.vocab)} tokens")
        if ty == CONTROL:
            return b"" if skip_special else self.vocab[tid].encode()
        if ty == USER_DEFINED:
            return self.vocab[tid].encode()
        return self.model.token_bytes(tid)

    def decode(self, ids: list[int], *, skip_special: bool = False) -> str:
        return b"".join(self.token_bytes(t, skip_special=skip_special) for t in ids).decode(errors="replace")

    def token_text(self, token_id: int) -> str:
        return self.decode([token_id])

    def detokenizer(self, *, skip_special: bool = False) -> Detokenizer:
        return Detokenizer(self, skip_special)

    def encode_chat(self, messages: list[dict[str, str]]) -> list[int]:
        """The conversation through the model's chat template, special tokens parsed, ready for the assistant's
        turn; BOS is added only where the template does not write it itself."""
        text = self.apply_chat_template(messages)
        bos_text = self.vocab[self.bos_id] if self.bos_id is not None else None
        return self.encode(text, parse_special=True, add_bos=None if not bos_text or
                           not text.startswith(bos_text) else False)

    def apply_chat_template(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        if not self.chat_template:
            raise GGUFError("the model has no tokenizer.chat_template")
        import jinja2

        def raise_exception(message: str) -> None:
            raise GGUFError(f"the model's chat template refused the messages: {message}")

        env = jinja2.Environment(undefined=jinja2.StrictUndefined)
        bos = self.vocab[self.bos_id] if self.bos_id is not None else ""
        eos = self.vocab[self.eos_id] if self.eos_id is not None else ""
        return env.from_string(self.chat_template).render(
            messages=messages, add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos,
            raise_exception=raise_exception)


class Detokenizer:
    """Text of a token stream, piece by piece: bytes of a character split over tokens wait for the rest."""

    def __init__(self, tokenizer: Tokenizer, skip_special: bool) -> None:
        self._tok = tokenizer
        self._skip = skip_special
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, tid: int) -> str:
        return self._utf8.decode(self._tok.token_bytes(tid, skip_special=self._skip))

    def flush(self) -> str:
        return self._utf8.decode(b"", final=True)
