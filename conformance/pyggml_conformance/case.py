"""A conformance case: the op under test, a stable parameter string, and a builder that records its graph.

A case never holds tensors: `build` records a fresh graph into a `CaseBuilder` every time the case runs, once per
backend, so each run places its own tensors. Inputs are declared through the builder together with how their
random values are drawn (`pyggml_conformance.inputs`), so every backend reads identical input bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from pyggml import ops
from pyggml.backend.protocol import Device
from pyggml.context import Context
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import INT_TYPES, GGMLType, parse_type
from pyggml_conformance.inputs import Init, default_init


class Compare(Enum):
    NMSE = "nmse"
    """normalised mean squared error under a threshold; NaN fails, infinities must match"""
    EXACT = "exact"
    """every value equal"""
    SET = "set"
    """each row holds the same values in any order (TOP_K)"""


DEFAULT_NMSE = 1e-7
OP_NMSE: dict[Op, float] = {
    Op.MUL_MAT: 5e-4,
    Op.MUL_MAT_ID: 5e-4,
    Op.OUT_PROD: 5e-4,
    Op.FLASH_ATTN_EXT: 5e-4,
    Op.SOFT_MAX: 1e-6,
}
OP_COMPARE: dict[Op, Compare] = {
    Op.ARGMAX: Compare.EXACT,
    Op.COUNT_EQUAL: Compare.EXACT,
    Op.ARGSORT: Compare.EXACT,
    Op.TOP_K: Compare.SET,
}

BuildFn = Callable[["CaseBuilder"], Tensor | Sequence[Tensor]]
Scenario = Callable[[Device], str | None]
"""A misuse scenario run on a device (lifetime, concurrency): None when the device behaved, else what went wrong."""


@dataclass(frozen=True)
class Case:
    op: Op
    params: str
    """`key=value,...`: stable across runs, used in the name and matched by --params."""
    build: BuildFn = field(compare=False, repr=False)
    sub: str | None = None
    """Sub-op of UNARY / GLU (e.g. 'SILU'), so --op accepts it too."""
    threshold: float | None = None
    """NMSE threshold overriding the op's default."""
    compare: Compare | None = None
    source: str = "suite"
    """'suite' or the case file a replayed case came from."""
    nan_ok: bool = False
    """NaN may appear in the output where the reference has NaN (and only there): cases with NaN inputs."""
    expect_error: bool = False
    """Computing must raise a PyGGMLError on the reference and on every backend (ids out of range); guard bytes and
    inputs are still checked, nothing is compared."""
    scenario: Scenario | None = field(default=None, compare=False, repr=False)
    """Run this on each device instead of comparing the built graph (which only decides support)."""

    @property
    def name(self) -> str:
        return f"{self.op.name}({self.params})"

    def max_nmse(self) -> float:
        if self.threshold is not None:
            return self.threshold
        return OP_NMSE.get(self.op, DEFAULT_NMSE)

    def compare_mode(self, out: Tensor) -> Compare:
        if self.compare is not None:
            return self.compare
        mode = OP_COMPARE.get(self.op)
        if mode is not None:
            return mode
        return Compare.EXACT if out.type in INT_TYPES else Compare.NMSE


# ---- parameter strings ------------------------------------------------------------------------------------------


def _fmt(v: object) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, GGMLType):
        return str(v)
    if isinstance(v, Enum):
        return v.name.lower()
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list | tuple):
        return "[" + ",".join(_fmt(x) for x in v) + "]"
    return str(v)


def fmt_params(**kw: object) -> str:
    """`a=1,b=f32,ne=[4,5,1,1]` in the given order (ggml's VARS_TO_STR style)."""
    return ",".join(f"{k}={_fmt(v)}" for k, v in kw.items())


# ---- the builder a case records its graph into ------------------------------------------------------------------


class CaseBuilder:
    """Creates a case's input tensors (named in0, in1, ... in creation order) and remembers how to fill them."""

    def __init__(self, ctx: Context | None = None) -> None:
        self.ctx = ctx if ctx is not None else Context(no_alloc=True)
        self.inits: dict[str, Init] = {}

    def input(self, ttype: GGMLType | str, ne: Sequence[int], init: Init | None = None) -> Tensor:
        """A new leaf of type `ttype` and shape `ne` (ggml order), filled with `init` (default: uniform in
        [-1, 1] for floats, small integers for integer types)."""
        tt = parse_type(ttype)
        t = self.ctx.new_tensor(tt, *ne, name=f"in{len(self.inits)}")
        self.inits[t.name] = init if init is not None else default_init(tt)
        return t

    def permuted(self, ttype: GGMLType | str, ne: Sequence[int], perm: Sequence[int],
                 init: Init | None = None) -> Tensor:
        """A tensor of shape `ne` whose memory is laid out in another dim order: a leaf with ne'[i] = ne[perm[i]]
        permuted back with ggml_permute(perm). perm (0, 1, 2, 3) gives a plain contiguous leaf."""
        p = tuple(perm)
        full = tuple(ne) + (1,) * (4 - len(ne))
        if p == (0, 1, 2, 3):
            return self.input(ttype, full, init)
        leaf = self.input(ttype, [full[p[i]] for i in range(4)], init)
        return ops.permute(leaf, p[0], p[1], p[2], p[3])

    def strided(self, ttype: GGMLType | str, ne: Sequence[int], pad: Sequence[int] = (0, 1, 0, 0),
                offset: int = 0, init: Init | None = None) -> Tensor:
        """A view of shape `ne` into a bigger leaf (ne + pad in each dim), starting `offset` elements into dim 0:
        rows (and planes) are strided, so the tensor is not contiguous."""
        full = list(ne) + [1] * (4 - len(ne))
        big = [full[i] + (pad[i] if i < len(pad) else 0) for i in range(4)]
        if offset:
            big[0] += offset
        leaf = self.input(ttype, big, init)
        tr = leaf.type.traits
        byte_off = offset // tr.blck_size * tr.type_size
        return ops.view(leaf, tuple(full), leaf.nb[1:], byte_off)

    def sub_view(self, t: Tensor, ne: Sequence[int], offset_elems: int = 0) -> Tensor:
        """A view of t's first ne elements in each dim (t's strides kept), starting offset_elems into dim 0."""
        tr = t.type.traits
        full = tuple(ne) + (1,) * (4 - len(ne))
        return ops.view(t, full, t.nb[1:], offset_elems // tr.blck_size * tr.type_size)
