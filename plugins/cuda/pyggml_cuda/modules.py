"""Compiled kernels in one device's context: launches of a plan bound to PyCUDA functions.

`Modules.bind` compiles what is missing (one nvcc run per file and bucket, see `pyggml_cuda.compile`), loads each
bundle's fatbin into the device's context once, checks every launch against its kernel's PTX parameters and
prepares the function for the launch's argument codes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyggml.backend.op_table import describe_node
from pyggml.errors import ComputeError
from pyggml.tensor import Tensor
from pyggml_cuda.buffer import drv
from pyggml_cuda.compile import ARCHS, Bundle, KernelBuildError, KernelCache, variant
from pyggml_cuda.launch import Launch, check_signature

if TYPE_CHECKING:
    from pyggml_cuda.device import CudaDevice

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Bound:
    """A launch ready to fire: the prepared function, geometry and argument values."""

    func: Any
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Any, ...]
    node: Tensor
    symbol: str

    def fire(self, stream: Any) -> None:
        self.func.prepared_async_call(self.grid, self.block, stream, *self.args)


class Modules:
    def __init__(self, dev: CudaDevice, kc: KernelCache) -> None:
        self.dev = dev
        self.kc = kc
        self._modules: dict[str, Any] = {}
        self._functions: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def bind(self, launches: Sequence[Launch]) -> list[Bound]:
        variants = {la.spec: variant(la.spec) for la in launches}
        bundles = self.kc.ensure(variants.values())
        out: list[Bound] = []
        for la in launches:
            v = variants[la.spec]
            b = bundles[v.tag]
            sym = v.symbol(la.kernel)
            check_signature(la, b.signatures.get(sym), sym)
            out.append(Bound(self.function(b, sym, la.fmt, la.node), la.grid, la.block, la.args, la.node, sym))
        return out

    def function(self, b: Bundle, symbol: str, fmt: str, node: Tensor) -> Any:
        key = (symbol, fmt)
        with self._lock:
            f = self._functions.get(key)
            if f is not None:
                return f
            cuda = drv()
            with self.dev.active():
                try:
                    f = self._module(b).get_function(symbol)
                except cuda.Error as e:
                    raise ComputeError(f"{self.dev.name}: {describe_node(node)}: kernel {symbol} is not in its "
                                       f"module: {e}") from e
                f.prepare(fmt)
            self._functions[key] = f
            return f

    def _module(self, b: Bundle) -> Any:
        mod = self._modules.get(b.key)
        if mod is None:
            cuda = drv()
            try:
                mod = cuda.module_from_buffer(b.image())
            except cuda.Error as e:
                raise KernelBuildError(f"{self.dev.name} ({self.dev.description}): loading compiled kernels "
                                       f"{b.fatbin} failed: {e} (built for sm_{', sm_'.join(ARCHS)} and PTX)") from e
            except OSError as e:
                raise KernelBuildError(f"{self.dev.name}: compiled kernels {b.fatbin} cannot be read: {e}") from e
            self._modules[b.key] = mod
            log.debug("%s: loaded %s", self.dev.name, b.fatbin)
        return mod
