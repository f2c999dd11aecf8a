"""Write docs/protocol-reference.md: every class, method, property and field of the backend protocol with its
signature and types as the code declares them, read from `pyggml.backend.protocol` (and the plugin hook) by
`inspect`, so the reference cannot drift from the code (core/tests/test_protocol_docs.py compares):

    python -m pyggml.tools.protocol_docs                 # print it
    python -m pyggml.tools.protocol_docs --write         # rewrite docs/protocol-reference.md
    python -m pyggml.tools.protocol_docs --check         # exit 1 when the committed file differs
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import inspect
import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyggml.backend import hookspec, protocol
from pyggml.backend.registry import API_CONSTANT

DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol-reference.md"

CLASSES = ("Registry", "LazyRegistry", "Device", "BufferType", "Buffer", "Backend", "Event", "SyncEvent")
"""The protocol's classes, in the order a plugin meets them."""
RECORDS = ("DeviceCaps", "DeviceProps", "DeviceType", "BufferUsage")
FUNCTIONS = ("tensor_copy",)
MODULE_NAMES = ("API_VERSION", "Bytes", "BackendParams")
"""Module-level names the signatures use: a type alias and the version constant, documented by the string under
their assignment."""

HEADER = """# Backend protocol reference

Generated from `core/pyggml/backend/protocol.py` and `core/pyggml/backend/hookspec.py` by
`python -m pyggml.tools.protocol_docs --write`; do not edit by hand (`core/tests/test_protocol_docs.py` fails when
this file and the code differ). What the objects are for and the rules they keep: [backend-protocol.md](
backend-protocol.md); how to package them: [writing-a-plugin.md](writing-a-plugin.md).

Signatures are as the code writes them (`from __future__ import annotations`: types are the source text).
**required**: abstract, a plugin must implement it; **default**: works as is, override where the device does
better; **property**: read-only attribute, served by the base class from what the constructor was given;
**attribute**: declared on the class, set by a subclass as a class attribute where it differs.
"""


def summary(obj: object) -> str:
    """The object's own docstring (not one inherited from ABC, Enum or the dataclass machinery), first paragraph,
    on one line: table cells hold one line."""
    own = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    if isinstance(obj, type) and dataclasses.is_dataclass(obj) and own and own.startswith(f"{obj.__name__}("):
        own = None  # the signature dataclasses writes when the class has no docstring
    first = inspect.cleandoc(own or "").split("\n\n", 1)[0]
    return cell(" ".join(first.split()))


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell ('|' would end the cell, even inside backticks)."""
    return text.replace("|", "\\|")


def signature(fn: Callable[..., Any], name: str) -> str:
    """`name(param: type = default, ...) -> type`, with `self` left out and annotations as written."""
    sig = inspect.signature(fn)
    parts: list[str] = []
    star_done = False
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        text = p.name
        if p.annotation is not p.empty:
            text += f": {_ann(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {_default(p.default)}"
        parts.append(text)
    ret = "" if sig.return_annotation is sig.empty else f" -> {_ann(sig.return_annotation)}"
    return f"{name}({', '.join(parts)}){ret}"


def _ann(a: object) -> str:
    return a if isinstance(a, str) else getattr(a, "__name__", repr(a))


def _default(v: object) -> str:
    if isinstance(v, enum.Enum):
        return f"{type(v).__name__}.{v.name}"
    if dataclasses.is_dataclass(v):
        return f"{type(v).__name__}()"
    return repr(v)


def _kind(member: object) -> str:
    if isinstance(member, property):
        return "required property" if getattr(member.fget, "__isabstractmethod__", False) else "property"
    return "required" if getattr(member, "__isabstractmethod__", False) else "default"


def class_section(cls: type) -> list[str]:
    bases = [b.__name__ for b in cls.__bases__ if b.__module__ == protocol.__name__]
    title = f"## `{cls.__name__}`" + (f" ({', '.join(bases)})" if bases else "")
    lines = [title, "", summary(cls), ""]
    init = cls.__dict__.get("__init__")
    if init is not None:
        lines += [f"Constructor: `{signature(init, cls.__name__).removesuffix(' -> None')}`", ""]
    docs = _attribute_docs(inspect.getsource(cls), in_class=True)
    rows = [f"| `{cell(f'{name}: {_ann(ann)}')}` | attribute | {docs.get(name, '')} |"
            for name, ann in inspect.get_annotations(cls).items() if not name.startswith("_")]
    for name, member in cls.__dict__.items():
        if name.startswith("__") or (name.startswith("_") and not getattr(member, "__isabstractmethod__", False)):
            continue
        if isinstance(member, property):
            assert member.fget is not None
            ret = inspect.signature(member.fget).return_annotation
            sig = f"{name}: {_ann(ret)}"
            doc = summary(member.fget)
        elif inspect.isfunction(member):
            sig, doc = signature(member, name), summary(member)
        else:
            continue
        rows.append(f"| `{cell(sig)}` | {_kind(member)} | {doc} |")
    if rows:
        lines += ["| member | kind | what |", "| --- | --- | --- |", *rows, ""]
    inherited = sorted({n for b in cls.__mro__[1:-1] if b.__module__ == protocol.__name__
                        for n in [*b.__dict__, *inspect.get_annotations(b)]
                        if not n.startswith("_")} - set(cls.__dict__))
    if inherited:
        lines += [f"Inherited: {', '.join(f'`{n}`' for n in inherited)}.", ""]
    return lines


def record_section(cls: type) -> list[str]:
    lines = [f"## `{cls.__name__}`", "", summary(cls), ""]
    if issubclass(cls, enum.Enum):
        lines += ["| member | value |", "| --- | --- |"]
        lines += [f"| `{m.name}` | `{m.value!r}` |" for m in cls]
        return [*lines, ""]
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    docs = _field_docs(cls)
    lines += ["| field | type | default | what |", "| --- | --- | --- | --- |"]
    for f in fields:
        if f.default is not dataclasses.MISSING:
            default = f"`{_default(f.default)}`"
        elif f.default_factory is not dataclasses.MISSING:
            default = f"`{_default(f.default_factory())}`"
        else:
            default = "required"
        lines.append(f"| `{f.name}` | `{cell(_ann(f.type))}` | {default} | {docs.get(f.name, '')} |")
    return [*lines, ""]


def _field_docs(cls: type) -> dict[str, str]:
    return _attribute_docs(inspect.getsource(cls), in_class=True)


def _attribute_docs(source: str, in_class: bool) -> dict[str, str]:
    """Attribute docstrings (the string literal under an assignment) of a module's or a class's source."""
    tree = ast.parse(source)
    body = tree.body[0].body if in_class else tree.body  # type: ignore[attr-defined]
    out: dict[str, str] = {}
    for a, b in itertools.pairwise(body):
        target = a.target if isinstance(a, ast.AnnAssign) else a.targets[0] if isinstance(a, ast.Assign) else None
        if (isinstance(target, ast.Name) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
                and isinstance(b.value.value, str)):
            out[target.id] = cell(" ".join(b.value.value.split()))
    return out


def _assigned(source: str) -> dict[str, str]:
    """The source text of every module-level assignment's value (`Bytes = npt.NDArray[np.uint8]`), which, unlike
    the value's repr, does not change with the numpy version."""
    tree = ast.parse(source).body
    out = {t.id: ast.unparse(a.value) for a in tree if isinstance(a, ast.Assign) for t in a.targets
           if isinstance(t, ast.Name)}
    out.update({a.target.id: ast.unparse(a.value) for a in tree
                if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and a.value is not None})
    return out


def render() -> str:
    lines = [HEADER]
    lines += ["## The plugin's entry point", "",
              f"The entry-point module (group `{hookspec.ENTRY_POINT_GROUP}`) declares `{API_CONSTANT}: int`, the "
              f"backend API it implements (this core: `API_VERSION = {protocol.API_VERSION}`), and implements the "
              "hook:", "",
              "| member | kind | what |", "| --- | --- | --- |",
              f"| `{API_CONSTANT}: int` | required | {summary_of_constant()} |",
              f"| `{signature(hookspec.BackendHooks.pyggml_backend_registries, 'pyggml_backend_registries')}` | "
              f"required (`@hookimpl`) | {summary(hookspec.BackendHooks.pyggml_backend_registries)} |", ""]
    lines += ["## Module names", "", "| name | value: what |", "| --- | --- |"]
    source = inspect.getsource(protocol)
    module_docs, module_values = _attribute_docs(source, in_class=False), _assigned(source)
    for name in MODULE_NAMES:
        lines.append(f"| `{name}` | `{cell(module_values[name])}`: {module_docs.get(name, '')} |")
    lines.append("")
    for name in CLASSES:
        lines += class_section(getattr(protocol, name))
    for name in RECORDS:
        lines += record_section(getattr(protocol, name))
    for name in FUNCTIONS:
        fn = getattr(protocol, name)
        lines += [f"## `{signature(fn, name)}`", "", summary(fn), ""]
    return "\n".join(lines).rstrip() + "\n"


def summary_of_constant() -> str:
    return ("a literal (`PYGGML_API_VERSION = 1`), not imported from pyggml: the loader refuses a plugin that "
            "declares none or another version than the core's, and registers nothing of it")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyggml.tools.protocol_docs", description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help=f"rewrite {DOC.relative_to(DOC.parents[1])}")
    g.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    args = p.parse_args(argv)
    text = render()
    if args.write:
        DOC.write_text(text, encoding="utf-8")
        return 0
    if args.check:
        if not DOC.is_file() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC} is out of date: run python -m pyggml.tools.protocol_docs --write", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
