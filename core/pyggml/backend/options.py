"""Typed options: every setting of pyggml and of each device declared once, read from the environment once where
it enters (the edge), then passed down as a frozen object; no module below the edge reads a `PYGGML_*` variable
(other programs' variables, such as CUDA's own, stay theirs: docs/options.md).

A group of options is a frozen dataclass deriving `Options`, one field per option made by `option()`: the field's
type and default, the environment variable that sets it, whether one backend may take its own value
(`per_backend`) and a line for the docs:

    @dataclass(frozen=True)
    class CudaOptions(Options):
        \"\"\"Read when the CUDA devices are enumerated.\"\"\"

        label = "CUDA"
        graphs: bool = option(True, env="PYGGML_CUDA_GRAPHS", per_backend=True,
                              doc="replay a graph's launches as one CUDA graph")

`CudaOptions.from_env()` reads the variables (unset or empty: the default; a value that does not parse:
OptionError naming the variable and the value); `CudaOptions(graphs=False)` and `opts.replace(graphs=False)` make
one in code, checked the same way. A plugin's registry names its group (`Registry.options_type`) and reads it once
(`Registry.options()`); its devices, buffers and backends are given the object. `Device.init_backend(params)` takes
the `per_backend` options as text (`"graphs=0"`), a mapping (`{"graphs": False}`) or an object of the group, checked
by `with_params`. `pyggml options` lists every group with its values; docs/options.md is generated from the
declarations (`python -m pyggml.tools.options_docs`).
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar, overload

from pyggml.backend.option_parsers import BY_TYPE
from pyggml.errors import BackendParamsError, OptionError

if TYPE_CHECKING:
    from pyggml.backend.protocol import BackendParams

T = TypeVar("T")
U = TypeVar("U")
_KEY = "pyggml.option"


@dataclasses.dataclass(frozen=True, slots=True)
class OptionSpec:
    """One option as declared: what `pyggml options` and docs/options.md show."""

    name: str
    env: str | None
    """The environment variable that sets it (None: set only in code)."""
    doc: str
    per_backend: bool
    """`Device.init_backend(params)` may give it (else it is fixed when the group is read)."""
    default_doc: str
    """The default as the docs write it."""
    parse: Callable[[str], object] = dataclasses.field(repr=False, compare=False)
    aliases: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class _Meta:
    env: str | None
    doc: str
    parse: Callable[[str], object] | None
    per_backend: bool
    aliases: tuple[str, ...]
    default_doc: str | None


@overload
def option(default: T, *, doc: str, env: str | None = None, per_backend: bool = False,
           aliases: tuple[str, ...] = (), default_doc: str | None = None) -> T: ...


@overload
def option(default: T, *, doc: str, env: str | None = None, parse: Callable[[str], U], per_backend: bool = False,
           aliases: tuple[str, ...] = (), default_doc: str | None = None) -> T | U: ...


@overload
def option(*, factory: Callable[[], T], default_doc: str, doc: str, env: str | None = None,
           parse: Callable[[str], U], per_backend: bool = False, aliases: tuple[str, ...] = ()) -> T | U: ...


def option(default: Any = dataclasses.MISSING, *, factory: Callable[[], Any] | None = None, doc: str,
           env: str | None = None, parse: Callable[[str], Any] | None = None, per_backend: bool = False,
           aliases: tuple[str, ...] = (), default_doc: str | None = None) -> Any:
    """A field of an `Options` group: its default (or a `factory` of it, with `default_doc` saying what it gives),
    the variable `env` that sets it, `parse` (text -> value, ValueError with the reason; by default from the
    default's type: `option_parsers.BY_TYPE`), `per_backend`, `aliases` (other names in params), `doc`."""
    meta = {_KEY: _Meta(env, doc, parse, per_backend, aliases, default_doc)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def spelled(value: object) -> str:
    """A typed value as its variable would spell it ("" for an empty tuple; checking a value given in code, the docs'
    defaults and `pyggml options` all go through this)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


# ---- the group ---------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Options:
    """A group of options (a frozen dataclass of `option()` fields); this base has none (`NoOptions`)."""

    label: ClassVar[str] = "options"
    """The group's name in messages, `pyggml options` and docs/options.md (a registry's name for a device group)."""
    positional: ClassVar[str | None] = None
    """The option a bare value in params text sets (`init_backend("4")` for the cpu device's n_threads)."""

    def __post_init__(self) -> None:
        hints = _hints(type(self))
        for spec in self.specs():
            value = getattr(self, spec.name)
            try:
                object.__setattr__(self, spec.name, _checked(spec, value, hints[spec.name]))
            except (TypeError, ValueError) as e:
                raise OptionError(f"{self.label} option {spec.name}={value!r}: {_why(e)}") from None

    @classmethod
    def specs(cls) -> tuple[OptionSpec, ...]:
        return _specs(cls)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """The group as the environment sets it (default: `os.environ`); OptionError names a variable whose value
        does not parse, with the value and the option."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for spec in cls.specs():
            raw = env.get(spec.env, "").strip() if spec.env else ""
            if raw:
                try:
                    values[spec.name] = spec.parse(raw)
                except ValueError as e:
                    raise OptionError(f"{spec.env}={raw!r}: {_why(e)} ({cls.label} option {spec.name})") from None
        return cls._make(values)

    @classmethod
    def _make(cls, values: Mapping[str, object]) -> Self:
        make: Callable[..., Self] = cls
        return make(**values)

    @classmethod
    def narrow(cls, opts: Options) -> Self:
        """`opts` as this group (a registry's `options()` typed for its plugin); TypeError when it is another."""
        if not isinstance(opts, cls):
            raise TypeError(f"{cls.label}: expected {cls.__name__}, got {type(opts).__name__}")
        return opts

    def replace(self, **changes: object) -> Self:
        """A copy with `changes` (checked as any value given in code)."""
        return dataclasses.replace(self, **changes)

    def with_params(self, params: BackendParams, device: str) -> Self:
        """These options with a backend's `params` (see `Device.init_backend`): None or "" (these), text
        "name=value,..." (a bare value sets `positional`), a mapping of names (or aliases) to text or typed values,
        or an object of this group whose options other than the per-backend ones are these. BackendParamsError
        names the device and the option: one not in the group, one fixed when the group was read, a bad value."""
        if params is None or (isinstance(params, str) and not params.strip()):
            return self
        if not any(s.per_backend for s in self.specs()):
            raise BackendParamsError(f"{device}: the backend takes no parameters, got {params!r}")
        if isinstance(params, Options):
            return self._with_object(params, device)
        items = parse_params(params) if isinstance(params, str) else dict(params)
        by_name = {n: s for s in self.specs() for n in (s.name, *s.aliases)}
        takes = ", ".join(s.name for s in self.specs() if s.per_backend)
        changes: dict[str, object] = {}
        for key, value in items.items():
            spec = by_name.get(key or self.positional or "")
            if spec is None:
                raise BackendParamsError(f"{device}: unknown backend option {key!r} in {params!r} (it takes {takes})")
            if not spec.per_backend:
                raise BackendParamsError(f"{device}: option {spec.name!r} is fixed when its devices are enumerated "
                                         f"({spec.env or 'the registry options'}), not per backend (it takes {takes})")
            try:
                changes[spec.name] = _checked(spec, spec.parse(value) if isinstance(value, str) else value,
                                              _hints(type(self))[spec.name])
            except (TypeError, ValueError) as e:
                raise BackendParamsError(f"{device}: option {spec.name}={value!r}: {_why(e)}") from None
        return self.replace(**changes)

    def _with_object(self, other: Options, device: str) -> Self:
        if type(other) is not type(self):
            raise BackendParamsError(f"{device}: backend options are {type(self).__name__}, not {type(other).__name__}")
        fixed = [s.name for s in self.specs() if not s.per_backend and getattr(other, s.name) != getattr(self, s.name)]
        if fixed:
            raise BackendParamsError(f"{device}: option(s) {', '.join(fixed)} are fixed when its devices are "
                                     "enumerated, not per backend")
        return type(self).narrow(other)


@dataclasses.dataclass(frozen=True)
class NoOptions(Options):
    """A registry that declares no options."""

    label = "none"


def parse_params(text: str) -> dict[str, str]:
    """Params text as a mapping: "a=1, b=x" -> {"a": "1", "b": "x"}; a bare value has the key "" (the positional
    option)."""
    out: dict[str, str] = {}
    for part in text.split(","):
        if part.strip():
            key, _, value = part.strip().rpartition("=")
            out[key.strip()] = value.strip()
    return out


def split_params(params: BackendParams, group: type[Options]) -> tuple[BackendParams, BackendParams]:
    """`params` parted into what `group` takes by name and the rest, each None when empty (the meta device keeps
    its own options and gives the rest to every device it wraps). An object of `group` is its own; any other
    object the rest."""
    if params is None or isinstance(params, Options):
        return (params, None) if isinstance(params, group) else (None, params)
    items: dict[str, object] = dict(parse_params(params) if isinstance(params, str) else params)
    known = {n for s in group.specs() for n in (s.name, *s.aliases)}
    own = {k: v for k, v in items.items() if k in known}
    rest = {k: v for k, v in items.items() if k not in known}
    return own or None, rest or None


def _why(e: Exception) -> str:
    return str(e) or type(e).__name__


_HINTS: dict[type[Options], dict[str, Any]] = {}
_SPECS: dict[type[Options], tuple[OptionSpec, ...]] = {}


def _hints(cls: type[Options]) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _specs(cls: type[Options]) -> tuple[OptionSpec, ...]:
    specs = _SPECS.get(cls)
    if specs is None:
        specs = _SPECS[cls] = _declared(cls)
    return specs


def _declared(cls: type[Options]) -> tuple[OptionSpec, ...]:
    hints = _hints(cls)
    out: list[OptionSpec] = []
    for f in dataclasses.fields(cls):
        meta: _Meta | None = f.metadata.get(_KEY)
        if meta is None:
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with option()")
        parse = meta.parse or BY_TYPE.get(_base_type(hints[f.name]))
        if parse is None:
            raise TypeError(f"{cls.__name__}.{f.name}: give option(parse=...) for type {hints[f.name]}")
        default = meta.default_doc if meta.default_doc is not None else _default_doc(f.default)
        out.append(OptionSpec(f.name, meta.env, meta.doc, meta.per_backend, default, parse, meta.aliases))
    return tuple(out)


def _base_type(hint: Any) -> Any:
    """The one type of `X` or `X | None`."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if _is_union(hint) and len(args) == 1 else hint


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _default_doc(value: object) -> str:
    return "unset" if value is None else spelled(value) or "(empty)"


def _checked(spec: OptionSpec, value: object, hint: Any) -> object:
    """`value` as the option's type (`_conform`), within what its parser accepts (a value given in code passes the
    checks of text); TypeError or ValueError saying why not."""
    value = _conform(value, hint)
    if value is not None:
        spec.parse(spelled(value))
    return value


def _conform(value: object, hint: Any) -> object:
    """`value` as the field's declared type (an int for a float, text for a Path, a list for a tuple), or
    TypeError."""
    if _is_union(hint):
        for arm in typing.get_args(hint):
            try:
                return _conform(value, arm)
            except TypeError:
                continue
        raise TypeError(f"expected {hint}, got {type(value).__name__}")
    if hint is type(None):
        if value is None:
            return None
    elif hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    elif hint is Path and isinstance(value, str):
        return Path(value)
    elif typing.get_origin(hint) is tuple:
        if isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
            return tuple(value)
    elif isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return value
    name = getattr(hint, "__name__", str(hint))
    raise TypeError(f"expected {name}, got {type(value).__name__}")
