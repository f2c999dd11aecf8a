"""SentencePiece-style tokenizer of llama.cpp's `llama` vocab type (Llama 1/2, Mistral, TinyLlama, Phi-3 GGUFs).

The algorithm is llama.cpp's (its behaviour, written here anew): the text, spaces escaped as U+2581, starts as one
symbol per UTF-8 character; every adjacent pair whose concatenation is a vocab token is a candidate, and the
candidate with the highest token score (the leftmost among equal scores) is merged, repeatedly. A final symbol that
is no token falls back to byte tokens `<0xXX>`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

SPACE = "\u2581"
UNKNOWN_PIECE = "\u2585".encode()
UNKNOWN_TOKEN, BYTE_TOKEN = 2, 6


@dataclass(slots=True)
class _Symbol:
    start: int
    n: int
    prev: int
    next: int


class SPMModel:
    def __init__(self, tokens: list[str], scores: list[float], types: list[int], unk_id: int | None) -> None:
        self.tokens = tokens
        self.scores = scores
        self.types = types
        self.unk_id = unk_id
        self.ids = {t: i for i, t in enumerate(tokens)}  # a text listed twice maps to its last id, as llama.cpp's

    def encode(self, text: str) -> list[int]:
        """Token ids of one text fragment (spaces not yet escaped, no prefix space added)."""
        text = text.replace(" ", SPACE)
        syms = [_Symbol(i, 1, i - 1, i + 1 if i + 1 < len(text) else -1) for i in range(len(text))]
        heap: list[tuple[float, int, int, int]] = []
        merged_from: dict[str, tuple[int, int]] = {}

        def candidate(left: int, right: int) -> None:
            if left < 0 or right < 0:
                return
            a, b = syms[left], syms[right]
            piece = text[a.start : a.start + a.n + b.n]
            tid = self.ids.get(piece)
            if tid is None:
                return
            heapq.heappush(heap, (-self.scores[tid], left, right, len(piece)))
            merged_from[piece] = (left, right)

        for i in range(1, len(syms)):
            candidate(i - 1, i)
        while heap:
            _, left, right, size = heapq.heappop(heap)
            a, b = syms[left], syms[right]
            if a.n == 0 or b.n == 0 or a.n + b.n != size:
                continue  # stale: one side was merged into something else since
            a.n += b.n
            b.n = 0
            a.next = b.next
            if b.next >= 0:
                syms[b.next].prev = left
            candidate(a.prev, left)
            candidate(left, a.next)
        out: list[int] = []
        i = 0 if syms else -1
        while i != -1:
            self._resegment(text, syms, syms[i], merged_from, out)
            i = syms[i].next
        return out

    def _resegment(self, text: str, syms: list[_Symbol], s: _Symbol, merged_from: dict[str, tuple[int, int]],
                   out: list[int]) -> None:
        piece = text[s.start : s.start + s.n]
        tid = self.ids.get(piece)
        if tid is not None:
            out.append(tid)
            return
        parts = merged_from.get(piece)
        if parts is None:
            out.extend(self._byte_token(b) for b in piece.encode())
            return
        self._resegment(text, syms, syms[parts[0]], merged_from, out)
        self._resegment(text, syms, syms[parts[1]], merged_from, out)

    def _byte_token(self, byte: int) -> int:
        tid = self.ids.get(f"<0x{byte:02X}>", self.ids.get(chr(byte)))
        if tid is None:
            if self.unk_id is None:
                raise ValueError(f"byte 0x{byte:02X} has no token and the vocab has no unknown token")
            return self.unk_id
        return tid

    def token_bytes(self, tid: int) -> bytes:
        """The bytes a normal, unknown or byte token stands for."""
        text = self.tokens[tid]
        if self.types[tid] == BYTE_TOKEN:
            return bytes([int(text[3:5], 16)])
        if self.types[tid] == UNKNOWN_TOKEN:
            return UNKNOWN_PIECE
        return text.replace(SPACE, " ").encode()
