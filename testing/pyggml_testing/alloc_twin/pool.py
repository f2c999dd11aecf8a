"""The state of one random twin graph while it is drawn: the pool of contiguous F32 tensors ops are applied to,
what has been consumed, and the helpers every recipe uses (leafs, row-index inputs, picking operands)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_testing.alloc_twin.ggml import Twin, TwinBuilder

F32, F16, I32 = GGMLType.F32, GGMLType.F16, GGMLType.I32
DIMS0 = (4, 12, 16, 32, 33, 48, 64, 96, 128, 256)
"""Row lengths: some are not a multiple of the 32-byte alignment."""
DIMS1 = (1, 2, 3, 4, 5, 8, 16, 24, 32)
MAX_ELEMENTS = 1 << 15
"""No tensor grows beyond this (chains of matmuls would otherwise multiply their sizes)."""
T = TypeVar("T")


class Pool:
    """Random draws turned into tensors of both libraries: `pool` holds the contiguous F32 tensors later ops may
    take, `made` every tensor in creation order (results that end a branch too)."""

    def __init__(self, b: TwinBuilder, rng: np.random.Generator) -> None:
        self.b, self.rng = b, rng
        self.pool: list[Twin] = []
        self.made: list[Twin] = []
        self.consumed: set[int] = set()
        self.index_bounds: dict[str, int] = {}
        """Per I32 input (by name): the exclusive bound of its values."""
        self.n_nodes = 0
        self.n_leafs = 0

    def choice(self, seq: Sequence[T]) -> T:
        return seq[int(self.rng.integers(0, len(seq)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def leaf(self, ne: tuple[int, ...], kinds: tuple[str, ...], p: tuple[float, ...], ttype: GGMLType = F32) -> Twin:
        """A new leaf of one of `kinds` (probabilities `p`; see TwinBuilder.leaf)."""
        kind = str(self.rng.choice(kinds, p=p))
        self.n_leafs += 1
        return self.b.leaf(ne, f"leaf{self.n_leafs}", kind, ttype)

    def ids(self, ne: tuple[int, ...], bound: int) -> Twin:
        """An INPUT I32 tensor of indices below `bound`."""
        t = self.leaf(ne, ("input",), (1.0,), I32)
        self.index_bounds[t.py.name] = bound
        return t

    def operand(self, ne: tuple[int, ...], kinds: tuple[str, ...] = ("input", "const"),
                p: tuple[float, ...] = (0.5, 0.5)) -> Twin:
        """A pool tensor of shape ne if there is one (the tensor the op is drawn for too: an op may take one tensor
        twice), else a new leaf."""
        return self.peer(None, ne) or self.leaf(ne, kinds, p)

    def pick(self) -> Twin:
        """Mostly the newest tensor (deep chains); else one that nothing consumes yet (branches join again, as in
        a model: few dead ends) or any (long lifetimes, several consumers)."""
        r = self.rng.random()
        if r < 0.6:
            return self.pool[-1]
        open_ = [t for t in self.pool[:-1] if id(t.py) not in self.consumed]
        if r < 0.85 and open_:
            return self.choice(open_)
        return self.choice(self.pool)

    def peer(self, a: Twin | None, ne: tuple[int, ...] | None = None) -> Twin | None:
        """Another pool tensor than a, of shape `ne` (a's shape when None)."""
        want = a.py.ne if ne is None and a is not None else (*(ne or ()), 1, 1, 1, 1)[:4]
        same = [t for t in self.pool if t.py.ne == want and t is not a]
        return self.choice(same) if same else None

    def add(self, t: Twin, *used: Twin, nodes: int = 1, pool: bool = True) -> Twin:
        """Record t, made from `used`; `pool`: later ops may take it (it must be a contiguous 3-D F32 tensor, what
        every recipe expects, so that no ggml assertion aborts the process). Returns t."""
        self.consumed.update(id(u.py) for u in used)
        if pool:
            assert t.py.type == F32 and t.py.ne[3] == 1 and t.py.is_contiguous(), t.py
            self.pool.append(t)
        self.made.append(t)
        self.n_nodes += nodes
        return t

    def both(self, py: Tensor, gg: str, *args: object, pool: bool = True, nodes: int = 1) -> Twin:
        """add() of the tensor pyggml built (`py`) and ggml_<gg>(ctx, *args) built, made from the Twin arguments."""
        t = self.b.both(py, gg, *args)
        return self.add(t, *(a for a in args if isinstance(a, Twin)), nodes=nodes, pool=pool)
