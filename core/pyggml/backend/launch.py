"""The builder interface of backends whose op rules launch compiled kernels over an N-D range (OpenCL, CUDA):
a rule names a program (`spec`, the backend's kernel-source key), a kernel, a global and a local size and the
arguments, and the builder turns them into the backend's launches. One set of rules thus serves every backend
that compiles the same kernel texts; each backend only implements how a launch, a tensor argument, scratch
memory and an index-error site look on its API.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from pyggml.alloc.tensor_alloc import align_up
from pyggml.tensor import Tensor, shares_bytes

S = TypeVar("S")
"""The program spec type of a backend (which kernel file, specialised by which defines)."""

WG = 64
"""Work-group size of 1-D element launches and row reductions."""


round_up = align_up
"""n rounded up to a multiple of m (kernel global sizes); the allocator's helper under the launch-side name."""


def f32(x: float) -> np.float32:
    return np.float32(x)


def i32(x: int) -> np.int32:
    return np.int32(x)


def i64(x: int) -> np.int64:
    return np.int64(x)


DERIVED_SLOTS = 2
"""Values derived from tensors (`LaunchBuilder.derived`) a plan keeps at a time: enough for a layer's Q, K and V
(or gate and up) sharing their quantised input while the attention output's is made, say."""


class LaunchRecord(Protocol):
    @property
    def node(self) -> Tensor: ...


@dataclass(slots=True)
class _Derived:
    source: Tensor
    memory: Any
    nbytes: int
    since: int
    """How many launches the plan had when the value was made (the ones after it may have written `source`)."""


class LaunchBuilder(ABC, Generic[S]):
    """Collects the kernel launches of one graph; `node` is the node whose rule is running."""

    node: Tensor | None
    launches: Sequence[LaunchRecord]
    """The launches so far, each with the node whose result it writes."""

    def __init__(self) -> None:
        self._derived: OrderedDict[tuple[Hashable, int], _Derived] = OrderedDict()

    @abstractmethod
    def launch(self, spec: S, name: str, gsize: Sequence[int], lsize: Sequence[int] | None, *args: Any) -> None:
        """Launch kernel `name` of program `spec` over `gsize` work-items in groups of `lsize` (None: the
        backend's choice); a zero-sized range launches nothing."""

    def launch_1d(self, spec: S, name: str, n: int, *args: Any) -> None:
        """n work-items in groups of WG (kernels check the bound)."""
        self.launch(spec, name, (round_up(n, WG),), (WG,), *args)

    @abstractmethod
    def tensor(self, t: Tensor | None) -> list[Any]:
        """The 10 TENSOR(x) kernel arguments of t: memory, byte offset, ne[4], nb[4]."""

    @abstractmethod
    def scratch(self, nbytes: int) -> Any:
        """Device memory of at least nbytes for one node's intermediates, kept by the plan."""

    @abstractmethod
    def error_args(self, what: str) -> list[Any]:
        """ERR_ARGS of a kernel that checks indices: the status word and a code naming this node and `what`."""

    @abstractmethod
    def new_memory(self, nbytes: int) -> Any:
        """Device memory of nbytes of the plan's own, which no other request shares."""

    def derived(self, key: Hashable, source: Tensor, nbytes: int) -> tuple[Any, bool]:
        """Memory for a value derived from `source` (its rows quantised for a weight type's dot, say) that later
        nodes of this plan may share: (memory, True) where the caller launches the work that fills it; (memory,
        False) where an earlier node's launches filled it under the same key and none since wrote over `source`.
        The last DERIVED_SLOTS values are kept (the least recently asked for gives way, its memory reused)."""
        slots = self._derived
        entry = slots.get((key, id(source)))
        if entry is not None and entry.source is source and entry.nbytes >= nbytes and not any(
                shares_bytes(la.node, source) for la in self.launches[entry.since:]):
            slots.move_to_end((key, id(source)))
            return entry.memory, False
        if entry is not None:
            del slots[(key, id(source))]
        memory = None
        if len(slots) >= DERIVED_SLOTS:
            _, old = slots.popitem(last=False)
            memory = old.memory if old.nbytes >= nbytes else None
            nbytes = max(nbytes, old.nbytes)
        if memory is None:
            memory = self.new_memory(nbytes)
        slots[(key, id(source))] = _Derived(source, memory, nbytes, len(self.launches))
        return memory, True


class ErrorSites:
    """The codes (>= 1) kernels store in a device's status word when an index is out of range (the dialect's
    ERR_ARGS / CHECK_INDEX, Vulkan's DECLARE_STATUS), each naming a node and the violated condition. One code per
    distinct description, so replays and re-records of the same graph reuse codes instead of growing the list."""

    def __init__(self, lock: AbstractContextManager[Any] | None = None) -> None:
        """lock: a device lock to share (it must be re-entrant if finalizers may take it); default: a new RLock."""
        self._codes: dict[str, int] = {}
        self._sites: list[str] = []
        self._lock: AbstractContextManager[Any] = lock if lock is not None else threading.RLock()

    def code(self, node: Tensor, what: str) -> int:
        """The code (>= 1) that names node and the violated condition."""
        site = f"node '{node.name}' ({node.op.name}, {node.type} ne={list(node.ne)}): {what}"
        with self._lock:
            code = self._codes.get(site)
            if code is None:
                self._sites.append(site)
                code = self._codes[site] = len(self._sites)
            return code

    def describe(self, code: int, unknown: str = "code") -> str:
        """What `code` names; `unknown` prefixes a code no site was given (a stray or corrupted word)."""
        with self._lock:
            return self._sites[code - 1] if 0 < code <= len(self._sites) else f"{unknown} {code}"
