"""Perf mode: time each case's op on realistic sizes.

The op's node is repeated inside one graph until the graph does a few GFLOP (ops with a FLOP count: matrix
products, attention) or moves a few hundred MB (everything else), as ggml's test-backend-ops does; the graph is
run until at least `seconds` have passed. Reported: microseconds per op run and GFLOP/s or GB/s.
"""

from __future__ import annotations

import time

from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_conformance.case import Case
from pyggml_conformance.inputs import InputUnavailable, case_rng, generate
from pyggml_conformance.placement import ArenaTooLarge, GuardedArena
from pyggml_conformance.runner import CaseResult, Status, Target, error_text, first_unsupported, realize

TARGET_FLOPS = 4e9
TARGET_BYTES = 512e6
MAX_REPEATS = 1000


def op_flops(t: Tensor) -> int:
    """Floating-point operations of one run of node t (0: not a FLOP-bound op)."""
    s0, s1 = t.src[0] if t.src else None, t.src[1] if len(t.src) > 1 else None
    if t.op in (Op.MUL_MAT, Op.MUL_MAT_ID) and s0 is not None:
        return 2 * t.nelements() * s0.ne[0]
    if t.op is Op.OUT_PROD and s0 is not None:
        return 2 * t.nelements() * s0.ne[1]
    if t.op is Op.FLASH_ATTN_EXT and s0 is not None and s1 is not None:
        v = t.src[2]
        dv = v.ne[0] if v is not None else s0.ne[0]
        return 2 * s0.ne[1] * s0.ne[2] * s0.ne[3] * s1.ne[1] * (s0.ne[0] + dv)
    return 0


def op_bytes(t: Tensor) -> int:
    """Bytes one run of node t reads and writes (its srcs and its result)."""
    return t.nbytes() + sum(s.nbytes() for s in t.src if s is not None)


def perf_case(case: Case, target: Target, seed: int = 0, seconds: float = 0.5) -> CaseResult:
    res = CaseResult(case.name, case.op.name, case.params, target.name, Status.PASS)
    try:
        r = realize(case)
        why = first_unsupported(r.graph, target.device)
        if why is not None:
            res.status, res.error = Status.UNSUPPORTED, why
            return res
        data = generate(r.graph, r.inits, case_rng(case.name, seed))
    except InputUnavailable as e:
        res.status, res.error = Status.SKIP, str(e)
        return res
    except Exception as e:
        res.status, res.error = Status.FAIL, error_text(e)
        return res
    node = r.outputs[0]
    flops, nbytes = op_flops(node), op_bytes(node)
    if flops:
        n = int(TARGET_FLOPS // flops) + 1
    else:
        n = int(TARGET_BYTES // max(nbytes, 1)) + 1
    n = max(1, min(n, MAX_REPEATS))
    g = r.graph.copy()
    g.nodes = list(g.nodes) + [node] * (n - 1)
    g.size = len(g.nodes)
    try:
        pl = GuardedArena(r.graph, target.device.buffer_type(), guard=0)
    except ArenaTooLarge as e:
        res.status, res.error = Status.SKIP, str(e)
        return res
    try:
        pl.upload(data, snapshot=False)
        backend = target.backend
        backend.graph_compute(g)  # warm-up: caches, compilation, first-touch
        backend.synchronize()
        total, runs = 0.0, 0
        while total < seconds or not runs:  # at least one timed run, whatever `seconds` says
            t0 = time.perf_counter()
            backend.graph_compute(g)
            backend.synchronize()
            total += time.perf_counter() - t0
            runs += n
    except Exception as e:
        res.status, res.error = Status.FAIL, error_text(e)
        return res
    finally:
        pl.free()
    res.runs = runs
    res.time_us = total * 1e6 / runs
    if flops:
        res.gflops = flops * runs / total / 1e9
    else:
        res.gbps = nbytes * runs / total / 1e9
    return res
