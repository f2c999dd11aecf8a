"""SUPPORTS_OP, pyggml's own command: a client asks a pyggml server whether its device runs a node before placing
the node there, so a graph never holds a node the server's device refuses (the server would close the connection:
GRAPH_COMPUTE has no error reply). Served here: OpenCL0 (PoCL in CI), which has no IQ4_XS kernels."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest
from pyggml_rpc.client import RPCDevice
from pyggml_rpc.graph_codec import support_query
from pyggml_rpc.registry import RPCRegistry
from pyggml_rpc.server import Served, Session
from pyggml_rpc.wire import U8, Cmd

import pyggml.ops as O
from pyggml.backend.protocol import Device
from pyggml.backend.registry import get_registry, hub
from pyggml.context import Context
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_testing.rpc_servers import start_pyggml_server, stop

T = GGMLType


def _opencl0() -> Device:
    found = [d for d in hub().devices() if d.name == "OpenCL0"]
    if not found:
        pytest.skip("no OpenCL0 device here (PoCL serves it in CI)")
    return found[0]


@pytest.fixture(scope="module")
def opencl_server() -> Iterator[str]:
    _opencl0()
    proc, endpoint = start_pyggml_server("OpenCL0")
    yield endpoint
    stop(proc)


def _refused_and_add(ctx: Context) -> tuple[Tensor, Tensor]:
    """A node OpenCL0 refuses (rows of a type its kernels do not read) and one it runs."""
    rows = O.get_rows(ctx.new_tensor(T.IQ4_XS, 256, 4), ctx.new_tensor(T.I32, 2))
    a, b = ctx.new_tensor(T.F32, 8, 3), ctx.new_tensor(T.F32, 8, 3)
    return rows, O.add(a, b)


def test_the_server_answers_for_its_device() -> None:
    dev = _opencl0()
    session = Session(Served([dev], [dev.init_backend()], 1 << 30))
    refused, add = _refused_and_add(Context(no_alloc=True))
    assert session.handle(Cmd.SUPPORTS_OP, support_query(refused, 0)) == U8.pack(0)
    assert session.handle(Cmd.SUPPORTS_OP, support_query(add, 0)) == U8.pack(1)


def test_a_client_places_what_the_remote_device_refuses_elsewhere(opencl_server: str) -> None:
    reg = cast(RPCRegistry, get_registry("RPC"))
    dev: RPCDevice = reg.add_server(opencl_server)[0]
    assert dev.server.conn.answers_supports_op
    refused, add = _refused_and_add(Context(no_alloc=True))
    assert refused.op is Op.GET_ROWS
    assert not dev.supports_op(refused)
    assert dev.supports_op(add)
    asked = len(dev._support)
    assert dev.supports_op(add) and len(dev._support) == asked  # asked once per kind of node
    assert dev.memory()[0] > 0  # the connection is still there
