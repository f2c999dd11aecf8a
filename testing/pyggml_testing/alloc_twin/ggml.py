"""ggml's side of the twin graphs (pyggml_testing.alloc_twin): libggml-base of `make llama-cpp-ref` (llama.cpp
0.3.36) through ctypes, a builder that makes every tensor in both libraries at once, and the structural check that
both graphs are the same problem for an allocator.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.host import HostBufferType
from pyggml.context import Context
from pyggml.graph import Graph
from pyggml.tensor import Tensor
from pyggml.types import GGMLType

GRAPH_SIZE = 2048
_P = ctypes.c_void_p
_TYPE, _NE, _NB, _OP, _FLAGS, _SRC, _VIEW_SRC, _VIEW_OFFS = 0, 16, 48, 80, 148, 152, 232, 240
"""Offsets of fields of ggml's struct ggml_tensor (x86-64)."""
_MAX_SRC = 10
_N_LEAFS, _LEAFS = 8, 40
"""Offsets of n_leafs and leafs in ggml's struct ggml_cgraph."""


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


_SIGS: dict[str, tuple[Any, list[Any]]] = {
    "ggml_init": (_P, [_InitParams]),
    "ggml_free": (None, [_P]),
    "ggml_tensor_overhead": (ctypes.c_size_t, []),
    "ggml_graph_overhead_custom": (ctypes.c_size_t, [ctypes.c_size_t, ctypes.c_bool]),
    "ggml_set_input": (None, [_P]),
    "ggml_set_output": (None, [_P]),
    "ggml_new_graph_custom": (_P, [_P, ctypes.c_size_t, ctypes.c_bool]),
    "ggml_build_forward_expand": (None, [_P, _P]),
    "ggml_graph_n_nodes": (ctypes.c_int, [_P]),
    "ggml_graph_node": (_P, [_P, ctypes.c_int]),
    "ggml_op_name": (ctypes.c_char_p, [ctypes.c_int]),
    "ggml_op_can_inplace": (ctypes.c_bool, [ctypes.c_int]),
    "ggml_backend_cpu_buffer_type": (_P, []),
    "ggml_backend_buft_get_alignment": (ctypes.c_size_t, [_P]),
    "ggml_gallocr_new": (_P, [_P]),
    "ggml_gallocr_free": (None, [_P]),
    "ggml_gallocr_reserve": (ctypes.c_bool, [_P, _P]),
    "ggml_gallocr_get_buffer_size": (ctypes.c_size_t, [_P, ctypes.c_int]),
}
_ARG = {"t": _P, "f": ctypes.c_float, "i": ctypes.c_int, "l": ctypes.c_int64, "z": ctypes.c_size_t,
        "b": ctypes.c_bool}
OP_ARGS: dict[str, str] = {
    "new_tensor_4d": "illll", "view_1d": "tlz", "view_2d": "tllzz", "view_3d": "tlllzzz",
    "view_4d": "tllllzzzz", "reshape_1d": "tl", "reshape_2d": "tll", "reshape_3d": "tlll", "permute": "tiiii",
    "transpose": "t", "cont": "t", "cont_2d": "tll", "cont_3d": "tlll", "dup": "t", "cpy": "tt", "get_rows": "tt",
    "acc": "ttzzzz", "acc_inplace": "ttzzzz", "set": "ttzzzz", "set_inplace": "ttzzzz", "concat": "tti",
    "pad": "tiiii", "pad_ext": "tiiiiiiii", "roll": "tiiii", "repeat_back": "tt", "diag": "t", "tri": "ti",
    "mul_mat": "tt", "out_prod": "tt", "mul_mat_id": "ttt", "add_id": "ttt", "add_rel_pos": "ttt",
    "add_rel_pos_inplace": "ttt", "sum": "t", "sum_rows": "t", "mean": "t", "argmax": "t", "count_equal": "tt",
    "argsort": "ti", "top_k": "ti", "soft_max_ext": "ttff", "rope": "ttii", "rope_inplace": "ttii",
    "flash_attn_ext": "ttttfff", "swiglu_oai": "ttff", "silu_back": "tt", "rms_norm_back": "ttf",
    "soft_max_ext_back": "ttff", "rope_ext_back": "tttiiiffffff", "cross_entropy_loss": "tt",
    "cross_entropy_loss_back": "ttt", "get_rows_back": "ttt", "pool_1d": "tiiii", "pool_2d": "tiiiiiff",
    "upscale": "tii", "interpolate": "tlllli", "pad_reflect_1d": "tii", "arange": "fff",
    "timestep_embedding": "tii", "conv_2d": "ttiiiiii", "conv_2d_direct": "ttiiiiii", "conv_2d_dw": "ttiiiiii",
    "conv_2d_dw_direct": "ttiiiiii", "conv_1d_dw": "ttiii", "conv_transpose_1d": "ttiii", "im2col": "ttiiiiiibi",
    "win_part": "ti", "ssm_conv": "tt",
}
"""ggml_<name>(ctx, ...) -> tensor of the ops the twin graphs call beyond the tables of elementwise.py (which
declares those): argument kinds after ctx (t tensor, f float, i int, l int64, z size_t, b bool)."""


class Ggml:
    """ggml's base library with the signatures this module calls and the constructors of OP_ARGS declared."""

    def __init__(self, path: Path) -> None:
        self.lib = ctypes.CDLL(str(path))
        self.ops: set[str] = set()
        """The op constructors declared (declare_ops)."""
        for name, (restype, argtypes) in _SIGS.items():
            self._declare(name, restype, argtypes)
        self.declare_ops(OP_ARGS)
        self.cpu_buft = int(self.lib.ggml_backend_cpu_buffer_type())
        self.alignment = int(self.lib.ggml_backend_buft_get_alignment(self.cpu_buft))

    def _declare(self, name: str, restype: Any, argtypes: list[Any]) -> None:
        fn = getattr(self.lib, name)
        fn.restype, fn.argtypes = restype, argtypes

    def declare_ops(self, args: dict[str, str]) -> None:
        """Declare ggml_<name>(ctx, ...) -> tensor for each name with its argument kinds (see OP_ARGS)."""
        for name, kinds in args.items():
            self._declare(f"ggml_{name}", _P, [_P, *(_ARG[k] for k in kinds)])
            self.ops.add(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lib, name)

    def reserve_size(self, graph: int) -> int:
        """ggml_gallocr_reserve of `graph` on the CPU buffer type; the compute buffer's size."""
        galloc = self.lib.ggml_gallocr_new(self.cpu_buft)
        try:
            if not self.lib.ggml_gallocr_reserve(galloc, graph):
                raise RuntimeError("ggml_gallocr_reserve failed")
            return int(self.lib.ggml_gallocr_get_buffer_size(galloc, 0))
        finally:
            self.lib.ggml_gallocr_free(galloc)


@dataclass(frozen=True)
class Twin:
    """One tensor in both libraries."""

    py: Tensor
    gg: int


WEIGHT_BYTES = 16 << 20
"""Memory of the ggml weights context; weights beyond it are made as constants instead."""


class TwinBuilder:
    """Builds the same tensors in pyggml and in ggml: compute tensors in no_alloc contexts, weights in a ggml
    context with memory and in a pyggml context that `finish` places in a weights buffer."""

    def __init__(self, ggml: Ggml) -> None:
        self.g = ggml
        overhead = ggml.ggml_tensor_overhead()
        mem = overhead * 4096 + ggml.ggml_graph_overhead_custom(GRAPH_SIZE, False)
        self.gctx = int(ggml.ggml_init(_InitParams(mem, None, True)))
        self.wctx = int(ggml.ggml_init(_InitParams(WEIGHT_BYTES + overhead * 1024, None, False)))
        self.weight_bytes = 0
        self.pctx = Context(no_alloc=True)
        self.pwctx = Context(no_alloc=True)

    def close(self) -> None:
        self.g.ggml_free(self.gctx)
        self.g.ggml_free(self.wctx)

    def finish(self, alignment: int) -> None:
        """Give the pyggml weights their memory (usage WEIGHTS: pre-allocated for the graph allocator)."""
        alloc_ctx_tensors(self.pwctx, HostBufferType("weights", alignment=alignment))

    def call(self, name: str, *args: object) -> int:
        """ggml_<name>(ctx, *args) with Twin arguments passed as their ggml tensors."""
        if name not in self.g.ops:
            raise KeyError(f"ggml_{name} is not declared (Ggml.declare_ops)")
        fn = getattr(self.g, f"ggml_{name}")
        return int(fn(self.gctx, *(a.gg if isinstance(a, Twin) else a for a in args)))

    def both(self, py: Tensor, gg: str, *args: object) -> Twin:
        """A tensor pyggml built (`py`) and ggml_<gg>(ctx, *args) built."""
        return Twin(py, self.call(gg, *args))

    def leaf(self, ne: tuple[int, ...], name: str, kind: str, ttype: GGMLType = GGMLType.F32) -> Twin:
        """A tensor of shape ne (up to 4 dims). kind: "input" (INPUT, placed by the allocator), "const" (placed
        by the allocator) or "weight" (has memory already; a const when the weights context is full)."""
        ne4 = (*ne, 1, 1, 1)[:4]
        nbytes = ttype.traits.type_size * ne4[0] * ne4[1] * ne4[2] * ne4[3]
        if kind == "weight" and self.weight_bytes + nbytes + 64 <= WEIGHT_BYTES:
            self.weight_bytes += nbytes + 64
            return Twin(self.pwctx.new_tensor(ttype, *ne4, name=name),
                        int(self.g.ggml_new_tensor_4d(self.wctx, int(ttype), *ne4)))
        t = Twin(self.pctx.new_tensor(ttype, *ne4, name=name), self.call("new_tensor_4d", int(ttype), *ne4))
        if kind == "input":
            t.py.set_input()
            self.g.ggml_set_input(t.gg)
        return t

    def set_output(self, t: Twin) -> None:
        t.py.set_output()
        self.g.ggml_set_output(t.gg)


# ---- both graphs are the same problem -------------------------------------------------------------------------


def _i64(addr: int, n: int) -> tuple[int, ...]:
    return tuple((ctypes.c_int64 * n).from_address(addr))


def _ptr(addr: int) -> int:
    return ctypes.c_void_p.from_address(addr).value or 0


def check_same_graph(ggml: Ggml, py: Graph, gg: int) -> None:
    """Raise AssertionError unless both graphs have the same leafs and nodes in the same order, each with the same
    type, op, ne, nb and flags, the same srcs slot by slot and the same data owner and offset: the allocators then
    see the same problem."""
    n = int(ggml.ggml_graph_n_nodes(gg))
    n_leafs = ctypes.c_int.from_address(gg + _N_LEAFS).value
    assert (n, n_leafs) == (py.n_nodes, py.n_leafs), (n, n_leafs, py.n_nodes, py.n_leafs)
    leafs = _ptr(gg + _LEAFS)
    g_list = [_ptr(leafs + 8 * i) for i in range(n_leafs)] + [int(ggml.ggml_graph_node(gg, i)) for i in range(n)]
    p_list = [*py.leafs, *py.nodes]
    g_pos = {g: k for k, g in enumerate(g_list)}
    p_pos = {id(t): k for k, t in enumerate(p_list)}

    def g_ref(addr: int) -> object:
        return None if addr == 0 else g_pos.get(addr, "outside")

    def p_ref(t: Tensor | None) -> object:
        return None if t is None else p_pos.get(id(t), "outside")

    for k, (g, t) in enumerate(zip(g_list, p_list, strict=True)):
        op = ggml.ggml_op_name(ctypes.c_int.from_address(g + _OP).value).decode()
        src = tuple(g_ref(_ptr(g + _SRC + 8 * j)) for j in range(_MAX_SRC))
        got = (ctypes.c_int.from_address(g + _TYPE).value, op, _i64(g + _NE, 4), _i64(g + _NB, 4),
               ctypes.c_int32.from_address(g + _FLAGS).value, src, g_ref(_ptr(g + _VIEW_SRC)),
               ctypes.c_size_t.from_address(g + _VIEW_OFFS).value)
        p_src = tuple(p_ref(t.src[j] if j < len(t.src) else None) for j in range(_MAX_SRC))
        want = (int(t.type), t.op.name, t.ne, t.nb, int(t.flags), p_src, p_ref(t.view_src), t.view_offs)
        what = f"leaf {k}" if k < n_leafs else f"node {k - n_leafs}"
        assert got == want, f"{what}: ggml {got}, pyggml {want}"
