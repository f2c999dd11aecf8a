"""The constants of a `pyggml.function`: numpy arrays given once, held on the device in the layout each use needs.

Each weight is a leaf tensor (numpy order as given) in a context of its own, placed in the device's memory and
written the first time a graph reads it. `x @ w` records MUL_MAT(CONT(TRANSPOSE(w)), x) (pyggml.ops.operators);
for a weight that CONT would copy the same constant every call, so `fold_transposes` gives such a node's readers
a second leaf holding w transposed (ggml's layout for MUL_MAT's src0, what a hand-written model stores), written
once. A weight only ever multiplied from the right is stored only transposed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import BufferType
from pyggml.context import Context
from pyggml.errors import ShapeError
from pyggml.func.signature import ggml_type, ne_of
from pyggml.graph import Graph
from pyggml.ops.base import Op
from pyggml.tensor import Tensor


@dataclass
class Weight:
    name: str
    values: npt.NDArray[Any]
    """The array as given (converted to the tensor's dtype), numpy order."""
    leaf: Tensor
    """What the traced function receives: the weight in numpy order."""
    transposed: Tensor | None = None
    """The weight with its last two numpy axes swapped, made when a graph multiplies by it from the right."""

    def forms(self) -> list[Tensor]:
        """The tensors holding this weight."""
        return [self.leaf] if self.transposed is None else [self.leaf, self.transposed]

    def memory_order(self, form: Tensor) -> npt.NDArray[Any]:
        """The values `form` (one of `forms()`) holds, in memory order."""
        if form is self.leaf:
            return self.values.reshape(-1)
        full = self.values.reshape(self.leaf.ne[::-1])  # 4-D, numpy order
        return np.ascontiguousarray(full.swapaxes(2, 3)).reshape(-1)


class Weights:
    """The weights of one function, by name."""

    def __init__(self, arrays: Mapping[str, npt.ArrayLike]) -> None:
        self._by_name: dict[str, Weight] = {}
        self._by_leaf: dict[int, Weight] = {}
        """id(tensor) -> the weight it holds, for both forms (the record keeps the tensor alive, so the id is not reused
        meanwhile)."""
        for name, values in arrays.items():
            arr = np.array(values)  # a copy: what the caller does to its array later is not seen
            t = ggml_type(arr.dtype, f"pyggml.function weight '{name}'")
            leaf = Context(no_alloc=True).new_tensor(t, *ne_of(arr.shape, f"pyggml.function weight '{name}'"),
                                                     name=name)
            dtype = t.traits.np_dtype
            assert dtype is not None  # the types of TYPE_OF_DTYPE all have one
            w = Weight(name, arr.astype(dtype, copy=False), leaf)
            self._by_name[name] = w
            self._by_leaf[id(leaf)] = w

    def leafs(self) -> dict[str, Tensor]:
        return {name: w.leaf for name, w in self._by_name.items()}

    def fold_transposes(self, graph: Graph) -> bool:
        """Point every node reading CONT(TRANSPOSE(weight)) at the weight's transposed leaf instead; True when a
        source changed (the graph must be built again: those CONT nodes are gone)."""
        changed = False
        for node in graph.nodes:
            srcs = tuple(self._folded(s) for s in node.src)
            if any(a is not b for a, b in zip(srcs, node.src, strict=True)):
                node.src = srcs
                changed = True
        return changed

    def _folded(self, s: Tensor | None) -> Tensor | None:
        if s is None or s.op is not Op.CONT or s.params is not None:
            return s
        t = s.src[0]
        w = self._by_leaf.get(id(t.src[0])) if t is not None and t.op is Op.TRANSPOSE else None
        if w is None:
            return s
        if w.transposed is None:
            w.transposed = Context(no_alloc=True).new_tensor(w.leaf.type, *s.ne, name=f"{w.name}.T")
            self._by_leaf[id(w.transposed)] = w
        return w.transposed

    def place(self, graph: Graph, buft: BufferType) -> None:
        """Allocate in `buft` and write each weight tensor `graph` reads that has no memory yet."""
        for leaf in graph.leafs:
            w = self._by_leaf.get(id(leaf))
            if w is None or leaf.buffer is not None:
                continue
            assert leaf.ctx is not None
            alloc_ctx_tensors(leaf.ctx, buft)
            leaf.set(w.memory_order(leaf))

    def set(self, name: str, values: npt.ArrayLike) -> None:
        """New values for weight `name` (same numpy shape), written into every tensor holding it."""
        w = self._by_name.get(name)
        if w is None:
            raise KeyError(f"pyggml.function has no weight '{name}'; its weights: {', '.join(self._by_name)}")
        arr = np.asarray(values)
        if arr.shape != w.values.shape:
            raise ShapeError(f"pyggml.function weight '{name}' has numpy shape {w.values.shape}, got an array of "
                             f"shape {arr.shape}")
        w.values = np.array(arr, dtype=w.values.dtype)
        for t in w.forms():
            if t.buffer is not None:
                t.set(w.memory_order(t))
