"""pyggml_rpc.opcodes: the table against ggml.h, round trips over every conformance graph, decode against random
and mutated input, hand-checked op_params layouts (from ggml.c), and, where ggml's base library is built
(`make llama-cpp-ref`), the words and src order ggml's own constructors record."""

from __future__ import annotations

import ctypes
import math
import os
import re
import struct
import tarfile
from collections import Counter
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pyggml_rpc import opcodes
from pyggml_rpc.opcode_table import (
    ENTRIES,
    GGML_GLU_COUNT,
    GGML_MAX_SRC,
    GGML_OP_NAMES,
    GGML_TYPE_COUNT,
    GGML_UNARY_COUNT,
    GLU_CODES,
    GLU_GGML_ONLY,
    HINT_VALUES,
    N_WORDS,
    PREC_VALUES,
    ROPE_GGML_ONLY,
    ROPE_MODES,
    SORT_CODES,
    TYPE_GGML_ONLY,
    UNARY_CODES,
    UNARY_GGML_ONLY,
)
from pyggml_rpc.opcodes import OpcodeError, decode, encode, wire_params

from pyggml import ops
from pyggml.context import Context
from pyggml.errors import PyGGMLError, UnsupportedOpError
from pyggml.ops import GluOp, Op, SortOrder, UnaryOp
from pyggml.ops.custom import CUSTOM_OPS
from pyggml.ops.elementwise import PARAMS_OF_GLU, PARAMS_OF_UNARY
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.cases import all_cases
from pyggml_conformance.runner import realize
from pyggml_testing.llama_cpp_ref import CACHE, ggml_library

SDIST_INCLUDE = Path("/tmp/sd/llama_cpp_python-0.3.36/vendor/llama.cpp/ggml/include")
T = GGMLType


def f32(x: float) -> int:
    """The int32 word of float32 x (ggml's memcpy of a float into op_params)."""
    return int(struct.unpack("<i", struct.pack("<f", x))[0])


def words(*w: int) -> list[int]:
    return [*w] + [0] * (N_WORDS - len(w))


# ---- ggml.h -------------------------------------------------------------------------------------------------------


@cache
def ggml_header(name: str) -> str | None:
    """ggml/include/<name> of llama-cpp-python 0.3.36: $PYGGML_GGML_INCLUDE, the unpacked sdist, or the sdist
    `make` keeps in .cache."""
    for d in (Path(os.environ.get("PYGGML_GGML_INCLUDE", "") or SDIST_INCLUDE), SDIST_INCLUDE):
        if (d / name).is_file():
            return (d / name).read_text()
    for tgz in sorted(CACHE.glob("llama_cpp_python-0.3.36*.tar.gz")):
        with tarfile.open(tgz) as tar:
            for m in tar.getmembers():
                if m.name.endswith(f"/vendor/llama.cpp/ggml/include/{name}"):
                    f = tar.extractfile(m)
                    return f.read().decode() if f is not None else None
    return None


def header(name: str) -> str:
    text = ggml_header(name)
    if text is None:
        pytest.skip(f"{name} of llama-cpp-python 0.3.36 not found (neither {SDIST_INCLUDE} nor "
                    f"{CACHE}/llama_cpp_python-0.3.36.tar.gz; make llama-cpp-ref fetches the sdist)")
    return text


def c_enum(name: str) -> dict[str, int]:
    """enum `name` of ggml.h: member -> value (implicit values counted, commented-out members left out)."""
    m = re.search(r"enum\s+" + name + r"\s*\{(.*?)\};", header("ggml.h"), re.S)
    assert m is not None, f"enum {name} not in ggml.h"
    out: dict[str, int] = {}
    v = -1
    for item in re.sub(r"//[^\n]*", "", m.group(1)).split(","):
        key, _, val = item.partition("=")
        if not key.strip():
            continue
        v = int(val.strip(), 0) if val.strip() else v + 1
        out[key.strip()] = v
    return out


def c_define(name: str, text: str) -> int:
    m = re.search(rf"#\s*define\s+{name}\s+(\d+)", text)
    assert m is not None, f"#define {name} not found"
    return int(m.group(1))


def test_op_numbers_match_ggml_h() -> None:
    ggml = c_enum("ggml_op")
    assert ggml["GGML_OP_COUNT"] == opcodes.GGML_OP_COUNT == len(GGML_OP_NAMES) == 101
    assert {f"GGML_OP_{n}": i for i, n in enumerate(GGML_OP_NAMES)} == {k: v for k, v in ggml.items()
                                                                         if k != "GGML_OP_COUNT"}
    for op, entry in ENTRIES.items():
        assert ggml[f"GGML_OP_{op.name}"] == entry.code, op
    assert set(ENTRIES) == set(Op) - {Op.NONE}, "a pyggml op without a ggml number"
    assert ggml["GGML_OP_NONE"] == encode(Context(no_alloc=True).new_tensor(T.F32, 4)).op == 0


def test_sub_op_and_enum_numbers_match_ggml_h() -> None:
    unary = c_enum("ggml_unary_op")
    assert unary["GGML_UNARY_OP_COUNT"] == GGML_UNARY_COUNT
    assert {u: unary[f"GGML_UNARY_OP_{u.name}"] for u in UnaryOp} == UNARY_CODES
    assert {v: k.removeprefix("GGML_UNARY_OP_") for k, v in unary.items()
            if v not in UNARY_CODES.values() and not k.endswith("COUNT")} == UNARY_GGML_ONLY
    glu = c_enum("ggml_glu_op")
    assert glu["GGML_GLU_OP_COUNT"] == GGML_GLU_COUNT
    assert {g: glu[f"GGML_GLU_OP_{g.name}"] for g in GluOp} == GLU_CODES
    assert {v: k.removeprefix("GGML_GLU_OP_") for k, v in glu.items()
            if v not in GLU_CODES.values() and not k.endswith("COUNT")} == GLU_GGML_ONLY
    sort = c_enum("ggml_sort_order")
    assert {o: sort[f"GGML_SORT_ORDER_{o.name}"] for o in SortOrder} == SORT_CODES
    assert set(c_enum("ggml_prec").values()) == set(PREC_VALUES)
    assert set(c_enum("ggml_op_hint").values()) == set(HINT_VALUES)
    h = header("ggml.h")
    assert {c_define("GGML_ROPE_TYPE_NORMAL", h), c_define("GGML_ROPE_TYPE_NEOX", h)} == set(ROPE_MODES.values())
    assert {c_define(f"GGML_ROPE_TYPE_{n}", h): n for n in ROPE_GGML_ONLY.values()} == ROPE_GGML_ONLY
    assert c_define("GGML_MAX_SRC", h) == GGML_MAX_SRC
    assert c_define("GGML_MAX_OP_PARAMS", h) == 4 * N_WORDS


def test_type_ids_match_ggml_h() -> None:
    types = c_enum("ggml_type")
    assert types.pop("GGML_TYPE_COUNT") == GGML_TYPE_COUNT
    assert {t.name: int(t) for t in GGMLType} | {k: v for k, v in TYPE_GGML_ONLY.items() if v == "Q2_0"} == \
        {k.removeprefix("GGML_TYPE_"): v for k, v in types.items() if v != 42} | {42: "Q2_0"}
    removed = set(range(GGML_TYPE_COUNT)) - set(types.values())
    assert removed == {k for k, v in TYPE_GGML_ONLY.items() if "removed" in v}
    for t in GGMLType:
        assert opcodes.pyggml_type(opcodes.ggml_type(t)) is t
    for bad in (*TYPE_GGML_ONLY, GGML_TYPE_COUNT, -1, 1 << 40, "f32", None, 1.0):
        with pytest.raises(OpcodeError):
            opcodes.pyggml_type(bad)  # type: ignore[arg-type]


def test_rpc_protocol_version() -> None:
    rpc = header("ggml-rpc.h")
    assert [c_define(f"RPC_PROTO_{p}_VERSION", rpc) for p in ("MAJOR", "MINOR", "PATCH")] == [7, 0, 0]
    assert re.search(r"GGML_OP_COUNT\s*==\s*101", rpc)


# ---- round trips over the conformance suite -----------------------------------------------------------------------


def test_round_trip_every_conformance_node() -> None:
    refused: dict[str, str] = {}
    seen: Counter[Op] = Counter()
    for case in all_cases():
        for node in realize(case).graph.nodes:
            try:
                w = encode(node)
            except UnsupportedOpError as e:
                refused.setdefault(node.op.name, str(e))
                assert not opcodes.supported(node)
                continue
            assert opcodes.supported(node)
            assert w.params.dtype == np.int32 and w.params.shape == (N_WORDS,)
            assert len(w.srcs) <= GGML_MAX_SRC and (not w.srcs or w.srcs[-1] is not None)
            op, params, srcs = decode(w.op, w.params, w.srcs, node.type, node.ne)
            seen[op] += 1
            assert op is node.op
            expected_srcs = tuple(node.src)
            if op is Op.GLU and len(node.src) == 2 and node.params.swapped:  # sent as ggml's split op over (b, a)
                assert w.srcs == (node.src[1], node.src[0]) and w.params[1] == 0
                assert params == ops.GluParams(node.params.op, swapped=False)
                continue
            if op is Op.CONT and node.params is not None and node.params.ne == node.src[0].ne:
                assert params is None  # cont(a, *a.ne) is cont(a)
            else:
                assert params == wire_params(op, node.params), case.name
            if op is Op.REPEAT:  # ggml keeps no src1; decode stands in a data-less leaf of the result's shape
                assert w.srcs == (node.src[0],) and srcs[0] is node.src[0]
                assert srcs[1] is not None and srcs[1].ne == node.ne and srcs[1].op is Op.NONE
                continue
            assert len(srcs) == len(expected_srcs) and all(a is b for a, b in zip(srcs, expected_srcs, strict=True))
    never = set(Op) - set(seen) - {Op.NONE} - CUSTOM_OPS
    assert not never, f"ops the suite never built: {never}"
    # the only nodes ggml cannot express: FLASH_ATTN_EXT with an F32 mask (ggml's kernels read masks as F16), and
    # custom ops (a Python callable cannot travel)
    assert set(refused) == {"FLASH_ATTN_EXT"} | {op.name for op in CUSTOM_OPS}, refused
    assert all("callable" in refused[op.name] for op in CUSTOM_OPS)
    assert "mask" in refused["FLASH_ATTN_EXT"] and "F16" in refused["FLASH_ATTN_EXT"]


# ---- decode on untrusted input ------------------------------------------------------------------------------------

INTERESTING = [0, 1, 2, 3, 4, 8, 24, 40, -1, -2, 10, 15, 20, 30, 64, 1 << 30, 2**31 - 1, -(2**31),
               *(f32(x) for x in (float("nan"), float("inf"), float("-inf"), -0.0, 1e-6, -1.0, 0.5, 1e30, 3.4e38))]


def _pool(ctx: Context) -> list[Tensor]:
    shapes = [(8,), (8, 4), (8, 4, 6), (8, 4, 6, 2), (4, 8), (1,), (6,), (32, 4, 6)]
    pool = [ctx.new_tensor(t, *ne) for t in (T.F32, T.F16, T.I32, T.I64) for ne in shapes]
    return [*pool, ctx.new_tensor(T.Q4_0, 32, 4), ctx.new_tensor(T.BF16, 8, 4)]


def _seeds() -> list[tuple[int, np.ndarray, tuple[Tensor | None, ...], GGMLType, tuple[int, int, int, int]]]:
    out = []
    per_op: Counter[Op] = Counter()
    for case in all_cases():
        for node in realize(case).graph.nodes:
            if per_op[node.op] < 40 and opcodes.supported(node):
                per_op[node.op] += 1
                w = encode(node)
                out.append((w.op, w.params, w.srcs, node.type, node.ne))
    return out


def test_decode_raises_only_opcode_error_on_random_input() -> None:
    rng = np.random.default_rng(20240607)
    pool = _pool(Context(no_alloc=True))
    seeds = _seeds()
    types = list(GGMLType)
    outcome: Counter[str] = Counter()
    for _ in range(20_000):
        if rng.random() < 0.35:
            op = int(rng.integers(-3, 106))
            w = np.zeros(N_WORDS, np.int32)
            for i in rng.choice(N_WORDS, size=int(rng.integers(0, 6)), replace=False):
                w[i] = INTERESTING[rng.integers(len(INTERESTING))] if rng.random() < 0.7 else rng.integers(-9, 99)
            srcs: tuple[Tensor | None, ...] = tuple(
                None if rng.random() < 0.2 else pool[rng.integers(len(pool))] for _ in range(rng.integers(0, 12)))
            dtype, ne = types[rng.integers(len(types))], tuple(int(x) for x in rng.integers(0, 9, 4))
        else:
            op, w0, srcs, dtype, ne = seeds[rng.integers(len(seeds))]
            w = w0.copy()
            r = rng.random()
            if r < 0.6:
                w[rng.integers(N_WORDS)] = INTERESTING[rng.integers(len(INTERESTING))]
            elif r < 0.75:
                srcs = srcs[: rng.integers(0, len(srcs) + 1)] + (pool[rng.integers(len(pool))],) * rng.integers(0, 2)
            elif r < 0.85:
                op = int(rng.integers(0, 101))
            elif r < 0.95:
                ne = tuple(int(x) for x in rng.integers(-1, 70, 4))
            # else: unchanged
        try:
            got = decode(op, w, srcs, dtype, ne)  # type: ignore[arg-type]
        except OpcodeError as e:
            assert e.field != "input", f"an unexpected error slipped through: {e}"
            assert isinstance(e, ValueError) and isinstance(e, PyGGMLError)
            outcome["refused"] += 1
            continue
        pyop, params, psrcs = got
        entry = ENTRIES.get(pyop)
        assert pyop is Op.NONE or entry is not None
        assert params is None or (entry is not None and isinstance(params, entry.params or ()))
        assert all(s is None or isinstance(s, Tensor) for s in psrcs)
        outcome["decoded"] += 1
    assert outcome["decoded"] > 2500 and outcome["refused"] > 2500, outcome


@pytest.mark.parametrize("bad", [
    dict(op="1"), dict(op=None), dict(op=1.5), dict(op=-1), dict(op=101), dict(op=2**40),
    dict(params=[0] * 16), dict(params=np.zeros(15, np.int32)), dict(params=np.zeros((4, 4), np.int32)),
    dict(params=np.zeros(16, np.float32)), dict(params=np.full(16, 2**40, np.int64)), dict(params=None),
    dict(srcs=None), dict(srcs=(1, 2)), dict(srcs=(None,) * 11), dict(srcs="ab"),
    dict(dtype=99), dict(dtype=4), dict(dtype="f32"), dict(ne=(1, 2, 3)), dict(ne=(1, -2, 3, 4)), dict(ne=None),
])
def test_decode_refuses_malformed_arguments(bad: dict[str, Any]) -> None:
    a = Context(no_alloc=True).new_tensor(T.F32, 8)
    args: dict[str, Any] = dict(op=9, params=np.zeros(16, np.int32), srcs=(a,), dtype=T.F32, ne=(8, 1, 1, 1))
    args.update(bad)
    with pytest.raises(OpcodeError):
        decode(**args)


def test_decode_names_why_flash_attn_back_is_deferred() -> None:
    """The one ggml op pyggml leaves out (pyggml.ops.backward.DEFERRED_OPS) is refused with the reason."""
    ctx = Context(no_alloc=True)
    q, k, v, d = (ctx.new_tensor(T.F32, 8, 4), ctx.new_tensor(T.F32, 8, 6), ctx.new_tensor(T.F32, 6, 8),
                  ctx.new_tensor(T.F32, 8, 4))
    with pytest.raises(OpcodeError, match=r"FLASH_ATTN_BACK.*aborts"):
        decode(GGML_OP_NAMES.index("FLASH_ATTN_BACK"), np.zeros(16, np.int32), (q, k, v, d), T.F32, (112, 1, 1, 1))


def test_decode_accepts_uint32_and_int64_words() -> None:
    a = Context(no_alloc=True).new_tensor(T.F32, 8)
    w = np.array(words(f32(0.5), f32(-2.0)), np.int64)
    for arr in (w.astype(np.int32).view(np.uint32), w):
        assert decode(32, arr, (a,), T.F32, (8, 1, 1, 1))[1] == ops.ScaleParams(0.5, -2.0)


# ---- hand-checked layouts (ggml.c's constructors) -----------------------------------------------------------------


@pytest.fixture
def ctx() -> Context:
    return Context(no_alloc=True)


def roundtrip(node: Tensor) -> opcodes.WireOp:
    w = encode(node)
    op, params, _ = decode(w.op, w.params, w.srcs, node.type, node.ne)
    assert (op, params) == (node.op, wire_params(node.op, node.params))
    return w


def test_layout_rope(ctx: Context) -> None:
    a, pos, ff = ctx.new_tensor(T.F32, 16, 4, 6), ctx.new_tensor(T.I32, 6), ctx.new_tensor(T.F32, 8)
    n = ops.rope(a, pos, 16, ops.ROPE_TYPE_NEOX, freq_factors=ff, n_ctx_orig=4096, freq_base=500000.0,
                 freq_scale=0.25, ext_factor=1.0, attn_factor=0.75, beta_fast=32.0, beta_slow=2.0)
    w = roundtrip(n)
    assert w.op == 48 and w.srcs == (a, pos, ff)
    # n_past 0, n_dims, mode, n_ctx 0, n_ctx_orig, then six floats; sections 11..14 and n_offs 15 zero
    assert list(w.params) == words(0, 16, 2, 0, 4096, f32(500000.0), f32(0.25), f32(1.0), f32(0.75), f32(32.0),
                                   f32(2.0))
    for slot, value, field in ((2, 8, "mode"), (2, 24, "mode"), (2, 40, "mode"), (2, 1, "mode"), (15, 3, "params[15]"),
                               (11, 4, "params[11]"), (0, 1, "params[0]"), (1, 0, "n_dims"), (1, 15, "n_dims"),
                               (1, 18, "n_dims"), (4, -1, "n_ctx_orig"), (5, f32(float("nan")), "freq_base")):
        p = w.params.copy()
        p[slot] = value
        with pytest.raises(OpcodeError, match=re.escape(field)):
            decode(48, p, w.srcs, n.type, n.ne)


def test_layout_soft_max_and_flash_attn(ctx: Context) -> None:
    a, mask, sinks = ctx.new_tensor(T.F32, 8, 4, 2), ctx.new_tensor(T.F16, 8, 4), ctx.new_tensor(T.F32, 2)
    w = roundtrip(ops.soft_max(a, mask, 0.125, 8.0, sinks))
    assert (w.op, w.srcs, list(w.params)) == (46, (a, mask, sinks), words(f32(0.125), f32(8.0)))
    w = roundtrip(ops.soft_max(a, None, 1.0, 0.0, sinks))
    assert w.srcs == (a, None, sinks) and list(w.params) == words(f32(1.0))
    q, k, v = ctx.new_tensor(T.F32, 64, 3, 4), ctx.new_tensor(T.F16, 64, 8, 2), ctx.new_tensor(T.F16, 32, 8, 2)
    fmask = ctx.new_tensor(T.F16, 8, 3)
    n = ops.flash_attn_ext(q, k, v, fmask, 0.125, 0.0, 30.0, ctx.new_tensor(T.F32, 4))
    w = roundtrip(n)
    assert (w.op, w.srcs[:4], list(w.params)) == (74, (q, k, v, fmask), words(f32(0.125), 0, f32(30.0)))
    p = w.params.copy()
    p[3], p[4] = 10, 256  # GGML_PREC_F32 and an n_kv_max: permissions pyggml's exact kernel satisfies
    assert decode(74, p, w.srcs, n.type, n.ne)[1] == n.params
    for slot, value in ((3, 7), (4, -1), (5, 1), (2, f32(float("nan")))):
        p = w.params.copy()
        p[slot] = value
        with pytest.raises(OpcodeError):
            decode(74, p, w.srcs, n.type, n.ne)
    with pytest.raises(UnsupportedOpError, match="mask"):
        encode(ops.flash_attn_ext(q, k, v, ctx.new_tensor(T.F32, 8, 3), 0.125))


def test_layout_views(ctx: Context) -> None:
    big = ctx.new_tensor(T.I8, 2**32 + 64)  # metadata only (no_alloc)
    w = roundtrip(ops.view(big, (16,), offset=2**32 + 8))
    assert (w.op, list(w.params)) == (37, words(8, 1))  # size_t offset, low word first
    a = ctx.new_tensor(T.F32, 8, 4, 6, 2)
    w = roundtrip(ops.permute(a, 2, 0, 3, 1))
    assert (w.op, list(w.params)) == (38, words(2, 0, 3, 1))
    p = w.params.copy()
    p[3] = 2
    with pytest.raises(OpcodeError, match="axes"):
        decode(38, p, (a,), a.type, a.ne)
    assert roundtrip(ops.transpose(a)).op == 39 and roundtrip(ops.reshape(a, 32, 12)).op == 36
    c = ops.cont(ops.transpose(a), 32, 12)
    assert decode(35, roundtrip(c).params, (c.src[0],), c.type, c.ne)[1] == ops.ContParams((32, 12, 1, 1))


def test_layout_pad_concat_arange(ctx: Context) -> None:
    a = ctx.new_tensor(T.F32, 8, 4, 6, 2)
    w = roundtrip(ops.pad_ext(a, (1, 2, 3, 4), (5, 6, 7, 8)))
    assert (w.op, list(w.params)) == (64, words(1, 5, 2, 6, 3, 7, 4, 8))  # lp0, rp0, lp1, rp1, ...
    p = w.params.copy()
    p[8] = 1  # circular
    with pytest.raises(OpcodeError, match=r"params\[8\]"):
        decode(64, p, (a,), a.type, (14, 12, 16, 14))
    w = roundtrip(ops.concat(a, a, 2))
    assert (w.op, list(w.params)) == (22, words(2))
    n = ops.arange(ctx, 0.0, 10.0, 0.5)
    w = roundtrip(n)
    assert (w.op, w.srcs, list(w.params), n.ne) == (67, (), words(0, f32(10.0), f32(0.5)), (20, 1, 1, 1))
    with pytest.raises(OpcodeError, match="ne"):
        decode(67, w.params, (), T.F32, (21, 1, 1, 1))
    with pytest.raises(OpcodeError, match="step"):
        decode(67, np.array(words(0, f32(1.0), 0), np.int32), (), T.F32, (0, 1, 1, 1))


def test_layout_acc_set_glu_unary(ctx: Context) -> None:
    a, b = ctx.new_tensor(T.F32, 8, 4), ctx.new_tensor(T.F32, 4, 2)
    assert list(roundtrip(ops.acc(a, b, 32, 64, 64, 8)).params) == words(32, 64, 64, 8, 0)
    assert list(roundtrip(ops.set_(a, b, 32, 64, 64, 8, inplace=True)).params) == words(32, 64, 64, 8, 1)
    n = ops.set_(a, b, 32, 64, 64, 8)
    n.params = ops.AccParams(32, 64, 64, 1 << 30)
    with pytest.raises(UnsupportedOpError, match="offset"):
        encode(n)
    n.params = ops.AccParams(2**31, 64, 64, 0)
    with pytest.raises(UnsupportedOpError, match="nb1"):
        encode(n)
    x = ctx.new_tensor(T.F32, 8, 4)
    assert list(roundtrip(ops.swiglu(x, swapped=True)).params) == words(2, 1)
    w = encode(ops.swiglu(x, b=a, swapped=True))  # act(b) * a is ggml's split op over (b, a)
    assert (w.op, w.srcs, list(w.params)) == (100, (a, x), words(2, 0))
    assert decode(100, np.array(words(2, 1), np.int32), (x, a), T.F32, x.ne)[1] == ops.GluParams(GluOp.SWIGLU)
    for u in UnaryOp:
        if u not in PARAMS_OF_UNARY:
            assert list(roundtrip(ops.unary(x, u)).params) == words(UNARY_CODES[u])
    for bad_unary in (22, -1):
        with pytest.raises(OpcodeError, match="op"):
            decode(91, np.array(words(bad_unary), np.int32), (x,), T.F32, x.ne)
    for bad_glu in (7, -1):
        with pytest.raises(OpcodeError, match="op"):
            decode(100, np.array(words(bad_glu), np.int32), (x,), T.F32, (4, 4, 1, 1))


def test_layout_issue21_ops(ctx: Context) -> None:
    """XIELU's coefficients in words 1-4, SWIGLU_OAI's alpha / limit in 2-3, SWIGLU_CLAMP's limit in 3; stray
    words refused; ADD_ID's srcs; custom ops refused both ways."""
    x = ctx.new_tensor(T.F32, 8, 4)
    p = ops.xielu(x, 4.0, 20.0, 0.5, 1e-7).params
    w = roundtrip(ops.xielu(x, 4.0, 20.0, 0.5, 1e-7))
    assert list(w.params) == words(17, f32(p.alpha_n), f32(p.alpha_p), f32(0.5), f32(1e-7))
    assert list(roundtrip(ops.expm1(x)).params) == words(14)
    with pytest.raises(OpcodeError, match=r"alpha_n.*only XIELU"):
        decode(91, np.array(words(14, f32(1.0)), np.int32), (x,), T.F32, x.ne)
    assert list(roundtrip(ops.swiglu_oai(x, alpha=1.702, limit=7.0, swapped=True)).params) == \
        words(3, 1, f32(1.702), f32(7.0))
    assert list(roundtrip(ops.swiglu_clamp(x, x, 10.0)).params) == words(6, 0, 0, f32(10.0))
    with pytest.raises(OpcodeError, match=r"alpha.*only SWIGLU_OAI"):
        decode(100, np.array(words(6, 0, f32(1.0), f32(2.0)), np.int32), (x, x), T.F32, x.ne)
    with pytest.raises(OpcodeError, match=r"limit.*SWIGLU_"):
        decode(100, np.array(words(2, 0, 0, f32(2.0)), np.int32), (x, x), T.F32, x.ne)
    a, b = ctx.new_tensor(T.F32, 8, 2, 3), ctx.new_tensor(T.F32, 8, 5)
    ids = ctx.new_tensor(T.I32, 2, 3)
    w = roundtrip(ops.add_id(a, b, ids))
    assert (w.op, w.srcs, list(w.params)) == (3, (a, b, ids), words())

    def fn(*args: Any) -> None:
        pass

    assert not opcodes.supported(ops.map_custom1(x, fn))
    for code in (92, 93, 94, 95):
        with pytest.raises(OpcodeError, match="fn"):
            decode(code, np.array(words(), np.int32), (x, x, x)[: code - 91 if code < 95 else 1], T.F32, x.ne)


def test_layout_rows_repeat_sort_norm(ctx: Context) -> None:
    dst, rows, ids = ctx.new_tensor(T.F16, 8, 10), ctx.new_tensor(T.F32, 8, 3), ctx.new_tensor(T.I64, 3)
    n = ops.set_rows(dst, rows, ids)
    w = roundtrip(n)
    assert (w.op, w.srcs) == (42, (rows, ids, dst))  # ggml: rows, ids, destination
    assert decode(42, w.params, w.srcs, n.type, n.ne)[2] == (dst, rows, ids)
    a, shape = ctx.new_tensor(T.F32, 4, 2), ctx.new_tensor(T.F16, 8, 4, 3)
    w = roundtrip(ops.repeat(a, shape))
    assert (w.op, w.srcs) == (20, (a,))
    s = ctx.new_tensor(T.F32, 8, 4)
    assert list(roundtrip(ops.argsort(s, SortOrder.DESC)).params) == words(1)
    with pytest.raises(OpcodeError, match="order"):
        decode(69, np.array(words(2), np.int32), (s,), T.I32, s.ne)
    top = ops.top_k(s, 3)
    assert list(roundtrip(top).params) == words() and decode(70, words_arr(), (s,), T.I32, top.ne)[1].k == 3
    assert list(roundtrip(ops.group_norm(ctx.new_tensor(T.F32, 4, 4, 6), 3, 1e-6)).params) == words(3, f32(1e-6))
    assert list(roundtrip(ops.rms_norm(s, 1e-5)).params) == words(f32(1e-5))
    assert list(roundtrip(ops.diag_mask_inf(s, 3)).params) == words(3)
    for op, w_bad, field in ((24, words(f32(-1.0)), "eps"), (24, words(f32(float("nan"))), "eps"),
                             (44, words(-1), "n_past"), (27, words(0, f32(1e-6)), "n_groups"),
                             (22, words(4), "dim"), (2, words(1), "params[0]")):
        with pytest.raises(OpcodeError, match=re.escape(field)):
            decode(op, np.array(w_bad, np.int32), (s, s) if op in (2, 22) else (s,), T.F32, s.ne)


def words_arr(*w: int) -> np.ndarray:
    return np.array(words(*w), np.int32)


def test_scalar_floats_and_matmul_words(ctx: Context) -> None:
    x = ctx.new_tensor(T.F32, 8, 4)
    assert list(roundtrip(ops.scale(x, 0.5, -1.0)).params) == words(f32(0.5), f32(-1.0))
    assert list(roundtrip(ops.clamp(x, -2.0, 3.0)).params) == words(f32(-2.0), f32(3.0))
    assert list(roundtrip(ops.leaky_relu(x, 0.1)).params) == words(f32(0.1))
    assert list(roundtrip(ops.fill(x, 7.0)).params) == words(f32(7.0))
    assert math.isnan(decode(73, words_arr(f32(float("nan"))), (x,), T.F32, x.ne)[1].value)  # a fill value
    for big in (1e39, -1e300):
        with pytest.raises(UnsupportedOpError, match="overflows float32"):
            encode(ops.scale(x, big))
    with pytest.raises(UnsupportedOpError, match="rounds to 0"):
        encode(ops.rms_norm(x, 1e-50))
    m = ops.mul_mat(ctx.new_tensor(T.Q4_0, 32, 4), ctx.new_tensor(T.F32, 32, 3))
    w = roundtrip(m)
    assert (w.op, list(w.params)) == (29, words())
    assert decode(29, words_arr(10, 1, 0, 30), w.srcs, m.type, m.ne)[0] is Op.MUL_MAT  # precisions, hint
    for bad in (words_arr(7), words_arr(0, 2), words_arr(0, 0, 0, 0, 1)):
        with pytest.raises(OpcodeError):
            decode(29, bad, w.srcs, m.type, m.ne)
    with pytest.raises(OpcodeError, match="srcs"):
        decode(29, w.params, w.srcs[:1], m.type, m.ne)
    with pytest.raises(OpcodeError, match="ADD_ID"):
        decode(3, w.params, w.srcs, m.type, m.ne)


# ---- ggml's own constructors (libggml-base of `make llama-cpp-ref`) -----------------------------------------------

_CT = {"p": ctypes.c_void_p, "i": ctypes.c_int, "f": ctypes.c_float, "l": ctypes.c_int64, "b": ctypes.c_bool,
       "z": ctypes.c_size_t}


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


class Twin:
    """The same graph built twice: with pyggml's constructors and with ggml's (through ctypes)."""

    OP, PARAMS, SRC = 80, 84, 152  # offsets in struct ggml_tensor (x86-64)

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        lib.ggml_init.restype, lib.ggml_init.argtypes = ctypes.c_void_p, [_InitParams]
        self.gctx = lib.ggml_init(_InitParams(64 << 20, None, True))
        self.pctx = Context(no_alloc=True)
        self.py: dict[int, Tensor] = {}

    def close(self) -> None:
        self.lib.ggml_free.argtypes = [ctypes.c_void_p]
        self.lib.ggml_free(self.gctx)

    def input(self, t: GGMLType, *ne: int) -> tuple[Tensor, int]:
        dims = (*ne, 1, 1, 1)[:4]
        g = self.call("ggml_new_tensor_4d", "illll", int(t), *dims)
        p = self.pctx.new_tensor(t, *ne)
        self.py[g] = p
        return p, g

    def call(self, name: str, sig: str, *args: Any) -> int:
        fn = getattr(self.lib, name)
        fn.restype, fn.argtypes = ctypes.c_void_p, [ctypes.c_void_p] + [_CT[c] for c in sig]
        return int(fn(self.gctx, *args))

    def wire(self, g: int) -> tuple[int, np.ndarray, tuple[Tensor | None, ...], GGMLType, tuple[int, ...]]:
        raw = bytes((ctypes.c_uint8 * 240).from_address(g))
        srcs = [self.py.get(int(s)) if s else None for s in np.frombuffer(raw[self.SRC:self.SRC + 80], np.uint64)]
        while srcs and srcs[-1] is None:
            srcs.pop()
        op = int(np.frombuffer(raw[self.OP:self.OP + 4], np.uint32)[0])
        ne = tuple(int(n) for n in np.frombuffer(raw[16:48], np.int64))
        t = GGMLType(int(np.frombuffer(raw[:4], np.int32)[0]))
        return op, np.frombuffer(raw[self.PARAMS:self.PARAMS + 64], np.int32).copy(), tuple(srcs), t, ne


def _twin_cases() -> list[tuple[str, Callable[[Twin], Any]]]:
    f = float

    def x2(tw: Twin) -> tuple[tuple[Tensor, int], tuple[Tensor, int]]:
        return tw.input(T.F32, 8, 4, 3), tw.input(T.F32, 8, 4, 3)

    def rope_inputs(tw: Twin) -> tuple[tuple[Tensor, int], tuple[Tensor, int]]:
        """A ROPE src of 16 dims, 2 heads and 3 tokens, and its 3 positions."""
        return tw.input(T.F32, 16, 2, 3), tw.input(T.I32, 3)

    out: list[tuple[str, Callable[[Twin], Any]]] = []
    for pname, gname in (("add", "ggml_add"), ("sub", "ggml_sub"), ("mul", "ggml_mul"), ("div", "ggml_div"),
                         ("count_equal", "ggml_count_equal")):
        def binary(tw: Twin, pname: str = pname, gname: str = gname) -> tuple[Tensor, int]:
            (pa, ga), (pb, gb) = x2(tw)
            if pname == "count_equal":
                (pa, ga), (pb, gb) = tw.input(T.I32, 8, 4), tw.input(T.I32, 8, 4)
            return getattr(ops, pname)(pa, pb), tw.call(gname, "pp", ga, gb)
        out.append((pname, binary))
    for pname in ("dup", "sqr", "sqrt", "log", "sin", "cos", "sum", "sum_rows", "cumsum", "mean", "argmax", "cont",
                  "transpose", "diag"):
        def one(tw: Twin, pname: str = pname) -> tuple[Tensor, int]:
            pa, ga = tw.input(T.F32, 8, 1 if pname == "diag" else 4)
            return getattr(ops, pname)(pa), tw.call(f"ggml_{pname}", "p", ga)
        out.append((pname, one))

    def unaries(tw: Twin) -> list[tuple[Tensor, int]]:
        pa, ga = tw.input(T.F32, 8, 4)
        res = [(ops.unary(pa, u), tw.call("ggml_unary", "pi", ga, UNARY_CODES[u])) for u in UnaryOp
               if u not in PARAMS_OF_UNARY]
        res.append((ops.xielu(pa, 4.0, 20.0, 0.5, 1e-7), tw.call("ggml_xielu", "pffff", ga, 4.0, 20.0, 0.5, 1e-7)))
        pb, gb = tw.input(T.F32, 8, 4)
        res.append((ops.swiglu_oai(pa, pb, 1.702, 7.0), tw.call("ggml_swiglu_oai", "ppff", ga, gb, 1.702, 7.0)))
        res.append((ops.swiglu_clamp(pa, pb, 10.0), tw.call("ggml_swiglu_clamp", "ppf", ga, gb, 10.0)))
        pa3, ga3 = tw.input(T.F32, 8, 2, 3)
        pbias, gbias = tw.input(T.F32, 8, 5)
        pids, gids = tw.input(T.I32, 2, 3)
        res.append((ops.add_id(pa3, pbias, pids), tw.call("ggml_add_id", "ppp", ga3, gbias, gids)))
        for g, code in GLU_CODES.items():
            if g in PARAMS_OF_GLU:
                continue
            res.append((ops.glu(pa, g, swapped=True), tw.call("ggml_glu", "pib", ga, code, True)))
            res.append((ops.glu(pa, g, pb), tw.call("ggml_glu_split", "ppi", ga, gb, code)))
        return res

    def many(tw: Twin) -> list[tuple[Tensor, int]]:
        (pa, ga), (pb, gb) = x2(tw)
        pi, gi = tw.input(T.I32, 4, 3)
        pm, gm = tw.input(T.F16, 8, 4)
        pq, gq = tw.input(T.F32, 16, 5, 4)
        pk, gk = tw.input(T.F16, 16, 8, 2)
        pv, gv = tw.input(T.F16, 12, 8, 2)
        pfm, gfm = tw.input(T.F16, 8, 5)
        ps, gs = tw.input(T.F32, 4)
        (pr, gr), (ppos, gpos) = rope_inputs(tw)
        pff, gff = tw.input(T.F32, 8)
        pd, gd = tw.input(T.F16, 8, 10, 3)
        prow, grow = tw.input(T.F32, 8, 4, 3)
        pid, gid = tw.input(T.I64, 4, 3)
        pw, gw = tw.input(T.Q8_0, 32, 6, 4)
        pmb, gmb = tw.input(T.F32, 32, 2, 5)
        pe, ge = tw.input(T.I32, 2, 5)
        p1, g1 = tw.input(T.F32, 1)
        psm, gsm2 = tw.input(T.F32, 4, 2)
        sm = ops.soft_max(pa, pm, 0.125, 8.0)
        gsm = tw.call("ggml_soft_max_ext", "ppff", ga, gm, 0.125, 8.0)
        fa = ops.flash_attn_ext(pq, pk, pv, pfm, 0.25, 0.0, 50.0, ps)
        gfa = tw.call("ggml_flash_attn_ext", "ppppfff", gq, gk, gv, gfm, 0.25, 0.0, 50.0)
        tw.lib.ggml_flash_attn_ext_add_sinks.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        tw.lib.ggml_flash_attn_ext_add_sinks(gfa, gs)
        return [
            (sm, gsm),
            (fa, gfa),
            (ops.add1(pa, p1), tw.call("ggml_add1", "pp", ga, g1)),
            (ops.repeat(p1, pa), tw.call("ggml_repeat", "pp", g1, ga)),
            (ops.concat(pa, pb, 2), tw.call("ggml_concat", "ppi", ga, gb, 2)),
            (ops.norm(pa, 1e-5), tw.call("ggml_norm", "pf", ga, 1e-5)),
            (ops.rms_norm(pa, 1e-6, inplace=True), tw.call("ggml_rms_norm_inplace", "pf", ga, 1e-6)),
            (ops.l2_norm(pa, 1e-12), tw.call("ggml_l2_norm", "pf", ga, 1e-12)),
            (ops.group_norm(pa, 2, 1e-6), tw.call("ggml_group_norm", "pif", ga, 2, 1e-6)),
            (ops.mul_mat(pa, pb), tw.call("ggml_mul_mat", "pp", ga, gb)),
            (ops.out_prod(pa, pb), tw.call("ggml_out_prod", "pp", ga, gb)),
            (ops.mul_mat_id(pw, pmb, pe), tw.call("ggml_mul_mat_id", "ppp", gw, gmb, ge)),
            (ops.scale(pa, 0.3, 0.7), tw.call("ggml_scale_bias", "pff", ga, 0.3, 0.7)),
            (ops.set_(pa, psm, 32, 128, 384, 8), tw.call("ggml_set", "ppzzzz", ga, gsm2, 32, 128, 384, 8)),
            (ops.acc(pa, pb, 32, 128, 384, 0, inplace=True), tw.call("ggml_acc_inplace", "ppzzzz", ga, gb, 32, 128,
                                                                     384, 0)),
            (ops.cpy(pa, pb), tw.call("ggml_cpy", "pp", ga, gb)),
            (ops.cont(pa, 32, 3), tw.call("ggml_cont_4d", "pllll", ga, 32, 3, 1, 1)),
            (ops.reshape(pa, 32, 3), tw.call("ggml_reshape_2d", "pll", ga, 32, 3)),
            (ops.view(pa, (4, 2), (32,), 12), tw.call("ggml_view_2d", "pllzz", ga, 4, 2, 32, 12)),
            (ops.permute(pa, 1, 2, 0, 3), tw.call("ggml_permute", "piiii", ga, 1, 2, 0, 3)),
            (ops.get_rows(pa, pi), tw.call("ggml_get_rows", "pp", ga, gi)),
            (ops.set_rows(pd, prow, pid), tw.call("ggml_set_rows", "ppp", gd, grow, gid)),
            (ops.diag_mask_inf(pa, 2), tw.call("ggml_diag_mask_inf", "pi", ga, 2)),
            (ops.diag_mask_zero(pa, 1, inplace=True), tw.call("ggml_diag_mask_zero_inplace", "pi", ga, 1)),
            (ops.rope(pr, ppos, 16, 2, freq_factors=pff, n_ctx_orig=2048, freq_base=f(5e5), freq_scale=0.5,
                      ext_factor=1.0, attn_factor=0.9, beta_fast=16.0, beta_slow=2.0),
             tw.call("ggml_rope_ext", "pppiiiffffff", gr, gpos, gff, 16, 2, 2048, 5e5, 0.5, 1.0, 0.9, 16.0, 2.0)),
            (ops.clamp(pa, -0.5, 0.25), tw.call("ggml_clamp", "pff", ga, -0.5, 0.25)),
            (ops.pad_ext(pa, (1, 0, 2, 0), (3, 1, 0, 2)), tw.call("ggml_pad_ext", "piiiiiiii", ga, 1, 3, 0, 1, 2, 0,
                                                                  0, 2)),
            (ops.arange(tw.pctx, 1.0, 7.5, 0.25), tw.call("ggml_arange", "fff", 1.0, 7.5, 0.25)),
            (ops.argsort(pa, SortOrder.DESC), tw.call("ggml_argsort", "pi", ga, 1)),
            (ops.top_k(pa, 3), tw.call("ggml_top_k", "pi", ga, 3)),
            (ops.leaky_relu(pa, 0.01), tw.call("ggml_leaky_relu", "pfb", ga, 0.01, False)),
            (ops.fill(pa, -3.5), tw.call("ggml_fill", "pf", ga, -3.5)),
        ]

    def spatial(tw: Twin) -> list[tuple[Tensor, int]]:
        """POOL_1D / POOL_2D (ggml_pool_2d's float paddings stored as ints), UPSCALE's mode word, the SAM ops'
        words and src order, ADD_REL_POS's in-place word."""
        pim, gim = tw.input(T.F32, 9, 7, 3)
        pt, gt = tw.input(T.F32, 5)
        pwin, gwin = tw.input(T.F32, 3, 4, 4, 4)
        prel, grel = tw.input(T.F16, 4, 9)
        pa, ga = tw.input(T.F32, 9, 12, 2)
        pw, gw = tw.input(T.F32, 3, 4, 3, 2)
        ph, gh = tw.input(T.F32, 3, 4, 3, 2)
        ac = ops.SCALE_FLAG_ALIGN_CORNERS | ops.ScaleMode.BILINEAR
        return [
            (ops.pool_1d(pim, ops.PoolOp.AVG, 3, 2, 1), tw.call("ggml_pool_1d", "piiii", gim, 1, 3, 2, 1)),
            (ops.pool_2d(pim, ops.PoolOp.MAX, 3, 2, 2, 1, 1, 0),
             tw.call("ggml_pool_2d", "piiiiiff", gim, 0, 3, 2, 2, 1, 1.0, 0.0)),
            (ops.interpolate(pim, 17, 5, 3, 2, ac), tw.call("ggml_interpolate", "pllllz", gim, 17, 5, 3, 2, ac)),
            (ops.pad_reflect_1d(pim, 3, 2), tw.call("ggml_pad_reflect_1d", "pii", gim, 3, 2)),
            (ops.roll(pim, 2, -3, 1, 0), tw.call("ggml_roll", "piiii", gim, 2, -3, 1, 0)),
            (ops.timestep_embedding(pt, 33, 100), tw.call("ggml_timestep_embedding", "pii", gt, 33, 100)),
            (ops.win_part(pim, 4), tw.call("ggml_win_part", "pi", gim, 4)),
            (ops.win_unpart(pwin, 7, 5, 4), tw.call("ggml_win_unpart", "piii", gwin, 7, 5, 4)),
            (ops.get_rel_pos(prel, 5, 5), tw.call("ggml_get_rel_pos", "pii", grel, 5, 5)),
            (ops.add_rel_pos(pa, pw, ph), tw.call("ggml_add_rel_pos", "ppp", ga, gw, gh)),
            (ops.add_rel_pos(pa, pw, ph, inplace=True), tw.call("ggml_add_rel_pos_inplace", "ppp", ga, gw, gh)),
        ]

    def seq(tw: Twin) -> list[tuple[Tensor, int]]:
        """The sequence-model ops: src order, K / scale / tri_type words, the packed result shapes."""
        ps, gs = tw.input(T.F32, 16, 4, 6, 3)
        px, gx = tw.input(T.F32, 4, 6, 5, 2)
        pdt, gdt = tw.input(T.F32, 6, 5, 2)
        pa, ga = tw.input(T.F32, 1, 6)
        pb, gb = tw.input(T.F32, 16, 2, 5, 2)
        pc, gc = tw.input(T.F32, 16, 2, 5, 2)
        pids, gids = tw.input(T.I32, 2)
        psx, gsx = tw.input(T.F32, 7, 8, 2)
        pw, gw = tw.input(T.F32, 4, 8)
        tok = [tw.input(T.F32, 8, 2, 6) for _ in range(6)]
        ptf, gtf = tw.input(T.F32, 8, 2)
        pst, gst = tw.input(T.F32, 128, 2)
        pq, gq = tw.input(T.F32, 8, 2, 3, 2)
        pv, gv = tw.input(T.F32, 8, 4, 3, 2)
        pg, gg_ = tw.input(T.F32, 1, 4, 3, 2)
        pbeta, gbeta = tw.input(T.F32, 1, 4, 3, 2)
        pds, gds = tw.input(T.F32, 8, 8, 4, 2)
        pm, gm = tw.input(T.F32, 5, 5, 2)
        prhs, grhs = tw.input(T.F32, 3, 5, 2)
        (p0, g0), (p1, g1), (p2, g2), (p3, g3), (p4, g4), (p5, g5) = tok
        return [
            (ops.ssm_conv(psx, pw), tw.call("ggml_ssm_conv", "pp", gsx, gw)),
            (ops.ssm_scan(ps, px, pdt, pa, pb, pc, pids, 3),
             tw.call("ggml_ssm_scan", "pppppppl", gs, gx, gdt, ga, gb, gc, gids, 3)),
            (ops.rwkv_wkv6(p0, p1, p2, ptf, p3, pst), tw.call("ggml_rwkv_wkv6", "pppppp", g0, g1, g2, gtf, g3, gst)),
            (ops.gated_linear_attn(p0, p1, p2, p3, pst, 0.125),
             tw.call("ggml_gated_linear_attn", "pppppf", g0, g1, g2, g3, gst, 0.125)),
            (ops.rwkv_wkv7(p0, p1, p2, p3, p4, p5, pst),
             tw.call("ggml_rwkv_wkv7", "ppppppp", g0, g1, g2, g3, g4, g5, gst)),
            (ops.gated_delta_net(pq, pq, pv, pg, pbeta, pds, 2),
             tw.call("ggml_gated_delta_net", "ppppppl", gq, gq, gv, gg_, gbeta, gds, 2)),
            (ops.solve_tri(pm, prhs), tw.call("ggml_solve_tri", "ppbbb", gm, grhs, True, True, False)),
            (ops.tri(pm, ops.TriType.LOWER_DIAG), tw.call("ggml_tri", "pi", gm, 2)),
        ]

    def train(tw: Twin) -> list[tuple[Tensor, int]]:
        """The backward ops (shape-only srcs dropped, ROPE_BACK with ROPE's words), the loss and the optimiser
        steps (parameters flagged on both sides)."""
        (pg, gg_), (px, gx) = x2(tw)
        pbig, gbig = tw.input(T.F32, 16, 4, 6)
        pgr, ggr = tw.input(T.F32, 8, 5)
        pm, gm = tw.input(T.F32, 8, 7)
        pids, gids = tw.input(T.I32, 5)
        (pr, gr), (ppos, gpos) = rope_inputs(tw)
        p1, g1 = tw.input(T.F32, 1)
        pw, gw = tw.input(T.F32, 8, 4, 3)
        pw.set_param()
        tw.lib.ggml_set_param.argtypes = [ctypes.c_void_p]
        tw.lib.ggml_set_param(gw)
        (pmo, gmo), (pv, gv) = x2(tw)
        ph7, gh7 = tw.input(T.F32, 7)
        ph2, gh2 = tw.input(T.F32, 2)
        return [
            (ops.repeat_back(pbig, pg), tw.call("ggml_repeat_back", "pp", gbig, gg_)),
            (ops.silu_back(pg, px), tw.call("ggml_silu_back", "pp", gg_, gx)),
            (ops.rms_norm_back(pg, px, 1e-6), tw.call("ggml_rms_norm_back", "ppf", gg_, gx, 1e-6)),
            (ops.get_rows_back(pgr, pids, pm), tw.call("ggml_get_rows_back", "ppp", ggr, gids, gm)),
            (ops.soft_max_ext_back(pg, px, 0.25), tw.call("ggml_soft_max_ext_back", "ppff", gg_, gx, 0.25, 0.0)),
            (ops.rope_back(pr, ppos, ops.RopeParams(16, 2, n_ctx_orig=2048, freq_base=f(5e5), freq_scale=0.5,
                                                    ext_factor=1.0, attn_factor=0.9, beta_fast=16.0, beta_slow=2.0)),
             tw.call("ggml_rope_ext_back", "pppiiiffffff", gr, gpos, None, 16, 2, 2048, 5e5, 0.5, 1.0, 0.9, 16.0,
                     2.0)),
            (ops.cross_entropy_loss(pg, px), tw.call("ggml_cross_entropy_loss", "pp", gg_, gx)),
            (ops.cross_entropy_loss_back(p1, pg, px), tw.call("ggml_cross_entropy_loss_back", "ppp", g1, gg_, gx)),
            (ops.opt_step_adamw(pw, pg, pmo, pv, ph7),
             tw.call("ggml_opt_step_adamw", "ppppp", gw, gg_, gmo, gv, gh7)),
            (ops.opt_step_sgd(pw, pg, ph2), tw.call("ggml_opt_step_sgd", "ppp", gw, gg_, gh2)),
            *back2(tw),
        ]

    def back2(tw: Twin) -> list[tuple[Tensor, int]]:
        """IM2COL_BACK (the result's shape from an int64_t[4], IM2COL's words) and POOL_2D_BACK (POOL_2D's)."""
        pcol, gcol = tw.input(T.F32, 12, 8, 5, 2)  # IM2COL of [10, 9, 2, 2] by a [3, 2, 2, 6] kernel, s 1 2, p 0 1
        pk, gk = tw.input(T.F16, 3, 2, 2, 6)
        ne = (ctypes.c_int64 * 4)(10, 9, 2, 2)
        pgp, ggp = tw.input(T.F32, 5, 6, 3)  # POOL_2D of [9, 7, 3]: k 3 2, s 2 1, p 1 0
        pim, gim = tw.input(T.F32, 9, 7, 3)
        return [
            (ops.im2col_back(pcol, pk, (10, 9, 2, 2), 1, 2, 0, 1, 1, 1, True),
             tw.call("ggml_im2col_back", "pppiiiiiib", gcol, gk, ctypes.addressof(ne), 1, 2, 0, 1, 1, 1, True)),
            (ops.pool_2d_back(pgp, pim, ops.PoolOp.MAX, 3, 2, 2, 1, 1, 0),
             tw.call("ggml_pool_2d_back", "ppiiiiiff", ggp, gim, 0, 3, 2, 2, 1, 1.0, 0.0)),
        ]

    def conv(tw: Twin) -> list[tuple[Tensor, int]]:
        """The convolution family with ggml's constructors (IM2COL 1-D leaves s1, p1, d1 at 0)."""
        pk, gk = tw.input(T.F16, 3, 2, 4, 6)
        px, gx = tw.input(T.F32, 10, 9, 4, 2)
        pk1, gk1 = tw.input(T.F32, 3, 5, 2)
        px1, gx1 = tw.input(T.F32, 12, 5, 3)
        pt, gt = tw.input(T.F32, 7, 2)
        pdw, gdw = tw.input(T.F32, 3, 3, 1, 4)
        pk3, gk3 = tw.input(T.F32, 2, 3, 2, 6)
        px3, gx3 = tw.input(T.F32, 8, 7, 6, 4)
        pct, gct = tw.input(T.F32, 3, 2, 5, 4)
        pcols, gcols = tw.input(T.F32, 12, 9)
        p3 = (1, 2, 1, 1, 0, 2, 2, 1, 1)
        return [
            (ops.im2col(pk, px, 2, 1, 1, 0, 1, 2, True, T.F16),
             tw.call("ggml_im2col", "ppiiiiiibi", gk, gx, 2, 1, 1, 0, 1, 2, True, int(T.F16))),
            (ops.im2col(pk1, px1, 2, 0, 1, 0, 2, 0, False, T.F32),
             tw.call("ggml_im2col", "ppiiiiiibi", gk1, gx1, 2, 0, 1, 0, 2, 0, False, int(T.F32))),
            (ops.im2col_3d(pk3, px3, 2, *p3, T.F32), tw.call("ggml_im2col_3d", "ppliiiiiiiiii", gk3, gx3, 2, *p3,
                                                               int(T.F32))),
            (ops.col2im_1d(pcols, 2, 3, 1), tw.call("ggml_col2im_1d", "piii", gcols, 2, 3, 1)),
            (ops.conv_transpose_1d(pk1, pt, 3), tw.call("ggml_conv_transpose_1d", "ppiii", gk1, gt, 3, 0, 1)),
            (ops.conv_2d_direct(pk, px, 2, 1, 1, 0, 1, 2),
             tw.call("ggml_conv_2d_direct", "ppiiiiii", gk, gx, 2, 1, 1, 0, 1, 2)),
            (ops.conv_2d_dw_direct(pdw, px, 1, 2, 1, 1, 2, 1),
             tw.call("ggml_conv_2d_dw_direct", "ppiiiiii", gdw, gx, 1, 2, 1, 1, 2, 1)),
            (ops.conv_3d_direct(pk3, px3, *p3, 2, 2, 3),
             tw.call("ggml_conv_3d_direct", "ppiiiiiiiiiiii", gk3, gx3, *p3, 2, 2, 3)),
            (ops.conv_transpose_2d_p0(pct, px, 2), tw.call("ggml_conv_transpose_2d_p0", "ppi", gct, gx, 2)),
        ]

    out.append(("conv", conv))
    out.append(("train", train))
    out.append(("seq", seq))
    out.append(("spatial", spatial))

    def deepseek(tw: Twin) -> list[tuple[Tensor, int]]:
        """LIGHTNING_INDEXER's four srcs, DSV4_HC_COMB's eps / n_iter, DSV4_HC_PRE's scale / gated words (1.0 and 0
        for the plain form), DSV4_HC_POST with and without comb."""
        pq, gq = tw.input(T.F32, 8, 3, 5, 2)
        pk, gk = tw.input(T.F16, 8, 1, 7, 2)
        pw, gw = tw.input(T.F32, 3, 5, 1, 2)
        pm, gm = tw.input(T.F16, 7, 5, 1, 1)
        pmix, gmix = tw.input(T.F32, 24, 6)
        psc, gsc = tw.input(T.F32, 3)
        pb, gb = tw.input(T.F32, 24)
        px, gx = tw.input(T.F32, 8, 4, 6)
        pwt, gwt = tw.input(T.F32, 4, 6)
        pgate, ggate = tw.input(T.F32, 8, 4, 6)
        py, gy = tw.input(T.F32, 8, 6)
        ppost, gpost = tw.input(T.F32, 4, 6)
        pcomb, gcomb = tw.input(T.F32, 4, 4, 6)
        return [
            (ops.lightning_indexer(pq, pk, pw, pm), tw.call("ggml_lightning_indexer", "pppp", gq, gk, gw, gm)),
            (ops.dsv4_hc_comb(pmix, psc, pb, 1e-6, 20), tw.call("ggml_dsv4_hc_comb", "pppfi", gmix, gsc, gb, 1e-6, 20)),
            (ops.dsv4_hc_pre(px, pwt), tw.call("ggml_dsv4_hc_pre", "pp", gx, gwt)),
            (ops.dsv4_hc_pre_gated(px, pgate, 0.25), tw.call("ggml_dsv4_hc_pre_gated", "ppf", gx, ggate, 0.25)),
            (ops.dsv4_hc_post(py, px, ppost, pcomb), tw.call("ggml_dsv4_hc_post", "pppp", gy, gx, gpost, gcomb)),
            (ops.dsv4_hc_post(py, px, ppost), tw.call("ggml_dsv4_hc_post", "pppp", gy, gx, gpost, None)),
        ]

    out.append(("deepseek", deepseek))
    out.append(("unary and glu", unaries))
    out.append(("the rest", many))
    return out


@pytest.fixture(scope="module")
def ggml_base() -> ctypes.CDLL:
    path = ggml_library("base")
    if path is None:
        pytest.skip("ggml's libggml-base is not built (make llama-cpp-ref, or PYGGML_GGML_LIB_DIR)")
    return ctypes.CDLL(str(path))


def test_ggml_constructor_cases_cover_every_op(ggml_base: ctypes.CDLL) -> None:
    tw = Twin(ggml_base)
    try:
        built = [build(tw) for _, build in _twin_cases()]
    finally:
        tw.close()
    covered = {n.op for made in built for n, _ in (made if isinstance(made, list) else [made])}
    assert covered == set(Op) - {Op.NONE} - CUSTOM_OPS  # custom ops never travel


@pytest.mark.parametrize(("name", "build"), _twin_cases(), ids=[n for n, _ in _twin_cases()])
def test_matches_ggml_constructors(ggml_base: ctypes.CDLL, name: str,
                                   build: Callable[[Twin], Any]) -> None:
    tw = Twin(ggml_base)
    try:
        made = build(tw)
        pairs = made if isinstance(made, list) else [made]
        for node, g in pairs:
            op, params, gsrcs, gtype, gne = tw.wire(g)
            assert (gtype, gne) == (node.type, node.ne), node
            w = encode(node)
            if node.op is Op.GLU and len(node.src) == 2:  # pyggml's split GLU has swapped False here
                assert not node.params.swapped
            assert (w.op, list(w.params), w.srcs) == (op, list(params), gsrcs), node
            dop, dparams, dsrcs = decode(op, params, gsrcs, gtype, gne)
            assert (dop, dparams) == (node.op, wire_params(node.op, node.params)), node
            if node.op is Op.REPEAT:
                assert dsrcs[0] is node.src[0] and dsrcs[1] is not None and dsrcs[1].ne == node.ne
            else:
                assert dsrcs == tuple(node.src), node
    finally:
        tw.close()
