"""The training ops on OpenCL beyond the conformance suite (pyggml_testing.train_ops): in place, optimiser steps
replayed with new hyper-parameters, deterministic sums, bad row ids."""

from __future__ import annotations

import pytest

from pyggml_testing import train_ops


@pytest.mark.parametrize(("name", "alias"), train_ops.IN_PLACE_CASES)
def test_in_place(dev, name: str, alias: int) -> None:  # type: ignore[no-untyped-def]
    train_ops.check_in_place(dev, name, alias)


@pytest.mark.parametrize("adamw", [True, False], ids=["adamw", "sgd"])
def test_optimiser_steps_replayed(dev, adamw: bool) -> None:  # type: ignore[no-untyped-def]
    train_ops.check_optimiser_replay(dev, adamw)


def test_sums_are_deterministic(dev) -> None:  # type: ignore[no-untyped-def]
    train_ops.check_deterministic(dev)


def test_bad_row_id_names_the_node(dev) -> None:  # type: ignore[no-untyped-def]
    train_ops.check_bad_row_id(dev)
