"""The training ops on OpenCL beyond the conformance suite (pyggml_testing.train_ops): in place, optimiser steps
replayed with new hyper-parameters, deterministic sums, bad row ids."""

from __future__ import annotations

from pyggml_testing.train_ops import TrainOpsTests


class TestTrainOps(TrainOpsTests):
    pass
