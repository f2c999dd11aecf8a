"""`pyggml-llama bench` (issue 35, item 2): llama-bench's options, tests and output formats on a tiny GGUF written
here. Every format parses and carries llama-bench's columns / fields with positive figures; bad options are one
line; the timing core fills a depth once; --plot draws or says plainly that matplotlib is missing."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import statistics
from pathlib import Path

import pytest

from pyggml_llama.bench import params as bp
from pyggml_llama.bench.timing import BenchTest, Runner, mean_stddev
from pyggml_llama.cli import main
from pyggml_testing.llama import tiny_llama_gguf

DEVICE = "cpu" if importlib.util.find_spec("pyggml_cpu") else "numpy"
FIELDS = ["build_commit", "build_number", "cpu_info", "gpu_info", "backends", "model_filename", "model_type",
          "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads", "type_k", "type_v", "n_gpu_layers",
          "split_mode", "flash_attn", "devices", "tensor_split", "use_mmap", "repack", "n_prompt", "n_gen", "n_depth",
          "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts"]
"""llama-bench's fields (in its order) that pyggml has a meaning for."""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("gguf")
    return tiny_llama_gguf(tmp_path_factory.mktemp("bench") / "tiny.gguf")


def bench(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["bench", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_markdown_table(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = bench(capsys, "-m", str(model), "-p", "8", "-n", "4", "-r", "2", "-d", "0,16", "-t", "1,2",
                             "--backend", DEVICE)
    assert status == 0, err
    lines = out.splitlines()
    table = [ln for ln in lines if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in table]
    assert cells[0] == ["model", "size", "params", "backend", "threads", "dev", "test", "t/s"]
    assert all(set(c) <= set("-:") for c in cells[1])
    rows = [dict(zip(cells[0], r, strict=True)) for r in cells[2:]]
    assert [(r["threads"], r["test"]) for r in rows] == [
        (t, name) for t in ("1", "2") for name in ("pp8", "tg4", "pp8 @ d16", "tg4 @ d16")]
    for r in rows:
        mean, std = r["t/s"].split(" ± ")
        assert float(mean) > 0 and float(std) >= 0
        assert r["model"] == "llama 134K Q8_0" and r["size"].endswith(" MiB") and r["params"] == "0.13 M"
        assert r["dev"] == DEVICE
    assert lines[-1].startswith("build: pyggml-")
    progress = [ln for ln in err.splitlines() if ln.startswith("pyggml-llama bench: ")]  # (plugins may log)
    assert len(progress) == 8 and progress[2].startswith("pyggml-llama bench: test 3/8: pp8 @ d16, tiny.gguf")


def _check_row(row: dict[str, object], samples: bool) -> None:
    assert list(row)[: len(FIELDS)] == FIELDS
    assert row["model_type"] == "llama 134K Q8_0" and row["type_k"] == "f16" and row["devices"] == DEVICE
    for key in ("model_size", "model_n_params", "n_threads", "avg_ns", "avg_ts"):
        assert float(str(row[key])) > 0, key
    assert float(str(row["stddev_ts"])) >= 0
    assert (int(str(row["n_prompt"])), int(str(row["n_gen"]))) in ((8, 0), (0, 4))
    if samples:
        ns, ts = row["samples_ns"], row["samples_ts"]
        assert isinstance(ns, list) and isinstance(ts, list) and len(ns) == len(ts) == 2
        assert all(x > 0 for x in ns + ts)
        assert statistics.mean(ts) == pytest.approx(row["avg_ts"], rel=1e-5)


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
def test_machine_formats(model: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    status, out, err = bench(capsys, "-m", str(model), "-p", "8", "-n", "4", "-r", "2", "--backend", DEVICE, "-o", fmt)
    assert status == 0, err
    if fmt == "json":
        rows = json.loads(out)
    elif fmt == "jsonl":
        rows = [json.loads(ln) for ln in out.splitlines()]
    else:
        rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 2
    for row in rows:
        _check_row(row, samples=fmt != "csv")
    progress = [ln.split(": ")[1] for ln in err.splitlines() if ln.startswith("pyggml-llama bench: ")]
    assert progress == ["test 1/2", "test 2/2"]


def test_tests_follow_llama_benchs_order_and_ranges() -> None:
    opts = bp.Options(models=[Path("m.gguf")], n_prompt=[8, 0], n_gen=[4], n_pg=[(4, 2)], n_depth=[0, 16],
                      n_batch=[2048], n_ubatch=[512], kv_type=["f16"], n_threads=[2], flash_attn=[False],
                      split_mode=["layer"], tensor_split=[()], devices=[("cpu",)], repack=True, devices_given=False)
    assert [i.test.name for i in opts.instances()] == ["pp8", "tg4", "pp4+tg2", "pp8 @ d16", "tg4 @ d16",
                                                       "pp4+tg2 @ d16"]
    assert opts.shown_columns() == []
    assert bp.int_range("1-4,16") == [1, 2, 3, 4, 16]
    assert bp.int_range("0-4096+1024") == [0, 1024, 2048, 3072, 4096]
    assert bp.int_range("1-16*2") == [1, 2, 4, 8, 16]
    assert bp.device_list("cpu,OpenCL0/Vulkan0") == [("cpu",), ("OpenCL0", "Vulkan0")]
    assert mean_stddev([1.0, 2.0, 4.0]) == pytest.approx((statistics.mean([1, 2, 4]), statistics.stdev([1, 2, 4])))
    assert mean_stddev([3.0]) == (3.0, 0.0)


class CountingEvaluator:
    n_vocab = 50
    bos = 1

    def __init__(self) -> None:
        self.n_past = 0
        self.decoded = 0

    def seek(self, n_past: int) -> None:
        self.n_past = n_past

    def decode(self, tokens: list[int]) -> None:
        assert tokens and all(0 <= t < self.n_vocab for t in tokens)
        self.n_past += len(tokens)
        self.decoded += len(tokens)


def test_a_depth_is_filled_once_per_runner() -> None:
    ev = CountingEvaluator()
    runner = Runner(ev, n_batch=8)
    pp = BenchTest(8, 0, 16)
    runner.warmup(pp)
    assert ev.decoded == 16 + 8  # the depth, then the warm-up prompt after it
    runner.sample(pp)
    runner.sample(BenchTest(0, 4, 16))
    assert ev.decoded == 16 + 8 + 8 + 4 and ev.n_past == 20  # no second fill: the cache kept the first 16 tokens
    runner.sample(BenchTest(0, 4, 24))
    assert ev.decoded == 16 + 8 + 8 + 4 + 8 + 4  # filled from 16 to 24 only


@pytest.mark.parametrize(("args", "says"), [
    (["-p", "8-x"], "'8-x' is not N"), (["-o", "xml"], "invalid choice: 'xml'"), (["--bogus"], "--bogus"),
    (["-ctk", "q8_0", "-ctv", "f16"], "-ctk and -ctv differ"), (["-p", "0", "-n", "0"], "no tests"),
    (["-fa", "maybe"], "give 0 or 1"), (["-pg", "8"], "give PP,TG"), (["-b", "0,8"], "-b takes counts of 1"),
    (["-t", "4-1"], "does not advance")])
def test_bad_options_are_one_line(capsys: pytest.CaptureFixture[str], args: list[str], says: str) -> None:
    with pytest.raises(SystemExit) as e:
        main(["bench", *args])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert err.startswith("pyggml-llama bench: error: ") and err.count("\n") == 1 and says in err, err


def test_failures_are_one_line_before_any_output(model: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = bench(capsys, "-m", str(tmp_path / "none.gguf"), "--backend", DEVICE)
    assert status == 1 and out == "" and err.count("\n") == 1 and "none.gguf" in err
    status, out, err = bench(capsys, "-m", str(model), "-p", "8", "-d", "100", "--backend", DEVICE)
    assert status == 1 and out == ""
    assert err == "pyggml-llama bench: error: pp8 @ d100 needs a context of 108 tokens; tiny.gguf was trained for 64\n"


def test_plot_without_matplotlib_says_so_first(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    status, out, err = bench(capsys, "-m", str(model), "--plot", str(tmp_path / "p.png"))
    assert status == 1 and out == ""
    assert err == "pyggml-llama bench: error: --plot needs matplotlib: pip install 'pyggml-llama[plot]'\n"


def test_plot_draws_tok_s_against_depth(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "bench.png"
    status, _, err = bench(capsys, "-m", str(model), "-p", "8", "-n", "4", "-d", "0,8", "-r", "1", "--backend",
                           DEVICE, "-o", "jsonl", "--plot", str(png))
    assert status == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and err.endswith(f"wrote {png}\n")


def test_the_generation_cli_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "give --prompt" in capsys.readouterr().err
