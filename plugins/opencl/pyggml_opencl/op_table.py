"""The one op table of the OpenCL backend: for each op, whether a node is supported and how it is launched.

`supports(node, dev)` and the plan builder both read `TABLE`, so support and dispatch cannot drift apart. A rule's
`build(node, b)` appends launches (kernel objects with their arguments already set) to the plan builder `b`;
it runs once per graph plan, never on replay. Family modules in `pyggml_opencl.ops` fill the table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pyggml.errors import ComputeError, PyGGMLError, UnsupportedOpError
from pyggml.ops.base import VIEW_OPS, Op
from pyggml.tensor import Tensor, TensorFlag
from pyggml.types import GGMLType
from pyggml_opencl.buffer import cl_mem_of
from pyggml_opencl.programs import ProgramSpec

if TYPE_CHECKING:
    from pyggml_opencl.device import OpenCLDevice

T = GGMLType
PLAIN = frozenset({T.F32, T.F16, T.BF16})
"""Float types every element-wise kernel reads and writes."""
QUANT32 = frozenset({T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.IQ4_NL})
"""Block types with 32-element blocks that kernels read element by element (quants.h)."""
KQUANTS = frozenset({T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K})
"""256-element block types read element by element (kquants.h): GET_ROWS, MUL_MAT (f32 activations)."""
QUANT_READ = QUANT32 | KQUANTS
QUANT_WRITE = QUANT32 | KQUANTS
"""Block types kernels can write (SET_ROWS / CPY): ggml's reference quantisers, byte for byte (quants.h,
kquantize.h)."""
WG = 64
"""Default work-group size of 1-D element launches and row reductions."""


def tname(t: GGMLType) -> str:
    """A type's name in the kernel dialect (the define value): f32, f16, q4_0 ..."""
    return str(t)


@dataclass(frozen=True, slots=True)
class Launch:
    kernel: Any
    gsize: tuple[int, ...]
    lsize: tuple[int, ...] | None
    node: Tensor


class PlanBuilder:
    """Collects the launches of one graph for one device."""

    def __init__(self, dev: OpenCLDevice) -> None:
        self.dev = dev
        self.launches: list[Launch] = []
        self.node: Tensor | None = None
        self.scratch_mems: list[Any] = []
        self._scratch_size = 0

    def scratch(self, nbytes: int) -> Any:
        """A device buffer of at least nbytes for intermediates of one node; the plan keeps it. Launches run in
        queue order, so nodes share one (a larger request replaces it for the nodes that follow)."""
        import pyopencl as cl

        if nbytes > self._scratch_size or not self.scratch_mems:
            self._scratch_size = max(nbytes, 1)
            self.scratch_mems.append(cl.Buffer(self.dev.ctx, cl.mem_flags.READ_WRITE, self._scratch_size))
        return self.scratch_mems[-1]

    def launch(self, spec: ProgramSpec, name: str, gsize: Sequence[int], lsize: Sequence[int] | None,
               *args: Any) -> None:
        if any(g == 0 for g in gsize):
            return
        k = self.dev.programs.kernel(spec, name)
        k.set_args(*args)
        assert self.node is not None
        self.launches.append(Launch(k, tuple(gsize), tuple(lsize) if lsize else None, self.node))

    def launch_1d(self, spec: ProgramSpec, name: str, n: int, *args: Any) -> None:
        """n work-items in groups of WG (kernels check the bound)."""
        self.launch(spec, name, (round_up(n, WG),), (WG,), *args)

    def error_args(self, what: str) -> list[Any]:
        """ERR_ARGS of a kernel that checks indices: the device's status word and a code naming this node."""
        assert self.node is not None
        return [self.dev.status_mem, np.int32(self.dev.error_site(self.node, what))]

    def tensor(self, t: Tensor | None) -> list[Any]:
        """The 10 TENSOR(x) kernel arguments of t: buffer, byte offset, ne[4], nb[4]."""
        if t is None:
            raise ComputeError(f"{self.dev.name}: node '{self._node_name()}' is missing a src")
        buf = t.buffer
        mem = cl_mem_of(buf) if buf is not None else None
        if mem is None:
            raise ComputeError(f"{self.dev.name}: node '{self._node_name()}': tensor '{t.name}' is in {buf!r}, "
                               "which this device cannot read (allocate it in the device's buffer type)")
        return [mem, np.int64(t.offset), *map(np.int64, t.ne), *map(np.int64, t.nb)]

    def _node_name(self) -> str:
        return self.node.name if self.node is not None else "?"


Supports = Callable[[Tensor, "OpenCLDevice"], bool]
Build = Callable[[Tensor, PlanBuilder], None]


@dataclass(frozen=True, slots=True)
class OpRule:
    supports: Supports
    build: Build


TABLE: dict[Op, OpRule] = {}


def rule(*ops: Op, supports: Supports) -> Callable[[Build], Build]:
    """Register `build` (and its support predicate) for ops."""

    def deco(fn: Build) -> Build:
        for op in ops:
            TABLE[op] = OpRule(supports, fn)
        return fn

    return deco


def supports(node: Tensor, dev: OpenCLDevice) -> bool:
    if node.op is Op.NONE or node.op in VIEW_OPS:
        return True
    r = TABLE.get(node.op)
    return r is not None and r.supports(node, dev)


def compute_nodes(nodes: Sequence[Tensor]) -> list[Tensor]:
    """The nodes a backend runs: COMPUTE-flagged, not NONE, not views."""
    return [n for n in nodes if n.flags & TensorFlag.COMPUTE and n.op is not Op.NONE and n.op not in VIEW_OPS]


def describe_node(node: Tensor) -> str:
    types = ", ".join(f"{s.type} {list(s.ne)}" for s in node.src if s is not None)
    return f"node '{node.name}' {node.op.name} -> {node.type} {list(node.ne)} from ({types})"


def build_nodes(table: dict[Op, OpRule], nodes: Sequence[Tensor], b: Any, dev: Any, who: str,
                backend: str) -> list[Tensor]:
    """Hand every compute node of `nodes` to its rule in `table`, which appends its launches to plan builder `b`
    (the OpenCL or the CUDA one); returns those nodes. UnsupportedOpError / ComputeError name `who` (the device or
    backend), the node and `backend` (the plugin)."""
    out = compute_nodes(nodes)
    for node in out:
        r = table.get(node.op)
        if r is None or not r.supports(node, dev):
            raise UnsupportedOpError(f"{who}: {describe_node(node)} is not supported by the {backend} backend")
        b.node = node
        try:
            r.build(node, b)
        except PyGGMLError:
            raise
        except Exception as e:
            raise ComputeError(f"{who}: preparing node '{node.name}' ({node.op.name}) failed: "
                               f"{type(e).__name__}: {e}") from e
    return out


def srcs(node: Tensor) -> list[Tensor]:
    return [s for s in node.src if s is not None]


def src(node: Tensor, i: int) -> Tensor:
    s = node.src[i] if i < len(node.src) else None
    if s is None:
        raise ComputeError(f"node '{node.name}' ({node.op.name}) has no src{i}")
    return s


def opt_src(node: Tensor, i: int) -> Tensor | None:
    return node.src[i] if i < len(node.src) else None


def round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def f32(x: float) -> np.float32:
    return np.float32(x)


def i32(x: int) -> np.int32:
    return np.int32(x)


def i64(x: int) -> np.int64:
    return np.int64(x)


def codes_prelude(prefix: str, names: Sequence[str]) -> str:
    """`#define PREFIX_NAME n` lines: the host's op codes, sent to kernels from this one definition."""
    return "".join(f"#define {prefix}_{n} {i}\n" for i, n in enumerate(names))


def load_families() -> None:
    from pyggml_opencl.ops import (  # noqa: F401  (each module registers its rules)
        attention,
        elementwise,
        layout,
        matmul,
        norm,
        reduce,
        rope,
        rows,
    )


load_families()
