"""KV cache: per layer K and V tensors [n_embd_kv, n_ctx] placed with their layer's weights, in F16, F32, BF16 or a
legacy quantised type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: as llama.cpp's --cache-type-k/v, read by FLASH_ATTN_EXT)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyggml as gg
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import Buffer, BufferType, BufferUsage
from pyggml.errors import PyGGMLError
from pyggml.tensor import Tensor
from pyggml.types import GGMLType

T = GGMLType
TYPES = (T.F16, T.F32, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1)


class KVCache:
    def __init__(self, n_layer: int, n_embd_kv: int, n_ctx: int, layer_buft: Callable[[int], BufferType],
                 dtype: GGMLType = GGMLType.F16, *, v_trans: bool = False) -> None:
        if dtype not in TYPES:
            raise PyGGMLError(f"KV cache type {dtype} is not supported ({', '.join(str(t) for t in TYPES)})")
        if v_trans and dtype.traits.blck_size > 1:
            raise PyGGMLError(f"a transposed V cache (attention without flash attention) cannot be {dtype}")
        self.n_ctx = n_ctx
        self.dtype = dtype
        self.v_trans = v_trans
        """V stored [n_ctx, n_embd_kv] (a row per channel) for the mul_mat attention."""
        self.k: list[Tensor] = []
        self.v: list[Tensor] = []
        self.buffers: list[Buffer] = []
        by_buft: dict[int, tuple[BufferType, gg.Context]] = {}
        for il in range(n_layer):
            buft = layer_buft(il)
            _, ctx = by_buft.setdefault(id(buft), (buft, gg.Context(no_alloc=True)))
            self.k.append(ctx.new_tensor(dtype, n_embd_kv, n_ctx, name=f"cache_k_l{il}"))
            v_ne = (n_ctx, n_embd_kv) if v_trans else (n_embd_kv, n_ctx)
            self.v.append(ctx.new_tensor(dtype, *v_ne, name=f"cache_v_l{il}"))
        for buft, ctx in by_buft.values():
            buf = alloc_ctx_tensors(ctx, buft)
            if buf is not None:
                buf.usage = BufferUsage.ANY
                buf.clear(0)
                self.buffers.append(buf)

    def clear(self) -> None:
        for b in self.buffers:
            b.clear(0)

    def tensors(self) -> Sequence[Tensor]:
        return [*self.k, *self.v]
