"""LaunchBuilder.derived: a value derived from a tensor is made once for the nodes of a plan that ask for it, made
again once a launch wrote over the tensor, and the last DERIVED_SLOTS values are kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyggml import ops
from pyggml.backend.launch import DERIVED_SLOTS, LaunchBuilder
from pyggml.context import Context
from pyggml.tensor import Tensor, shares_bytes
from pyggml.types import GGMLType as T


@dataclass
class Rec:
    node: Tensor


class Builder(LaunchBuilder[str]):
    def __init__(self) -> None:
        super().__init__()
        self.node: Tensor | None = None
        self.launches: list[Rec] = []
        self.made = 0

    def launch(self, spec: str, name: str, gsize: Any, lsize: Any, *args: Any) -> None:
        assert self.node is not None
        self.launches.append(Rec(self.node))

    def tensor(self, t: Tensor | None) -> list[Any]:
        return []

    def scratch(self, nbytes: int) -> Any:
        return None

    def error_args(self, what: str) -> list[Any]:
        return []

    def new_memory(self, nbytes: int) -> Any:
        self.made += 1
        return ("mem", self.made, nbytes)


def _tensors(n: int) -> list[Tensor]:
    ctx = Context(no_alloc=True)
    return [ctx.new_tensor(T.F32, 8, 2, name=f"t{i}") for i in range(n)]


def test_shared_until_written_over() -> None:
    x, y = _tensors(2)
    b = Builder()
    b.node = y
    mem, fresh = b.derived("q", x, 64)
    assert fresh
    b.launch("s", "k", (1,), None)
    assert b.derived("q", x, 64) == (mem, False)
    assert b.derived("other", x, 64)[1]  # another key: another value
    b.node = ops.add(x, y, inplace=True)  # its result is x's memory
    b.launch("s", "k", (1,), None)
    assert b.derived("q", x, 64)[1]


def test_least_recently_asked_gives_way_and_its_memory_is_reused() -> None:
    ts = _tensors(DERIVED_SLOTS + 1)
    b = Builder()
    b.node = ts[0]
    first = [b.derived("q", t, 64)[0] for t in ts[:DERIVED_SLOTS]]
    assert b.derived("q", ts[0], 64) == (first[0], False)  # ts[0] now the most recent
    mem, fresh = b.derived("q", ts[-1], 32)               # evicts ts[1]: its memory is large enough
    assert fresh and mem == first[1] and b.made == DERIVED_SLOTS
    assert b.derived("q", ts[1], 64)[1]                    # gone: made again
    assert b.derived("q", ts[-1], 128)[1] and b.made == DERIVED_SLOTS + 1  # larger than what it holds


def test_unplaced_tensors_write_over_by_their_data() -> None:
    a, c = _tensors(2)
    assert shares_bytes(a, a) and not shares_bytes(a, c)
