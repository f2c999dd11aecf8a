"""Scheduler debug output: PYGGML_SCHED_DEBUG levels, the DOT picture and the self-drawn SVG."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from pyggml.backend.sched import Scheduler
from pyggml.errors import GraphError, OptionError
from pyggml.ops.base import Op
from pyggml_testing.devices import fake_device, numpy_backend
from pyggml_testing.sched import build_graph, make_model


def planned(level: str | None, monkeypatch: pytest.MonkeyPatch) -> Scheduler:
    if level is None:
        monkeypatch.delenv("PYGGML_SCHED_DEBUG", raising=False)
    else:
        monkeypatch.setenv("PYGGML_SCHED_DEBUG", level)
    dev = fake_device("gpu", exclude={Op.ROPE, Op.SOFT_MAX})
    cpu = numpy_backend()
    r = build_graph(make_model({"0": dev.buffer_type(), "1": dev.buffer_type()}, cpu.device.buffer_type()))
    s = Scheduler([dev.init_backend(), cpu])
    s.alloc_graph(r.graph)
    return s


def test_debug_levels(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    planned(None, monkeypatch)
    assert capsys.readouterr().err == ""
    planned("1", monkeypatch)
    err = capsys.readouterr().err
    assert "15 splits, 16 inputs copied" in err
    assert len(re.findall(r"^## split \d+: (gpu|numpy)", err, re.M)) == 15
    assert "## split 1: gpu, nodes [1, 5), 1 inputs: inp_embd (0.6 KiB) from numpy" in err
    assert "\nnode " not in err
    planned("2", monkeypatch)
    err = capsys.readouterr().err
    lines = err.splitlines()
    node_lines = [ln for ln in lines if ln.startswith("node ")]
    assert len(node_lines) == 64
    mm = next(ln for ln in node_lines if "MUL_MAT" in ln and "0.wk" in ln)
    assert "[gpu 1.wgt0] use=1: 0.wk [gpu 1.dst] attn_norm-0 [gpu 1.wgt1]" in mm
    rope = next(ln for ln in node_lines if " ROPE " in ln)
    assert "[numpy 3.best]" in rope and "numpy#" in rope and "[numpy 5.cpy]" in rope
    assert sum(ln.startswith("leaf ") for ln in lines) == 26
    with pytest.raises(OptionError, match=r"^PYGGML_SCHED_DEBUG='not-a-number': not an integer"):
        planned("not-a-number", monkeypatch)  # named, not silently 0


def test_debug_text_without_env(monkeypatch: pytest.MonkeyPatch) -> None:
    s = planned(None, monkeypatch)
    assert s.debug_text(1).count("## split") == 15
    assert "node " in s.debug_text(2)
    s.reset()
    assert s.debug_text() == "(no graph planned)"
    with pytest.raises(GraphError, match="no graph planned"):
        s.to_dot()
    with pytest.raises(GraphError, match="no graph planned"):
        s.to_svg()


def test_dot(monkeypatch: pytest.MonkeyPatch) -> None:
    s = planned(None, monkeypatch)
    dot = s.to_dot()
    assert dot.startswith("digraph sched {") and dot.rstrip().endswith("}")
    assert dot.count("subgraph cluster_s") == 15
    assert 'label="split 1: gpu (1 inputs)"' in dot
    assert dot.count("style=dashed, color=") == 16        # one red edge per copy
    assert "copy\\ngpu#inp_embd#0" in dot
    assert dot.count("{") == dot.count("}")


def test_svg(monkeypatch: pytest.MonkeyPatch) -> None:
    s = planned(None, monkeypatch)
    root = ET.fromstring(s.to_svg())
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text or "" for t in root.iter(f"{ns}title")]
    plan = s.plan
    assert plan is not None
    assert len(titles) == plan.n_nodes + plan.n_split_inputs   # one box per node and per copy
    assert "gpu#inp_embd#0" in titles and "ROPE node_5" in titles
    assert len(root.findall(f"{ns}line")) == 15               # split boundaries
    assert len(root.findall(f"{ns}path")) == 16               # copy arrows
    lanes = [t.text for t in root.findall(f"{ns}text") if t.get("font-weight") == "bold"]
    assert lanes == ["gpu", "numpy"]
