"""The `pyggml` command: devices, plugins, options, info, graph pictures, and the subcommands of installed distributions
(entry points of group pyggml.commands: `conformance` from pyggml-conformance, `rpc-server` from pyggml-rpc).

Bad options are argparse's one-line usage errors (status 2); a failure the program can name is one line
`pyggml CMD: error: ...` (status 1); output into a pipe whose reader has gone (`pyggml devices | head -1`) ends
quietly (`run_command`, which the other pyggml command-line tools use too)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from pyggml.backend.registry import hub
from pyggml.errors import PluginLoadError, PyGGMLError
from pyggml.graph import Graph
from pyggml.tensor import Tensor
from pyggml.weight_cache.command import add_parser as add_cache_parser


def _default_device_name() -> str | None:
    """The device `default_device()` picks, or None (with a warning on stderr) when it cannot pick one: a
    PYGGML_DEVICE that names no device still leaves the list to read."""
    from pyggml.backend.choice import default_device

    try:
        return default_device().name
    except PluginLoadError:
        raise  # strict mode: a plugin that failed to load ends the command
    except PyGGMLError as e:
        print(f"pyggml: warning: no default device: {e}", file=sys.stderr)
        return None


def _device_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    h = hub()
    for info in h.registries():
        devs = h.devices_of(info)
        if not devs:
            rows.append({"registry": info.registry.name, "plugin": info.plugin, "device": None,
                         "reason": h.reason(info)})
        for d in devs:
            p = d.props()
            bufts = [d.buffer_type()]
            host = d.host_buffer_type()
            if host is not None:
                bufts.append(host)
            rows.append({
                "registry": info.registry.name,
                "plugin": info.plugin,
                "device": p.name,
                "description": p.description,
                "default": False,
                "type": p.type.value,
                "memory_free": p.memory_free,
                "memory_total": p.memory_total,
                "caps": asdict(p.caps),
                "buffer_types": [{"name": b.name, "alignment": b.alignment, "max_size": b.max_size,
                                  "is_host": b.is_host} for b in bufts],
                "details": p.details,
            })
    default = _default_device_name()
    for r in rows:
        if r["device"] is not None:
            r["default"] = r["device"] == default
    return rows


def cmd_devices(args: argparse.Namespace) -> int:
    """Every device of every loaded plugin, the default one (`default_device()`: PYGGML_DEVICE, else the best)
    marked `*` (in JSON: `"default": true`)."""
    rows = _device_rows()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        if r["device"] is None:
            print(f"  {r['registry']:<10} (no devices: {r['reason']})")
            continue
        caps = ",".join(k for k, v in r["caps"].items() if v) or "-"
        mem = f"{r['memory_free'] / 2**30:.1f}/{r['memory_total'] / 2**30:.1f} GiB"
        bufts = ", ".join(b["name"] for b in r["buffer_types"])
        mark = "*" if r["default"] else " "
        print(f"{mark} {r['registry']:<10} {r['device']:<12} {r['type']:<6} {mem:<16} caps={caps:<30} "
              f"bufts=[{bufts}]  {r['description']}")
    if any(r["device"] and r["default"] for r in rows):
        print("(* the default device: PYGGML_DEVICE, else the best by plugin priority and device type)")
    return 0


def cmd_plugins(args: argparse.Namespace) -> int:
    """Every entry point of group pyggml.backends: distribution, version, the backend API it declares, status."""
    from pyggml.backend.protocol import API_VERSION

    h = hub()
    h.load()
    rows = [asdict(p) for p in h.plugins]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"pyggml implements backend API {API_VERSION}")
    for p in rows:
        api = "-" if p["api_version"] is None else p["api_version"]
        print(f"{p['name']:<12} {p['distribution']:<20} {p['version']:<10} api={api!s:<3} {p['status']:<12} "
              f"registries={','.join(p['registries']) or '-'}")
        if p["error"]:
            last = p["error"].strip().splitlines()[-1]
            print(f"{'':<12} error: {last}")
    return 0


def cmd_options(args: argparse.Namespace) -> int:
    """Every options group (pyggml's, then each loaded registry's, docs/options.md) with its current values: a
    core group as the environment sets it now, a registry's as its devices use it (named)."""
    from pyggml.backend.option_catalog import current, undeclared

    rows = [g.report() for g in current(hub())]
    if args.json:
        print(json.dumps({"groups": rows, "undeclared": undeclared(hub())}, indent=2))
        return 0
    for r in rows:
        devs = f"; devices: {', '.join(r['devices'])}" if r["devices"] else ""
        print(f"{r['group']} ({r['class']}, {r['owner']}{devs})")
        if r["error"]:
            print(f"  error: {r['error']}")
        for o in r["options"]:
            mark = "*" if o["per_backend"] else " "
            value = "-" if o["value"] is None else o["value"]
            print(f"  {mark} {o['name']:<16} {o['variable'] or '-':<28} {value}")
    print(f"registries that declare no options: {', '.join(undeclared(hub())) or 'none'}")
    print("(* per backend: Device.init_backend(params) takes it; docs/options.md says what each one does)")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    import numpy

    import pyggml

    h = hub()
    h.load()
    report: dict[str, Any] = {
        "pyggml": pyggml.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "numpy": numpy.__version__,
        "plugins": [{"name": p.name, "status": p.status, "version": p.version} for p in h.plugins],
        "devices": [r["device"] for r in _device_rows() if r["device"]],
    }
    print(json.dumps(report, indent=2))
    return 0


def load_function(target: str, cmd: str, what: str) -> Callable[[], object] | None:
    """The function MODULE:FUNCTION names, or None after saying on stderr why there is none."""
    mod_name, _, fn_name = target.partition(":")
    if not fn_name:
        print(f"{cmd}: give MODULE:FUNCTION {what}", file=sys.stderr)
        return None
    try:
        fn: Callable[[], object] = getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError) as e:
        print(f"{cmd}: cannot load {target}: {type(e).__name__}: {e}", file=sys.stderr)
        return None
    return fn


def cmd_profile(args: argparse.Namespace) -> int:
    """Run MODULE:FUNCTION with a profile active, write its trace, print the summary by op."""
    from pyggml.profile import Profile

    if args.dir:
        sys.path.insert(0, args.dir)
    fn = load_function(args.target, "profile", "that computes graphs (through a Scheduler)")
    if fn is None:
        return 2
    with Profile() as prof:
        fn()
    out = prof.write_trace(args.output)
    print(prof.summary().text())
    print(f"profile: {len(prof.node_events())} node events on {sum(map(len, prof.lanes().values()))} lanes -> {out} "
          "(open in ui.perfetto.dev or chrome://tracing)", file=sys.stderr)
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    """Render the graph returned by MODULE:FUNCTION (a Graph or a Tensor) as DOT, or SVG through graphviz."""
    fn = load_function(args.target, "graph", "returning a Graph or Tensor")
    if fn is None:
        return 2
    obj = fn()
    graph = obj if isinstance(obj, Graph) else Graph().build_forward_expand(obj) if isinstance(obj, Tensor) else None
    if graph is None:
        print(f"graph: {args.target} returned {type(obj).__name__}, not a Graph or Tensor", file=sys.stderr)
        return 2
    dot = graph.to_dot()
    out = Path(args.output) if args.output else None
    if out is None:
        print(dot)
    elif out.suffix == ".svg":
        if shutil.which("dot") is None:
            print("graph: SVG output needs graphviz's `dot` (apt-get install graphviz)", file=sys.stderr)
            return 2
        done = subprocess.run(["dot", "-Tsvg", "-o", str(out)], input=dot.encode(), capture_output=True)
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip().splitlines()
            raise OSError(f"graphviz's dot could not write {out}: {why[-1] if why else f'status {done.returncode}'}")
    else:
        out.write_text(dot)
    return 0


COMMANDS_GROUP = "pyggml.commands"
"""Entry points of plugins' subcommands: `name = module:function`, the function taking the remaining argv."""


def plugin_commands() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=COMMANDS_GROUP)}


SIGPIPE_STATUS = 128 + 13
"""The exit status of a tool that wrote into a pipe whose reader had gone (a shell reports SIGPIPE's death so)."""


def run_command(command: Callable[[], int]) -> int:
    """Run a command-line tool's body and return its exit status. Output into a pipe whose reader has gone (`pyggml
    devices --json | head -1`) ends the tool quietly, as Unix tools end, with status 141, and not with a
    BrokenPipeError traceback. (Python ignores SIGPIPE so that sockets report EPIPE, so a closed stdout is an
    exception here; restoring SIGPIPE's default would let a client's closed socket kill `pyggml rpc-server`.)"""
    try:
        status = command()
        sys.stdout.flush()  # what is still buffered fails here, not in the interpreter's flush at exit
        return status
    except BrokenPipeError:
        # nothing more can be written there: point stdout at /dev/null, so the flush at exit is quiet too
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        return SIGPIPE_STATUS


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(lambda: _main(list(sys.argv[1:] if argv is None else argv)))


def _main(argv: list[str]) -> int:
    extra = plugin_commands()
    if argv and argv[0] in extra:
        return int(extra[argv[0]].load()(argv[1:]))
    if argv and argv[0] == "conformance":  # registered in COMMANDS_GROUP by pyggml-conformance, when installed
        print("pyggml conformance needs the pyggml-conformance distribution (pip install ./conformance)",
              file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog="pyggml", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("devices", help="list devices of every loaded backend plugin")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_devices)
    p = sub.add_parser("plugins", help="list backend plugins (entry points) and their load status")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_plugins)
    p = sub.add_parser("options", help="every option of pyggml and of each device, with its variable and value")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_options)
    p = sub.add_parser("info", help="environment report (JSON)")
    p.set_defaults(fn=cmd_info)
    p = sub.add_parser("graph", help="render a graph to DOT or SVG")
    p.add_argument("target", help="MODULE:FUNCTION returning a Graph or Tensor")
    p.add_argument("-o", "--output", help="file.dot or file.svg (default: DOT on stdout)")
    p.set_defaults(fn=cmd_graph)
    add_cache_parser(sub)
    p = sub.add_parser("profile", help="run MODULE:FUNCTION profiled: a Chrome/Perfetto trace and a table by op")
    p.add_argument("target", help="MODULE:FUNCTION that computes graphs (no arguments)")
    p.add_argument("-o", "--output", default="trace.json", help="the trace JSON (default: trace.json)")
    p.add_argument("--dir", help="a directory to import MODULE from (put first on sys.path)")
    p.set_defaults(fn=cmd_profile)
    for name, ep in sorted(extra.items()):
        dist = ep.dist.name if ep.dist is not None else "a plugin"
        sub.add_parser(name, help=f"from {dist} ({name} --help)")
    args = parser.parse_args(argv)
    try:
        return int(args.fn(args))
    except BrokenPipeError:
        raise  # the reader of the output has gone: `run_command` ends quietly
    except (PyGGMLError, OSError) as e:
        print(f"pyggml {args.cmd}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
