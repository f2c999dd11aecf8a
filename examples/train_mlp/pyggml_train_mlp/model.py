"""The network: inputs -> [linear -> SILU] x n_hidden_layers -> linear -> logits, weights in a device buffer.

Parameters are created in their own no_alloc context, placed in one buffer of the device (`alloc_ctx_tensors`) and
initialised from a seeded generator (scaled normal, He-style), so a run is reproducible on every device.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import BufferType
from pyggml.tensor import Tensor


@dataclass
class MLP:
    inputs: Tensor
    logits: Tensor
    params: list[Tensor]


def build_mlp(buft: BufferType, n_in: int, n_hidden: int, n_out: int, batch: int, *, layers: int = 2,
              seed: int = 0) -> MLP:
    weights = gg.Context(no_alloc=True)
    sizes = [n_in] + [n_hidden] * layers + [n_out]
    params: list[Tensor] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        params.append(weights.new_tensor(gg.F32, a, b, name=f"w{i}").set_param())
        params.append(weights.new_tensor(gg.F32, b, name=f"b{i}").set_param())
    alloc_ctx_tensors(weights, buft)
    rng = np.random.default_rng(seed)
    for p in params:
        if p.name.startswith("w"):
            fan_in = p.ne[0]
            p.set(rng.normal(0.0, np.sqrt(2.0 / fan_in), p.nelements()).astype(np.float32))
        else:
            p.set(np.zeros(p.nelements(), dtype=np.float32))
    with gg.Context(no_alloc=True) as ctx:
        x = ctx.new_tensor(gg.F32, n_in, batch, name="inputs")
        h = x
        for i in range(len(sizes) - 1):
            h = ops.add(ops.mul_mat(params[2 * i], h), params[2 * i + 1])
            if i < len(sizes) - 2:
                h = ops.silu(h)
        h.set_name("logits")
    return MLP(x, h, params)
