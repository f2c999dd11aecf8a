"""The toy registry: cheap to create, it lists its one device on the first `devices()`."""

from __future__ import annotations

from collections.abc import Sequence

from pyggml.backend.protocol import Device, LazyRegistry
from pyggml_toy.device import ToyDevice


class ToyRegistry(LazyRegistry):
    def __init__(self) -> None:
        super().__init__("Toy")

    def _enumerate(self) -> Sequence[Device]:
        return [ToyDevice(self, "Toy0")]
