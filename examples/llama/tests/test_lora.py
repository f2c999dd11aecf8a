"""LoRA fine-tuning on tiny llamas with SmolLM2's layout (pyggml_llama.synthetic's weight table, Q8_0/Q4_1 base
weights): the adapters' gradients, which reach them through MUL_MAT / OUT_PROD with the quantised weights, match
central finite differences; a few AdamW steps make the loss fall; a fresh adapter leaves the logits unchanged; the
saved adapter GGUF has llama.cpp's layout and loads back; the CLI trains and saves on a GGUF written here."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.autodiff import build_backward
from pyggml.backend import devices, init_backend
from pyggml.backend.sched import Scheduler
from pyggml.errors import PyGGMLError, ShapeError
from pyggml.gguf import Weights
from pyggml.opt import AdamW
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_llama import lora
from pyggml_llama.adapter import LoraAdapter, LoraConfig, layer_list, parse_targets
from pyggml_llama.finetune import CausalLMTrainer, LoraTrainer, TextDataset, graph_size_for, mark_full_params, placement
from pyggml_llama.hparams import HParams
from pyggml_llama.model import LlamaModel
from pyggml_llama.synthetic import synthetic_weights
from pyggml_testing.llama import write_llama_gguf

TINY = HParams(arch="llama", n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=96, n_vocab=40, n_ctx_train=64,
               head_dim=16, rope_dims=16, rope_type=0, rope_freq_base=10000.0, rope_freq_scale=1.0, norm_eps=1e-5)


def _values(hp: HParams, seed: int = 0) -> dict[str, np.ndarray]:
    _, tensors = synthetic_weights(hp, GGMLType.Q8_0, GGMLType.Q8_0)
    rng = np.random.default_rng(seed)
    out = {}
    for name, t in tensors.items():
        norm = "norm" in name  # norms near 1, matrices N(0, 1 / n_in): every layer keeps the activations' scale
        v = rng.standard_normal(tuple(reversed([d for d in t.ne if d > 1] or [1])))
        out[name] = (v * (0.1 if norm else t.ne[0] ** -0.5) + (1.0 if norm else 0.0)).astype(np.float32)
    return out


def _model(device: str, wtype: GGMLType = GGMLType.Q8_0) -> tuple[LlamaModel, Scheduler]:
    """The tiny model's weights on `device`; a scheduler over it (and the numpy reference as the CPU fallback of
    an accelerator)."""
    be = init_backend(device)
    ctx, tensors = synthetic_weights(TINY, wtype, GGMLType.Q8_0)
    alloc_ctx_tensors(ctx, be.device.buffer_type())
    for name, v in _values(TINY).items():
        tensors[name].set(v)
    model = LlamaModel(TINY, Weights(SimpleNamespace(path="<tiny>"), ctx, tensors))  # type: ignore[arg-type]
    backends = [be] if device in ("numpy", "cpu") else [be, init_backend("numpy")]
    return model, Scheduler(backends, graph_size=graph_size_for(model))


class _LossGraph:
    """Forward + backward of the mean next-token cross-entropy of one window (no optimiser step)."""

    def __init__(self, model: LlamaModel, sched: Scheduler, n: int) -> None:
        st = gg.Context(no_alloc=True)
        pos, mask = st.new_tensor(GGMLType.I32, n), st.new_tensor(GGMLType.F32, n, n)
        self.tokens, self.labels = st.new_tensor(GGMLType.I32, n), st.new_tensor(GGMLType.F32, TINY.n_vocab, n)
        self.seed = st.new_tensor(GGMLType.F32, 1)
        alloc_ctx_tensors(st, sched.buffer_type(0))
        pos.set(np.arange(n, dtype=np.int32))
        mask.set(np.triu(np.full((n, n), -np.inf, dtype=np.float32), k=1))
        with gg.Context(no_alloc=True) as ctx:
            self.loss = ops.cross_entropy_loss(model.forward(self.tokens, pos, mask), self.labels)
            self.graph = gg.build_graph(self.loss, size=graph_size_for(model))
            self.grads = None
            if model.adapters:
                self.loss.set_loss()
                self.grads = build_backward(self.graph, {self.loss: self.seed}, ctx=ctx)
        self.sched = sched
        sched.reset()
        sched.alloc_graph(self.graph)

    def run(self, ids: np.ndarray) -> float:
        self.tokens.set(ids[:-1].astype(np.int32))
        self.labels.set(np.eye(TINY.n_vocab, dtype=np.float32)[ids[1:]])
        if self.grads is not None:
            self.grads.reset()
        self.sched.graph_compute(self.graph)
        return float(self.loss.numpy()[0])

    def grad(self, p: Tensor) -> np.ndarray:
        assert self.grads is not None
        g = self.grads.grad(p)
        assert g is not None, p.name
        return g.numpy().reshape(-1).astype(np.float64)


def _graded(device: str, wtype: GGMLType) -> tuple[list[Tensor], _LossGraph, np.ndarray]:
    """Adapters on q, v and the FFN's down projection of the tiny model (B random: B = 0 makes every dA zero),
    their gradients computed once; returns (params, loss graph, token ids)."""
    model, sched = _model(device, wtype)
    ad = LoraAdapter(model, LoraConfig(rank=3, alpha=6.0, targets=("attn_q", "attn_v", "ffn_down"))).alloc(
        sched.buffer_type(0))
    rng = np.random.default_rng(1)
    for _, b in ad.pairs.values():
        b.set(rng.normal(0, 0.3, b.nelements()).astype(np.float32))
    ad.attach()
    lg = _LossGraph(model, sched, 8)
    ids = rng.integers(0, TINY.n_vocab, 9)
    lg.run(ids)
    return ad.params, lg, ids


@pytest.mark.parametrize("wtype", [GGMLType.Q8_0, GGMLType.Q4_1, GGMLType.F16])
def test_adapter_gradients_match_finite_differences(wtype: GGMLType) -> None:
    """d(loss)/dA and d(loss)/dB through frozen quantised weights, on the numpy reference (float64 math, F32
    storage: a step of 1e-2 keeps the loss's rounding out of the difference)."""
    params, lg, ids = _graded("numpy", wtype)
    analytic = {p.name: lg.grad(p) for p in params}
    eps = 1e-2
    rng = np.random.default_rng(3)
    for p in params:
        base = p.numpy().reshape(-1).copy()
        g = analytic[p.name]
        for i in rng.choice(base.size, 3, replace=False):
            vals = []
            for s in (1.0, -1.0):
                v = base.copy()
                v[i] += s * eps
                p.set(v)
                vals.append(lg.run(ids))
            p.set(base)
            fd = (vals[0] - vals[1]) / (2 * eps)
            assert abs(fd - g[i]) <= 3e-3 * max(np.abs(g).max(), 1e-6), f"{p.name}[{i}]: {fd} vs gradient {g[i]}"


def test_cpu_adapter_gradients_match_the_reference() -> None:
    """The cpu plugin's gradients (OUT_PROD with Q4_1 src0, ROPE_BACK, SOFT_MAX_BACK, ... in C) against the
    reference's. The cpu plugin quantises the activations of a quantised matmul to Q8 as ggml does, so the two
    differ by that rounding (a few % of the largest gradient here), not bit for bit."""
    pytest.importorskip("pyggml_cpu")
    ref_params, ref, _ = _graded("numpy", GGMLType.Q4_1)
    cpu_params, cpu, _ = _graded("cpu", GGMLType.Q4_1)
    for p, q in zip(ref_params, cpu_params, strict=True):
        g, h = ref.grad(p), cpu.grad(q)
        assert np.abs(g - h).max() <= 0.05 * np.abs(g).max(), p.name


def test_a_few_steps_make_the_loss_fall() -> None:
    pytest.importorskip("pyggml_cpu")
    model, sched = _model("cpu", GGMLType.Q4_1)
    ad = LoraAdapter(model, LoraConfig(rank=4, alpha=8.0)).alloc(sched.buffer_type(0))
    trainer = LoraTrainer(model, ad, sched, 16, optimizer=AdamW(alpha=1e-2))
    ds = TextDataset(np.random.default_rng(0).integers(0, TINY.n_vocab, 2 * 16 + 1).tolist(), TINY.n_vocab, 16)
    frozen = {n: t.numpy().copy() for n, t in model.weights.tensors.items()}
    before = trainer.evaluate(ds, 0, 2).loss
    losses = [trainer.step(ds, s % 2).loss for s in range(12)]
    after = trainer.evaluate(ds, 0, 2).loss
    assert np.isfinite(losses).all()
    assert losses[0] == pytest.approx(before, rel=0.2)  # window 0's loss before any update is about the mean
    assert losses[-2] < 0.8 * losses[0] and after < 0.7 * before, (before, losses, after)
    for n, t in model.weights.tensors.items():  # only the adapters moved
        np.testing.assert_array_equal(t.numpy(), frozen[n], err_msg=n)



def test_full_fine_tune_trains_every_weight_it_marks() -> None:
    """All-F32 weights marked as parameters (llama-finetune's full fine-tune): the loss falls and every marked
    weight moves. The tiny model ties its output matrix to the token embedding, so freezing the embedding alone
    (llama.cpp's choice, which trains a separate output copy) is refused rather than half-applied."""
    be = init_backend("numpy")
    ctx, tensors = synthetic_weights(TINY, GGMLType.F32, GGMLType.F32)
    alloc_ctx_tensors(ctx, be.device.buffer_type())
    for name, v in _values(TINY).items():
        tensors[name].set(v)
    model = LlamaModel(TINY, Weights(SimpleNamespace(path="<tiny>"), ctx, tensors))  # type: ignore[arg-type]
    with pytest.raises(PyGGMLError, match="tied"):
        mark_full_params(model)
    params = mark_full_params(model, frozen=())
    assert len(params) == len(tensors)
    trainer = CausalLMTrainer(model, Scheduler([be], graph_size=graph_size_for(model)), 16,
                              optimizer=AdamW(alpha=1e-2))
    ds = TextDataset(np.random.default_rng(0).integers(0, TINY.n_vocab, 16 + 1).tolist(), TINY.n_vocab, 16)
    before = {t.name: t.numpy().copy() for t in params}
    losses = [trainer.step(ds, 0).loss for _ in range(6)]
    assert np.isfinite(losses).all() and losses[-1] < 0.7 * losses[0], losses
    for t in params:
        assert not np.array_equal(t.numpy(), before[t.name]), t.name


def _losses(device: str, steps: int) -> tuple[list[float], dict[str, Counter[str]]]:
    model, sched = _model(device, GGMLType.Q4_1)
    ad = LoraAdapter(model, LoraConfig(rank=4, alpha=8.0, targets=parse_targets("q,k,v,o,gate,up,down")))
    trainer = LoraTrainer(model, ad.alloc(sched.buffer_type(0)), sched, 16, optimizer=AdamW(alpha=1e-2))
    ds = TextDataset(np.random.default_rng(0).integers(0, TINY.n_vocab, 2 * 16 + 1).tolist(), TINY.n_vocab, 16)
    losses = [trainer.step(ds, s % 2).loss for s in range(steps)]
    return losses, placement(sched, trainer.trainer.gb.nodes)


@pytest.mark.parametrize("device", ["OpenCL0", "Vulkan0"])
def test_the_step_runs_on_accelerators(device: str) -> None:
    """The whole training step (OUT_PROD of Q4_1 weights, the backward ops, AdamW) runs on the device, and the
    loss curve follows the reference's: the first loss within 1e-3 (the devices' quantised matmuls round their
    activations), the next ones within 1% (AdamW's first steps move every parameter by about lr whatever the
    gradient's size, which spreads small differences)."""
    if device.lower() not in {d.name.lower() for d in devices()}:
        pytest.skip(f"{device} is not present here")
    ref, _ = _losses("numpy", 4)
    got, where = _losses(device, 4)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-3)
    np.testing.assert_allclose(got, ref, rtol=1e-2)
    elsewhere = {name: ops for name, ops in where.items() if name != device}
    assert all(set(ops) <= {"RESHAPE"} for ops in elsewhere.values()), elsewhere  # the tokens' view only


def test_fresh_adapter_leaves_the_logits_unchanged() -> None:
    model, sched = _model("numpy")
    lg = _LossGraph(model, sched, 8)
    ids = np.arange(9) % TINY.n_vocab
    base = lg.run(ids)
    ad = LoraAdapter(model, LoraConfig(targets=parse_targets("q,k,v,o,gate,up,down"))).alloc(sched.buffer_type(0))
    ad.attach()
    assert _LossGraph(model, sched, 8).run(ids) == base  # B = 0: the added term is exactly zero
    ad.detach()
    assert not model.adapters


def test_adapter_gguf_has_llama_cpp_layout_and_loads_back(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    model, sched = _model("numpy")
    ad = LoraAdapter(model, LoraConfig(rank=4, alpha=12.0, targets=("attn_q", "attn_v"), layers=(1,))).alloc(
        sched.buffer_type(0))
    rng = np.random.default_rng(2)
    for p in ad.params:
        p.set(rng.standard_normal(p.nelements()).astype(np.float32))
    path = tmp_path / "adapter.gguf"
    ad.save(path)
    r = gguf.GGUFReader(str(path))
    meta = {f.name: f.contents() for f in r.fields.values()}
    assert meta["general.type"] == "adapter" and meta["adapter.type"] == "lora"
    assert meta["general.architecture"] == "llama" and meta["adapter.lora.alpha"] == pytest.approx(12.0)
    shapes = {t.name: tuple(int(d) for d in t.shape) for t in r.tensors}
    assert shapes == {"blk.1.attn_q.weight.lora_a": (64, 4), "blk.1.attn_q.weight.lora_b": (4, 64),
                      "blk.1.attn_v.weight.lora_a": (64, 4), "blk.1.attn_v.weight.lora_b": (4, 32)}
    model2, sched2 = _model("numpy")
    back = LoraAdapter.load(path, model2, sched2.buffer_type(0))
    assert back.cfg == LoraConfig(rank=4, alpha=12.0, targets=("attn_q", "attn_v"), layers=(1,))
    for p in ad.params:
        np.testing.assert_array_equal(back.pairs[p.name.rsplit(".", 1)[0]][p.name.endswith("b")].numpy(), p.numpy())
    ad.attach()
    back.attach()
    ids = np.arange(9) % TINY.n_vocab
    assert _LossGraph(model, sched, 8).run(ids) == _LossGraph(model2, sched2, 8).run(ids)


def test_misuse_is_refused_by_name() -> None:
    model, _ = _model("numpy")
    with pytest.raises(PyGGMLError, match="attn_x"):
        parse_targets("q,attn_x")
    with pytest.raises(PyGGMLError, match="layers"):
        LoraAdapter(model, LoraConfig(layers=(5,)))
    with pytest.raises(PyGGMLError, match="rank"):
        LoraAdapter(model, LoraConfig(rank=0))
    with pytest.raises(PyGGMLError, match="0-x"):
        layer_list("0-x")
    with pytest.raises(ShapeError, match="window"):
        TextDataset([1, 2, 3], TINY.n_vocab, 8)
    with pytest.raises(PyGGMLError, match="place the adapter"):
        LoraTrainer(model, LoraAdapter(model, LoraConfig()), Scheduler([init_backend("numpy")]), 8)


def _write_tiny_gguf(path: Path) -> None:
    """A tiny llama GGUF with SmolLM2's tensor table (Q8_0 weights) and a letters-only BPE vocabulary."""
    pytest.importorskip("gguf")
    write_llama_gguf(path, TINY, _values(TINY))


def test_cli_trains_and_saves_an_adapter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pyggml_cpu")
    model_path = tmp_path / "tiny.gguf"
    _write_tiny_gguf(model_path)
    text = tmp_path / "text.txt"
    text.write_text("ABCDEFGHIJKLMNOP" * 2 + "HIJACKEDBADGECAFE")
    out, js = tmp_path / "ad.gguf", tmp_path / "steps.json"
    argv = ["--model", str(model_path), "--text", str(text), "--steps", "8", "--ctx", "12", "--rank", "4",
            "--targets", "q,v,down", "--lr", "1e-2", "--out", str(out), "--json", str(js)]
    assert lora.main(argv) == 0
    printed = capsys.readouterr().out
    assert "step   8/8" in printed and "adapter written" in printed
    steps = json.loads(js.read_text())["steps"]
    assert steps[-1]["loss"] < steps[0]["loss"]
    assert lora.main([*argv[:-4], "--steps", "2", "--init", str(out)]) == 0  # resume from the saved adapter
    assert lora.main(["--model", str(model_path), "--text", str(text), "--targets", "q,x"]) == 1


@pytest.mark.parametrize("bad", [["--text", "missing.txt"], ["--out", "no/such/dir/ad.gguf"],
                                 ["--json", "no/such/dir/steps.json"]])
def test_cli_reports_bad_paths_without_a_traceback(tmp_path: Path, bad: list[str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A missing --text file used to end in a FileNotFoundError traceback; an --out or --json in a missing
    directory failed only after the whole training run."""
    model_path = tmp_path / "tiny.gguf"
    _write_tiny_gguf(model_path)
    bad = [bad[0], str(tmp_path / bad[1])]
    assert lora.main(["--model", str(model_path), "--steps", "1", "--ctx", "4", *bad]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and ("missing.txt" in err or "does not exist" in err)
