"""The pieces of gpu_bench.sh that need no GPU (pyggml_cuda_testing.bench_vs_llama): llama-perplexity's saved
log-probabilities read back and scored, its log parsed, and the summary of both benchmarks' rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from pyggml_cuda_testing.bench_vs_llama import KldBase, judge, kld_rows, perplexity_figures, summary


def _log_softmax(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    x = x - x.max(axis=-1, keepdims=True)
    out: npt.NDArray[np.float64] = x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
    return out


def _write_base(path: Path, logits: npt.NDArray[np.float64], n_ctx: int, tokens: npt.NDArray[np.int32]) -> None:
    """A --kl-divergence-base file in llama-perplexity's layout: header, tokens, then per chunk's scored position
    a float32 scale and minimum and one 16-bit step count per token (16 nats below the top at most)."""
    n_chunk, n_scored, n_vocab = logits.shape
    nv = 2 * ((n_vocab + 1) // 2) + 4
    rows = np.zeros((n_chunk, n_scored, nv), np.uint16)
    for c in range(n_chunk):
        for i in range(n_scored):
            x = logits[c, i].astype(np.float32)
            hi, lo = float(x.max()), max(float(x.min()), float(x.max()) - 16)
            lse = float(np.log(np.exp(x - hi).sum()))
            scale = np.float32((hi - lo) / 65535)
            rows[c, i, :4] = np.array([scale, lo - hi - lse], np.float32).view(np.uint16)
            rows[c, i, 4:4 + n_vocab] = np.where(x > lo, np.rint((x - lo) / scale), 0).astype(np.uint16)
    with path.open("wb") as f:
        f.write(b"_logits_")
        f.write(np.array([n_ctx, n_vocab, n_chunk], np.int32).tobytes())
        f.write(tokens.astype(np.int32).tobytes())
        f.write(rows.tobytes())


def test_base_file_read_back_and_scored(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n_ctx, n_chunk, n_vocab = 16, 2, 37  # odd vocabulary: one padding value per row
    first = n_ctx // 2
    logits = rng.normal(0, 3, (n_chunk, n_ctx - 1 - first, n_vocab))
    tokens = rng.integers(0, n_vocab, (n_chunk, n_ctx)).astype(np.int32)
    _write_base(tmp_path / "base", logits, n_ctx, tokens)
    base = KldBase.read(tmp_path / "base")
    assert (base.n_ctx, base.n_vocab, base.n_chunk, base.first, base.n_scored) == (n_ctx, n_vocab, n_chunk, 8, 7)
    assert np.array_equal(base.tokens, tokens)
    chunks = list(base.log_probs())
    assert len(chunks) == n_chunk
    for got, x in zip(chunks, logits, strict=True):
        want = _log_softmax(x)
        kept = want > want.max(axis=-1, keepdims=True) - 16
        assert np.allclose(got[kept], want[kept], atol=1e-3)
        kld, same, clear = kld_rows(got, x)  # the same logits: no divergence but the 16-bit steps and the -16 cut
        assert np.all(np.abs(kld) < 1e-4) and same.all()
        top2 = np.sort(x, axis=-1)[:, -2:]
        margin = top2[:, 1] - top2[:, 0]  # clear: the base's first token 1.0 above its second (16-bit steps aside)
        assert clear[margin > 1.01].all() and not clear[margin < 0.99].any()
        shifted = x.copy()
        shifted[:, 0] += 5.0
        kld, _, _ = kld_rows(got, shifted)
        assert np.all(kld > 1e-3)


LOG = """\
chunk      PPL      ln(PPL(Q)/PPL(base))      KL Divergence      Δp RMS      Same top p
   6   25.4831 ± 3.5881   -0.00004 ± 0.00270   0.00330 ± 0.00012   1.748 ± 0.087 %   94.974 ± 1.125 %
====== KL divergence statistics ======
Mean    KLD:   0.003298 ±   0.000123
Maximum KLD:   0.018252
Same top p: 94.974 ± 1.125 %
"""


def test_floor_from_log_and_judgement() -> None:
    floor = perplexity_figures(LOG)
    assert floor == {"kld": 0.003298, "top1": pytest.approx(0.94974)}
    assert perplexity_figures("no statistics: fewer than 100 positions") is None
    row = {"batch": {"kld": 1e-7, "top1": 1.0, "clear_top1": 1.0},
           "token_by_token": {"kld": 0.0033, "top1": 0.94, "clear_top1": 0.99}}
    judged = judge(row, floor)
    assert judged["pass"] and judged["goal_top1"] == 0.95  # top-1 counted where llama.cpp's choice is clear
    assert judge({"batch": {"kld": 0.006, "top1": 1.0, "clear_top1": 1.0}}, floor)["pass"] is False
    assert judge({"batch": {"kld": 0.001, "top1": 0.97, "clear_top1": 0.94}}, floor)["pass"] is False
    assert judge({"batch": {"kld": 0.0, "top1": 1.0, "clear_top1": 1.0}}, None)["pass"] is None


def _row(p: int, n: int, d: int, fa: int | bool, ts: float) -> dict[str, object]:
    return {"model_filename": "/nowhere/m.gguf", "n_prompt": p, "n_gen": n, "n_depth": d, "flash_attn": fa,
            "avg_ts": ts, "stddev_ts": ts / 100}


def test_summary_side_by_side(tmp_path: Path) -> None:
    llama = [_row(512, 0, 0, 1, 20000.0), _row(0, 128, 0, 1, 500.0), _row(512, 0, 0, 0, 18000.0),
             _row(0, 128, 0, 0, 400.0)]
    (tmp_path / "llama_bench.llama-1.1b-q8_0.jsonl").write_text("\n".join(json.dumps(r) for r in llama) + "\n")
    # pyggml's rows say flash_attn as a bool; a run cut short leaves a partial last line
    pyggml = [json.dumps(_row(512, 0, 0, False, 9000.0)), json.dumps(_row(0, 128, 0, False, 440.0)), '{"n_pro']
    (tmp_path / "pyggml_bench.llama-1.1b-q8_0.jsonl").write_text("\n".join(pyggml))
    (tmp_path / "facts.json").write_text(json.dumps({"gpu": {"name": "H100"}, "bandwidth": {"GBps": 3000.0}}))
    (tmp_path / "summary.txt").write_text("install: rc=0 10s\n")
    result = summary(tmp_path)
    assert json.loads((tmp_path / "bench.json").read_text()) == result
    rows = {(r["test"], r["fa"]): r for r in result["rows"]}
    assert rows[("tg128", 0)]["ratio"] == pytest.approx(1.1) and rows[("tg128", 1)]["ratio"] is None
    assert rows[("pp512", 0)]["ratio"] == pytest.approx(0.5)
    best = {r["test"]: r for r in result["best"]}
    assert best["tg128"]["llama_cpp_fa"] == 1 and best["tg128"]["ratio"] == pytest.approx(0.88)
    goals = result["goals"]
    assert goals["decode_ratio_min"] == pytest.approx(0.88) and goals["prompt_ratio_min"] == pytest.approx(0.45)
    assert not goals["decode_ge_1x"] and result["steps"] == ["install: rc=0 10s"]
