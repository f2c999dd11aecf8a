"""Case files: a real graph's ops exported and replayed as cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pyggml as gg
from pyggml import ops
from pyggml_conformance.casefile import CaseFileError, export_graph, load_case_file, write_case_file
from pyggml_conformance.cli import main
from pyggml_conformance.runner import Status, compare_case, open_target


def small_model_graph() -> gg.Graph:
    """A decoder-layer-like graph: quantised weights, norms, rope, attention, MoE-free FFN, views."""
    ctx = gg.Context(no_alloc=True)
    x = ctx.new_tensor("f32", 64, 5, name="x")
    wq = ctx.new_tensor("q4_0", 64, 64, name="wq")
    wk = ctx.new_tensor("q8_0", 64, 32, name="wk")
    pos = ctx.new_tensor("i32", 5, name="pos")
    h = ops.mul(ops.rms_norm(x, 1e-5), ctx.new_tensor("f32", 64, name="norm_w"))
    q = ops.rope(ops.reshape(ops.mul_mat(wq, h), 16, 4, 5), pos, 16, ops.ROPE_TYPE_NEOX)
    k = ops.rope(ops.reshape(ops.mul_mat(wk, h), 16, 2, 5), pos, 16, ops.ROPE_TYPE_NEOX)
    qp = ops.permute(q, 0, 2, 1, 3)
    kp = ops.permute(k, 0, 2, 1, 3)
    mask = ctx.new_tensor("f16", 5, 5, name="mask")
    attn = ops.flash_attn_ext(qp, ops.cpy(kp, ctx.new_tensor("f16", 16, 5, 2)), ops.cont(ops.cpy(kp, ctx.new_tensor(
        "f16", 16, 5, 2))), mask, 0.25)
    out = ops.add(x, ops.reshape(ops.cont(attn), 64, 5))
    ffn = ops.swiglu(ops.mul_mat(ctx.new_tensor("q4_K", 256, 128), ops.pad(out, 192)))
    logits = ops.get_rows(ctx.new_tensor("f16", 64, 100), ops.argmax(ops.soft_max(ffn)))
    return gg.build_graph(logits, ops.top_k(ffn, 3))


def test_export_and_replay(tmp_path: Path) -> None:
    g = small_model_graph()
    path = tmp_path / "layer.cases.jsonl"
    n = write_case_file(g, path, source="test graph")
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "pyggml-conformance-cases" and len(lines) == n + 1
    recs = export_graph(g)
    assert {r["op"] for r in recs} >= {"MUL_MAT", "ROPE", "FLASH_ATTN_EXT", "CPY", "GLU", "GET_ROWS", "TOP_K"}
    assert all(r["op"] not in ("VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE") for r in recs)
    cases = load_case_file(path)
    assert len(cases) == n and all(c.source.startswith("layer.cases.jsonl:") for c in cases)
    ref = open_target("numpy")
    bad = [(r.name, r.error) for c in cases for r in compare_case(c, [ref], ref) if r.status is not Status.PASS]
    assert bad == []


def test_replayed_layouts_match_the_graph(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    write_case_file(small_model_graph(), path)
    for rec, case in zip([json.loads(x) for x in path.read_text().splitlines()[1:]], load_case_file(path),
                         strict=True):
        from pyggml_conformance.runner import realize

        node = realize(case).outputs[0]
        assert node.op.name == rec["op"] and list(node.ne) == rec["ne"] and str(node.type) == rec["type"]
        for s, d in zip(node.src, rec["srcs"], strict=True):
            assert (s is None) == (d is None)
            if s is not None:
                assert list(s.ne) == d["ne"] and list(s.nb) == d["nb"] and str(s.type) == d["type"]


def test_identical_nodes_are_exported_once() -> None:
    ctx = gg.Context(no_alloc=True)
    a = ctx.new_tensor("f32", 8, 3)
    g = gg.build_graph(ops.add(ops.silu(a), ops.silu(ops.scale(a, 2.0))))
    recs = export_graph(g)
    assert [r["count"] for r in recs if r["op"] == "UNARY"] == [2]


def test_cli_replays_a_case_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "g.jsonl"
    n = write_case_file(small_model_graph(), path)
    assert main(["--backend", "numpy", "--case-file", str(path)]) == 0
    assert f"{n}/{n} cases passed" in capsys.readouterr().out


@pytest.mark.parametrize(("text", "msg"), [
    ("", "empty case file"),
    ("{\"format\": \"other\"}\n", "not a pyggml-conformance-cases file"),
    ("{\"format\": \"pyggml-conformance-cases\", \"version\": 99}\n", "version 99"),
    ("{\"format\": \"pyggml-conformance-cases\", \"version\": 1}\n{\"op\": \"FROB\"}\n", "unknown op 'FROB'"),
    ("{\"format\": \"pyggml-conformance-cases\", \"version\": 1}\nnot json\n", ":2: not JSON"),
])
def test_bad_case_files(tmp_path: Path, text: str, msg: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(CaseFileError, match=msg.replace("(", "\\(")):
        load_case_file(path)
