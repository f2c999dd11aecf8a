"""Training in the spirit of ggml-opt: a `Dataset` of (datapoint, label) rows cut into batches, a `Trainer` that
builds the forward, backward and optimiser-step graph once and runs epochs over a train/validation split,
reporting loss and accuracy per epoch and progress per batch. See docs/training.md.
"""

from pyggml.opt.dataset import Dataset
from pyggml.opt.optimizer import SGD, AdamW, Optimizer
from pyggml.opt.trainer import LOSSES, EpochResult, Progress, Result, Trainer

__all__ = ["LOSSES", "SGD", "AdamW", "Dataset", "EpochResult", "Optimizer", "Progress", "Result", "Trainer"]
