"""Passes 1-4 of the scheduler: give every leaf and node of a graph a backend id, with a cause tag.

backend_of maps id(tensor) -> backend id (0 = highest priority, last = CPU); cause maps id(tensor) -> tag. Entries
present on entry (user assignments, cause "usr") are kept. Tags:

    1.dst  the tensor is pre-allocated: highest-priority backend that can use its buffer and run its op
    1.vsrc the same, through the view's data owner
    1.inp  graph INPUT: the last (CPU) backend
    1.wgt<i> follows the weight in src slot i (not for ROPE and FLASH_ATTN_EXT)
    1.off  a host weight on the CPU, offloaded to a higher-priority backend that asks for the op (offload_op)
    2.sup  taken from a neighbour by the expansion sweeps (only where that backend supports the op)
    3.upg  upgraded to a higher-priority backend with the same buffer type
    3.best the backend supporting the op with the most srcs it can read
    4.vsrc a view takes its data owner's backend; 4.cur a src takes its consumer's; 4.sup first supporting backend
"""

from __future__ import annotations

from collections.abc import Iterable

from pyggml.backend.protocol import BufferUsage
from pyggml.backend.sched.table import BackendTable
from pyggml.errors import UnsupportedOpError
from pyggml.graph import Graph
from pyggml.ops.base import VIEW_OPS, Op, describe
from pyggml.tensor import Tensor, TensorFlag

_NO_WEIGHT_RULE = frozenset({Op.ROPE, Op.FLASH_ATTN_EXT})
"""Ops whose small side tensors (rope freq factors, attention sinks) must not decide their backend."""


def weight_owner(t: Tensor) -> Tensor | None:
    """t's data owner when it lives in a WEIGHTS buffer (views of weights count as weights)."""
    owner = t.view_src if t.view_src is not None else t
    buf = owner.buffer
    return owner if buf is not None and buf.usage is BufferUsage.WEIGHTS else None


def assign_backends(
    tab: BackendTable, graph: Graph, backend_of: dict[int, int], cause: dict[int, str], op_offload: bool
) -> None:
    """Run passes 1-4 over `graph`; afterwards every leaf, node and src has an entry in backend_of."""
    nodes = graph.nodes
    compute = [t for t in nodes if t.op not in VIEW_OPS]
    _pass1(tab, graph.leafs, backend_of, cause, op_offload)
    _pass1(tab, nodes, backend_of, cause, op_offload)
    # pass 2: spread accelerators first (a CPU node stops the run), then any backend
    _expand(tab, compute, backend_of, cause, tab.last)
    _expand(tab, reversed(compute), backend_of, cause, tab.last)
    _expand(tab, compute, backend_of, cause, -1)
    _expand(tab, reversed(compute), backend_of, cause, -1)
    _pass3(tab, compute, backend_of, cause)
    _pass4(tab, nodes, backend_of, cause)
    for t in graph.leafs:  # a leaf no node reads (a graph that is just a leaf)
        if id(t) not in backend_of:
            backend_of[id(t)] = tab.last
            cause[id(t)] = "4.none"


def _pass1(tab: BackendTable, tensors: list[Tensor], backend_of: dict[int, int], cause: dict[int, str],
           op_offload: bool) -> None:
    for t in tensors:
        k = id(t)
        if k in backend_of:
            continue
        b, tag = _from_cur(tab, t, op_offload)
        if b >= 0:
            backend_of[k] = b
            cause[k] = tag


def _from_cur(tab: BackendTable, t: Tensor, op_offload: bool) -> tuple[int, str]:
    buf = tab.preallocated(t)
    if buf is not None:
        owner = t.view_src if t.view_src is not None else t
        b = tab.from_buffer(owner, t)
        if b < 0:
            dev = buf.buft.device
            where = f"buffer type '{buf.buft.name}'" + (f" of device '{dev.name}'" if dev is not None else "")
            via = "" if owner is t else f" (a view of '{owner.name}')"
            raise UnsupportedOpError(
                f"pre-allocated tensor '{t.name}'{via} lives in {where}, and no scheduler backend that can use "
                f"that buffer runs its op {t.op.name} ({describe(t)}); backends: {tab.names()}"
            )
        return b, "1.dst" if owner is t else "1.vsrc"
    if t.flags & TensorFlag.INPUT:
        return tab.last, "1.inp"
    if t.op in _NO_WEIGHT_RULE:
        return -1, ""
    for i, s in enumerate(t.src):
        if s is None:
            continue
        w = weight_owner(s)
        if w is None:
            continue
        b = tab.from_buffer(w, t)
        assert w.buffer is not None
        if op_offload and b == tab.last and w.buffer.buft.is_host:
            for o in range(tab.last):
                if tab.supports_op(o, t) and tab.devices[o].offload_op(t):
                    return o, "1.off"
        return b, f"1.wgt{i}"
    return -1, ""


def _expand(tab: BackendTable, order: Iterable[Tensor], backend_of: dict[int, int], cause: dict[int, str],
            stop_at: int) -> None:
    """One sweep: unassigned nodes take the running backend if it supports them. A node assigned to `stop_at`
    (the CPU in the first two sweeps, none in the last two) resets the running backend."""
    cur = -1
    get = backend_of.get
    for t in order:
        b = get(id(t), -1)
        if b >= 0:
            cur = -1 if b == stop_at else b
        elif cur >= 0 and tab.supports_op(cur, t):
            backend_of[id(t)] = cur
            cause[id(t)] = "2.sup"


def _pass3(tab: BackendTable, compute: list[Tensor], backend_of: dict[int, int], cause: dict[int, str]) -> None:
    bufts = tab.bufts
    for t in compute:
        k = id(t)
        a = backend_of.get(k, -1)
        if a < 0:
            best, n_best = -1, -1
            for b in range(tab.n):
                if not tab.supports_op(b, t):
                    continue
                n = sum(1 for s in t.src if s is not None and _is_assigned(s, backend_of)
                        and tab.buffer_supported(s, b, backend_of))
                if n > n_best:
                    best, n_best = b, n
            if best >= 0:
                backend_of[k] = best
                cause[k] = "3.best"
            continue
        if cause.get(k) == "usr":
            continue  # the user's choice is not second-guessed
        for b in range(a):
            if bufts[b] is bufts[a] and tab.supports_op(b, t) and all(
                s is None or tab.buffer_supported(s, b, backend_of) for s in t.src
            ):
                backend_of[k] = b
                cause[k] = "3.upg"
                break


def _is_assigned(s: Tensor, backend_of: dict[int, int]) -> bool:
    return id(s) in backend_of or (s.view_src is not None and id(s.view_src) in backend_of)


def _pass4(tab: BackendTable, nodes: list[Tensor], backend_of: dict[int, int], cause: dict[int, str]) -> None:
    for t in nodes:
        k = id(t)
        b = backend_of.get(k, -1)
        if b < 0 and t.view_src is not None:
            b = backend_of.get(id(t.view_src), -1)
            if b >= 0:
                backend_of[k] = b
                cause[k] = "4.vsrc"
        if b < 0:
            b = next((c for c in range(tab.n) if tab.supports_op(c, t)), -1)
            if b < 0:
                raise UnsupportedOpError(
                    f"no scheduler backend supports op {t.op.name} of node {describe(t)} with srcs "
                    f"[{', '.join(describe(s) for s in t.src if s is not None)}]; backends: {tab.names()}"
                )
            backend_of[k] = b
            cause[k] = "4.sup"
        elif cause.get(k) in ("usr", "1.inp") and not tab.supports_op(b, t):
            raise UnsupportedOpError(
                f"node {describe(t)} was put on backend '{tab.backends[b].name}' ({cause[k]}), which does not "
                f"support op {t.op.name}"
            )
        for s in t.src:
            if s is None or id(s) in backend_of:
                continue
            if s.view_src is not None:
                sb = backend_of.get(id(s.view_src), -1)
                backend_of[id(s)] = sb if sb >= 0 else b
                cause[id(s)] = "4.vsrc"
            else:
                backend_of[id(s)] = b
                cause[id(s)] = "4.cur"
