"""Entry point of the RPC backend (group `pyggml.backends`). Importing it opens no connection: servers named in
PYGGML_RPC_SERVERS are contacted when devices are first listed."""

from __future__ import annotations

from pyggml.backend.hookspec import hookimpl
from pyggml.backend.protocol import Registry

PYGGML_API_VERSION = 1
"""The backend API (pyggml.backend.protocol.API_VERSION) this plugin implements; the loader refuses others."""


@hookimpl
def pyggml_backend_registries() -> list[Registry]:
    from pyggml_rpc.registry import RPCRegistry

    return [RPCRegistry()]
