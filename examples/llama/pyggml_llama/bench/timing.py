"""How one benchmark test is timed: llama-bench's protocol, written once for `pyggml-llama bench` and for
`bench_llama.py` (which runs it on pyggml and on llama.cpp side by side).

A test is a prompt of n_prompt tokens (pp), n_gen single-token decode steps (tg), or both (pg), run after n_depth
tokens already in the KV cache. Each sample: cut the cache back to the depth (filling it, untimed, when it holds
fewer tokens), then time the prompt, fed in batches of n_batch tokens whose first is BOS where the model adds one,
and the decode steps, each a random token after the first (BOS or random), waiting for every step's result. The
warm-up runs the same prompt, or one decode step, at the test's depth, so that the graphs the timed runs replay
are built before any timing (llama-bench warms up at depth 0: its graphs cost nothing to build)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from pyggml_llama.session import Session
    from pyggml_llama.tokenizer import Tokenizer


@dataclass(frozen=True)
class BenchTest:
    """What one test runs: llama-bench's n_prompt, n_gen and n_depth."""

    n_prompt: int
    n_gen: int
    n_depth: int = 0

    @property
    def name(self) -> str:
        """llama-bench's test column: pp512, tg128, pp512+tg128, with " @ d4096" after a depth."""
        if self.n_gen == 0:
            kind = f"pp{self.n_prompt}"
        elif self.n_prompt == 0:
            kind = f"tg{self.n_gen}"
        else:
            kind = f"pp{self.n_prompt}+tg{self.n_gen}"
        return f"{kind} @ d{self.n_depth}" if self.n_depth else kind

    @property
    def n_tokens(self) -> int:
        """The tokens a sample times (its tok/s is these over its seconds)."""
        return self.n_prompt + self.n_gen

    @property
    def n_ctx(self) -> int:
        """The context the test needs (llama-bench's n_ctx for it)."""
        return self.n_depth + self.n_prompt + self.n_gen


class Evaluator(Protocol):
    """What the timing needs of a model runtime: its vocabulary size, the token a prompt starts with, moving the
    cache's end back, and evaluating tokens there to completion."""

    @property
    def n_vocab(self) -> int: ...

    @property
    def bos(self) -> int | None:
        """The token each prompt starts with (BOS where the model adds one), or None: a random one."""

    def seek(self, n_past: int) -> None:
        """Keep the first n_past tokens of the cache; the next tokens go after them."""

    def decode(self, tokens: Sequence[int]) -> None:
        """Evaluate tokens at the cache's end and wait for the result."""


def prompt_bos(tokenizer: Tokenizer) -> int | None:
    """The token a benchmark prompt starts with: BOS where the model's tokenizer adds one (as llama-bench)."""
    return tokenizer.bos_id if tokenizer.add_bos and tokenizer.bos_id is not None else None


class SessionEvaluator:
    """A pyggml-llama Session as an Evaluator."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.n_vocab = session.hp.n_vocab
        self.bos = prompt_bos(session.tokenizer)

    def seek(self, n_past: int) -> None:
        self.session.n_past = n_past
        del self.session.cached[n_past:]

    def decode(self, tokens: Sequence[int]) -> None:
        self.session.eval(tokens)  # returns the last logits, read back from the device: the step is complete


class Runner:
    """Runs the tests of one evaluator: warm-up and timed samples. Remembers how many depth tokens the cache holds,
    so that samples and tests at the same depth fill it once (llama-bench keeps that state too)."""

    def __init__(self, ev: Evaluator, n_batch: int, seed: int = 0) -> None:
        self.ev = ev
        self.n_batch = n_batch
        self.rng = np.random.default_rng(seed)
        self.filled = 0
        """The cache's first `filled` tokens are a depth prefix that later tests at that depth or less can keep."""

    def _random(self, n: int) -> list[int]:
        return [int(t) for t in self.rng.integers(0, self.ev.n_vocab, n)]

    def prompt(self, n: int) -> None:
        """n tokens in batches of n_batch; the first is BOS where the model adds one."""
        if self.n_batch < 1:
            raise ValueError(f"a batch of {self.n_batch} tokens")
        done = 0
        while done < n:
            k = min(n - done, self.n_batch)
            tokens = self._random(k)
            if done == 0 and self.ev.bos is not None:
                tokens[0] = self.ev.bos
            self.ev.decode(tokens)
            done += k

    def gen(self, n: int) -> None:
        """n decode steps of one token each: BOS (or a random token) first, then random tokens."""
        tok = self.ev.bos if self.ev.bos is not None else self._random(1)[0]
        for _ in range(n):
            self.ev.decode([tok])
            tok = self._random(1)[0]

    def at_depth(self, depth: int) -> None:
        """Put the cache's end at `depth`, filling the cells up to it (untimed) where they do not hold a prefix."""
        if depth > self.filled:
            self.ev.seek(self.filled)
            self.prompt(depth - self.filled)
        self.ev.seek(depth)
        self.filled = depth  # what runs next writes the cells from depth on

    def warmup(self, test: BenchTest) -> None:
        """llama-bench's warm-up (the whole prompt, then one decode step), at the test's depth."""
        self.at_depth(test.n_depth)
        if test.n_prompt:
            self.prompt(test.n_prompt)
        if test.n_gen:
            self.gen(1)

    def sample(self, test: BenchTest) -> int:
        """One timed run of the test: nanoseconds for its prompt and decode steps after the depth."""
        self.at_depth(test.n_depth)
        t0 = time.perf_counter_ns()
        if test.n_prompt:
            self.prompt(test.n_prompt)
        if test.n_gen:
            self.gen(test.n_gen)
        return time.perf_counter_ns() - t0


def mean_stddev(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1; 0 for fewer than two values), as llama-bench reports them."""
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
