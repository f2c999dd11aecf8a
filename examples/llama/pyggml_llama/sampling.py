"""Token sampling from logits: greedy, or temperature with top-k and top-p (nucleus) filtering."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0
    """0: greedy (argmax, the lowest id on ties)."""
    top_k: int = 40
    top_p: float = 0.95
    seed: int | None = None


class Sampler:
    def __init__(self, params: SamplingParams) -> None:
        if params.temperature < 0 or not 0 < params.top_p <= 1 or params.top_k < 0:
            raise ValueError(f"invalid sampling parameters {params}")
        self.params = params
        self.rng = np.random.default_rng(params.seed)

    def __call__(self, logits: npt.NDArray[np.float32]) -> int:
        p = self.params
        if p.temperature == 0:
            return int(np.argmax(logits))
        x = logits.astype(np.float64) / p.temperature
        order = np.argsort(-x, kind="stable")
        if p.top_k > 0:
            order = order[: p.top_k]
        probs = np.exp(x[order] - x[order[0]])
        probs /= probs.sum()
        if p.top_p < 1.0:
            keep = int(np.searchsorted(np.cumsum(probs), p.top_p) + 1)
            order, probs = order[:keep], probs[:keep] / probs[:keep].sum()
        return int(order[self.rng.choice(len(order), p=probs)])
