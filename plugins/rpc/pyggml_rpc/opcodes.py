"""pyggml op <-> ggml wire op: op numbers, the 16 int32 op_params words and src order of ggml's RPC protocol
v7.0.0 (llama.cpp as vendored in llama-cpp-python 0.3.36, GGML_OP_COUNT == 101).

`encode(node)` gives what ggml's own constructor would have recorded for the same op; `decode(...)` turns what a
ggml client sent back into a pyggml op, params dataclass and srcs, refusing (OpcodeError) anything out of range.
Both directions run one table, `pyggml_rpc.opcode_table.ENTRIES`. Type ids: pyggml's GGMLType values already are
ggml's ids (so GGUF maps 1:1); `ggml_type` / `pyggml_type` check them.

Every pyggml op has a ggml number; the one ggml op pyggml lacks (FLASH_ATTN_BACK, deferred: see
pyggml.ops.backward.DEFERRED_OPS), types Q2_0 and the removed ids are refused by decode. Custom ops
(MAP_CUSTOM1/2/3, CUSTOM) have their numbers but never travel: a Python callable cannot be sent, and a ggml
client's function pointer cannot be called here.

Where pyggml and ggml differ (all handled here, exactly, or refused):

- Floats travel as float32 (ggml's constructors take `float`): pyggml's Python floats are rounded to nearest, as
  C rounds a double argument, so a decoded value equals the original only if it was a float32 already. A finite
  value that overflows float32, or a non-zero one that rounds to 0, is refused. NaN is refused except in SCALE,
  LEAKY_RELU and FILL constants.
- Ints must fit their word: int32 (ACC/SET strides and offset are int32 in ggml, SET's offset < 2**30 as
  ggml_set asserts), VIEW's byte offset is a size_t in words 0-1, low word first (little-endian hosts).
- REPEAT: ggml keeps only src0 (the target shape is the result's ne); pyggml's src1 only lends its shape, so
  decode supplies a data-less leaf of the result's type and ne in its place (callers must not allocate it).
- SET_ROWS: ggml's srcs are (rows, ids, destination), pyggml's (destination, rows, ids).
- REPEAT_BACK / GET_ROWS_BACK: ggml keeps no params (the result's shape is its ne); pyggml's ShapeParams(ne) is
  rebuilt from the result's ne on decode. ROPE_BACK has ROPE's words.
- CONT: ggml has no params (ggml_cont_4d just shapes the result); decode gives ContParams(ne) when ne differs
  from src0's, else None (pyggml's `cont(a)` and `cont(a, *a.ne)` are the same op).
- TOP_K: ggml has no params; k is the result's ne[0].
- UNARY: words 1-4 are XIELU's coefficients (ggml_xielu stores them already constrained, as XieluParams holds
  them); every other sub-op has them 0. GLU: words 2-3 are SWIGLU_OAI's alpha and limit (SWIGLU_CLAMP: limit in
  word 3, word 2 0), 0 for the others.
- GLU: ggml's split form ignores `swapped` (every backend); pyggml's split+swapped computes act(b) * a, which
  encode sends as ggml's split op over (b, a). Decode drops a swapped flag on a split GLU, as ggml's kernels do.
- ACC / SET: word 4 is ggml's in-place flag; encode sets it when the node is a view (in place), decode accepts
  0/1 and drops it (the view relation travels as view_src; a result that ggml leaves undefined is defined here).
- ROPE: pyggml implements modes NORMAL (0) and NEOX (2) only: MROPE / VISION / IMROPE, mode bit 0, the mrope
  sections (words 11-14) and ggml_rope_set_offset's n_offs (word 15) are refused; words 0 and 3 must be 0.
- PAD: ggml's word 8 (circular padding) must be 0: pyggml pads with zeros.
- FLASH_ATTN_EXT: ggml's kernels read the mask as F16, so encode refuses an F32 mask. Decode accepts and drops
  word 3 (accumulator precision) and word 4 (n_kv_max, a sparsity bound that leaves the result unchanged).
- MUL_MAT / MUL_MAT_ID: words 0-3 (precision requests, op hint) are accepted and dropped; pyggml computes
  exactly.
- ARANGE: the element count ggml computes in float32 must equal the tensor's ne[0] (encode and decode); a
  negative step, which ggml_arange's assert forbids but its kernels compute, is sent as is.
- CPY made by ggml_cast has src1 == the node itself: decode passes srcs through; callers must resolve it.
- Any other word must be 0 on decode (a word ggml would read that pyggml would ignore is refused).

Decode checks params, srcs count and the ranges above; it does not run pyggml's shape rules
(`pyggml.ops.base.OPS[op].infer`), which the caller applies to the srcs it resolved.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import struct
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from pyggml.errors import PyGGMLError, UnsupportedOpError, UnsupportedTypeError
from pyggml.ops.backward import DEFERRED_OPS
from pyggml.ops.base import Op
from pyggml.tensor import Ne, Tensor
from pyggml.types import GGMLType, type_traits
from pyggml_rpc.opcode_table import (
    BY_CODE,
    ENTRIES,
    GGML_MAX_SRC,
    GGML_OP_COUNT,
    GGML_OP_NAMES,
    GGML_TYPE_COUNT,
    INT32_MAX,
    INT32_MIN,
    N_WORDS,
    TYPE_GGML_ONLY,
    Entry,
    Field,
    ParamError,
    Srcs,
)

__all__ = ["GGML_OP_COUNT", "OpcodeError", "WireOp", "decode", "encode", "ggml_type", "pyggml_type", "supported",
           "wire_params"]

Words = npt.NDArray[np.int32]


class OpcodeError(PyGGMLError, ValueError):
    """A ggml op, params word, src list or type id that pyggml cannot take; `op` and `field` name the culprit."""

    def __init__(self, op: str, field: str, message: str) -> None:
        super().__init__(f"{op}: {field}: {message}")
        self.op = op
        self.field = field


class WireOp(NamedTuple):
    op: int
    params: Words
    """int32[16], ggml's op_params."""
    srcs: Srcs
    """ggml's src order, trailing Nones dropped (at most GGML_MAX_SRC)."""


# ---- types ------------------------------------------------------------------------------------------------------


def ggml_type(t: GGMLType) -> int:
    """ggml's type id of a pyggml type (the same number)."""
    if not isinstance(t, GGMLType) or type_traits(t).blck_size <= 0:
        raise UnsupportedTypeError(f"{t!r} is not a ggml type")
    return int(t)


def pyggml_type(type_id: int) -> GGMLType:
    """The pyggml type of a ggml type id; OpcodeError for ids out of range, removed (block size 0) or missing."""
    try:
        i = operator.index(type_id)
    except TypeError:
        raise OpcodeError("type", "id", f"{type_id!r} is not an integer") from None
    if not 0 <= i < GGML_TYPE_COUNT:
        raise OpcodeError("type", "id", f"{i} is outside ggml's 0..{GGML_TYPE_COUNT - 1}")
    if i in TYPE_GGML_ONLY:
        raise OpcodeError("type", "id", f"{i} ({TYPE_GGML_ONLY[i]}) is not a type pyggml has")
    try:
        t = GGMLType(i)
    except ValueError:
        raise OpcodeError("type", "id", f"{i} is not a type pyggml has") from None
    if type_traits(t).blck_size <= 0:
        raise OpcodeError("type", "id", f"{i} ({t}) has block size 0")
    return t


# ---- words <-> values -------------------------------------------------------------------------------------------


def _signed(u: int) -> int:
    u &= 0xFFFFFFFF
    return u - (1 << 32) if u > INT32_MAX else u


def _f32_word(x: float) -> int:
    try:
        (w,) = struct.unpack("<i", struct.pack("<f", x))
    except OverflowError:
        raise ValueError(f"{x!r} overflows float32") from None
    if x != 0 and w & 0x7FFFFFFF == 0:
        raise ValueError(f"{x!r} rounds to 0 in float32")
    return int(w)


def _word_f32(w: int) -> float:
    return float(struct.unpack("<f", struct.pack("<i", w))[0])


def _check_value(f: Field, v: Any) -> None:
    if f.kind == "f32":
        if math.isnan(v):
            if not f.nan:
                raise ParamError(f.name, "NaN is not allowed")
            return
        if f.finite and not math.isfinite(v):
            raise ParamError(f.name, f"{v} is not finite")
    if f.kind in ("i32", "u64", "f32"):
        if f.lo is not None and v < f.lo:
            raise ParamError(f.name, f"{v} is below {f.lo:g}")
        if f.hi is not None and v > f.hi:
            raise ParamError(f.name, f"{v} is above {f.hi:g}")


def _put(f: Field, v: Any, words: list[int]) -> None:
    """Write pyggml value v of field f into words (ParamError when the wire cannot carry it)."""
    if f.kind == "enum":
        assert f.codes is not None
        code = next((c for k, c in f.codes.items() if type(k) is type(v) and k == v), None)
        if code is None:
            raise ParamError(f.name, f"{v!r} has no ggml number")
        words[f.slot] = code
        return
    if f.kind == "bool":
        if not isinstance(v, bool | np.bool_):
            raise ParamError(f.name, f"{v!r} is not a bool")
        words[f.slot] = int(v)
        return
    try:
        x: Any = float(v) if f.kind == "f32" else operator.index(v)
    except (TypeError, ValueError, OverflowError) as e:
        raise ParamError(f.name, f"{v!r} is not a {f.kind}: {e}") from None
    _check_value(f, x)
    if f.kind == "f32":
        try:
            words[f.slot] = _f32_word(x)
        except ValueError as e:
            raise ParamError(f.name, str(e)) from None
    elif f.kind == "u64":
        words[f.slot], words[f.slot + 1] = _signed(x), _signed(x >> 32)
    else:
        if not INT32_MIN <= x <= INT32_MAX:
            raise ParamError(f.name, f"{x} does not fit int32")
        words[f.slot] = x


def _get(f: Field, words: list[int]) -> Any:
    """The pyggml value of field f in words (ParamError when out of range)."""
    w = words[f.slot]
    if f.kind == "enum":
        assert f.codes is not None
        for value, code in f.codes.items():
            if code == w:
                return value
        name = f" ({f.missing[w]}, which pyggml lacks)" if w in f.missing else ""
        raise ParamError(f.name, f"{w}{name} is not a value pyggml knows")
    if f.kind == "bool":
        if w not in (0, 1):
            raise ParamError(f.name, f"{w} is not 0 or 1")
        return bool(w)
    v: Any = w
    if f.kind == "f32":
        v = _word_f32(w)
    elif f.kind == "u64":
        v = (w & 0xFFFFFFFF) | ((words[f.slot + 1] & 0xFFFFFFFF) << 32)
    _check_value(f, v)
    return v


def _attr(params: Any, name: str) -> Any:
    base, _, rest = name.partition("[")
    v = getattr(params, base)
    return v[int(rest[:-1])] if rest else v


def _build(entry: Entry, words: list[int]) -> Any:
    cls = entry.wire or entry.params
    if cls is None or not entry.fields:
        return None
    kw: dict[str, Any] = {}
    for f in entry.fields:
        base, _, rest = f.name.partition("[")
        if rest:
            kw.setdefault(base, {})[int(rest[:-1])] = _get(f, words)
        else:
            kw[base] = _get(f, words)
    for k, v in kw.items():
        if isinstance(v, dict):
            kw[k] = tuple(v[i] for i in range(len(v)))
    return cls(**kw)


def _strip(srcs: Srcs) -> Srcs:
    n = len(srcs)
    while n and srcs[n - 1] is None:
        n -= 1
    return tuple(srcs[:n])


def _count_srcs(entry: Entry, srcs: Srcs) -> str | None:
    need, most = entry.n_src
    if len(srcs) > most:
        return f"{len(srcs)} srcs given, ggml's op takes at most {most}"
    missing = [i for i in range(need) if i >= len(srcs) or srcs[i] is None]
    if missing:
        return f"src[{missing[0]}] is required ({need} required, {most} at most)"
    return None


# ---- encode -------------------------------------------------------------------------------------------------------


def encode(node: Tensor) -> WireOp:
    """ggml's op number, op_params and src order for a pyggml node (leaves: op 0, zero params, no srcs)."""
    words = [0] * N_WORDS
    if node.op is Op.NONE:
        return WireOp(0, np.zeros(N_WORDS, np.int32), ())
    entry = ENTRIES.get(node.op)
    where = f"{node.op.name} node '{node.name}'"
    if entry is None:
        raise UnsupportedOpError(f"{where}: ggml has no op number for {node.op.name}")
    params = node.params
    try:
        if entry.params is not None and params is not None and not isinstance(params, entry.params):
            raise ParamError("params", f"{type(params).__name__} is not {entry.params.__name__}")
        if entry.fields and params is None:
            raise ParamError("params", f"{node.op.name} needs {entry.params.__name__ if entry.params else 'params'}")
        srcs = tuple(node.src)
        if entry.check is not None:
            entry.check(params, node.ne)
        if entry.to_wire is not None:
            srcs, params = entry.to_wire(srcs, params, node)
        for f in entry.fields:
            _put(f, _attr(params, f.name), words)
        if entry.inplace_slot is not None:
            words[entry.inplace_slot] = int(node.view_src is not None)
        srcs = _strip(srcs)
        why = _count_srcs(entry, srcs)
        if why is not None:
            raise ParamError("srcs", why)
    except ParamError as e:
        raise UnsupportedOpError(f"{where}: {e.field}: {e} (ggml cannot express it)") from None
    return WireOp(entry.code, np.array(words, dtype=np.int32), srcs)


def supported(node: Tensor) -> bool:
    """Whether `encode(node)` succeeds."""
    try:
        encode(node)
    except UnsupportedOpError:
        return False
    return True


# ---- decode -------------------------------------------------------------------------------------------------------


def _words(params: Any, where: str) -> list[int]:
    if not isinstance(params, np.ndarray):
        raise OpcodeError(where, "params", f"a numpy array of {N_WORDS} int32 words is required, "
                                           f"got {type(params).__name__}")
    if params.shape != (N_WORDS,) or params.dtype.kind not in "iu":
        raise OpcodeError(where, "params", f"{N_WORDS} integer words are required, got {params.dtype} "
                                           f"{params.shape}")
    if params.dtype.itemsize == 4:
        return [int(w) for w in params.view(np.int32)]
    out = [int(w) for w in params]
    if any(not INT32_MIN <= w <= INT32_MAX for w in out):
        raise OpcodeError(where, "params", "a word does not fit int32")
    return out


def _check_shape(where: str, srcs: Any, dtype: Any, ne: Any) -> tuple[Srcs, GGMLType, Ne]:
    if not isinstance(srcs, tuple | list) or len(srcs) > GGML_MAX_SRC:
        raise OpcodeError(where, "srcs", f"a tuple of at most {GGML_MAX_SRC} tensors or None is required")
    bad = [i for i, s in enumerate(srcs) if s is not None and not isinstance(s, Tensor)]
    if bad:
        raise OpcodeError(where, f"src[{bad[0]}]", f"{type(srcs[bad[0]]).__name__} is not a Tensor")
    t = dtype if isinstance(dtype, GGMLType) else pyggml_type(dtype)
    try:
        dims = tuple(operator.index(n) for n in ne)
    except TypeError:
        raise OpcodeError(where, "ne", f"{ne!r} is not 4 integers") from None
    if len(dims) != 4 or any(n < 0 for n in dims):
        raise OpcodeError(where, "ne", f"{list(dims)} must be 4 non-negative dimensions")
    return tuple(srcs), t, (dims[0], dims[1], dims[2], dims[3])


def decode(op: int, params: npt.NDArray[Any], srcs: Srcs, dtype: GGMLType,
           ne: tuple[int, int, int, int]) -> tuple[Op, Any, Srcs]:
    """(pyggml Op, params dataclass or None, srcs in pyggml's order) of a ggml op received on the wire.

    Raises OpcodeError, and nothing else, for anything pyggml cannot take exactly."""
    try:
        return _decode(op, params, srcs, dtype, ne)
    except OpcodeError:
        raise
    except Exception as e:  # untrusted input: whatever slipped past the checks is still a refusal
        raise OpcodeError(f"ggml op {op!r}", "input", f"unexpected {type(e).__name__}: {e}") from e


def _decode(op: Any, params: Any, srcs: Any, dtype: Any, ne: Any) -> tuple[Op, Any, Srcs]:
    try:
        code = operator.index(op)
    except TypeError:
        raise OpcodeError(f"ggml op {op!r}", "op", "not an integer") from None
    if not 0 <= code < GGML_OP_COUNT:
        raise OpcodeError(f"ggml op {code}", "op", f"outside ggml's 0..{GGML_OP_COUNT - 1}")
    where = f"ggml op {code} ({GGML_OP_NAMES[code]})"
    words = _words(params, where)
    given, t, dims = _check_shape(where, srcs, dtype, ne)
    given = _strip(given)
    if code == 0:
        if any(words):
            raise OpcodeError(where, "params", "a leaf has no params")
        if given:
            raise OpcodeError(where, "srcs", "a leaf has no srcs")
        return Op.NONE, None, ()
    pyop = BY_CODE.get(code)
    if pyop is None:
        raise OpcodeError(where, "op", DEFERRED_OPS.get(GGML_OP_NAMES[code], "pyggml has no such op"))
    entry = ENTRIES[pyop]
    why = _count_srcs(entry, given)
    if why is not None:
        raise OpcodeError(where, "srcs", why)
    try:
        used: set[int] = set()
        for f in (*entry.fields, *entry.extra):
            used.update(range(f.slot, f.slot + f.width))
        for f in entry.extra:
            _get(f, words)
        if entry.inplace_slot is not None:
            used.add(entry.inplace_slot)
            if words[entry.inplace_slot] not in (0, 1):
                raise ParamError("inplace", f"{words[entry.inplace_slot]} is not 0 or 1")
        stray = [i for i in range(N_WORDS) if words[i] and i not in used]
        if stray:
            raise ParamError(f"params[{stray[0]}]", f"{words[stray[0]]} where pyggml expects 0 (unused or "
                                                    "a ggml feature pyggml lacks)")
        value = _build(entry, words)
        if entry.from_wire is not None:
            given, value = entry.from_wire(given, value, t, dims)
        if entry.check is not None:
            entry.check(value, dims)
    except ParamError as e:
        raise OpcodeError(where, e.field, str(e)) from None
    return pyop, value, _strip(given)


def wire_params(op: Op, params: Any) -> Any:
    """params as decode gives them back after encode: float fields rounded to float32 (for comparisons)."""
    entry = ENTRIES.get(op)
    if entry is None or entry.params is None or params is None:
        return params
    changes = {f.name: _word_f32(_f32_word(float(getattr(params, f.name)))) for f in entry.fields
               if f.kind == "f32" and hasattr(params, f.name)}
    return dataclasses.replace(params, **changes) if changes else params
