"""Servers for the RPC tests (pyggml_testing.rpc_servers): llama.cpp's `ggml-rpc-server` (skipped with the reason
where it is not built) and `pyggml rpc-server --device cpu`, one of each for the whole session, stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pyggml_testing.rpc_servers import NotBuilt, start_ggml_server, start_pyggml_server, stop


@pytest.fixture(scope="session")
def ggml_server() -> Iterator[str]:
    try:
        proc, endpoint = start_ggml_server()
    except NotBuilt as e:
        pytest.skip(str(e))
    yield endpoint
    stop(proc)


@pytest.fixture(scope="session")
def pyggml_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, endpoint = start_pyggml_server("cpu", log=tmp_path_factory.mktemp("rpc") / "server.log")
    yield endpoint
    stop(proc)
