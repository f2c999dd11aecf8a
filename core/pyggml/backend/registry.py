"""Plugin discovery and the process-wide list of registries and devices.

Entry points in group `pyggml.backends` are loaded one by one, each inside its own try/except: a plugin that
fails to import, register or enumerate is recorded (name, distribution, version, traceback) and shown by
`pyggml plugins`, never fatal, unless PYGGML_STRICT_PLUGINS=1. PYGGML_BACKENDS=a,b restricts loading to the
named plugins or registries (each named one must then load). Devices are enumerated lazily, on first request.
"""

from __future__ import annotations

import logging
import os
import threading
import traceback
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import cast

import pluggy

from pyggml.backend.hookspec import ENTRY_POINT_GROUP, PROJECT, BackendHooks
from pyggml.backend.protocol import API_VERSION, Backend, Device, Registry
from pyggml.errors import PluginLoadError, PyGGMLError

log = logging.getLogger(__name__)


@dataclass
class PluginInfo:
    name: str
    value: str
    distribution: str
    version: str
    status: str = "pending"
    """loaded | error | disabled"""
    error: str | None = None
    registries: list[str] = field(default_factory=list)


@dataclass
class RegistryInfo:
    registry: Registry
    plugin: str
    devices: list[Device] | None = None
    error: str | None = None


class BackendHub:
    """Everything discovered in this process. One instance: `hub()`; tests may build their own."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._loaded = False
        self.plugins: list[PluginInfo] = []
        self._regs: dict[str, RegistryInfo] = {}

    # ---- loading ----------------------------------------------------------------------------------------------

    def load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            strict = os.environ.get("PYGGML_STRICT_PLUGINS", "") not in ("", "0")
            wanted = [w.strip() for w in os.environ.get("PYGGML_BACKENDS", "").split(",") if w.strip()]
            pm = pluggy.PluginManager(PROJECT)
            pm.add_hookspecs(BackendHooks)
            for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
                info = _plugin_info(ep)
                self.plugins.append(info)
                if wanted and ep.name not in wanted and not any(w.lower() == ep.name.lower() for w in wanted):
                    info.status = "disabled"
                    info.error = "not listed in PYGGML_BACKENDS"
                    continue
                try:
                    module = ep.load()
                    pm.register(module, name=ep.name)
                    impls = [i for i in pm.hook.pyggml_backend_registries.get_hookimpls() if i.plugin is module]
                    regs: list[Registry] = []
                    for impl in impls:
                        regs.extend(cast("list[Registry]", impl.function()))
                    for reg in regs:
                        self._add(reg, ep.name)
                        info.registries.append(reg.name)
                    info.status = "loaded"
                except Exception as e:
                    info.status = "error"
                    info.error = "".join(traceback.format_exception(e)).strip()
                    log.warning("pyggml plugin %r failed to load: %s", ep.name, e)
                    if strict:
                        raise PluginLoadError(f"plugin {ep.name!r} ({info.value}) failed to load: {e}") from e
            if wanted:
                missing = [w for w in wanted if not self._names_match(w)]
                if missing:
                    known = ", ".join(p.name for p in self.plugins) or "none"
                    raise PluginLoadError(
                        f"PYGGML_BACKENDS names {missing} but they did not load; installed plugins: {known}"
                    )

    def _names_match(self, wanted: str) -> bool:
        w = wanted.lower()
        return any(p.name.lower() == w and p.status == "loaded" for p in self.plugins) or any(
            r.lower() == w for r in self._regs
        )

    def _add(self, reg: Registry, plugin: str) -> None:
        if not isinstance(reg, Registry):
            raise PluginLoadError(f"plugin {plugin!r} returned {reg!r}, not a pyggml Registry")
        if reg.api_version != API_VERSION:
            raise PluginLoadError(
                f"plugin {plugin!r}: registry {reg.name!r} speaks backend API {reg.api_version}, pyggml {API_VERSION}"
            )
        if reg.name.lower() in self._regs:
            raise PluginLoadError(f"plugin {plugin!r}: a registry named {reg.name!r} exists already")
        self._regs[reg.name.lower()] = RegistryInfo(reg, plugin)

    def register(self, reg: Registry, plugin: str = "<in-process>") -> None:
        """Add a registry by hand (tests, embedded backends)."""
        with self._lock:
            self.load()
            self._add(reg, plugin)

    def unregister(self, name: str) -> None:
        with self._lock:
            self._regs.pop(name.lower(), None)

    # ---- queries ----------------------------------------------------------------------------------------------

    def registries(self) -> list[RegistryInfo]:
        self.load()
        return list(self._regs.values())

    def registry(self, name: str) -> Registry:
        self.load()
        info = self._regs.get(name.lower())
        if info is None:
            known = ", ".join(i.registry.name for i in self._regs.values()) or "none"
            raise PyGGMLError(f"no backend registry named {name!r}; known: {known}")
        return info.registry

    def devices_of(self, info: RegistryInfo) -> list[Device]:
        """Enumerate (once) a registry's devices; an enumeration failure is recorded, not raised."""
        with self._lock:
            if info.devices is None:
                try:
                    info.devices = list(info.registry.devices())
                except Exception as e:
                    info.devices = []
                    info.error = f"device enumeration failed: {type(e).__name__}: {e}"
                    log.warning("pyggml registry %r: %s", info.registry.name, info.error)
                    if os.environ.get("PYGGML_STRICT_PLUGINS", "") not in ("", "0"):
                        raise PluginLoadError(f"registry {info.registry.name!r}: {info.error}") from e
            return info.devices

    def devices(self) -> list[Device]:
        return [d for info in self.registries() for d in self.devices_of(info)]

    def refresh(self, name: str) -> None:
        """Forget a registry's device list, so the next query asks it again (a registry whose devices can be added
        at run time, such as RPC's `add_server`, calls this)."""
        with self._lock:
            info = self._regs.get(name.lower())
            if info is not None:
                info.devices = None
                info.error = None

    def device(self, name: str) -> Device:
        for d in self.devices():
            if d.name.lower() == name.lower():
                return d
        for info in self.registries():  # a registry name picks its first device
            if info.registry.name.lower() == name.lower() and self.devices_of(info):
                return self.devices_of(info)[0]
        known = ", ".join(d.name for d in self.devices()) or "none"
        raise PyGGMLError(f"no device named {name!r}; available: {known}")

    def reason(self, info: RegistryInfo) -> str | None:
        devs = self.devices_of(info)
        if info.error:
            return info.error
        return None if devs else (info.registry.unavailable_reason() or "no devices")


def _plugin_info(ep: EntryPoint) -> PluginInfo:
    dist = ep.dist
    return PluginInfo(ep.name, ep.value, dist.name if dist else "?", dist.version if dist else "?")


_HUB = BackendHub()


def hub() -> BackendHub:
    return _HUB


def devices() -> list[Device]:
    """Every device of every loaded plugin."""
    return _HUB.devices()


def get_device(name: str) -> Device:
    return _HUB.device(name)


def get_registry(name: str) -> Registry:
    return _HUB.registry(name)


def init_backend(name: str, params: str | None = None) -> Backend:
    """A backend (stream) on the device (or registry's first device) called `name`."""
    return _HUB.device(name).init_backend(params)
