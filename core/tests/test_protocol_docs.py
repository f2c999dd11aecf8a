"""docs/protocol-reference.md is what `python -m pyggml.tools.protocol_docs` makes of the code, so the signatures
a plugin author reads cannot drift from the protocol (issue 24: the docs said `write(offset, bytes)`)."""

from __future__ import annotations

import inspect

from pyggml.backend import protocol
from pyggml.tools import protocol_docs


def test_committed_reference_matches_the_code() -> None:
    committed = protocol_docs.DOC.read_text(encoding="utf-8")
    assert committed == protocol_docs.render(), \
        "docs/protocol-reference.md is out of date: run python -m pyggml.tools.protocol_docs --write"


def test_every_public_method_is_listed_with_its_types() -> None:
    text = protocol_docs.render()
    assert "| `write(offset: int, data: Bytes) -> None` | required |" in text
    assert "| `read(offset: int, size: int) -> Bytes` | required |" in text
    assert "| `init_backend(params: BackendParams = None) -> Backend` | default |" in text
    assert "| `options() -> Options` | default |" in text
    assert "| `new_backend() -> Backend` | default |" in text
    assert "| `memory() -> tuple[int, int]` | required | (free, total) bytes. |" in text
    assert "Constructor: `Buffer(buft: BufferType, size: int)`" in text
    assert "Constructor: `Backend(device: Device)`" in text
    for name in protocol_docs.CLASSES:
        cls = getattr(protocol, name)
        for member, value in vars(cls).items():
            if member.startswith("_") or not (inspect.isfunction(value) or isinstance(value, property)):
                continue
            assert f"| `{member}" in text, f"{name}.{member} is missing from the reference"
