"""One training step (forward + backward + AdamW, one graph compute) of the train_mlp example's network, per device,
against one evaluation step (forward only) of the same network, and against ggml's own training step.

Each configuration builds the example's MLP (2 -> hidden -> hidden -> 3, SILU) and a `pyggml.opt.Trainer`, warms up
(plans, allocation, kernel compilation), then times passes of `--steps` batches; the median per-step wall time of
`--repeat` passes is reported. The ggml figure is the same network trained the way ggml-opt does it, through
ggml's CPU library of `make llama-cpp-ref` (ctypes): ggml_build_backward_expand, one ggml_opt_step_adamw per
parameter, the graph planned once and computed per step with the same thread count as pyggml's cpu backend
(`--threads`, default 1: on a machine shared with other work, spinning thread barriers make multi-threaded
figures of small graphs meaningless; the batch's data copied in each step, the loss read back). Each figure comes
as wall time and as the process's CPU time per step (`_cpu_ms_`: the figure a machine shared with other work
distorts least). Prints JSON with the CPU model; `--rounds` alternates pyggml and ggml that many times and keeps
the best of each figure.

    python benchmarks/bench_train_step.py [--devices cpu numpy] [--shapes 32x64 256x256] [--steps 50]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pyggml.backend import get_device
from pyggml.backend.sched import Scheduler, backends_for
from pyggml.backend.sysinfo import cpu_model
from pyggml.errors import PyGGMLError
from pyggml.opt import AdamW, Dataset, Trainer
from pyggml_train_mlp.data import spirals
from pyggml_train_mlp.model import build_mlp


def bench(device: str, batch: int, hidden: int, steps: int, repeat: int, threads: int) -> dict[str, object]:
    x, y = spirals(max(steps * batch // 3 + 1, 64))
    backends = backends_for(device)
    if device == "cpu":
        backends = [get_device("cpu").init_backend(f"n_threads={threads}")]
    sched = Scheduler(backends)
    mlp = build_mlp(sched.buffer_type(0), 2, hidden, 3, batch)
    tr = Trainer(sched, mlp.inputs, mlp.logits, optimizer=AdamW(alpha=1e-3))
    ds = Dataset(x, y)
    n = steps * batch
    out: dict[str, object] = {"device": device, "batch": batch, "hidden": hidden,
                              "params": int(sum(p.nelements() for p in mlp.params)),
                              "train_nodes": tr.gb.n_nodes, "eval_nodes": tr.gf.n_nodes}
    for what, train in (("train_step", True), ("eval_step", False)):
        tr.run_pass(ds, 0, 2 * batch, train=train)  # warm-up: plan, allocate, compile
        out.update(_timed(what, repeat, steps, functools.partial(tr.run_pass, ds, 0, n, train=train)))
    return out


def _timed(what: str, repeat: int, steps: int, one_pass: Callable[[], object]) -> dict[str, float]:
    """Wall and CPU milliseconds per step over `repeat` passes of `steps` steps: median and min of each. The CPU
    time (time.process_time: every thread of the process) is what a loaded machine does not inflate by
    preempting the run; spinning worker threads count in it."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        one_pass()
        wall.append((time.perf_counter() - t0) / steps)
        cpu.append((time.process_time() - c0) / steps)
    return {f"{what}_ms_median": round(statistics.median(wall) * 1e3, 3), f"{what}_ms_min": round(min(wall) * 1e3, 3),
            f"{what}_cpu_ms_median": round(statistics.median(cpu) * 1e3, 3),
            f"{what}_cpu_ms_min": round(min(cpu) * 1e3, 3)}


def ggml_bench(batch: int, hidden: int, steps: int, repeat: int, threads: int) -> dict[str, object]:
    """The same training step in ggml itself (CPU library, ctypes)."""
    import ctypes

    from pyggml.types import GGMLType
    from pyggml_testing.ggml_ctypes import GgmlCtx
    from pyggml_testing.llama_cpp_ref import GgmlMissing, open_ggml_cpu

    try:
        lib = open_ggml_cpu()
    except GgmlMissing as e:
        return {"error": str(e)}
    f32 = GGMLType.F32
    g = GgmlCtx(lib, 64 << 20)
    try:
        rng = np.random.default_rng(0)
        x = g.tensor(rng.standard_normal((batch, 2)).astype(np.float32), f32)
        labels = g.tensor(np.eye(3, dtype=np.float32)[rng.integers(0, 3, batch)], f32)
        sizes = [2, hidden, hidden, 3]
        params, h = [], x
        for i in range(3):
            w = g.param(rng.normal(0, np.sqrt(2 / sizes[i]), (sizes[i + 1], sizes[i])).astype(np.float32), f32)
            b = g.param(np.zeros(sizes[i + 1], dtype=np.float32), f32)
            params += [w, b]
            h = g.call("ggml_add", g.call("ggml_mul_mat", w, h), b)
            if i < 2:
                h = g.call("ggml_silu", h)
        loss = g.call("ggml_cross_entropy_loss", h, labels)
        lib.ggml_set_loss.argtypes = [ctypes.c_void_p]
        lib.ggml_set_loss(loss)
        lib.ggml_new_graph_custom.restype = ctypes.c_void_p
        lib.ggml_new_graph_custom.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_bool]
        gf = ctypes.c_void_p(lib.ggml_new_graph_custom(g.ctx, 4096, True))
        lib.ggml_build_forward_expand(gf, loss)
        lib.ggml_build_backward_expand.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.ggml_build_backward_expand(g.ctx, gf, None)
        lib.ggml_graph_get_grad.restype = ctypes.c_void_p
        lib.ggml_graph_get_grad.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        hp = g.tensor(np.array([1e-3, 0.9, 0.999, 1e-8, 0.0, 10.0, 1000.0], dtype=np.float32), f32)
        for p in params:
            grad = ctypes.c_void_p(lib.ggml_graph_get_grad(gf, p))
            m = g.call("ggml_dup_tensor", p)  # moments (zeroed by ggml_graph_reset below)
            v = g.call("ggml_dup_tensor", p)
            step = g.call("ggml_opt_step_adamw", p, grad, m, v, hp)
            lib.ggml_build_forward_expand(gf, step)
        lib.ggml_graph_reset.argtypes = [ctypes.c_void_p]
        lib.ggml_graph_reset(gf)
        plan = g.planned(gf, threads)
        xs = rng.standard_normal((batch, 2)).astype(np.float32)
        lib.ggml_get_data.restype, lib.ggml_get_data.argtypes = ctypes.c_void_p, [ctypes.c_void_p]

        def one_step() -> None:
            ctypes.memmove(lib.ggml_get_data(x), xs.ctypes.data, xs.nbytes)
            plan.compute()
            g.read(loss, (1,), f32)

        def one_pass() -> None:
            for _ in range(steps):
                one_step()

        for _ in range(2):
            one_step()
        figures = _timed("train_step", repeat, steps, one_pass)
        lib.ggml_graph_n_nodes.restype, lib.ggml_graph_n_nodes.argtypes = ctypes.c_int, [ctypes.c_void_p]
        return {"threads": threads, "train_nodes": int(lib.ggml_graph_n_nodes(gf)), **figures}
    finally:
        g.close()


def _keep_best(into: dict[Any, dict[str, object]], key: Any, got: dict[str, object]) -> None:
    """Record `got` under `key`, or keep the smaller of each timing figure (`_ms_` keys) of two rounds."""
    have = into.setdefault(key, got)
    if have is not got:
        for k, v in got.items():
            old = have.get(k)
            if "_ms_" in k and isinstance(v, float) and isinstance(old, float):
                have[k] = min(v, old)


def _ms(figures: dict[str, object]) -> float:
    v = figures["train_step_cpu_ms_min"]
    assert isinstance(v, float)
    return v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", nargs="+", default=["cpu", "numpy"])
    ap.add_argument("--shapes", nargs="+", default=["32x64", "256x256"], help="BATCHxHIDDEN")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="threads of the pyggml cpu backend and of ggml")
    ap.add_argument("--rounds", type=int, default=1, help="alternate pyggml and ggml this many times, keep the best")
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in shape.split("x")) for shape in args.shapes]
    results: dict[tuple[str, int, int], dict[str, object]] = {}
    ggml: dict[tuple[int, int], dict[str, object]] = {}
    for _ in range(args.rounds):
        for dev in args.devices:
            for batch, hidden in shapes:
                try:
                    got = bench(dev, batch, hidden, args.steps, args.repeat, args.threads)
                except PyGGMLError as e:
                    got = {"device": dev, "batch": batch, "hidden": hidden, "error": str(e)}
                _keep_best(results, (dev, batch, hidden), got)
        for batch, hidden in shapes:
            figures = ggml_bench(batch, hidden, args.steps, args.repeat, args.threads)
            _keep_best(ggml, (batch, hidden), {"batch": batch, "hidden": hidden, **figures})
    ratios = {f"{b}x{h}": round(_ms(g) / _ms(r), 2) for (dev, b, h), r in results.items()
              if dev == "cpu" and "error" not in r for g in [ggml[(b, h)]] if "error" not in g}
    print(json.dumps({"benchmark": "bench_train_step", "cpu": cpu_model(), "python": sys.version.split()[0],
                      "numpy": np.__version__, "threads": args.threads, "steps": args.steps, "repeat": args.repeat,
                      "rounds": args.rounds, "results": list(results.values()), "ggml_cpu": list(ggml.values()),
                      "ggml_cpu_ms_over_pyggml_cpu_ms": ratios}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
