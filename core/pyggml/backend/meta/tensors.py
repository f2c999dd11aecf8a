"""The meta device's table of tensors: each meta tensor's split state and its per-device simple tensors.

Stored tensors (op NONE, not views) get their state from the device's callback, except tensors of compute buffers
(the scheduler's input copies), which are MIRRORED. Every other tensor derives its state from its srcs through the
op's rule (rules.py), srcs taken as synchronised. Entries are cached per tensor and dropped when the tensor's
placement, shape, op or srcs change.

A simple tensor is what one device computes: the split dimension holds the device's extent and every larger
stride shrinks by the same ratio; it lives at the meta tensor's offset in that device's part of the meta buffer
(a view: in its data owner's simple tensor, at the offset scaled like the owner's split).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pyggml.backend.meta.rules import SplitRuleError, derive
from pyggml.backend.meta.spmd import Spmd
from pyggml.backend.meta.state import MIRRORED, SplitState, check_state
from pyggml.backend.protocol import Buffer, BufferUsage
from pyggml.errors import AllocationError, ShapeError
from pyggml.ops.base import Op
from pyggml.ops.layout import ContParams, ViewParams
from pyggml.tensor import MAX_DIMS, Ne, Tensor

SplitStateFn = Callable[[Tensor], SplitState]
"""The user's choice of state for a stored tensor (weights, KV caches); the llama example's is
pyggml_llama.split_states.LlamaSplit."""


def axis_bytes(t: Tensor, axis: int, n: int) -> int:
    """Bytes of n elements along `axis` of t (whole blocks on axis 0 of quantised types)."""
    if axis == 0:
        tr = t.type.traits
        return n // tr.blck_size * tr.type_size
    return n * t.nb[axis]


def _snapshot(t: Tensor) -> tuple[Any, ...]:
    buf = t.buffer
    return (buf, None if buf is None else buf.usage, t.offset, t.type, t.ne, t.nb, t.op, t.params, t.src,
            t.view_src, t.view_offs)


@dataclass(eq=False, slots=True)
class Entry:
    snap: tuple[Any, ...]
    states: dict[bool, SplitState] = field(default_factory=dict)
    simple: list[Tensor] | None = None
    reduced: bool = False
    """A PARTIAL node whose allreduce ran: it holds the full values on every device."""
    pending: bool = False
    """A node inside a delayed reduction: it holds per-device partial values."""


class TensorTable:
    def __init__(self, n_devices: int, split_state: SplitStateFn | None, is_meta: Callable[[Buffer], bool],
                 simple_buffer: Callable[[Buffer, int], Buffer],
                 packed_offset: Callable[[Buffer, int, int, int], int] | None = None) -> None:
        self.n = n_devices
        self.packed_offset = packed_offset
        """(buffer, device, tensor offset, slice bytes) -> where a stored tensor's slice lives in the device's part
        (None: at the tensor's own offset)."""
        self.spmd: Spmd | None = None
        """Set when the devices span processes: which are this process's (transfer.py reads and writes those)."""
        self.split_state_fn = split_state
        self.is_meta = is_meta
        self.simple_buffer = simple_buffer
        self._entries: weakref.WeakKeyDictionary[Tensor, Entry] = weakref.WeakKeyDictionary()

    def entry(self, t: Tensor) -> Entry:
        snap = _snapshot(t)
        e = self._entries.get(t)
        if e is None or e.snap != snap:
            e = self._entries[t] = Entry(snap)
        return e

    def forget(self, t: Tensor) -> None:
        self._entries.pop(t, None)

    # ---- states -------------------------------------------------------------------------------------------

    def state(self, t: Tensor, sync: bool = True) -> SplitState:
        """t's split state; sync=False shows PARTIAL where an allreduce is still due."""
        e = self.entry(t)
        st = e.states.get(sync)
        if st is None:
            if t.op is not Op.NONE or t.view_src is not None:
                _resolve(t, lambda x: True in self.entry(x).states, self._state_deps, self._make_state)
            st = e.states.get(sync)
            if st is None:
                st = e.states[sync] = self._compute(t, sync)
        return st

    def _state_deps(self, t: Tensor) -> Iterable[Tensor]:
        if t.op is Op.NONE and t.view_src is None:
            return ()
        return [s for s in t.src if s is not None] or ([t.view_src] if t.view_src is not None else [])

    def _make_state(self, t: Tensor) -> None:
        self.entry(t).states[True] = self._compute(t, True)

    def _compute(self, t: Tensor, sync: bool) -> SplitState:
        if t.op is Op.NONE and t.view_src is None:
            return self._stored(t)
        if t.op is Op.NONE:  # a plain view (view_tensor, the scheduler's dependencies): same layout
            src = t.src[0] if t.src and t.src[0] is not None else t.view_src
            assert src is not None
            return self.state(src, True)
        states = [None if s is None else self.state(s, True) for s in t.src]
        return derive(t, states, sync)

    def _stored(self, t: Tensor) -> SplitState:
        buf = t.buffer
        if buf is None:
            raise AllocationError(f"tensor '{t.name}' has no buffer; a meta device cannot tell its split state")
        if not self.is_meta(buf):
            raise SplitRuleError(f"tensor split: tensor '{t.name}' lives in buffer type '{buf.buft.name}', not in "
                                 f"a buffer of this meta device (the scheduler copies inputs into one)")
        if buf.usage is BufferUsage.COMPUTE or t.nelements() == 0 or self.split_state_fn is None:
            return MIRRORED
        return check_state(t, self.split_state_fn(t), self.n, "split state callback")

    # ---- simple tensors ------------------------------------------------------------------------------------

    def simple(self, t: Tensor) -> list[Tensor]:
        """t's simple tensor on every device (created on first use)."""
        e = self.entry(t)
        if e.simple is None:
            _resolve(t, lambda x: self.entry(x).simple is not None, self._simple_deps, self._make_simple)
            assert e.simple is not None
        return e.simple

    def _simple_deps(self, t: Tensor) -> list[Tensor]:
        deps = [s for s in t.src if s is not None and s.data_owner.buffer is not None
                and self.is_meta(s.data_owner.buffer)]
        if t.view_src is not None:
            deps += [t.view_src, _viewed(t)]
        return deps

    def _make_simple(self, t: Tensor) -> None:
        owner = t.data_owner
        if owner.buffer is None or not self.is_meta(owner.buffer):
            raise SplitRuleError(f"tensor split: tensor '{t.name}' is not in a buffer of this meta device")
        st = self.state(t, True)
        for s in t.src:
            if s is not None and (s.data_owner.buffer is None or not self.is_meta(s.data_owner.buffer)):
                raise SplitRuleError(f"tensor split: src '{s.name}' of node '{t.name}' ({t.op.name}) is not in a "
                                     f"buffer of this meta device")
        out = []
        for j in range(self.n):
            ne, nb = local_layout(t, st, j)
            srcs = tuple(None if s is None else self.simple(s)[j] for s in t.src)
            if t.view_src is not None:
                root = self.simple(t.view_src)[j]
                offs = self._local_offset(t, j)
                rel = offs - self.simple(_viewed(t))[j].view_offs
                tj = Tensor(t.type, ne, nb, op=t.op, params=_local_params(t, ne, rel), src=srcs, view_src=root,
                            view_offs=offs)
                tj.buffer, tj.offset = root.buffer, root.offset + offs
            else:
                tj = Tensor(t.type, ne, nb, op=t.op, params=_local_params(t, ne, 0), src=srcs)
                buf = t.buffer
                assert buf is not None
                tj.buffer, tj.offset = self.simple_buffer(buf, j), t.offset
                if t.op is Op.NONE and buf.usage is not BufferUsage.COMPUTE and self.packed_offset is not None:
                    tj.offset = self.packed_offset(buf, j, t.offset, tj.nbytes())
            tj.flags, tj.name = t.flags, t.name
            assert tj.buffer is not None
            tj.buffer.init_tensor(tj)
            out.append(tj)
        self.entry(t).simple = out

    def _local_offset(self, t: Tensor, j: int) -> int:
        """Device j's view offset of view t: the offset into the viewed tensor, scaled past split slices."""
        viewed = _viewed(t)
        rel = t.view_offs - viewed.view_offs
        vj = self.simple(viewed)[j]
        sv = self.state(viewed, True)
        if sv.is_split and rel:
            a = int(sv.axis)
            span = axis_bytes(viewed, a, viewed.ne[a])
            if span:
                q, rem = divmod(rel, span)
                rel = q * axis_bytes(viewed, a, sv.extent(j)) + rem
        return vj.view_offs + rel


def _viewed(t: Tensor) -> Tensor:
    """The tensor whose data a view-producing node `t` shows (its view_src's chain starts there)."""
    i = 1 if t.op is Op.CPY else 0
    s = t.src[i] if len(t.src) > i else None
    if s is None:
        assert t.view_src is not None
        return t.view_src
    return s


def local_layout(t: Tensor, st: SplitState, j: int) -> tuple[Ne, Ne]:
    """(ne, nb) of device j's simple tensor of t."""
    if not st.is_split:
        return t.ne, t.nb
    a = int(st.axis)
    e, full = st.extent(j), t.ne[a]
    ne, nb = list(t.ne), list(t.nb)
    ne[a] = e
    if full:
        for i in range(MAX_DIMS):
            if t.nb[i] > t.nb[a]:
                if t.nb[i] * e % full:
                    raise ShapeError(f"tensor split: stride {t.nb[i]} of '{t.name}' does not scale to {e}/{full}")
                nb[i] = t.nb[i] * e // full
    return (ne[0], ne[1], ne[2], ne[3]), (nb[0], nb[1], nb[2], nb[3])


def _local_params(t: Tensor, ne: Ne, rel_offs: int) -> Any:
    if t.op is Op.CONT and isinstance(t.params, ContParams):
        return ContParams(ne)
    if t.op is Op.VIEW and isinstance(t.params, ViewParams):
        return ViewParams(rel_offs)
    return t.params


def _resolve(t: Tensor, done: Callable[[Tensor], bool], deps: Callable[[Tensor], Iterable[Tensor]],
             make: Callable[[Tensor], None]) -> None:
    """Make t after everything it depends on, without recursion (graphs are thousands of nodes deep)."""
    stack = [t]
    while stack:
        cur = stack[-1]
        if done(cur):
            stack.pop()
            continue
        todo = [d for d in deps(cur) if d is not cur and not done(d)]
        if todo:
            stack.extend(todo)
        else:
            stack.pop()
            make(cur)
