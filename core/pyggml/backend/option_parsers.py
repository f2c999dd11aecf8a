"""Parsers of option values (`pyggml.backend.options`): text -> value, or ValueError saying why not (the message
that follows the variable's name and value). `option()` picks one by the default's type where none is given."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def flag(text: str) -> bool:
    """1/0, true/false, yes/no, on/off (any case)."""
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ValueError("not a flag (1/0, true/false, yes/no, on/off)")


def integer(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError("not an integer") from None


def count(text: str) -> int:
    """An integer of at least 1."""
    n = integer(text)
    if n < 1:
        raise ValueError("must be at least 1")
    return n


def level(text: str) -> int:
    """An integer of at least 0."""
    n = integer(text)
    if n < 0:
        raise ValueError("must be at least 0")
    return n


def seconds(text: str) -> float:
    """A positive number of seconds."""
    try:
        v = float(text.strip())
    except ValueError:
        raise ValueError("not a number of seconds") from None
    if not v > 0:
        raise ValueError("must be a positive number of seconds")
    return v


def seconds_or_forever(text: str) -> float | None:
    """A number of seconds; 0 or less: no limit (None)."""
    try:
        v = float(text.strip())
    except ValueError:
        raise ValueError("not a number of seconds") from None
    return None if v <= 0 else v


def names(text: str) -> tuple[str, ...]:
    """A comma-separated list (entries stripped, empty ones dropped)."""
    return tuple(w.strip() for w in text.split(",") if w.strip())


def choice(*allowed: str) -> Callable[[str], str]:
    """One of `allowed` (any case)."""
    def parse(text: str) -> str:
        t = text.strip().lower()
        if t not in allowed:
            raise ValueError(f"not one of {', '.join(allowed)}")
        return t
    return parse


def under(sub: str) -> Callable[[str], Path]:
    """A folder given by its parent: `$VAR/sub` (the kernel caches under PYGGML_CACHE_DIR)."""
    return lambda text: Path(text.strip()) / sub


def number(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError("not a number") from None


BY_TYPE: dict[type, Callable[[str], object]] = {bool: flag, int: integer, float: number, str: str.strip,
                                                Path: lambda t: Path(t.strip())}
"""The parser of an option declared without one, by its type (`X` or `X | None`)."""
