"""How closely two runs of a model agree, teacher-forced, as `llama-perplexity --kl-divergence` measures it: over the
same token sequence, the KL divergence of each position's next-token distribution from the reference's, and how
often both put the same token on top.

Backends that sum in other orders part at near ties when sampling greedily; these figures do not. llama.cpp against
itself (one batch vs one token at a time) differs by a mean KLD of 1.3e-3 to 3.1e-3 on SmolLM2 Q4_1: its noise
floor, and the bar for any backend or transport.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

NOISE_FLOOR_KLD = 3.1e-3
"""The top of llama.cpp's own batch-vs-sequential mean KLD on SmolLM2 Q4_1."""
CLEAR_MARGIN = 1.0
"""A position whose reference puts its first token at least this far (in logits) above its second is a clear
choice; closer ones are near ties, where llama.cpp itself picks another token one token at a time than in one batch
(on a 405-token text it missed its own 95% top-1 on three of six SmolLM2 types, every miss at a margin under 0.85)."""


@dataclass(frozen=True, slots=True)
class Agreement:
    mean_kld: float
    max_kld: float
    same_top1: float
    """Fraction of positions whose most likely token is the same."""
    n: int
    clear_top1: float = 1.0
    """The same fraction over the positions whose reference choice is clear (CLEAR_MARGIN; 1.0 where none is)."""
    n_clear: int = 0


def log_softmax(logits: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
    """Log-probabilities of each row of logits (last axis), in float64."""
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    out: npt.NDArray[np.float64] = x - np.log(np.exp(x).sum(axis=-1, keepdims=True))  # numpy's sum types as Any
    return out


def clear_choices(reference: npt.NDArray[np.floating]) -> npt.NDArray[np.bool_]:
    """Per row of logits (or log-probabilities) [positions, vocab]: whether its first token is at least CLEAR_MARGIN
    above its second."""
    if reference.shape[-1] < 2:
        return np.ones(reference.shape[:-1], dtype=bool)
    top2 = np.sort(reference, axis=-1)[..., -2:]
    out: npt.NDArray[np.bool_] = (top2[..., 1] - top2[..., 0]) >= CLEAR_MARGIN
    return out


def agreement(reference: npt.NDArray[np.floating], other: npt.NDArray[np.floating]) -> Agreement:
    """Logits [positions, vocab] of the same tokens from two runs: KL(reference || other) per position."""
    if reference.shape != other.shape or reference.ndim != 2:
        raise ValueError(f"logits must both be [positions, vocab]: {reference.shape} vs {other.shape}")
    lp, lq = log_softmax(reference), log_softmax(other)
    kld = (np.exp(lp) * (lp - lq)).sum(axis=-1)
    same = reference.argmax(-1) == other.argmax(-1)
    clear = clear_choices(reference)
    n_clear = int(clear.sum())
    clear_top1 = float(same[clear].mean()) if n_clear else 1.0
    return Agreement(float(kld.mean()), float(kld.max()), float(same.mean()), int(reference.shape[0]), clear_top1,
                     n_clear)
