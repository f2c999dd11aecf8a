"""Writing a GGUF made from another one with the `gguf` package (a dev dependency; pyggml only reads GGUF): the
source's metadata carried over, and the file moved into place only once it is complete."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import gguf


def copy_metadata(src: Path, w: gguf.GGUFWriter, overrides: dict[str, Any], only: set[str] | None = None) -> None:
    """Every key/value of `src` (or those named in `only`) into the gguf.GGUFWriter `w` (with its value type),
    `overrides` replacing values of keys src has (a key it lacks is an error: its value type would be a guess)."""
    import gguf

    missing = set(overrides)
    for field in gguf.GGUFReader(src).fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue  # written by the writer itself
        if only is not None and field.name not in only:
            continue
        missing.discard(field.name)
        value: Any = overrides.get(field.name, field.contents())
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(field.name, value, vtype, sub_type=sub)
    if missing:
        raise KeyError(f"{src}: no metadata {sorted(missing)} to replace")


def finish_file(w: gguf.GGUFWriter, tmp: Path, dest: Path) -> Path:
    """Write out the gguf.GGUFWriter `w` (to `tmp`) and move the file to `dest`: an interrupted run leaves none."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(dest)
    return dest
