"""One random twin graph: recipes drawn by weight over a pool of tensors, built in both libraries, reproducible
from a seed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pyggml.graph import Graph
from pyggml_testing.alloc_twin import elementwise, layout, model
from pyggml_testing.alloc_twin.ggml import GRAPH_SIZE, Ggml, Twin, TwinBuilder
from pyggml_testing.alloc_twin.pool import DIMS0, DIMS1, I32, Pool

Recipe = Callable[[Pool, Twin], Twin | None]
RECIPES: tuple[tuple[float, Recipe], ...] = (
    (0.22, elementwise.same_shape), (0.18, elementwise.binary), (0.12, model.matmul), (0.05, layout.transpose),
    (0.06, layout.view), (0.05, layout.reshape), (0.06, model.attention), (0.04, elementwise.glu),
    (0.05, elementwise.copy), (0.04, elementwise.acc_set), (0.05, layout.rows), (0.04, layout.shape_ops),
    (0.04, layout.reduce), (0.05, elementwise.backward), (0.04, model.kv_attention), (0.04, model.spatial),
    (0.04, model.conv),
)
"""(weight, recipe): a step applies one recipe to a drawn tensor (a same-shaped op when it does not apply)."""
_CUMULATIVE = np.cumsum([w for w, _ in RECIPES]) / sum(w for w, _ in RECIPES)


def open_ggml(path: Path) -> Ggml:
    """ggml's base library with every constructor the twin graphs call declared."""
    g = Ggml(path)
    g.declare_ops(elementwise.op_args())
    return g


@dataclass
class TwinGraph:
    """A random graph in both libraries (the pyggml graph and the ggml cgraph pointer); `close` frees ggml's
    contexts. `index_bounds`: per I32 leaf (by name), the exclusive bound of its values."""

    builder: TwinBuilder
    py: Graph
    gg: int
    index_bounds: dict[str, int] = field(default_factory=dict)

    def close(self) -> None:
        self.builder.close()


def _step(g: Pool) -> None:
    a = g.pick()
    i = min(int(np.searchsorted(_CUMULATIVE, g.rng.random(), side="right")), len(RECIPES) - 1)
    if RECIPES[i][1](g, a) is None:
        elementwise.same_shape(g, a)
    if g.chance(0.08):
        g.b.set_output(g.pool[-1])


def random_twin_graph(ggml: Ggml, seed: int, n_nodes: int | None = None) -> TwinGraph:
    """A random graph of about `n_nodes` nodes (20-120 when not given) in both libraries, reproducible from
    `seed`. `ggml` must come from `open_ggml`."""
    rng = np.random.default_rng(seed)
    target = int(rng.integers(20, 121)) if n_nodes is None else n_nodes
    b = TwinBuilder(ggml)
    g = Pool(b, rng)
    with b.pctx:
        for _ in range(int(rng.integers(1, 4))):
            ne = (int(rng.choice(DIMS0)), int(rng.choice(DIMS1)), int(rng.choice((1, 1, 2, 4))))
            g.pool.append(g.leaf(ne, ("input",), (1.0,)))
        while g.n_nodes < target:
            _step(g)
    b.finish(ggml.alignment)
    sinks = [t for t in g.made if id(t.py) not in g.consumed]
    b.set_output(sinks[-1])
    py = Graph(GRAPH_SIZE)
    gg = int(ggml.ggml_new_graph_custom(b.gctx, GRAPH_SIZE, False))
    for t in sinks:
        py.build_forward_expand(t.py)
        ggml.ggml_build_forward_expand(gg, t.gg)
    return TwinGraph(b, py, gg, g.index_bounds)


def fill_leafs(tg: TwinGraph) -> None:
    """Write every placed leaf (weights too): floats in [0.5, 1.5), indices within their bounds."""
    for k, t in enumerate(tg.py.leafs):
        if t.buffer is None or t.view_src is not None:
            continue
        rng = np.random.default_rng(k)
        if t.type == I32:
            t.set(rng.integers(0, tg.index_bounds.get(t.name, 1), t.nelements()).astype(np.int32))
        else:
            t.set(rng.uniform(0.5, 1.5, t.nelements()).astype(np.float32))
