"""pyggml's RPC client next to llama.cpp's, against the same server on loopback: raw SET/GET_TENSOR throughput and
SmolLM2 prompt (pp) / decode (tg) speed with every layer on the remote device. Goal: pyggml's client is no slower.

    .venv/bin/python plugins/rpc/benchmarks/bench_rpc.py [--rounds 3] [--mib 64] [--threads 2]
                                                         [--server ggml|pyggml|both] [--pp 128] [--tg 128]
                                                         [--only transfer|decode] [--profile DIR]

Prints one JSON object: the CPU model, threads, the servers, and per measurement each client's best and every
round, with the ratio pyggml / llama.cpp (higher is better everywhere; the goal is >= 1).

How it is fair:
- Same server process for both clients: llama.cpp's `ggml-rpc-server` (built by `python -m
  pyggml_testing.llama_cpp_ref rpc`) and/or `pyggml rpc-server --device cpu`, started here on 127.0.0.1 at a free port
  and stopped in `finally`.
- Same protocol: llama.cpp's clients are llama-bench (decode) and libggml-rpc through ctypes (transfer,
  ggml_rpc_ctypes.py); pyggml's side does what they do. Transfer: one I8 tensor of --mib MiB in a fresh buffer of
  the default usage (so neither client hashes it); SET is timed up to the answer of a following 1-byte GET (both
  clients send SET_TENSOR without waiting for the server), GET reads the whole tensor; best of --transfer-reps
  after one warm-up per round. Decode: llama-bench's protocol, mirrored for pyggml-llama's Session: pp = a cleared
  KV cache then one batch of --pp random tokens (BOS first), tg = a cleared KV cache then --tg single-token decodes
  from position 0, each after its own warm-up (pp: one full prompt, tg: one token); f16 KV cache, flash attention
  off unless --flash-attn, n_ctx = pp + tg. llama-bench runs with --poll 0 (--llama-poll): llama.cpp keeps the
  input layer (the token-embedding lookup) on its local cpu backend, and with its default --poll 50 that backend's
  threads spin after each token on the very cores the loopback server computes on, which halves llama.cpp's tg on
  a 2-core machine; a client on a machine of its own would not pay that, and neither does pyggml (its Session keeps
  everything on the remote device).
- One process per client per round. ggml's client keeps its connection for the life of the process and
  `ggml-rpc-server` serves one client at a time, so the two clients cannot share a process; giving pyggml a process
  of its own too keeps the sides alike. Rounds alternate pyggml, llama.cpp, pyggml, llama.cpp ..., after
  --warmup-rounds discarded ones, and the best round of each side is kept, so that a burst of load from other
  processes on a shared machine hits both sides alike. The load average is reported with the figures.

llama.cpp's side needs llama-bench and the ggml shared libraries of the same llama.cpp with RPC on: they are built
once into .cache/llama-rpc-bench (generic AVX2, as the project's other llama.cpp references; several minutes)
unless --llama-dir names a folder that has them. `--profile DIR` writes a cProfile file per pyggml child there
(where its client time goes; it slows pyggml's side, so its figures are not for comparison).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from pyggml.backend.sysinfo import cpu_model
from pyggml_testing.rpc_servers import free_port, stop, wait_listening

HERE = Path(__file__).resolve().parent
SCRIPT = Path(__file__).resolve()
MB = 1e6
"""Throughput unit: 10^6 bytes per second."""

# ---- llama.cpp's tools ---------------------------------------------------------------------------------------------

BENCH_LIBS = ("libggml-base.so.0", "libggml-cpu.so.0", "libggml-rpc.so.0", "libggml.so.0", "libllama.so.0",
              "libllama-common.so.0", "libllama-bench-impl.so")
"""What llama-bench of a shared build loads, under the names its DT_NEEDED entries ask for; libggml-base and
libggml-rpc are also what the ctypes transfer client loads."""


def bench_cmake_flags() -> list[str]:
    """The project's generic-AVX2 flags (llama_cpp_ref.CMAKE_FLAGS: shared libraries) with RPC on and no network
    or server extras: the same llama.cpp as the interop tests' ggml-rpc-server."""
    from pyggml_testing.llama_cpp_ref import CMAKE_FLAGS

    return [*CMAKE_FLAGS, "-DGGML_RPC=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_TOOLS=ON"]


def default_llama_dir() -> Path:
    from pyggml_testing.llama_cpp_ref import CACHE

    return CACHE / "llama-rpc-bench"


def ensure_llama_bench(dest: Path) -> Path:
    """`dest`, holding llama-bench and its shared libraries; built there from the llama-cpp-python sdist if not."""
    if (dest / "llama-bench").is_file() and all((dest / lib).is_file() for lib in BENCH_LIBS):
        return dest
    from pyggml_testing.llama_cpp_ref import _cmake_build

    print(f"bench_rpc: building llama-bench and libggml-rpc into {dest} (once; several minutes)", file=sys.stderr)
    try:
        outputs = ["bin/llama-bench", *(f"bin/{lib}" for lib in BENCH_LIBS)]
        _cmake_build("", bench_cmake_flags(), ["llama-bench"], outputs, dest)
    except (subprocess.CalledProcessError, OSError, StopIteration) as e:
        raise SystemExit(f"bench_rpc: llama.cpp's llama-bench is not in {dest} and building it failed ({e}); "
                         "build it by hand or pass --llama-dir") from e
    return dest


def ensure_ggml_server() -> Path:
    """llama.cpp's ggml-rpc-server of `python -m pyggml_testing.llama_cpp_ref rpc`, built now if it is not yet."""
    from pyggml_testing.llama_cpp_ref import build_avx2, rpc_tool

    exe = rpc_tool("ggml-rpc-server")
    if exe is None:
        print("bench_rpc: building llama.cpp's ggml-rpc-server (once; several minutes)", file=sys.stderr)
        try:
            build_avx2()
        except (subprocess.CalledProcessError, OSError, StopIteration) as e:
            raise SystemExit(f"bench_rpc: ggml-rpc-server is not built and building it failed ({e}); run "
                             "`python -m pyggml_testing.llama_cpp_ref rpc`") from e
        exe = rpc_tool("ggml-rpc-server")
        if exe is None:
            raise SystemExit("bench_rpc: ggml-rpc-server is still missing after building it")
    return exe


# ---- servers -------------------------------------------------------------------------------------------------------



def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every process started here, without PYGGML_RPC_SERVERS: a server named there would come
    before ours in pyggml's device list and RPC0 would be someone else's."""
    env = {k: v for k, v in os.environ.items() if k != "PYGGML_RPC_SERVERS"}
    return {**env, "PYTHONUNBUFFERED": "1", **(extra or {})}


@dataclass
class Server:
    """One RPC server process on 127.0.0.1, its output in a temporary file (shown if it dies)."""

    kind: str
    proc: subprocess.Popen[bytes]
    endpoint: str
    log: IO[bytes]
    description: str = ""

    def log_tail(self, n: int = 2000) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-n:]

    def check(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"the {self.kind} server exited with {self.proc.returncode}: {self.log_tail()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            stop(self.proc)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()




def start_server(kind: str, threads: int) -> Server:
    """llama.cpp's ggml-rpc-server (kind "ggml") or `pyggml rpc-server --device cpu` (kind "pyggml")."""
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by Server.stop
    if kind == "ggml":
        exe = ensure_ggml_server()
        port = free_port()
        proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port), "-t", str(threads)], stdout=log,
                                stderr=subprocess.STDOUT, env=child_env())
        server = Server(kind, proc, f"127.0.0.1:{port}", log, f"{exe} -t {threads}")
        try:
            wait_listening(port, proc)
        except RuntimeError as e:
            tail = server.log_tail()
            server.stop()
            raise SystemExit(f"bench_rpc: ggml-rpc-server did not start: {e}\n{tail}") from e
        return server
    # pyggml: --port 0 and the port it prints, so there is no race for a free port
    proc = subprocess.Popen([sys.executable, "-m", "pyggml.cli", "rpc-server", "--device", "cpu", "--port", "0",
                             "--threads", str(threads), "--log-level", "WARNING"], stdout=subprocess.PIPE,
                            stderr=log, env=child_env())
    server = Server(kind, proc, "", log, f"pyggml rpc-server --device cpu --threads {threads}")
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    line = proc.stdout.readline().decode() if ready else ""
    m = re.search(r"listening on ([\d.]+):(\d+)", line)
    if m is None:
        server.stop()
        raise SystemExit(f"bench_rpc: pyggml rpc-server did not start: {line!r}\n{server.log_tail()}")
    server.endpoint = f"{m.group(1)}:{m.group(2)}"
    return server


@contextmanager
def running(kind: str, threads: int) -> Iterator[Server]:
    server = start_server(kind, threads)
    try:
        yield server
    finally:
        server.stop()


# ---- child processes: one client, one round ------------------------------------------------------------------------


def _best_transfer(set_once: Callable[[], None], get_once: Callable[[], None], size: int,
                   reps: int) -> dict[str, float]:
    """Warm-up, then the best of `reps` timed SETs and GETs in MB/s."""
    set_once()
    get_once()
    t_set, t_get = float("inf"), float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        set_once()
        t_set = min(t_set, time.perf_counter() - t0)
        t0 = time.perf_counter()
        get_once()
        t_get = min(t_get, time.perf_counter() - t0)
    return {"set_mb_s": size / t_set / MB, "get_mb_s": size / t_get / MB}


def child_transfer_pyggml(endpoint: str, size: int, reps: int) -> dict[str, Any]:
    """pyggml's client: an RPCBuffer of `size` bytes, `write` then a 1-byte `read` (the write is fire-and-forget),
    and a full `read`."""
    from pyggml_rpc.registry import RPCRegistry

    from pyggml.backend.registry import get_registry

    reg = get_registry("RPC")
    assert isinstance(reg, RPCRegistry)
    dev = reg.add_server(endpoint)[0]
    buf = dev.buffer_type().alloc_buffer(size)
    data = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8)
    got: list[Any] = []

    def set_once() -> None:
        buf.write(0, data)
        buf.read(0, 1)

    def get_once() -> None:
        got[:] = [buf.read(0, size)]

    res: dict[str, Any] = _best_transfer(set_once, get_once, size, reps)
    res["verified"] = bool(np.array_equal(np.asarray(got[0]), data))
    buf.free()
    return res


def child_transfer_ggml(endpoint: str, size: int, reps: int, libdir: Path) -> dict[str, Any]:
    """llama.cpp's client through ctypes: ggml_backend_tensor_set then a 1-byte tensor_get, and a full tensor_get
    into a preallocated array (its API writes into the caller's memory)."""
    sys.path.insert(0, str(HERE))
    from ggml_rpc_ctypes import GGMLRPCLib, RemoteBytes

    remote = RemoteBytes(GGMLRPCLib(libdir), endpoint, size)
    data = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8)
    one = np.empty(1, np.uint8)
    out = np.empty(size, np.uint8)

    def set_once() -> None:
        remote.set(data)
        remote.get_into(one)

    res: dict[str, Any] = _best_transfer(set_once, lambda: remote.get_into(out), size, reps)
    res["verified"] = bool(np.array_equal(out, data))
    remote.free()
    return res


def child_decode_pyggml(endpoint: str, threads: int, pp: int, tg: int, flash_attn: bool) -> dict[str, Any]:
    """pyggml-llama's Session on RPC0 (every layer remote), measured as llama-bench measures (see the module doc)."""
    from pyggml_rpc.client import RPCBackend
    from pyggml_rpc.registry import RPCRegistry

    from pyggml.backend.registry import get_registry
    from pyggml_llama.session import Session

    reg = get_registry("RPC")
    assert isinstance(reg, RPCRegistry)
    reg.add_server(endpoint)
    s = Session(None, ["RPC0"], n_ctx=pp + tg, n_batch=pp, n_threads=threads, flash_attn=flash_attn)
    rng = np.random.default_rng(0)
    n_vocab = s.hp.n_vocab
    bos = s.tokenizer.bos_id if s.tokenizer.add_bos and s.tokenizer.bos_id is not None else int(rng.integers(n_vocab))
    prompt = [bos, *(int(t) for t in rng.integers(0, n_vocab, pp - 1))]

    def run_pp() -> float:
        s.reset()
        t0 = time.perf_counter()
        s.eval(prompt)
        return time.perf_counter() - t0

    def run_tg(n: int) -> float:
        s.reset()
        tok = bos
        t0 = time.perf_counter()
        for _ in range(n):
            s.eval([tok])
            tok = int(rng.integers(n_vocab))
        return time.perf_counter() - t0

    run_pp()  # warm-up: the pp graph
    t_pp = run_pp()
    run_tg(1)  # warm-up: the one-token graph
    t_tg = run_tg(tg)
    rpc = [b for b in s.backends if isinstance(b, RPCBackend)]
    return {"pp_tok_s": pp / t_pp, "tg_tok_s": tg / t_tg, "backends": s.stats.backends,
            "n_splits": s.stats.n_splits, "graph_builds": s.stats.graph_builds,
            "graph_recomputes": sum(b.recomputes for b in rpc)}


def child_main(a: argparse.Namespace) -> None:
    """One client's round in this process; prints its JSON on the last line of stdout."""
    prof = cProfile.Profile() if a.profile and a.child.endswith("pyggml") else None
    if prof is not None:
        prof.enable()
    if a.child == "transfer-pyggml":
        res = child_transfer_pyggml(a.endpoint, a.mib << 20, a.transfer_reps)
    elif a.child == "transfer-ggml":
        res = child_transfer_ggml(a.endpoint, a.mib << 20, a.transfer_reps, Path(a.llama_dir))
    elif a.child == "decode-pyggml":
        res = child_decode_pyggml(a.endpoint, a.threads, a.pp, a.tg, a.flash_attn)
    else:
        raise SystemExit(f"unknown child {a.child}")
    if prof is not None:
        prof.disable()
        Path(a.profile).mkdir(parents=True, exist_ok=True)
        prof.dump_stats(str(Path(a.profile) / f"{a.child}-{a.profile_tag}.prof"))
    print(json.dumps(res), flush=True)


class RoundError(RuntimeError):
    """A client's round failed (its process exited non-zero or printed no result)."""


def run_child(kind: str, a: argparse.Namespace, server: Server, timeout: float) -> dict[str, Any]:
    args = [sys.executable, str(SCRIPT), "--child", kind, "--endpoint", server.endpoint, "--mib", str(a.mib),
            "--transfer-reps", str(a.transfer_reps), "--threads", str(a.threads), "--pp", str(a.pp),
            "--tg", str(a.tg), "--llama-dir", str(a.llama_dir), "--profile-tag", server.kind]
    if a.flash_attn:
        args.append("--flash-attn")
    if a.profile:
        args += ["--profile", str(a.profile)]
    return _run_json(args, timeout, child_env(), server, lambda out: json.loads(out.strip().splitlines()[-1]))


def run_llama_bench(a: argparse.Namespace, server: Server, model: Path, timeout: float) -> dict[str, Any]:
    """llama-bench -r 1 (one round: a warm-up and one measured run of pp and of tg), every layer on the server."""
    exe = Path(a.llama_dir) / "llama-bench"
    args = [str(exe), "-m", str(model), "--rpc", server.endpoint, "-ngl", "99", "-p", str(a.pp), "-n", str(a.tg),
            "-r", "1", "-t", str(a.threads), "--poll", str(a.llama_poll), "-fa", "on" if a.flash_attn else "off",
            "-ctk", "f16", "-ctv", "f16", "-o", "json"]
    env = child_env({"LD_LIBRARY_PATH": os.pathsep.join(filter(None, [str(a.llama_dir),
                                                                      os.environ.get("LD_LIBRARY_PATH")]))})

    def parse(out: str) -> dict[str, Any]:
        res: dict[str, Any] = {}
        for t in json.loads(out):
            if t["n_prompt"] == a.pp and t["n_gen"] == 0:
                res["pp_tok_s"] = float(t["avg_ts"])
            elif t["n_gen"] == a.tg and t["n_prompt"] == 0:
                res["tg_tok_s"] = float(t["avg_ts"])
            res.setdefault("backends", t.get("backends"))
            res.setdefault("build_commit", t.get("build_commit"))
        if "pp_tok_s" not in res or "tg_tok_s" not in res:
            raise ValueError(f"no pp{a.pp} / tg{a.tg} result in {out[-500:]!r}")
        return res

    return _run_json(args, timeout, env, server, parse)


def _run_json(args: list[str], timeout: float, env: dict[str, str], server: Server,
              parse: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        raise RoundError(f"{Path(args[0]).name} {' '.join(args[1:4])}: no result within {timeout:g} s") from e
    server.check()
    if p.returncode != 0:
        raise RoundError(f"{Path(args[0]).name} {' '.join(args[1:4])} exited with {p.returncode}: "
                         f"{p.stderr[-1500:]}")
    try:
        return parse(p.stdout)
    except (ValueError, KeyError, IndexError) as e:
        raise RoundError(f"{Path(args[0]).name}: unreadable result ({e}): {p.stdout[-500:]} {p.stderr[-500:]}") from e


# ---- the comparison ------------------------------------------------------------------------------------------------

CLIENTS = ("pyggml", "llama_cpp")


@dataclass
class Series:
    """One metric of both clients: every round's value (None for a failed round) and the errors seen."""

    rounds: dict[str, list[float | None]] = field(default_factory=lambda: {c: [] for c in CLIENTS})
    errors: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in CLIENTS})

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        best: dict[str, float | None] = {}
        for c in CLIENTS:
            vals = [v for v in self.rounds[c] if v is not None]
            best[c] = max(vals) if vals else None
            out[c] = {"best": _r(best[c]), "rounds": [_r(v) for v in self.rounds[c]]}
            if self.errors[c]:
                out[c]["errors"] = self.errors[c]
        p, q = best["pyggml"], best["llama_cpp"]
        out["ratio"] = round(p / q, 3) if p and q else None
        return out


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def measure(name: str, metrics: tuple[str, ...], rounds: int, warmup: int,
            sides: dict[str, Callable[[], dict[str, Any]]]) -> tuple[dict[str, Series], dict[str, Any]]:
    """Alternate the clients round by round (warm-up rounds discarded); every metric of every round."""
    series = {m: Series() for m in metrics}
    info: dict[str, Any] = {}
    for r in range(warmup + rounds):
        for client in CLIENTS:
            label = f"{name} {'warm-up' if r < warmup else f'round {r - warmup + 1}'} {client}"
            try:
                res = sides[client]()
            except RoundError as e:
                print(f"bench_rpc: {label}: {e}", file=sys.stderr)
                if r >= warmup:
                    for m in metrics:
                        series[m].rounds[client].append(None)
                        series[m].errors[client].append(str(e)[:300])
                continue
            print(f"bench_rpc: {label}: " + ", ".join(f"{m} {res[m]:.1f}" for m in metrics), file=sys.stderr)
            if r >= warmup:
                for m in metrics:
                    series[m].rounds[client].append(float(res[m]))
                info[client] = {k: v for k, v in res.items() if k not in metrics}
    return series, info


def bench_server(kind: str, a: argparse.Namespace, model: Path) -> dict[str, Any]:
    with running(kind, a.threads) as server:
        out: dict[str, Any] = {"server": server.description, "endpoint": server.endpoint}
        if "transfer" in a.only:
            transfer, t_info = measure(f"[{kind}] transfer", ("set_mb_s", "get_mb_s"), a.rounds, a.warmup_rounds, {
                "pyggml": lambda: run_child("transfer-pyggml", a, server, 300),
                "llama_cpp": lambda: run_child("transfer-ggml", a, server, 300)})
            out["transfer"] = {"mib": a.mib, **{m: s.report() for m, s in transfer.items()},
                               "verified": {c: i.get("verified") for c, i in t_info.items()}}
        if "decode" in a.only:
            decode, d_info = measure(f"[{kind}] decode", ("pp_tok_s", "tg_tok_s"), a.rounds, a.warmup_rounds, {
                "pyggml": lambda: run_child("decode-pyggml", a, server, 900),
                "llama_cpp": lambda: run_llama_bench(a, server, model, 900)})
            out["decode"] = {**{m: s.report() for m, s in decode.items()}, "info": d_info}
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="measured rounds per client; the best is reported")
    ap.add_argument("--warmup-rounds", type=int, default=1, help="discarded rounds before them")
    ap.add_argument("--mib", type=int, default=64, help="transfer size in MiB")
    ap.add_argument("--transfer-reps", type=int, default=3, help="timed SET+GET pairs per transfer round (best)")
    ap.add_argument("--threads", type=int, default=2, help="threads of the server and of the clients' cpu backend")
    ap.add_argument("--server", choices=("ggml", "pyggml", "both"), default="both")
    ap.add_argument("--only", choices=("transfer", "decode"), action="append", default=None,
                    help="measure only this (repeatable; default both)")
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--flash-attn", action="store_true", help="flash attention on both clients (default off)")
    ap.add_argument("--llama-poll", type=int, default=0,
                    help="llama-bench --poll: how hard its cpu threads busy-wait for work (llama.cpp's default 50)")
    ap.add_argument("--llama-dir", type=Path, default=None,
                    help="folder with llama-bench and libggml*.so.0 (default .cache/llama-rpc-bench, built if absent)")
    ap.add_argument("--profile", type=Path, default=None, help="write a cProfile file per pyggml child here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--endpoint", help=argparse.SUPPRESS)
    ap.add_argument("--profile-tag", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child_main(a)
        return
    a.only = a.only or ["transfer", "decode"]
    if a.rounds < 1 or a.mib < 1 or a.pp < 1 or a.tg < 1:
        raise SystemExit("bench_rpc: --rounds, --mib, --pp and --tg must be positive")
    from pyggml_llama.session import default_model_path

    model = default_model_path()
    a.llama_dir = ensure_llama_bench(a.llama_dir or default_llama_dir())
    kinds = ["ggml", "pyggml"] if a.server == "both" else [a.server]
    if "ggml" in kinds:
        ensure_ggml_server()
    out: dict[str, Any] = {
        "benchmark": "rpc client: pyggml vs llama.cpp against the same server on 127.0.0.1",
        "cpu": cpu_model(), "n_cpus": os.cpu_count(), "threads": a.threads, "rounds": a.rounds,
        "warmup_rounds": a.warmup_rounds, "model": model.name, "pp": a.pp, "tg": a.tg, "flash_attn": a.flash_attn,
        "kv_type": "f16", "llama_bench_poll": a.llama_poll,
        "units": {"transfer": "MB/s (10^6 bytes/s)", "decode": "tokens/s"},
        "llama_cpp": {"llama_bench": str(Path(a.llama_dir) / "llama-bench"), "libggml_rpc": str(a.llama_dir)},
        "loadavg_1m_start": round(os.getloadavg()[0], 2), "servers": {}}
    t0 = time.monotonic()
    for kind in kinds:
        out["servers"][kind] = bench_server(kind, a, model)
    out["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    out["wall_s"] = round(time.monotonic() - t0, 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
