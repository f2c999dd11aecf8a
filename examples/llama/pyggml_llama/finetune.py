"""Fine-tuning a llama model on a text with pyggml.opt (causal language modelling): a LoRA adapter
(`LoraTrainer`), or every weight of an F32 model (`mark_full_params` + `CausalLMTrainer`, llama.cpp's finetune).

The text's tokens are one stream; datapoint i is token i and its label the next token (one-hot). A batch of
n_ctx datapoints is one window of the stream: the model (`LlamaModel.forward`, no KV cache) reads the window at
positions 0..n_ctx-1 under a causal mask, and the loss is the mean cross-entropy of each position's logits against
the next token, as llama.cpp's finetune computes it. The training step is pyggml.opt's `Trainer`: forward,
`build_backward` (gradients reach the adapters through the frozen, quantised weights: MUL_MAT's rule gives the
activations out_prod(W, dy^T), which takes a quantised W), and one OPT_STEP_ADAMW per parameter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.sched import Scheduler
from pyggml.errors import PyGGMLError, ShapeError
from pyggml.opt import AdamW, Dataset, Optimizer, Result, Trainer
from pyggml.types import GGMLType
from pyggml_llama.adapter import LoraAdapter
from pyggml_llama.model import LlamaModel

NODES_PER_LAYER = 320
"""Graph capacity per layer: the forward (about 40 nodes), its backward, adapters on every projection and their
optimiser steps stay under it."""

F32 = npt.NDArray[np.float32]


class TextDataset(Dataset):
    """Next-token prediction over one token stream, cut into windows of `n_ctx` tokens: the data are the token
    ids (as float32, exact below 2^24), the one-hot labels are made per batch rather than held for the whole text
    (n_vocab floats per token), and a shuffle moves whole windows so every batch stays a contiguous sequence."""

    def __init__(self, tokens: Sequence[int], n_vocab: int, n_ctx: int) -> None:
        ids = np.asarray(tokens, dtype=np.int64)
        if ids.ndim != 1 or len(ids) < n_ctx + 1:
            raise ShapeError(f"TextDataset: {len(ids)} tokens do not fill one window of {n_ctx} tokens plus the "
                             "next one")
        if ids.min() < 0 or ids.max() >= n_vocab:
            raise ShapeError(f"TextDataset: token ids must be in [0, {n_vocab})")
        super().__init__(ids[:-1, None].astype(np.float32), np.empty((len(ids) - 1, 0), dtype=np.float32))
        self.next_ids = ids[1:]
        self.n_vocab = n_vocab
        self.n_ctx = n_ctx

    @property
    def n_windows(self) -> int:
        return self.ndata // self.n_ctx

    def shuffle(self, rng: np.random.Generator, end: int | None = None) -> None:
        n = (self.ndata if end is None else end) // self.n_ctx
        w = self.order[: n * self.n_ctx].reshape(n, self.n_ctx)
        self.order[: n * self.n_ctx] = w[rng.permutation(n)].reshape(-1)

    def batches(self, batch_size: int, start: int, end: int) -> Iterator[tuple[F32, F32]]:
        if batch_size != self.n_ctx:
            raise ShapeError(f"TextDataset: batches are windows of {self.n_ctx} tokens, asked for {batch_size}")
        for i in range(self.n_batches(batch_size, start, end)):
            idx = self.order[start + i * batch_size : start + (i + 1) * batch_size]
            labels = np.zeros((batch_size, self.n_vocab), dtype=np.float32)
            labels[np.arange(batch_size), self.next_ids[idx]] = 1.0
            yield self.data[idx], labels


class CausalLMTrainer:
    """The training graph of `model`'s parameters (the leaves marked with `set_param`: a LoRA adapter's, or the
    weights themselves for a full fine-tune, `mark_full_params`) for windows of `n_ctx` tokens on the scheduler's
    backends. The parameters must be placed in memory of the scheduler's first backend, where the optimiser steps
    run; the positions and the causal mask are constants in a buffer of their own."""

    def __init__(self, model: LlamaModel, sched: Scheduler, n_ctx: int, *,
                 optimizer: Optimizer | None = None) -> None:
        self.model = model
        self.n_ctx = n_ctx
        self.static = gg.Context(no_alloc=True)
        pos = self.static.new_tensor(GGMLType.I32, n_ctx, name="inp_pos")
        mask = self.static.new_tensor(GGMLType.F32, n_ctx, n_ctx, name="inp_kq_mask")
        self.static_buffer = alloc_ctx_tensors(self.static, sched.buffer_type(0))
        pos.set(np.arange(n_ctx, dtype=np.int32))
        mask.set(np.triu(np.full((n_ctx, n_ctx), -np.inf, dtype=np.float32), k=1))
        self.ctx = gg.Context(no_alloc=True)
        with self.ctx:
            self.tokens = self.ctx.new_tensor(GGMLType.I32, 1, n_ctx, name="inp_tokens")
            self.logits = model.forward(ops.reshape(self.tokens, n_ctx), pos, mask)
        size = graph_size_for(model)
        if sched.graph_size < size:
            raise PyGGMLError(f"{type(self).__name__}: the scheduler's graph_size {sched.graph_size} is below the "
                              f"{size} nodes a training step of {model.hp.n_layer} layers may need")
        self.trainer = Trainer(sched, self.tokens, self.logits, optimizer=optimizer or AdamW(alpha=1e-3),
                               graph_size=size)

    def step(self, ds: TextDataset, window: int) -> Result:
        """One optimiser step on window `window` of the dataset's visiting order; the loss and accuracy are those
        of the forward pass before the update."""
        return self.trainer.run_pass(ds, window * self.n_ctx, (window + 1) * self.n_ctx, train=True)

    def evaluate(self, ds: TextDataset, first: int, end: int) -> Result:
        """Mean loss and next-token accuracy over windows [first, end), without training."""
        return self.trainer.run_pass(ds, first * self.n_ctx, end * self.n_ctx, train=False)


class LoraTrainer(CausalLMTrainer):
    """The training graph of `adapter` on `model` (frozen weights, quantised or not); the adapter must be placed
    (`LoraAdapter.alloc`) in memory of the scheduler's first backend."""

    def __init__(self, model: LlamaModel, adapter: LoraAdapter, sched: Scheduler, n_ctx: int, *,
                 optimizer: Optimizer | None = None) -> None:
        if adapter.buffer is None:
            raise PyGGMLError("LoraTrainer: place the adapter first (LoraAdapter.alloc or LoraAdapter.load)")
        self.adapter = adapter
        adapter.attach()
        super().__init__(model, sched, n_ctx, optimizer=optimizer)


FROZEN_IN_FULL_FINETUNE = ("token_embd.weight",)
"""What llama.cpp's full fine-tune leaves frozen (llama_opt_init never marks the token embeddings; a tied output
matrix is trained as a separate copy there): `mark_full_params` follows it so the two train the same tensors."""


def mark_full_params(model: LlamaModel, frozen: Sequence[str] = FROZEN_IN_FULL_FINETUNE) -> list[gg.Tensor]:
    """Mark every weight of `model` but `frozen` as a parameter (a full fine-tune) and return them. The weights
    must be F32 or F16 (ggml trains no quantised tensor; `set_param` refuses one) and placed in writable memory of
    the trainer's first backend (`load_weights(..., use_mmap=False)`), since the optimiser updates them in place.
    With tied embeddings (no output.weight) the output matrix is the token embedding: freeze both or neither."""
    if model.output is model.tok_embd and ("token_embd.weight" in frozen) != ("output.weight" in frozen):
        raise PyGGMLError("mark_full_params: the model's output matrix is its token embedding (tied); give it an "
                          "output.weight of its own (benchmarks/f32_gguf.py does) or freeze both or neither")
    params = [t for name, t in model.weights.tensors.items() if name not in frozen]
    bad = [f"'{t.name}' ({t.type})" for t in params if t.type not in (GGMLType.F32, GGMLType.F16)]
    if bad:  # refused before any is marked: the model is left as it was
        raise PyGGMLError(f"mark_full_params: ggml trains float weights only; {', '.join(bad[:4])}"
                          f"{' ...' if len(bad) > 4 else ''} would need freezing or an F32/F16 copy of the model")
    for t in params:
        t.set_param()
    return params


def graph_size_for(model: LlamaModel) -> int:
    """The scheduler graph size a CausalLMTrainer of this model needs."""
    return NODES_PER_LAYER * (model.hp.n_layer + 2)


def placement(sched: Scheduler, nodes: Sequence[gg.Tensor]) -> dict[str, Counter[str]]:
    """Backend name -> how many nodes of each op the scheduler gave it (after the graph was allocated): where a
    device lacks a kernel (a backward op, OUT_PROD of a quantised weight) the node runs on the CPU fallback."""
    out: dict[str, Counter[str]] = {}
    for t in nodes:
        b = sched.get_tensor_backend(t)
        if b is not None:
            out.setdefault(b.name, Counter())[t.op.name] += 1
    return out
