"""Whether a device accepts the nodes that do no work (NONE, VIEW, RESHAPE, PERMUTE, TRANSPOSE).

Such nodes sit in most case graphs (strided and permuted inputs, in-place results). A `supports_op` that refuses
them turns every case holding one into "unsupported", which is not a failure, so a run could say OK while most of
the suite never ran (issue 24: 94 of 141 cases). The protocol says `supports_op` accepts them
(docs/backend-protocol.md); a device that does not is reported with a warning by the command line (console
summary, json `warnings`) and by the pytest plugin (pytest's warnings summary).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pyggml import ops
from pyggml.backend.protocol import Device
from pyggml.context import Context
from pyggml.tensor import Tensor
from pyggml.types import GGMLType

if TYPE_CHECKING:
    from pyggml_conformance.runner import Target


class ViewOpsWarning(UserWarning):
    """A backend under test refuses view ops; the pytest plugin issues it (filterable with -W)."""


def probe_nodes() -> dict[str, Tensor]:
    """One small F32 node of each op that does no work, as graphs hold them."""
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(GGMLType.F32, 8, 6, 4, 2, name="probe")
    return {
        "NONE": a,
        "VIEW": ops.view(a, (8, 3), (a.nb[1],), a.nb[1]),
        "RESHAPE": ops.reshape(a, 48, 8),
        "PERMUTE": ops.permute(a, 2, 0, 1, 3),
        "TRANSPOSE": ops.transpose(a),
    }


def refused_view_ops(device: Device) -> list[str]:
    """The ops of `probe_nodes()` whose node `device.supports_op` refuses (or raises on)."""
    refused: list[str] = []
    for name, node in probe_nodes().items():
        try:
            ok = device.supports_op(node)
        except Exception:
            ok = False
        if not ok:
            refused.append(name)
    return refused


def view_ops_warning(name: str, device: Device) -> str | None:
    """The warning for a device that refuses view ops (`name`: how the run calls it), or None."""
    refused = refused_view_ops(device)
    if not refused:
        return None
    return (f"{name} refuses {', '.join(refused)} in supports_op: every case whose graph holds such a node is "
            "reported unsupported, not run. supports_op must accept NONE, VIEW, RESHAPE, PERMUTE and TRANSPOSE "
            "(they do no work; graph_compute skips them): see docs/backend-protocol.md")


def view_ops_warnings(targets: Iterable[Target]) -> dict[str, str]:
    """The view-ops warning of each target that refuses view ops, by target name (in the targets' order): the
    command line and the pytest plugin report the same warnings, each in its own way."""
    found: dict[str, str] = {}
    for t in targets:
        warning = view_ops_warning(t.name, t.device)
        if warning is not None:
            found[t.name] = warning
    return found
