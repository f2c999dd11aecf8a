"""The meta device's tensor split across MPI ranks against the same split in one process, printed as JSON.

    python benchmarks/bench_mpi.py                   # everything (a few minutes on 2 cores)
    python benchmarks/bench_mpi.py --rounds 1 --skip-decode

1. Allreduce latency (median, p90 in microseconds, per call the slowest rank's time) for 576 floats (SmolLM2's
   n_embd: one decode allreduce) and 262,144 floats (1 MiB), over 2 and 3 ranks on shared memory (Open MPI's vader
   or sm BTL) and on TCP loopback (`--btl self,tcp` on lo): `MPIWorld.allreduce_sum` (what the meta device uses:
   Iallgather, then a sum in rank order) next to a raw `comm.Allreduce`, back to back and with rank 0 arriving 30 us
   late (as after uneven work: what waiting costs, the 30 us taken off); plus the two other exchanges of a decoded
   token (the join of the vocabulary-split logits, `combine`, and rank 0's token, `bcast_ints`), and the meta
   device's in-process communicators (inprocess, butterfly) over as many cpu backends.
2. SmolLM2 prompt (pp) and decode (tg) tok/s: 1 process without split, the in-process tensor split over 2 and 3 cpu
   backends, and the split over 2 and 3 MPI ranks on shm and tcp. Every run uses one thread per backend/rank; each
   launch warms up with one full round first; launches alternate between configurations round by round, so a
   burst of other work on the machine hits all of them; the best round counts.

Each measurement runs in its own process (`--worker`, under mpirun for the MPI ones), with a timeout. A decoded
token over MPI costs 60 allreduces (two per layer), one logits join and one broadcast: `per_token` prices those
from part 1, next to the measured gaps to the in-process split and to one plain process.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, cast

import numpy as np

SIZES = (576, 262_144)
LOGITS_BYTES = 49_152 * 4
"""SmolLM2's logits (n_vocab float32) are joined once per token: an OR of this many bytes across ranks."""
N_CTX = 256
LATE_US = 30


def mpirun_cmd(ranks: int, transport: str, shm: str) -> list[str]:
    """ob1 is named so the BTL choice holds (a UCX PML would ignore it); binding is off as for the in-process runs."""
    btl = ["--mca", "btl", f"self,{shm}"] if transport == "shm" else \
          ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "pml", "ob1", *btl,
            "-n", str(ranks)]


def stats_us(ns: np.ndarray) -> dict[str, float]:
    return {"median_us": round(float(np.median(ns)) / 1e3, 1), "p90_us": round(float(np.percentile(ns, 90)) / 1e3, 1)}


def set_threads(backends: list[Any], n: int) -> None:
    from pyggml.backend.extensions import SET_N_THREADS

    for b in backends:
        fn = b.device.reg.get_extension(SET_N_THREADS)
        if fn is not None:
            fn(b, n)


# ---- workers (one process, or one MPI rank) ------------------------------------------------------------------


def timed(fn: Callable[[], object], iters: int, warmup: int, late_s: float = 0.0) -> np.ndarray:
    """Nanoseconds of each call after `warmup` calls, counting from a busy wait of late_s first (a rank arriving late,
    as after uneven work between two allreduces; the others' time then includes waiting for it)."""
    for _ in range(warmup):
        fn()
    ns = np.empty(iters, np.int64)
    for i in range(iters):
        t0 = time.perf_counter_ns()
        end = time.perf_counter() + late_s
        while time.perf_counter() < end:
            pass
        fn()
        ns[i] = time.perf_counter_ns() - t0
    return ns


def allreduce_worker(args: argparse.Namespace) -> dict[str, Any] | None:
    """MPI (--mpi): every rank times each call; rank 0 reports the per-call maximum over ranks. In-process
    (--inproc N): the meta device's communicators over N cpu backends, tensors in their buffers."""
    rows: list[dict[str, Any]] = []
    iters = {SIZES[0]: args.iters, SIZES[1]: max(args.iters // 10, 20)}
    if args.mpi:
        from pyggml.backend.meta.mpi import MPIWorld

        world = MPIWorld()
        mpi = world.MPI
        late = LATE_US * 1e-6 * (world.rank == 0)
        got: list[tuple[str, int, np.ndarray]] = []
        for n in SIZES:
            a = np.zeros(n, np.float32)
            calls = {"MPIWorld.allreduce_sum": lambda a=a: world.allreduce_sum(a, "bench"),
                     "comm.Allreduce": lambda a=a: world.comm.Allreduce(mpi.IN_PLACE, a, op=mpi.SUM)}
            got += [(what, n, timed(fn, iters[n], args.warmup)) for what, fn in calls.items()]
            if n == SIZES[0]:
                got += [(f"{what}, rank 0 {LATE_US} us late (not counted)", n,
                         timed(fn, iters[n], args.warmup, late) - LATE_US * 1000) for what, fn in calls.items()]
        mask = np.zeros(LOGITS_BYTES, np.uint8)
        got.append(("MPIWorld.combine (logits)", LOGITS_BYTES // 4,
                    timed(lambda: world.combine(mask), iters[SIZES[1]], args.warmup)))
        got.append(("MPIWorld.bcast_ints (token)", 1, timed(lambda: world.bcast_ints([7]), args.iters, args.warmup)))
        for what, n, ns in got:
            everyone = np.empty((world.size, ns.size), np.int64)
            world.comm.Gather(np.ascontiguousarray(ns), everyone, root=0)
            rows.append({"method": what, "floats": n, **stats_us(everyone.max(axis=0))})
        return {"ranks": world.size, "results": rows} if world.rank == 0 else None
    import pyggml as gg
    from pyggml.alloc import alloc_ctx_tensors
    from pyggml.backend.meta import ButterflyAllreduce, InProcessCommunicator
    from pyggml.backend.registry import get_device
    from pyggml.types import GGMLType

    dev = get_device("cpu")
    backends = [dev.init_backend() for _ in range(args.inproc)]
    set_threads(backends, 1)
    for n in SIZES:
        ts = []
        for _ in backends:
            ctx = gg.Context(no_alloc=True)
            ts.append(ctx.new_tensor(GGMLType.F32, n, name="x"))
            alloc_ctx_tensors(ctx, dev.buffer_type())
            ts[-1].set(np.zeros(n, np.float32))
        for comm in (InProcessCommunicator(backends), ButterflyAllreduce(backends)):
            def step(comm: Any = comm, ts: list[Any] = ts) -> None:
                comm.allreduce(ts)
                for b in backends:
                    b.synchronize()
            rows.append({"method": type(comm).__name__, "floats": n, **stats_us(timed(step, iters[n], args.warmup))})
    return {"ranks": args.inproc, "results": rows}


def decode_worker(args: argparse.Namespace) -> dict[str, Any] | None:
    """One warm-up round, then --inner rounds of a --pp-token prompt and --tg greedy tokens (no stop at end of
    text, so every round decodes the same count); under MPI rank 0's token is broadcast as in Session.generate."""
    from pyggml.backend.meta import MetaBackend
    from pyggml_llama.session import Session

    shares = [float(x) for x in args.shares.split(",")] if args.shares else None
    if args.mpi:
        s = Session(None, ["cpu"], n_ctx=N_CTX, split_mode="tensor", comm="mpi", tensor_split=shares, n_threads=1)
    elif args.inproc == 1:
        s = Session(None, ["cpu"], n_ctx=N_CTX, split_mode="none", n_threads=1)
    else:
        s = Session(None, ["cpu"] * args.inproc, n_ctx=N_CTX, split_mode="tensor", tensor_split=shares, n_threads=1)
    text = "The river rose over its banks, and the people of the valley moved their animals to the hills. "
    prompt = (s.tokenizer.encode(text) * (args.pp // 8 + 1))[: args.pp]
    pp: list[float] = []
    tg: list[float] = []
    out: list[int] = []
    for r in range(args.inner + 1):
        s.reset()
        t0 = time.perf_counter()
        logits = s.eval(prompt)[-1]
        t1 = time.perf_counter()
        out = []
        for _ in range(args.tg):
            tok = int(np.argmax(logits))
            if s.world is not None:
                tok = s.world.bcast_ints([tok])[0]
            out.append(tok)
            logits = s.eval([tok])[-1]
        t2 = time.perf_counter()
        if r:  # round 0 is the warm-up
            pp.append(len(prompt) / (t1 - t0))
            tg.append(args.tg / (t2 - t1))
    if s.world is not None and s.world.rank != 0:
        return None
    meta = s.backends[0]
    return {"backends": s.stats.backends, "pp_tok_s": pp, "tg_tok_s": tg, "tokens": out,
            "allreduce": getattr(getattr(meta, "comm", None), "name", None),
            "allreduces_per_token": meta.last_plan.n_allreduce if isinstance(meta, MetaBackend) else 0}


# ---- driver ----------------------------------------------------------------------------------------------------


def launch(cmd: list[str], timeout: float) -> dict[str, Any]:
    """Run a worker (or mpirun), return its last JSON line or {"error": ...}. On timeout the whole process group is
    sent SIGTERM (mpirun passes it on to its ranks), then SIGKILL."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYGGML_MPI_TIMEOUT=str(int(timeout)))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
        return {"error": f"timed out after {timeout:g} s"}
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": f"exit {p.returncode}: " + " | ".join(err.strip().splitlines()[-3:])}
    return dict(json.loads(lines[-1]))


def machine() -> dict[str, Any]:
    """CPU, cores, Open MPI (whose shared-memory BTL is vader in version 4, sm in 5) and mpi4py."""
    with open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    ompi = shm = None
    if shutil.which("mpirun") and shutil.which("ompi_info"):
        out = subprocess.run(["ompi_info"], capture_output=True, text=True, timeout=60).stdout
        ompi = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if "Open MPI:" in ln), "?")
        shm = next((n for n in ("vader", "sm") if f"MCA btl: {n} " in out), None)
    return {"cpu": cpu, "cores": os.cpu_count(), "open_mpi": ompi, "shm_btl": shm,
            "mpi4py": importlib.util.find_spec("mpi4py") is not None,
            "note": f"{os.cpu_count()} cores shared with other work: figures are noisy; 3 ranks (or 3 in-process "
                    "backends with one thread each) oversubscribe 2 cores"}


def per_token(decode: list[dict[str, Any]], allreduce: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add to each MPI decode row: ms per token, the gap to the in-process split with as many slices, and what its
    allreduces (back to back, and with one rank late) + one logits join + one broadcast cost at part 1's medians."""
    by = {(r["ranks"], r["transport"]): r for r in decode}
    lat = {(a["ranks"], a["transport"], a["method"]): a["median_us"] / 1e3 for a in allreduce
           if a.get("floats") in (SIZES[0], LOGITS_BYTES // 4, 1)}
    for r in decode:
        ref = by.get((r["ranks"], "inprocess"))
        if "tg_tok_s" not in r:
            continue
        r["ms_per_token"] = round(1e3 / r["tg_tok_s"], 2)
        if r["transport"] not in ("shm", "tcp") or not ref or "tg_tok_s" not in ref:
            continue
        r["same_tokens_as_inprocess"] = r["tokens"] == ref.get("tokens")
        r["gap_to_inprocess_ms"] = round(r["ms_per_token"] - 1e3 / ref["tg_tok_s"], 2)
        if "tg_tok_s" in by.get((1, "plain"), {}):
            r["gap_to_plain_ms"] = round(r["ms_per_token"] - 1e3 / by[(1, "plain")]["tg_tok_s"], 2)
        got = {k: lat.get((r["ranks"], r["transport"], m)) for k, m in (
            ("allreduce", "MPIWorld.allreduce_sum"),
            ("late", f"MPIWorld.allreduce_sum, rank 0 {LATE_US} us late (not counted)"),
            ("join", "MPIWorld.combine (logits)"), ("bcast", "MPIWorld.bcast_ints (token)"))}
        if None not in got.values():
            n, g = r["allreduces_per_token"], cast(dict[str, float], got)
            r["comm_ms_per_token_est"] = {"allreduces": round(n * g["allreduce"], 2),
                                          f"allreduces_rank0_{LATE_US}us_late": round(n * g["late"], 2),
                                          "logits_join": round(g["join"], 2), "token_bcast": round(g["bcast"], 3)}
    for r in decode:
        r.pop("tokens", None)
    return decode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default="2,3", help="rank / backend counts of the split")
    p.add_argument("--rounds", type=int, default=3, help="launches per decode configuration (alternating)")
    p.add_argument("--inner", type=int, default=2, help="measured rounds per launch, after one warm-up round")
    p.add_argument("--pp", type=int, default=128, help="prompt tokens")
    p.add_argument("--tg", type=int, default=64, help="decoded tokens")
    p.add_argument("--iters", type=int, default=1000, help="allreduce calls per small size (1 MiB: a tenth)")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--shares", default="", help="tensor split shares (default equal; 3 KV heads fit 3 equal)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per launch")
    p.add_argument("--skip-decode", action="store_true")
    p.add_argument("--worker", choices=["allreduce", "decode"], help=argparse.SUPPRESS)
    p.add_argument("--mpi", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--inproc", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        try:
            res = (allreduce_worker if args.worker == "allreduce" else decode_worker)(args)
        except Exception as e:
            if not args.mpi:
                raise
            print(f"bench_mpi: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            from pyggml.backend.meta.mpi import MPIWorld

            MPIWorld().abort(1)  # the other ranks would wait for this one until their collectives time out
            return 1
        if res is not None:
            print(json.dumps(res), flush=True)
        return 0

    info = machine()
    shm = info["shm_btl"]
    why_not = None if info["open_mpi"] else "mpirun/ompi_info not found (apt-get install openmpi-bin libopenmpi-dev)"
    why_not = why_not or (None if info["mpi4py"] else "mpi4py not installed (pip install 'pyggml[mpi]')")
    why_not = why_not or (None if shm else "no shared-memory BTL (vader/sm) in ompi_info")
    ranks = [int(x) for x in args.ranks.split(",")]
    me = [sys.executable, os.path.abspath(__file__)]
    common = ["--iters", str(args.iters), "--warmup", str(args.warmup), "--pp", str(args.pp), "--tg", str(args.tg),
              "--inner", str(args.inner), "--shares", args.shares]
    transports = [] if why_not else ["shm", "tcp"]

    def cmd(worker: str, n: int, transport: str) -> list[str]:
        if transport == "inprocess":
            return [*me, "--worker", worker, "--inproc", str(n), *common]
        return [*mpirun_cmd(n, transport, shm or ""), *me, "--worker", worker, "--mpi", *common]

    allreduce: list[dict[str, Any]] = []
    for n in ranks:
        for tr in ["inprocess", *transports]:
            got = launch(cmd("allreduce", n, tr), args.timeout)
            rows = got.get("results", [{"error": got.get("error")}])
            allreduce += [{"ranks": n, "transport": tr, **x} for x in rows]

    configs = [(1, "plain")] + [(n, tr) for n in ranks for tr in ["inprocess", *transports]]
    runs: dict[tuple[int, str], list[dict[str, Any]]] = {c: [] for c in configs}
    for _ in range(0 if args.skip_decode else args.rounds):
        for n, tr in configs:
            runs[(n, tr)].append(launch(cmd("decode", n, "inprocess" if tr == "plain" else tr), args.timeout))
    decode = []
    for (n, tr), rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        row: dict[str, Any] = {"ranks": n, "transport": tr, "launches": len(rs)}
        if ok:
            pp = [x for r in ok for x in r["pp_tok_s"]]
            tg = [x for r in ok for x in r["tg_tok_s"]]
            row |= {"pp_tok_s": round(max(pp), 1), "pp_tok_s_median": round(statistics.median(pp), 1),
                    "tg_tok_s": round(max(tg), 2), "tg_tok_s_median": round(statistics.median(tg), 2),
                    "backends": ok[0]["backends"],
                    "allreduce": ok[0]["allreduce"], "allreduces_per_token": ok[0]["allreduces_per_token"],
                    "tokens": ok[0]["tokens"]}
        if len(ok) < len(rs):
            row["errors"] = [r["error"] for r in rs if "error" in r]
        decode.append(row)
    print(json.dumps({"benchmark": "mpi", "machine": info, "mpi_skipped": why_not,
                      "settings": {"pp": args.pp, "tg": args.tg, "rounds": args.rounds, "inner": args.inner,
                                   "threads_per_rank": 1, "shares": args.shares or "equal",
                                   **{f"mpirun_{t}": " ".join(mpirun_cmd(0, t, shm or "vader")[:-2]) for t in
                                      ("shm", "tcp")}},
                      "allreduce": allreduce, "decode": per_token(decode, allreduce)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
