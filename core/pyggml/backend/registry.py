"""Plugin discovery and the process-wide list of registries and devices.

Entry points in group `pyggml.backends` are loaded one by one, each inside its own try/except: a plugin that
fails to import, register or enumerate is recorded (name, distribution, version, traceback) and shown by
`pyggml plugins`, never fatal, unless PYGGML_STRICT_PLUGINS=1. PYGGML_BACKENDS=a,b restricts loading to the
named plugins or registries (each named one must then load).

Two plugins registering one registry name are never resolved silently: the plugin whose entry point carries the
registry's name keeps it (the cpu plugin keeps "cpu"), the other is rejected; with no such owner every claimant is
rejected; either way the error names both distributions.

Every plugin declares the backend API it implements: its entry-point module sets `PYGGML_API_VERSION = <int>`.
A plugin that declares none, or another version than this core's `API_VERSION`, is not registered at all (its hook
is never called) and `pyggml plugins` shows it as `incompatible` with both versions; the other plugins load.

Devices are enumerated lazily, each registry on its own and on first request only: a driver that hangs in
`devices()` delays only what asks for that registry, by at most PYGGML_PLUGIN_TIMEOUT seconds (default 30; 0 waits
forever), after which the registry reports no devices and an error naming its plugin; looking a device up by name
asks the registries whose name it starts with first ("cpu" never waits for another plugin).

The three variables are the hub's `PluginOptions` (`pyggml.backend.core_options`), read once, when the plugins are
loaded; `BackendHub(options=...)` gives them in code.
"""

from __future__ import annotations

import logging
import threading
import traceback
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import cast

import pluggy

from pyggml.backend.core_options import PluginOptions
from pyggml.backend.extensions import RESCAN_DEVICES, RescanDevices
from pyggml.backend.hookspec import ENTRY_POINT_GROUP, PROJECT, BackendHooks
from pyggml.backend.protocol import API_VERSION, Backend, BackendParams, Device, Registry
from pyggml.errors import PluginLoadError, PyGGMLError

log = logging.getLogger(__name__)


@dataclass
class PluginInfo:
    name: str
    value: str
    distribution: str
    version: str
    status: str = "pending"
    """loaded | error | incompatible (backend API not declared or not this core's) | disabled"""
    error: str | None = None
    registries: list[str] = field(default_factory=list)
    api_version: int | None = None
    """The backend API the plugin declares (`PYGGML_API_VERSION` of its entry-point module); None: not declared."""


@dataclass
class RegistryInfo:
    registry: Registry
    plugin: str
    devices: list[Device] | None = None
    error: str | None = None
    distribution: str = "?"
    """The plugin's distribution and version, for messages."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Serialises this registry's enumeration (and only this one's)."""
    pending: _Enumeration | None = field(default=None, repr=False)


API_CONSTANT = "PYGGML_API_VERSION"
"""The name of the constant a plugin's entry-point module declares its backend API version in."""


class PluginAPIError(PluginLoadError):
    """A plugin declares no backend API version, or one this core does not implement: it is not loaded."""


class _Enumeration:
    """One registry's `devices()` running on a daemon thread, so a hung driver can be waited for with a limit."""

    def __init__(self, reg: Registry) -> None:
        self.done = threading.Event()
        self.devices: list[Device] = []
        self.error: BaseException | None = None
        threading.Thread(target=self._run, args=(reg,), name=f"pyggml-enumerate-{reg.name}", daemon=True).start()

    def _run(self, reg: Registry) -> None:
        try:
            self.devices = list(reg.devices())
        except BaseException as e:  # recorded and reported by devices_of
            self.error = e
        finally:
            self.done.set()


class BackendHub:
    """Everything discovered in this process. One instance: `hub()`; tests may build their own. `options`: how to
    load (default: `PluginOptions` read from the environment when the plugins are loaded)."""

    def __init__(self, options: PluginOptions | None = None) -> None:
        self._lock = threading.RLock()
        self._loaded = False
        self._options = options
        self.plugins: list[PluginInfo] = []
        self._regs: dict[str, RegistryInfo] = {}

    @property
    def options(self) -> PluginOptions:
        """The options the plugins were (or will be) loaded with, read from the environment on first use."""
        with self._lock:
            if self._options is None:
                self._options = PluginOptions.from_env()
            return self._options

    # ---- loading ----------------------------------------------------------------------------------------------

    def load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            strict, wanted = self.options.strict, self.options.backends
            pm = pluggy.PluginManager(PROJECT)
            pm.add_hookspecs(BackendHooks)
            claims: list[tuple[Registry, PluginInfo]] = []
            for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
                info = _plugin_info(ep)
                self.plugins.append(info)
                if wanted and ep.name not in wanted and not any(w.lower() == ep.name.lower() for w in wanted):
                    info.status = "disabled"
                    info.error = "not listed in PYGGML_BACKENDS"
                    continue
                try:
                    module = ep.load()
                    _check_api(module, info)
                    pm.register(module, name=ep.name)
                    impls = [i for i in pm.hook.pyggml_backend_registries.get_hookimpls() if i.plugin is module]
                    regs: list[Registry] = []
                    for impl in impls:
                        regs.extend(cast("list[Registry]", impl.function()))
                    for reg in regs:
                        self._check(reg, ep.name)
                    claims.extend((reg, info) for reg in regs)
                    info.status = "loaded"
                except PluginAPIError as e:
                    info.status, info.error = "incompatible", str(e)
                    log.warning("pyggml: %s", e)
                    if strict:
                        raise
                except Exception as e:
                    info.status = "error"
                    info.error = "".join(traceback.format_exception(e)).strip()
                    log.warning("pyggml plugin %r failed to load: %s", ep.name, e)
                    if strict:
                        raise PluginLoadError(f"plugin {ep.name!r} ({info.value}) failed to load: {e}") from e
            self._add_claims(claims, strict)
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

    @staticmethod
    def _check(reg: Registry, plugin: str) -> None:
        if not isinstance(reg, Registry):
            raise PluginLoadError(f"plugin {plugin!r} returned {reg!r}, not a pyggml Registry")

    def _add_claims(self, claims: list[tuple[Registry, PluginInfo]], strict: bool) -> None:
        """Add the loaded plugins' registries; a name claimed twice goes to the plugin whose entry point carries it
        (if exactly one does), the other claimants are rejected with an error naming every distribution."""
        by_name: dict[str, list[tuple[Registry, PluginInfo]]] = {}
        for reg, info in claims:
            by_name.setdefault(reg.name.lower(), []).append((reg, info))
        for key, group in by_name.items():
            if len(group) == 1:
                reg, info = group[0]
                self._add(reg, info)
                continue
            owners = [(r, i) for r, i in group if i.name.lower() == key]
            keep = owners[0] if len(owners) == 1 else None
            who = ", ".join(f"plugin {i.name!r} ({i.distribution} {i.version})" for _, i in group)
            verdict = (f"kept for plugin {keep[1].name!r}, whose entry point carries the name" if keep
                       else "rejected for all of them")
            msg = f"registry name {group[0][0].name!r} is registered by {who}: {verdict}"
            log.error("pyggml: %s", msg)
            if strict:
                raise PluginLoadError(msg)
            for reg, info in group:
                if keep is not None and info is keep[1]:
                    self._add(reg, info)
                    continue
                info.status = "error"
                info.error = f"{info.error}\n{msg}" if info.error else msg

    def _add(self, reg: Registry, info: PluginInfo) -> None:
        """A loaded plugin's registry: stored, and listed on the plugin."""
        self._put(reg, info.name, f"{info.distribution} {info.version}")
        info.registries.append(reg.name)

    def _put(self, reg: Registry, plugin: str, distribution: str = "?") -> None:
        """The one place a registry enters the table (from a plugin or by hand)."""
        self._regs[reg.name.lower()] = RegistryInfo(reg, plugin, distribution=distribution)

    def register(self, reg: Registry, plugin: str = "<in-process>") -> None:
        """Add a registry by hand (tests, embedded backends); a name in use raises PluginLoadError naming both."""
        with self._lock:
            self.load()
            self._check(reg, plugin)
            old = self._regs.get(reg.name.lower())
            if old is not None:
                raise PluginLoadError(f"plugin {plugin!r}: a registry named {reg.name!r} exists already (from plugin "
                                      f"{old.plugin!r}, {old.distribution})")
            self._put(reg, plugin)

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
        """Enumerate (once) a registry's devices; a failure, or no answer within PYGGML_PLUGIN_TIMEOUT seconds, is
        recorded (no devices), not raised (unless PYGGML_STRICT_PLUGINS=1). Other registries are not held up."""
        with info.lock:
            if info.devices is not None:
                return info.devices
            first = info.pending is None
            if info.pending is None:
                info.pending = _Enumeration(info.registry)
            timeout = self.options.timeout
            if not info.pending.done.wait(timeout if first else 0):
                info.error = (f"device enumeration of registry {info.registry.name!r} (plugin {info.plugin!r}, "
                              f"{info.distribution}) did not finish within {timeout:g} s (PYGGML_PLUGIN_TIMEOUT)")
                if first:
                    log.warning("pyggml: %s", info.error)
                    if self.options.strict:
                        raise PluginLoadError(info.error)
                return []
            e = info.pending.error
            if e is None:
                info.devices, info.error = info.pending.devices, None
                return info.devices
            info.devices = []
            info.error = f"device enumeration failed: {type(e).__name__}: {e}"
            log.warning("pyggml registry %r: %s", info.registry.name, info.error)
            if self.options.strict:
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
            with info.lock:
                info.devices = None
                info.error = None
                info.pending = None

    def device(self, name: str) -> Device:
        """The device called `name`, else the first device of the registry called `name`. Registries whose name
        starts `name` are asked first, so `cpu` or `OpenCL0` never wait for another plugin's enumeration.

        When none has it, those registries that offer `rescan_devices` look again (an RPC server unreachable at
        enumeration may be back), and the error names why each of them lacks the device (their
        `unavailable_reason()`: the unreached server and what went wrong)."""
        want = name.lower()
        infos = self.registries()
        likely = [i for i in infos if want.startswith(i.registry.name.lower())]
        found = self._find(want, likely + [i for i in infos if i not in likely])
        if found is None and [i for i in likely if self._rescan(i)]:  # every one rescans, not only the first
            found = self._find(want, likely)
        if found is not None:
            return found
        known = ", ".join(d.name for d in self.devices()) or "none"
        why = "".join(f"; registry {i.registry.name!r}: {r}" for i in likely if (r := self._why_missing(i)))
        raise PyGGMLError(f"no device named {name!r}; available: {known}{why}")

    def _find(self, want: str, infos: list[RegistryInfo]) -> Device | None:
        for info in infos:
            for d in self.devices_of(info):
                if d.name.lower() == want:
                    return d
            if info.registry.name.lower() == want and self.devices_of(info):
                return self.devices_of(info)[0]  # a registry name picks its first device
        return None

    def _rescan(self, info: RegistryInfo) -> bool:
        """Ask a registry that offers it to look for missing devices again; True (and its list forgotten, so the
        next query enumerates it again) when it found some. A failure is logged, never raised: a lookup that
        misses reports the miss."""
        ext = info.registry.get_extension(RESCAN_DEVICES)
        if ext is None:
            return False
        try:
            found = bool(cast(RescanDevices, ext)())
        except Exception as e:  # a plugin's failure stays the plugin's (the lookup's error says what is missing)
            log.warning("pyggml registry %r: rescanning devices failed: %s: %s", info.registry.name,
                        type(e).__name__, e)
            return False
        if found:
            self.refresh(info.registry.name)
        return found

    def _why_missing(self, info: RegistryInfo) -> str | None:
        """Why a registry lacks devices: its enumeration's failure, else its own reason (which may name devices
        missing beside the ones it has, such as an RPC server that could not be reached); None when it has devices
        and no reason."""
        devs = self.devices_of(info)
        if info.error:
            return info.error
        return info.registry.unavailable_reason() or (None if devs else "no devices")

    def reason(self, info: RegistryInfo) -> str | None:
        devs = self.devices_of(info)
        if info.error:
            return info.error
        return None if devs else (info.registry.unavailable_reason() or "no devices")


def _check_api(module: object, info: PluginInfo) -> None:
    """Refuse (PluginAPIError) a plugin module that does not declare this core's backend API version. Checked before
    the module is registered, so an incompatible plugin contributes nothing. The version is read from the module,
    never defaulted: a plugin written against another API must not be half-loaded."""
    from pyggml import __version__

    declared = getattr(module, API_CONSTANT, None)
    who = f"plugin {info.name!r} ({info.distribution} {info.version})"
    core = f"this pyggml {__version__} implements backend API {API_VERSION}"
    if declared is None:
        raise PluginAPIError(f"{who} declares no backend API version ({API_CONSTANT} missing in {info.value}); "
                             f"{core}; not loaded")
    if isinstance(declared, bool) or not isinstance(declared, int):
        raise PluginAPIError(f"{who}: {API_CONSTANT} = {declared!r} in {info.value} is not an integer; {core}; "
                             "not loaded")
    info.api_version = declared
    if declared != API_VERSION:
        raise PluginAPIError(f"{who} implements backend API {declared}, {core}; not loaded (install a version of "
                             f"{info.distribution} made for backend API {API_VERSION})")


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


def init_backend(name: str, params: BackendParams = None) -> Backend:
    """A backend (stream) on the device (or registry's first device) called `name`."""
    return _HUB.device(name).init_backend(params)
