"""The example's dataset, generated: interleaved spirals in the plane, one arm per class, with Gaussian noise.

A linear model cannot separate them (accuracy near 1/n_classes); a small MLP can, which makes it a quick check that
the backward pass and the optimiser really train.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


def spirals(n_per_class: int = 300, n_classes: int = 3, noise: float = 0.2, turns: float = 1.75,
            seed: int = 0) -> tuple[F32, F32]:
    """Points (n, 2) and one-hot labels (n, n_classes), in random order."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(n_classes):
        r = np.linspace(0.1, 1.0, n_per_class)
        theta = 2 * np.pi * (turns * r + c / n_classes) + rng.normal(0.0, noise, n_per_class)
        xs.append(np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1))
        ys.append(np.full(n_per_class, c))
    x = np.concatenate(xs).astype(np.float32)
    y = np.eye(n_classes, dtype=np.float32)[np.concatenate(ys)]
    perm = rng.permutation(len(x))
    return x[perm], y[perm]
