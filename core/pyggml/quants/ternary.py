"""ggml's ternary types TQ1_0 and TQ2_0."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pyggml.quants.common import F32, U8, f16_at, f16_bytes, f32, roundf
from pyggml.quants.kquants import pack_2bit, unpack_2bit

# ---------------------------------------------------------------------------------------------------------------
# ternary types
# ---------------------------------------------------------------------------------------------------------------


def tern(x: F32) -> tuple[F32, npt.NDArray[np.int32]]:
    amax = np.abs(x).max(axis=1)
    with np.errstate(divide="ignore"):
        idv = np.where(amax != 0, f32(1) / amax, f32(0)).astype(np.float32, copy=False)
    return amax.astype(np.float32, copy=False), roundf(x * idv[:, None]).astype(np.int32) + 1


POW3 = np.array([81, 27, 9, 3, 1], dtype=np.int32)


def tq1_0_quant(x: F32) -> U8:
    nb = x.shape[0]
    d, t = tern(x)
    a = (t[:, :160].reshape(nb, 5, 32) * POW3[None, :, None]).sum(axis=1)
    b = (t[:, 160:240].reshape(nb, 5, 16) * POW3[None, :, None]).sum(axis=1)
    c = (t[:, 240:].reshape(nb, 4, 4) * POW3[None, :4, None]).sum(axis=1)  # 4 trits, shifted up one
    q = np.concatenate([a, b, c], axis=1) & 0xFF
    q = (q * 256 + 242) // 243
    return np.concatenate([q.astype(np.uint8), f16_bytes(d)], axis=1)


def tq1_0_dequant(b: U8) -> F32:
    nb = b.shape[0]
    d = f16_at(b, 52)
    pow3 = np.array([1, 3, 9, 27, 81], dtype=np.uint8)
    a = (b[:, None, 0:32] * pow3[None, :, None]).reshape(nb, 160)
    c = (b[:, None, 32:48] * pow3[None, :, None]).reshape(nb, 80)
    h = (b[:, None, 48:52] * pow3[None, :4, None]).reshape(nb, 16)
    q = np.concatenate([a, c, h], axis=1).astype(np.uint8)
    t = ((q.astype(np.uint16) * 3) >> 8).astype(np.int16) - 1
    return (t.astype(np.float32, copy=False) * d[:, None]).astype(np.float32, copy=False)


def tq2_0_quant(x: F32) -> U8:
    d, t = tern(x)
    return np.concatenate([pack_2bit(t & 3), f16_bytes(d)], axis=1)


def tq2_0_dequant(b: U8) -> F32:
    d = f16_at(b, 64)
    q = unpack_2bit(b[:, 0:64]).astype(np.int8) - np.int8(1)
    return (q.astype(np.float32, copy=False) * d[:, None]).astype(np.float32, copy=False)


