"""Trainer: ggml-opt's training loop over pyggml graphs.

From a model's input tensor [ne_datapoint, batch] and output logits [n_classes, batch] (parameters marked with
`set_param` and already placed, e.g. with `alloc_ctx_tensors`), the trainer records
- the forward graph `gf`: loss (cross-entropy against a labels input, or mean squared error), predictions and the
  number of correct ones, for evaluation;
- the training graph `gb`: the same forward pass, its backward pass (`build_backward`) and one optimiser step op
  (OPT_STEP_ADAMW / OPT_STEP_SGD) per parameter, so one compute is one training step.
The optimiser state (AdamW's m and v per parameter), the loss's gradient seed and the step's hyper-parameters live
in a static buffer of the first backend's buffer type, allocated once: the graph allocator never places them, so
they persist across steps (what ggml-opt's ctx_static is for).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.autodiff import Gradients, build_backward
from pyggml.backend.host import HostBuffer
from pyggml.backend.sched import Scheduler
from pyggml.context import Context
from pyggml.errors import PyGGMLError, ShapeError
from pyggml.graph import DEFAULT_GRAPH_SIZE, Graph, build_graph
from pyggml.ops.base import describe
from pyggml.opt.dataset import Dataset
from pyggml.opt.optimizer import SGD, AdamW, Optimizer
from pyggml.tensor import Tensor, TensorFlag
from pyggml.tensor_io import TensorIO
from pyggml.types import GGMLType

LOSSES = ("cross_entropy", "mse")


@dataclass
class Result:
    """Loss and accuracy over the batches of one pass (ggml_opt_result)."""

    losses: list[float] = field(default_factory=list)
    ncorrect: int = 0
    ndata: int = 0

    @property
    def loss(self) -> float:
        """Mean of the per-batch losses (each already a mean over its datapoints)."""
        return float(np.mean(self.losses)) if self.losses else math.nan

    @property
    def accuracy(self) -> float:
        return self.ncorrect / self.ndata if self.ndata else math.nan


@dataclass
class EpochResult:
    epoch: int
    train: Result
    val: Result


Progress = Callable[[bool, int, int, Result, float], None]
"""(training?, batches done, batches in the pass, result so far, seconds since the pass began)."""


class Trainer:
    """Train the model between `inputs` and `outputs` with `optimizer` on the scheduler's backends."""

    def __init__(self, sched: Scheduler, inputs: Tensor, outputs: Tensor, *, loss: str = "cross_entropy",
                 optimizer: Optimizer | None = None, opt_period: int = 1,
                 graph_size: int = DEFAULT_GRAPH_SIZE) -> None:
        """`opt_period` > 1 accumulates the gradients of that many batches (micro-batches) in persistent
        accumulators and steps the optimiser once per period, on their mean (ggml-opt's opt_period).
        `graph_size`: node capacity of the graphs (forward, backward and steps of a deep model need more)."""
        if loss not in LOSSES:
            raise PyGGMLError(f"Trainer: loss {loss!r} is not one of {', '.join(LOSSES)}")
        if inputs.ne[1] != outputs.ne[1] or outputs.ne[2] != 1 or outputs.ne[3] != 1:
            raise ShapeError(f"Trainer: inputs {describe(inputs)} and outputs {describe(outputs)} must be "
                             "[n, batch] matrices with the same batch")
        self.opt = optimizer if optimizer is not None else AdamW()
        self.opt.check()
        if opt_period < 1:
            raise PyGGMLError(f"Trainer: opt_period must be at least 1, got {opt_period}")
        self.opt_period = opt_period
        self._micro = 0
        """Position of the next batch in the current period."""
        self.sched = sched
        self.inputs = inputs.set_input()
        self.outputs = outputs
        self.batch_size = inputs.ne[1]
        self.step = 0
        ctx = outputs.ctx
        if ctx is None:
            raise PyGGMLError(f"Trainer: outputs {describe(outputs)} belong to no context")
        with ctx:
            self.labels = ctx.new_tensor(GGMLType.F32, *outputs.ne, name="labels").set_input()
            if loss == "cross_entropy":
                self.loss = ops.cross_entropy_loss(outputs, self.labels)
            else:
                d = ops.sub(outputs, self.labels)
                self.loss = ops.scale(ops.sum(ops.sqr(d)), 1.0 / outputs.nelements())
            self.loss.set_name("loss")
            # what is differentiated: the batch's loss, divided over the period so the accumulated gradient is a mean
            objective = self.loss if opt_period == 1 else ops.scale(self.loss, 1.0 / opt_period)
            objective.set_loss()
            self.ncorrect = ops.count_equal(ops.argmax(outputs), ops.argmax(self.labels)).set_name("ncorrect")
        self.gf: Graph = build_graph(self.loss, self.ncorrect, size=graph_size)
        self.gb_grad: Graph = build_graph(objective, self.loss, self.ncorrect, size=graph_size)
        self.static = Context(no_alloc=True)
        accs = {objective: self.static.new_tensor(GGMLType.F32, 1, name="loss grad seed")}
        if opt_period > 1:
            for p in self.gb_grad.nodes:
                if p.flags & TensorFlag.PARAM:
                    accs[p] = self.static.new_tensor(GGMLType.F32, *p.ne, name=f"grad acc for {p.name}"[:63])
        self.grads: Gradients = build_backward(self.gb_grad, accs)
        self.param_accs = [a for t, a in accs.items() if t is not objective]
        self.gb: Graph = self.gb_grad.copy() if opt_period > 1 else self.gb_grad
        """The training step: forward, backward and the optimiser steps (with opt_period > 1, the period's last
        micro-batch; the others run `gb_grad`, which only accumulates)."""
        self.hyper = self.static.new_tensor(GGMLType.F32, self.opt.n_values, name="optimizer params")
        self._add_steps(ctx)
        self._check_steps_placement()
        self.buffer = alloc_ctx_tensors(self.static, sched.buffer_type(0))
        self.grads.reset()
        for t in self.steps:
            for m in t.src[2:4] if isinstance(self.opt, AdamW) else ():
                assert m is not None
                m.set(np.zeros(m.nelements(), dtype=np.float32))
        self._allocated: Graph | None = None
        self.gp: Graph = Graph(graph_size)
        """The model alone, inputs to outputs (no labels, no loss): what `predict` runs."""
        self.gp.build_forward_expand(outputs)
        self._io = {name: TensorIO(t) for name, t in (("inputs", self.inputs), ("labels", self.labels),
                                                      ("hyper", self.hyper), ("loss", self.loss),
                                                      ("ncorrect", self.ncorrect))}

    def _add_steps(self, ctx: Context) -> None:
        with ctx:
            self.steps: list[Tensor] = []
            for p in self.grads.params:
                g = self.grads.grad(p)
                if g is None:
                    continue
                if isinstance(self.opt, SGD):
                    step = ops.opt_step_sgd(p, g, self.hyper)
                else:
                    m = self.static.new_tensor(GGMLType.F32, *p.ne, name=f"AdamW m for {p.name}"[:63])
                    v = self.static.new_tensor(GGMLType.F32, *p.ne, name=f"AdamW v for {p.name}"[:63])
                    step = ops.opt_step_adamw(p, g, m, v, self.hyper)
                step.set_name(f"step for {p.name}"[:63])
                self.gb.build_forward_expand(step)
                self.steps.append(step)
        if not self.steps:
            raise PyGGMLError("Trainer: no parameter receives a gradient from the loss (did you set_param them?)")

    def _check_steps_placement(self) -> None:
        """A step writes its parameter and moments in place: it must run on the backend whose memory holds them,
        or the update would land in a copy and be lost. Refuse, before any compute, a first backend that cannot
        run the step."""
        dev = self.sched.backends[0].device
        for s in self.steps:
            p = s.src[0]
            assert p is not None
            if p.buffer is None:
                raise PyGGMLError(f"Trainer: parameter {describe(p)} has no buffer; allocate the model's weights "
                                  "(alloc_ctx_tensors) before building the trainer")
            if not dev.supports_op(s):
                raise PyGGMLError(f"Trainer: {dev.name} cannot run {s.op.name} for {describe(p)}; the optimiser "
                                  "step must run where the parameters live")
            if isinstance(p.buffer, HostBuffer) and not p.buffer.array.flags.writeable:
                raise PyGGMLError(f"Trainer: parameter {describe(p)} lives in read-only memory (a memory-mapped "
                                  "GGUF file, say), which the optimiser step would write; load the weights with "
                                  "use_mmap=False")
            if not dev.supports_buft(p.buffer.buft):
                raise PyGGMLError(f"Trainer: parameter {describe(p)} lives in a '{p.buffer.buft.name}' buffer, which "
                                  f"{dev.name} (the first backend, where the optimiser state goes) cannot update in "
                                  "place; allocate the parameters with the first backend's buffer type")

    # ---- running ----------------------------------------------------------------------------------------------

    def _use(self, graph: Graph) -> None:
        if self._allocated is not graph:
            self.sched.reset()
            self.sched.alloc_graph(graph)
            self._allocated = graph

    def _run(self, train: bool, data: np.ndarray, labels: np.ndarray, res: Result) -> None:
        graph = self.gf
        if train:
            if self._micro == 0:
                for a in self.param_accs:
                    a.set(np.zeros(a.nelements(), dtype=np.float32))
            last = self._micro == self.opt_period - 1
            graph = self.gb if last else self.gb_grad
            self._micro = 0 if last else self._micro + 1
        self._use(graph)
        io = self._io
        io["inputs"].write(data)
        io["labels"].write(labels)
        if graph is self.gb:
            self.step += 1
            io["hyper"].write(self.opt.values(self.step))
        self.sched.graph_compute(graph)
        res.losses.append(io["loss"].scalar())
        res.ncorrect += int(io["ncorrect"].scalar())
        res.ndata += data.shape[0]

    def run_pass(self, ds: Dataset, start: int, end: int, *, train: bool, progress: Progress | None = None) -> Result:
        """One pass over visiting positions [start, end) of `ds`: training steps, or evaluation only."""
        res = Result()
        n = ds.n_batches(self.batch_size, start, end)
        t0 = time.perf_counter()
        for i, (x, y) in enumerate(ds.batches(self.batch_size, start, end)):
            self._run(train, x, y, res)
            if progress is not None:
                progress(train, i + 1, n, res, time.perf_counter() - t0)
        return res

    def evaluate(self, ds: Dataset) -> Result:
        """Loss and accuracy over all of `ds` with the parameters as they are (whole batches, as run_pass)."""
        return self.run_pass(ds, 0, ds.ndata, train=False)

    def predict(self, x: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """The model's outputs (the logits given to the trainer, not probabilities) for each row of `x`, an
        (n, n_features) array: (n, n_outputs) float32. Runs the model alone in batches of the trainer's batch size,
        the last one padded with zeros (its padding rows are dropped), with the parameters as trained so far."""
        xs = np.asarray(x, dtype=np.float32)
        n_in = self.inputs.ne[0]
        if xs.ndim != 2 or xs.shape[1] != n_in:
            raise ShapeError(f"Trainer.predict: x of shape {xs.shape} must be (n, {n_in}): one datapoint of the "
                             f"model's input {describe(self.inputs)} per row")
        self._use(self.gp)
        b = self.batch_size
        out = np.empty((xs.shape[0], self.outputs.ne[0]), dtype=np.float32)
        batch = np.zeros((b, n_in), dtype=np.float32)
        for i in range(0, xs.shape[0], b):
            rows = xs[i : i + b]
            batch[: len(rows)] = rows
            batch[len(rows) :] = 0.0
            self._io["inputs"].write(batch)
            self.sched.graph_compute(self.gp)
            out[i : i + len(rows)] = self.outputs.numpy().reshape(b, -1)[: len(rows)]
        return out

    def fit(self, ds: Dataset, epochs: int, *, val_split: float = 0.1, seed: int = 0,
            progress: Progress | None = None, on_epoch: Callable[[EpochResult], None] | None = None
            ) -> list[EpochResult]:
        """Train for `epochs` over the first (1 - val_split) of the data, shuffled each epoch, and evaluate on the
        rest after each epoch (ggml_opt_fit)."""
        if not 0 <= val_split < 1:
            raise PyGGMLError(f"Trainer.fit: val_split must be in [0, 1), got {val_split}")
        n_train = int(ds.ndata * (1 - val_split)) // self.batch_size * self.batch_size
        if n_train == 0:
            raise PyGGMLError(f"Trainer.fit: {ds.ndata} datapoints give no whole training batch of "
                              f"{self.batch_size}")
        rng = np.random.default_rng(seed)
        out: list[EpochResult] = []
        for e in range(epochs):
            ds.shuffle(rng, n_train)
            train = self.run_pass(ds, 0, n_train, train=True, progress=progress)
            val = self.run_pass(ds, n_train, ds.ndata, train=False, progress=progress)
            r = EpochResult(e, train, val)
            out.append(r)
            if on_epoch is not None:
                on_epoch(r)
        return out
