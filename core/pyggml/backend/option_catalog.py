"""Every options group there is: pyggml's own (`core_options.CORE_GROUPS`) and each loaded registry's
(`Registry.options_type`), with their declarations (docs/options.md is rendered from them) and their current values
(`pyggml options`)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from pyggml.backend.core_options import CORE_GROUPS
from pyggml.backend.options import NoOptions, Options, OptionSpec, spelled
from pyggml.backend.registry import BackendHub
from pyggml.errors import PyGGMLError


@dataclass
class Group:
    """One options group: its class, whose it is, and (for `pyggml options`) its values or why there are none."""

    kind: type[Options]
    owner: str
    """"pyggml" for a core group, else "registry <name> (plugin <plugin>)"."""
    registry: str | None = None
    devices: list[str] = field(default_factory=list)
    values: Options | None = None
    error: str | None = None

    @property
    def label(self) -> str:
        return self.kind.label

    @property
    def when(self) -> str:
        """When the group is read: the first paragraph of its docstring."""
        return " ".join(inspect.cleandoc(self.kind.__doc__ or "").split("\n\n")[0].split())

    def report(self) -> dict[str, Any]:
        """The group as `pyggml options --json` prints it."""
        return {"group": self.label, "class": self.kind.__name__, "owner": self.owner, "devices": self.devices,
                "error": self.error,
                "options": [{"name": s.name, "variable": s.env, "per_backend": s.per_backend, "default": s.default_doc,
                             "value": None if self.values is None else value_text(s, self.values), "doc": s.doc}
                            for s in self.kind.specs()]}


def declared(hub: BackendHub) -> list[Group]:
    """The core groups, then each loaded registry's declared group (by label; none of a registry without options)."""
    groups = [Group(kind, "pyggml") for kind in CORE_GROUPS]
    seen: set[type[Options]] = set(CORE_GROUPS)
    for info in sorted(hub.registries(), key=lambda i: i.registry.options_type.label.lower()):
        kind = info.registry.options_type
        if kind is NoOptions or kind in seen:
            continue
        seen.add(kind)
        groups.append(Group(kind, f"registry {info.registry.name} (plugin {info.plugin})", info.registry.name))
    return groups


def undeclared(hub: BackendHub) -> list[str]:
    """The loaded registries that declare no options."""
    return [i.registry.name for i in hub.registries() if i.registry.options_type is NoOptions]


def current(hub: BackendHub) -> list[Group]:
    """`declared` groups with their values: a core group read from the environment now, a registry's the object its
    devices use (`Registry.options()`), with the names of those devices; a value that does not parse is the group's
    `error`."""
    groups = declared(hub)
    for g in groups:
        try:
            if g.registry is None:
                g.values = g.kind.from_env()
                continue
            reg = hub.registry(g.registry)
            g.values = reg.options()
            g.devices = [d.name for info in hub.registries() if info.registry is reg for d in hub.devices_of(info)]
        except PyGGMLError as e:
            g.error = str(e)
    return groups


def value_text(spec: OptionSpec, opts: Options) -> str:
    """A value as its variable would spell it."""
    value = getattr(opts, spec.name)
    return "(unset)" if value is None else spelled(value) or "(empty)"


def markdown(groups: list[Group]) -> str:
    """The tables of docs/options.md: one section per group, one row per option."""
    out: list[str] = []
    for g in groups:
        out += [f"### {g.label}", "", f"{g.kind.__name__}, {g.owner}. {g.when}", "",
                "| option | variable | default | per backend | what |", "| --- | --- | --- | --- | --- |"]
        for s in g.kind.specs():
            names = ", ".join(f"`{n}`" for n in (s.name, *(s.aliases if s.per_backend else ())))
            env = f"`{s.env}`" if s.env else "-"
            out.append(f"| {names} | {env} | {_cell(s.default_doc)} | {'yes' if s.per_backend else '-'} | "
                       f"{_cell(s.doc)} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
