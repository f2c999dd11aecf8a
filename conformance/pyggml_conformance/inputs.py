"""Input data of a case: how each input's random values are drawn, and their encoding into the tensor's type.

An `Init` draws values for one tensor in numpy order (shape ne[::-1]); `encode` turns them into the exact bytes
both backends receive (F16/BF16 rounded, block types quantised by `pyggml.quants`). Block-type inputs with the
default values are drawn block by block from a per-type pool of quantised random blocks (`pooled_blocks`).
Every op's input domain lives here once: SQRT/LOG read positive values, ARGSORT/ARGMAX distinct ones, row ids
stay in range, masks keep a finite entry in every row; `domain_init` gives them by op and src slot for cases
replayed from a case file.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.errors import PyGGMLError
from pyggml.graph import Graph
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import INT_TYPES, GGMLType, f32_to_bf16, type_traits

Array = npt.NDArray[Any]
Init = Callable[[np.random.Generator, Tensor], Array]
Bytes = npt.NDArray[np.uint8]


class InputUnavailable(PyGGMLError):
    """Input bytes cannot be produced here (e.g. block types without pyggml.quants): the case is skipped."""


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(reversed(t.ne))


def uniform(lo: float = -1.0, hi: float = 1.0) -> Init:
    def init(rng: np.random.Generator, t: Tensor) -> Array:
        return rng.uniform(lo, hi, _shape(t))

    init.__qualname__ = f"uniform({lo:g},{hi:g})"
    return init


def integers(lo: int, hi: int) -> Init:
    """Integers in [lo, hi)."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        return rng.integers(lo, hi, _shape(t))

    init.__qualname__ = f"integers({lo},{hi})"
    return init


def distinct(scale: float = 1.0) -> Init:
    """Each row (dim 0) holds distinct values, well apart, in about [-scale, scale] (no ties for ARGSORT,
    ARGMAX, TOP_K, even after F16 rounding for rows up to 1024)."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        shape = _shape(t)
        n = shape[-1]
        rows = int(np.prod(shape[:-1], dtype=np.int64))
        perm = np.argsort(rng.random((rows, n)), axis=1)
        vals = (perm - (n - 1) / 2) * (2 * scale / max(n, 1))
        return vals.reshape(shape)

    init.__qualname__ = f"distinct({scale:g})"
    return init


def distinct_ids(n: int) -> Init:
    """Each row (dim 0) holds distinct integers in [0, n) (SET_ROWS targets, MUL_MAT_ID experts)."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        shape = _shape(t)
        k = shape[-1]
        if k > n:
            raise PyGGMLError(f"cannot draw {k} distinct ids below {n} for '{t.name}'")
        rows = int(np.prod(shape[:-1], dtype=np.int64))
        ids = np.argsort(rng.random((rows, n)), axis=1)[:, :k]
        return ids.reshape(shape)

    init.__qualname__ = f"distinct_ids({n})"
    return init


def away_from_zero(lo: float = 0.5, hi: float = 2.0) -> Init:
    """Magnitudes in [lo, hi] with random signs (divisors, values whose sign must not flip on rounding)."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        shape = tuple(reversed(t.ne))
        signs: Array = rng.choice(np.array([-1.0, 1.0]), shape)
        return rng.uniform(lo, hi, shape) * signs

    init.__qualname__ = f"away_from_zero({lo:g},{hi:g})"
    return init


def kq_mask(p_inf: float = 0.2) -> Init:
    """An attention mask: uniform in [-1, 1] with about p_inf of the entries -inf, never a whole row."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        shape = _shape(t)
        vals = rng.uniform(-1.0, 1.0, shape)
        vals[rng.random(shape) < p_inf] = -np.inf
        keep = rng.integers(0, shape[-1], shape[:-1])
        np.put_along_axis(vals, keep[..., None], rng.uniform(-1.0, 1.0, (*shape[:-1], 1)), axis=-1)
        return vals

    init.__qualname__ = f"kq_mask({p_inf:g})"
    return init


UNIFORM = uniform(-1.0, 1.0)
"""The default init of float and block-type inputs."""


def default_init(t: GGMLType) -> Init:
    if t in INT_TYPES:
        return integers(-64, 64)
    return UNIFORM


MAX_POSITION = 4096
"""ROPE positions are drawn in [0, MAX_POSITION) (beyond the usual n_ctx_orig, so YaRN ramps matter)."""


def domain_init(op: Op, slot: int, srcs: Sequence[Tensor | None], t: GGMLType) -> Init:
    """The values src `slot` of an `op` node is given when a case is replayed from a case file: in range ids,
    distinct rows where order matters, positive values for SQRT/LOG, masks with -inf, divisors away from 0."""
    s0 = srcs[0] if srcs else None
    if op is Op.GET_ROWS and slot == 1 and s0 is not None:
        return integers(0, s0.ne[1])
    if op is Op.SET_ROWS and slot == 2 and s0 is not None:
        return distinct_ids(s0.ne[1])
    if op is Op.MUL_MAT_ID and slot == 2 and s0 is not None:
        return distinct_ids(s0.ne[2])
    if op is Op.ROPE and slot in (1, 2):
        return integers(0, MAX_POSITION) if slot == 1 else uniform(0.9, 1.1)
    if (op is Op.OPT_STEP_ADAMW and slot in (3, 4)) or (op is Op.OPT_STEP_SGD and slot == 2):
        return uniform(0.0, 1.0)  # v and the hyper-parameters are non-negative
    if op in (Op.SQRT, Op.LOG) and slot == 0:
        return uniform(0.1, 10.0)
    if op in (Op.ARGSORT, Op.ARGMAX, Op.TOP_K) and slot == 0:
        return distinct(100.0)
    if (op is Op.SOFT_MAX and slot == 1) or (op is Op.FLASH_ATTN_EXT and slot == 3):
        return kq_mask()
    if op is Op.COUNT_EQUAL:
        return integers(0, 4)
    if op is Op.DIV and slot == 1:
        return away_from_zero()
    return default_init(t)


# ---- block-type inputs ------------------------------------------------------------------------------------------

POOL_BLOCKS = 1024
_pools: dict[GGMLType, Bytes] = {}


def block_pool(t: GGMLType) -> Bytes:
    """POOL_BLOCKS blocks of type t (rows of type_size bytes), each the quantisation of random floats in [-1, 1],
    made once per process from a fixed seed (the same pool in every process)."""
    pool = _pools.get(t)
    if pool is None:
        tr = type_traits(t)
        rng = np.random.default_rng([0x9E3779B9, int(t)])
        values = rng.uniform(-1.0, 1.0, POOL_BLOCKS * tr.blck_size)
        pool = encode(values, t).reshape(POOL_BLOCKS, tr.type_size)
        _pools[t] = pool
    return pool


def pooled_blocks(t: GGMLType, n_elements: int, rng: np.random.Generator) -> Bytes:
    """Bytes of a block-type tensor of n_elements: blocks drawn at random from the type's pool. Every block of
    these formats is quantised on its own, so this is exactly the quantisation of the pool blocks' random
    floats in the drawn order, without quantising anew for every case (k-quants quantise slowly in numpy)."""
    n_blocks = n_elements // type_traits(t).blck_size
    idx = rng.integers(0, POOL_BLOCKS, n_blocks)
    return np.ascontiguousarray(block_pool(t)[idx]).reshape(-1)


# ---- encoding ---------------------------------------------------------------------------------------------------


def encode(values: Array, t: GGMLType) -> Bytes:
    """Contiguous bytes of `values` in type t (block types quantised by pyggml.quants)."""
    tr = type_traits(t)
    flat = np.asarray(values).reshape(-1)
    if tr.is_quantized:
        try:
            from pyggml.quants import quantize
        except ImportError as e:
            raise InputUnavailable(f"{t} inputs need pyggml.quants, which is not available: {e}") from e
        return np.asarray(quantize(np.ascontiguousarray(flat, dtype=np.float32), t), dtype=np.uint8).reshape(-1)
    if t == GGMLType.BF16:
        return f32_to_bf16(flat).view(np.uint8)
    dtype = tr.np_dtype
    assert dtype is not None
    if dtype.kind in "iu":
        flat = np.rint(flat) if flat.dtype.kind == "f" else flat
    return np.ascontiguousarray(flat.astype(dtype)).view(np.uint8)


def case_rng(name: str, seed: int) -> np.random.Generator:
    """The generator of one case's inputs: fresh per case, reproducible from (seed, case name)."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def graph_inputs(graph: Graph) -> list[Tensor]:
    """The tensors a case fills before compute: its leafs and its parameters (op NONE, flagged PARAM: a graph keeps
    them among its nodes, as ggml does), views excluded."""
    return [t for t in (*graph.leafs, *graph.nodes) if t.op is Op.NONE and t.view_src is None]


def generate(graph: Graph, inits: Mapping[str, Init], rng: np.random.Generator) -> dict[str, Bytes]:
    """Bytes of every input of `graph` (graph_inputs), by tensor name, drawn in graph order."""
    data: dict[str, Bytes] = {}
    for t in graph_inputs(graph):
        init = inits.get(t.name)
        if init is None:
            raise PyGGMLError(f"case input '{t.name}' {t.type} ne={list(t.ne)} has no initialiser")
        if init is UNIFORM and t.type.traits.is_quantized:
            data[t.name] = pooled_blocks(t.type, t.nelements(), rng)
        else:
            data[t.name] = encode(init(rng, t), t.type)
    return data
