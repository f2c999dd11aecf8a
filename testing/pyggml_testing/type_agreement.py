"""pyggml's agreement with llama.cpp on one model, teacher-forced as `llama-perplexity --kl-divergence` measures it
(pyggml_llama.agreement): along the same tokens (a fixed text, tokenised by llama.cpp), the mean KL divergence of
pyggml's next-token distributions from llama.cpp's and how often both put the same token on top, next to llama.cpp's
own noise floor on those tokens (its logits in one batch against its logits one token at a time). The goal (issue
38): pyggml's mean KLD at most 1.5 x that floor and the same top-1 for at least 95% of the positions, for each way
pyggml runs (one batch at each thread count, and one token at a time).

Both sides feed the tokens in micro-batches of up to 512 (llama-perplexity's default n_ubatch); every position's
logits are scored (llama-perplexity scores the second half of each chunk only), so no BOS is added unless the
model's vocabulary asks for one, as there.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml_llama.agreement import Agreement, agreement
from pyggml_llama.session import KV_PAD, Session
from pyggml_testing.llama_cpp_ref import llama_cpp_logits

KLD_FACTOR = 1.5
"""pyggml's mean KLD may be this many times llama.cpp's batch-vs-stepped figure."""
KLD_EXACT = 1e-6
"""...or this much where that figure is 0 (llama.cpp's stepped logits its batch's bits): a mean KLD a thousand times
below any floor measured, the size of float32 rounding in logits that agree to the last few bits."""
MIN_TOP1 = 0.95
"""...of the positions whose reference choice is clear (pyggml_llama.agreement.CLEAR_MARGIN): near ties are where
llama.cpp parts from itself (its own top-1 over all positions is reported beside)."""
N_UBATCH = 512

TEXT = """\
A quantised model keeps most of its weights in small blocks: thirty-two numbers share one scale, and each of them
is stored in four, five, six or eight bits. When the model runs, the matrix products do not expand those blocks back
into floating point. Instead the activations are rounded into blocks of their own, with eight-bit integers, and the
two are multiplied as integers, one block at a time, before the scales are applied. Because every library rounds
and sums in a slightly different order, two correct programs that read the same file will rarely produce the same
bits; what matters is whether they predict the same next word, and how far apart their probabilities are.

The old lighthouse keeper had kept a log for forty years. Each evening he wrote down the direction of the wind, the
colour of the sea and the names of the ships that passed the point before dark. Most nights there was little to
say, but in the winter of the great storm he filled three pages: the lamp had gone out twice, the supply boat had not
come for eleven days, and a fishing boat from the northern villages had run onto the rocks below the cliff. He and
his daughter brought the four men up the path with ropes, one at a time, while the waves broke over the steps.

To measure how closely two implementations agree, feed both the same sequence of tokens and compare, at every
position, the distributions they predict for the next token. The Kullback-Leibler divergence of one distribution
from the other is zero when they are identical and grows as probability moves between tokens; its mean over the
sequence summarises the difference in one number. A second figure counts how often both put the same token first.
Neither needs a sampler, a seed or a temperature, so small differences in arithmetic cannot grow into different
texts, as they do when each program is left to continue a prompt on its own.
"""

F32 = npt.NDArray[np.float32]


def text_tokens(llama: ModuleType, model: Path, n_tokens: int, text: str = TEXT) -> list[int]:
    """The first `n_tokens` tokens of `text` as llama.cpp (the imported llama_cpp package `llama`) tokenises it for
    `model` (a BOS first where the vocabulary adds one)."""
    vocab = llama.Llama(model_path=str(model), vocab_only=True, verbose=False)
    tokens = [int(t) for t in vocab.tokenize(text.encode(), add_bos=True, special=False)]
    vocab.close()
    return tokens[:n_tokens]


def pyggml_logits(model: Path, tokens: Sequence[int], n_threads: int, repack: bool = True,
                  stepped: bool = False) -> F32:
    """pyggml's (cpu) logits [len(tokens), n_vocab] along `tokens`: in micro-batches of N_UBATCH, or one by one. The
    context is a multiple of KV_PAD, as llama.cpp pads its own: attention then spans as many cells as llama.cpp's,
    so its F16 matmuls sum in the same order (tinyBLAS's where the cell count is a multiple of 8, else
    ggml_vec_dot_f16's; a 405-cell context gave other bits from the fourth token on)."""
    n_ctx = -(-len(tokens) // KV_PAD) * KV_PAD
    s = Session(model, ["cpu"], n_ctx=n_ctx, n_batch=min(N_UBATCH, len(tokens)), n_threads=n_threads,
                repack=repack)
    if not stepped:
        return s.eval(list(tokens), all_logits=True)
    return np.concatenate([s.eval([t]) for t in tokens])


def _figures(a: Agreement, floor: float) -> dict[str, Any]:
    ratio = a.mean_kld / floor if floor > 0 else (0.0 if a.mean_kld == 0 else float("inf"))
    return {"kld": a.mean_kld, "max_kld": a.max_kld, "top1": a.same_top1, "clear_top1": a.clear_top1,
            "clear_positions": a.n_clear, "ratio": round(ratio, 3),
            "pass": a.mean_kld <= max(KLD_FACTOR * floor, KLD_EXACT) and a.clear_top1 >= MIN_TOP1}


def measure(model: Path, tokens: Sequence[int], llama: ModuleType, threads: Sequence[int] = (1, 2),
            repack: bool = True, stepped: bool = True, llama_threads: int = 1) -> dict[str, Any]:
    """The figures of `model` along `tokens`: llama.cpp's (the llama_cpp package `llama`) floor, and pyggml's
    agreement with llama.cpp's batch logits in one batch at each of `threads`, and with `stepped` one token at a
    time at the largest; `pass` where every pyggml run meets the goal. llama.cpp's logits do not depend on its
    thread count (its threads split rows, not sums: the same bits at 1 and 2 on every type here); on a busy machine
    its spinning threads make `llama_threads` > 1 many times slower."""
    n_batch = min(N_UBATCH, len(tokens))
    ref, one_by_one = llama_cpp_logits(model, tokens, stepped=True, llama=llama, n_batch=n_batch,
                                       n_threads=llama_threads)
    assert one_by_one is not None
    floor = agreement(ref, one_by_one)
    runs = {f"batch_{t}t": pyggml_logits(model, tokens, t, repack) for t in threads}
    if stepped:
        runs[f"stepped_{max(threads)}t"] = pyggml_logits(model, tokens, max(threads), repack, stepped=True)
    batches = [runs[f"batch_{t}t"] for t in threads]
    pyggml = {name: _figures(agreement(ref, got), floor.mean_kld) for name, got in runs.items()}
    return {"tokens": len(tokens), "repack": repack,
            "llama_cpp_floor": {"kld": floor.mean_kld, "max_kld": floor.max_kld, "top1": floor.same_top1,
                                "clear_top1": floor.clear_top1, "clear_positions": floor.n_clear,
                                "top1_meets_goal": floor.same_top1 >= MIN_TOP1},
            "goal_kld": max(KLD_FACTOR * floor.mean_kld, KLD_EXACT),
            "threads_same_bits": all(np.array_equal(batches[0], b) for b in batches[1:]),
            "pyggml": pyggml, "pass": all(p["pass"] for p in pyggml.values())}
