"""The builder the GLSL op rules dispatch through, declared once: `Builder`, a `typing.Protocol` that pyggml-vulkan's
`DispatchBuilder` (Vulkan dispatches, recorded into a command buffer) and pyggml-metal's `MetalDispatchBuilder`
(Metal dispatches, bound by the MSL kernels' layouts) each implement. A rule names a shader (`shaders/<name>.comp`),
its specialisation constants, the tensors at its bindings, the push-constant bytes and the grid of work groups;
the builder makes that a dispatch of its API.

The binding layout is the shaders' (common.glsl): bindings 0..4 the sources, 5 the destination, 6 the backend's
status word. `bound` says which tensor each of bindings 0..5 gets and `status_push` where the code of an
out-of-range index travels, so both builders bind alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pyggml.backend.op_table import NodeBuilder
from pyggml.tensor import Tensor
from pyggml_glsl.ops.common import patch_pc

Spec = tuple[int | float, ...]
"""Specialisation constants of a dispatch: constant_id i gets spec[i] (a 32-bit uint or int, or a float's bits)."""
Groups = tuple[int, int, int]
"""Work groups of a dispatch along x, y and z (`pyggml_glsl.ops.common.grid`)."""

N_SOURCES = 5
"""Source bindings of every shader: 0..4."""
DST_BINDING = 5
STATUS_BINDING = 6
"""The backend's status word (`pyggml.backend.status.StatusWord`), where a shader that reads indices reports one
out of range."""
N_BINDINGS = 7
"""Storage-buffer bindings of every shader (whole buffers: offsets, ne and nb travel in the push constants)."""


class Builder(NodeBuilder, Protocol):
    """What a GLSL rule's `build(node, b)` dispatches through. `node` is the node whose rule is running (set by
    `OpTable.build`; the error sites name it)."""

    node: Tensor | None

    @property
    def cpu_emulated(self) -> bool:
        """The device is a CPU emulation (Mesa's lavapipe): rules then keep an invocation's loops within
        `LAVAPIPE_LOOPS` (fewer threads per matrix row, token loops split over dispatches). A GPU, and Metal's
        emulator (which takes the path a Mac runs), says False."""
        ...

    @property
    def forced_threads_per_row(self) -> int | None:
        """Threads per matrix row that MUL_MAT and MUL_MAT_ID must use (clamped to their work group), else None:
        the rule chooses (Vulkan's `tpr` option, per backend; Metal never forces it)."""
        ...

    def dispatch(self, shader: str, spec: Spec, srcs: Sequence[Tensor | None], dst: Tensor, push: bytes,
                 groups: Groups, extra_writes: tuple[Tensor, ...] = (), checks: str = "") -> None:
        """One dispatch of `shader` specialised by `spec` over `groups` work groups: `srcs` at bindings 0.. (see
        `bound`), `dst` at DST_BINDING, `push` the push-constant bytes. `extra_writes`: tensors the shader writes
        besides `dst` (later dispatches that read them wait for it). `checks`: the shader reads indices, and what
        one out of range violates; the builder puts the code naming it in the push constants (`status_push`) and
        binds its status word."""
        ...

    def scratch(self, nbytes: int) -> Tensor:
        """A temporary byte tensor of at least `nbytes` in the backend's scratch memory, for one node's
        intermediates (offset 0: reuse across nodes is ordered like any other write)."""
        ...


def bound(shader: str, srcs: Sequence[Tensor | None], dst: Tensor) -> list[Tensor]:
    """The tensors at bindings 0..DST_BINDING of a dispatch: the sources, the destination in place of a None and in
    every source slot past them (every binding the shader declares gets a buffer), then the destination.
    ValueError past N_SOURCES sources."""
    if len(srcs) > N_SOURCES:
        raise ValueError(f"{shader}: at most {N_SOURCES} sources")
    return [dst if s is None else s for s in srcs] + [dst] * (N_SOURCES - len(srcs)) + [dst]


def status_push(push: bytes, code: int) -> bytes:
    """The push constants of a shader that checks indices, with the status code of the node's error site in word 31
    (GENERIC_PC's f3, the last float of every layout whose shader checks), the float's bits, as the shaders read
    it."""
    return patch_pc(push, f3=code)
