"""Split states of llama-family weights and KV caches, by tensor name: the callback this example gives the meta
device (pyggml.backend.meta.MetaDevice takes any `Tensor -> SplitState` function; the core knows no model).

| tensor                                   | state    | unit                                   |
| ---------------------------------------- | -------- | -------------------------------------- |
| blk.N.attn_q.weight                      | AXIS_1   | the query heads of a group of KV heads |
| blk.N.attn_k.weight, attn_v.weight       | AXIS_1   | KV heads                               |
| blk.N.attn_qkv.weight                    | AXIS_1   | segments: Q once, K/V twice            |
| blk.N.attn_{q,k,v,qkv}.bias              | AXIS_0   | as the weight's output dimension       |
| blk.N.attn_output.weight                 | AXIS_0   | as attn_q (rows of whole heads)        |
| blk.N.attn_sinks.weight                  | AXIS_0   | query heads                            |
| blk.N.ffn_gate.weight, ffn_up.weight     | AXIS_1   | FFN columns (a quantisation block)     |
| blk.N.ffn_gate_up.weight                 | AXIS_1   | segments: gate and up                  |
| blk.N.ffn_{gate,up}.bias                 | AXIS_0   | FFN columns                            |
| blk.N.ffn_down.weight                    | AXIS_0   | FFN columns                            |
| output.weight / output.bias              | AXIS_1/0 | vocabulary rows                        |
| cache_k_lN, cache_v_lN                   | AXIS_0   | KV heads (n_embd_k_gqa split by heads) |
| anything else (embeddings, norms, ...)   | MIRRORED |                                        |

Column-parallel Q/K/V and gate/up followed by row-parallel attn_output and ffn_down give two allreduces per
layer. Every tensor of layer N uses the same shares, with the remainder rotated by N across devices; a group of
KV heads is the smallest that keeps attn_output's rows in whole quantisation blocks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import lcm

from pyggml.backend.meta import MIRRORED, Axis, MetaDevice, SplitState, segmented, split, split_shares
from pyggml.backend.meta.spmd import Spmd
from pyggml.backend.protocol import Device
from pyggml.errors import ShapeError
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_llama.hparams import HParams

COLUMN_PARALLEL: tuple[tuple[str, str], ...] = (
    (r"attn_q", "q"),
    (r"attn_[kv]", "kv"),
    (r"attn_qkv", "qkv"),
    (r"ffn_(gate|up)", "ff"),
)
"""(name inside blk.N. without .weight/.bias, unit group) of the column-parallel projections: the weight splits
its output columns (AXIS_1) and the bias, one entry per output, its entries (AXIS_0), in the same units."""

TABLE: tuple[tuple[str, Axis, str], ...] = (
    *((stem + r"\.weight", Axis.AXIS_1, group) for stem, group in COLUMN_PARALLEL),
    *((stem + r"\.bias", Axis.AXIS_0, group) for stem, group in COLUMN_PARALLEL),
    (r"attn_output\.weight", Axis.AXIS_0, "q"),
    (r"attn_sinks\.weight", Axis.AXIS_0, "heads"),
    (r"ffn_gate_up\.weight", Axis.AXIS_1, "ff2"),
    (r"ffn_down\.weight", Axis.AXIS_0, "ff"),
)
"""(name inside blk.N., axis, unit group) of the split layer tensors; see the module docstring."""

_LAYER = re.compile(r"^blk\.(\d+)\.(.+)$")
_CACHE = re.compile(r"^cache_[kv]_l(\d+)$")
_OUTPUT = {"output.weight": Axis.AXIS_1, "output.bias": Axis.AXIS_0}
_TABLE = [(re.compile(p + "$"), axis, group) for p, axis, group in TABLE]


@dataclass(frozen=True)
class LlamaSplit:
    """The split state callback of a llama model on `n_devices` devices (shares from `tensor_split`)."""

    dims: HParams
    n_devices: int
    tensor_split: tuple[float, ...] | None = None
    weight_types: Mapping[str, GGMLType] | None = None
    """GGUF tensor types by name: their block sizes set the units (default: unquantised)."""

    def __post_init__(self) -> None:
        d = self.dims
        if d.n_head_kv <= 0 or d.n_head % d.n_head_kv:
            raise ShapeError(f"tensor split: {d.n_head} query heads do not group over {d.n_head_kv} KV heads")
        ratios = self.tensor_split or (1.0,) * self.n_devices
        if len(ratios) != self.n_devices:
            raise ShapeError(f"tensor split {list(ratios)} has {len(ratios)} entries for {self.n_devices} devices")
        used = sum(r > 0 for r in ratios)
        groups = d.n_head_kv // self.heads_per_unit
        if used > groups:
            raise ShapeError(f"tensor split: {used} devices but only {groups} groups of KV heads ({d.n_head_kv} KV "
                             f"heads, {self.heads_per_unit} per group): every device needs whole KV heads")
        if d.n_ff % self.ff_unit:
            raise ShapeError(f"tensor split: n_ff {d.n_ff} is not a multiple of {self.ff_unit}, the block size of "
                             f"the FFN weights split on axis 0")

    # ---- units --------------------------------------------------------------------------------------------

    def _blck(self, suffix: str) -> int:
        types = self.weight_types or {}
        return lcm(1, *(t.traits.blck_size for n, t in types.items() if n.endswith(suffix)))

    @property
    def n_gqa(self) -> int:
        return self.dims.n_head // self.dims.n_head_kv

    @property
    def heads_per_unit(self) -> int:
        """KV heads per indivisible group: attn_output's rows of a group must be whole quantisation blocks."""
        d, blck = self.dims, self._blck("attn_output.weight")
        m = 1
        while (m * self.n_gqa * d.head_dim) % blck and m <= d.n_head_kv:
            m += 1
        if m > d.n_head_kv or d.n_head_kv % m:
            raise ShapeError(f"tensor split: attn_output rows come in blocks of {blck} elements, which no whole "
                             f"group of KV heads ({self.n_gqa * d.head_dim} rows per head) fills")
        return m

    @property
    def ff_unit(self) -> int:
        return self._blck("ffn_down.weight")

    def unit(self, group: str) -> int:
        d, m = self.dims, self.heads_per_unit
        return {"kv": m * d.head_dim, "q": m * self.n_gqa * d.head_dim, "heads": m * self.n_gqa,
                "ff": self.ff_unit, "vocab": 1}[group]

    def shares(self, total: int, group: str, rotation: int, name: str) -> tuple[int, ...]:
        return split_shares(total, self.n_devices, self.tensor_split, self.unit(group), rotation,
                            f"tensor '{name}'")

    # ---- the callback -------------------------------------------------------------------------------------

    def __call__(self, t: Tensor) -> SplitState:
        name = t.name
        m = _CACHE.match(name)
        if m:
            return self._split(t, Axis.AXIS_0, "kv", int(m.group(1)))
        if name in _OUTPUT:
            return self._split(t, _OUTPUT[name], "vocab", 0)
        m = _LAYER.match(name)
        if m is None:
            return MIRRORED
        il, rest = int(m.group(1)), m.group(2)
        for rx, axis, group in _TABLE:
            if rx.match(rest):
                return self._split(t, axis, group, il)
        return MIRRORED

    def _split(self, t: Tensor, axis: Axis, group: str, il: int) -> SplitState:
        d, total = self.dims, t.ne[axis]
        if group == "qkv":
            n_q, n_kv = d.n_head * d.head_dim, d.n_head_kv * d.head_dim
            if total != n_q + 2 * n_kv:
                raise ShapeError(f"tensor split: '{t.name}' has {total} rows, not Q {n_q} + K/V 2 x {n_kv}")
            return segmented(axis, [(self.shares(n_q, "q", il, t.name), 1), (self.shares(n_kv, "kv", il, t.name), 2)])
        if group == "ff2":
            if total != 2 * d.n_ff:
                raise ShapeError(f"tensor split: '{t.name}' has {total} rows, not gate + up 2 x {d.n_ff}")
            return segmented(axis, [(self.shares(d.n_ff, "ff", il, t.name), 2)])
        return split(axis, self.shares(total, group, il, t.name))


def llama_meta_device(devices: Sequence[Device], dims: HParams, tensor_split: Sequence[float] | None = None,
                      weight_types: Mapping[str, GGMLType] | None = None, spmd: Spmd | None = None) -> MetaDevice:
    """A meta device over `devices` whose weights and KV caches follow the llama table (`spmd`: the devices span
    processes, see pyggml.backend.meta.spmd)."""
    ts = tuple(float(x) for x in tensor_split) if tensor_split is not None else None
    return MetaDevice(devices, LlamaSplit(dims, len(devices), ts, weight_types), spmd=spmd)
