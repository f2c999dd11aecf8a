"""`pyggml cache info | clear`: the weight cache's files (`pyggml.weight_cache`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pyggml.weight_cache import default_directory
from pyggml.weight_cache.tidy import clear, entries


def add_parser(sub: Any) -> None:
    """Add the `cache` subcommand to the `pyggml` parser's subparsers."""
    p = sub.add_parser("cache", help="the weight cache (repacked weights kept across loads): info or clear")
    p.add_argument("action", choices=("info", "clear"))
    p.add_argument("--dir", default=None, help="the cache folder (default: $PYGGML_CACHE_DIR/weights, else "
                                               "$XDG_CACHE_HOME/pyggml/weights, else ~/.cache/pyggml/weights)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_cache)


def cmd_cache(args: argparse.Namespace) -> int:
    from pathlib import Path

    directory = Path(args.dir) if args.dir else default_directory()
    if args.action == "clear":
        n, size = clear(directory)
        out: dict[str, Any] = {"directory": str(directory), "removed_files": n, "removed_bytes": size}
        print(json.dumps(out) if args.json else f"{directory}: removed {n} files, {size / 2**20:.1f} MiB")
        return 0
    rows = entries(directory)
    total = sum(r["bytes"] for r in rows)
    if args.json:
        print(json.dumps({"directory": str(directory), "bytes": total, "files": rows}, indent=2))
        return 0
    print(f"{directory}: {len(rows)} files, {total / 2**20:.1f} MiB")
    for r in rows:
        what = ("temporary (a load writing it, or one that died)" if r.get("temporary")
                else f"unreadable: {r['error']}" if "error" in r
                else f"{r['model']} ({r['tensors']} tensors, {r['buffer_type']}, layout {r['layout']})")
        print(f"  {r['file']}  {r['bytes'] / 2**20:.1f} MiB  {what}")
    return 0
