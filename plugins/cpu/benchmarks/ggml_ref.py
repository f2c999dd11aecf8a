"""ggml's own CPU backend through `ggml-python` (which compiles real ggml at install), for the benchmark's
comparison; None when the package is absent."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np


class GGML:
    def __init__(self, mod: Any, n_threads: int) -> None:
        self.g = mod
        self.n_threads = n_threads
        try:
            self.version = f"{mod.ggml_version().decode()} ({mod.ggml_commit().decode()})"
        except (AttributeError, TypeError):
            self.version = "ggml-python"
        self._keep: list[Any] = []

    def mul_mat(self, wtype: int, wraw: np.ndarray, m: int, k: int, x: np.ndarray) -> Callable[[], object]:
        """A callable computing dst = x @ w.T with ggml (weights of type wtype given as raw blocks)."""
        g = self.g
        n = x.shape[0]
        mem = wraw.nbytes + x.nbytes + m * n * 4 + (64 << 20)
        ctx = g.ggml_init(g.ggml_init_params(mem_size=mem, mem_buffer=None, no_alloc=False))
        w = g.ggml_new_tensor_2d(ctx, wtype, k, m)
        xt = g.ggml_new_tensor_2d(ctx, g.GGML_TYPE_F32, k, n)
        ctypes.memmove(g.ggml_get_data(w), wraw.ctypes.data, wraw.nbytes)
        xc = np.ascontiguousarray(x, dtype=np.float32)
        ctypes.memmove(g.ggml_get_data(xt), xc.ctypes.data, xc.nbytes)
        out = g.ggml_mul_mat(ctx, w, xt)
        gf = g.ggml_new_graph(ctx)
        g.ggml_build_forward_expand(gf, out)
        self._keep.append(ctx)
        nt = self.n_threads
        return lambda: g.ggml_graph_compute_with_ctx(ctx, gf, nt)

    def free(self) -> None:
        for ctx in self._keep:
            self.g.ggml_free(ctx)
        self._keep.clear()


def load(n_threads: int) -> GGML | None:
    try:
        import ggml
    except ImportError:
        return None
    return GGML(ggml, n_threads)
