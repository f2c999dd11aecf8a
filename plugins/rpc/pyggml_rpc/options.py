"""The RPC plugin's options (`pyggml.backend.options`): the client's, read once, when the RPC registry first lists
its devices, and the server's `message_timeout`, read when `pyggml rpc-server` starts."""

from __future__ import annotations

from dataclasses import dataclass

from pyggml.backend.option_parsers import names, seconds
from pyggml.backend.options import Options, option

DEFAULT_TIMEOUT = 120.0
"""Seconds a client's socket operation may take (`RPCOptions.timeout`)."""
MESSAGE_TIMEOUT = 60.0
"""Seconds a client may take to send a whole message once it started it (plus size / MIN_RATE) or to read a reply,
may pause inside one, and has to say HELLO after connecting: a stalled or trickling client is dropped
(`RPCOptions.message_timeout`; tests make it short)."""


@dataclass(frozen=True)
class RPCOptions(Options):
    """Read when the RPC registry first lists its devices (the server's `message_timeout`: when `pyggml rpc-server`
    starts); its backends take no options."""

    label = "RPC"
    servers: tuple[str, ...] = option((), env="PYGGML_RPC_SERVERS", parse=names, default_doc="none",
                                      doc="servers (host:port, comma-separated) whose devices are listed; more with "
                                          "get_registry('RPC').add_server()")
    timeout: float = option(DEFAULT_TIMEOUT, env="PYGGML_RPC_TIMEOUT", parse=seconds,
                            doc="seconds each socket operation of a client may take before its server is reported "
                                "lost")
    message_timeout: float = option(MESSAGE_TIMEOUT, env="PYGGML_RPC_MESSAGE_TIMEOUT", parse=seconds,
                                    doc="the server's: seconds a client may take to send a message (plus its size at "
                                        "1 MiB/s), to read a reply, or to say HELLO")
