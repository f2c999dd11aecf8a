"""SmolLM2 split by tensors over MPI ranks (mpirun, one process per rank, the meta device's MPI communicator):
the logits of the same split computed in one process, every rank holding about 1/n of the split weights, and the
faults (a stalled rank, ranks that disagree) ending in a bounded time with an error naming the cause."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install 'pyggml[mpi]')")
if shutil.which("mpirun") is None:
    pytest.skip("Open MPI's mpirun is not installed (apt-get install openmpi-bin)", allow_module_level=True)

from pyggml.errors import PyGGMLError
from pyggml_llama.agreement import agreement
from pyggml_llama.session import Session, default_model_path

try:
    default_model_path()
except PyGGMLError as e:
    pytest.skip(str(e), allow_module_level=True)

SCRIPT = Path(__file__).parent / "mpi_run.py"
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,tcp"]


def run_ranks(n: int, out: Path, *args: str, timeout: float = 300, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MPIRUN, "-n", str(n), sys.executable, str(SCRIPT), str(out), *args],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def in_process(tokens: list[int], n: int, shares: list[float] | None) -> tuple[np.ndarray[Any, Any], list[int]]:
    """The same split in one process, reducing in the ranks' order (device 0 + device 1 + ...)."""
    os.environ["PYGGML_META_ALLREDUCE"] = "inprocess"
    try:
        s = Session(None, ["cpu"] * n, n_ctx=256, split_mode="tensor", tensor_split=shares, n_threads=1)
    finally:
        del os.environ["PYGGML_META_ALLREDUCE"]
    logits = s.eval(tokens, all_logits=True)
    s.reset()
    return logits, list(s.generate(tokens[:6], 12))


@pytest.mark.parametrize(("n", "shares"), [(2, None), (3, [2.0, 1.0, 1.0])])
def test_ranks_give_the_in_process_split(n: int, shares: list[float] | None, tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    p = run_ranks(n, out, *(["--shares", ",".join(map(str, shares))] if shares else []))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    d = np.load(out)
    tokens = [int(t) for t in d["tokens"]]
    logits, greedy = in_process(tokens, n, shares)
    a = agreement(logits, d["logits"])
    assert a.mean_kld == 0.0 and a.same_top1 == 1.0, a  # the same sums in the same order: the same bits
    assert [int(t) for t in d["greedy"]] == greedy
    for st in json.loads(str(d["stats"])):
        # slices of the split weights plus the mirrored ones (embeddings, norms), and only those pages touched
        assert st["local_weight_bytes"] < 0.8 * st["full_weight_bytes"], st
        assert st["resident_weight_bytes"] < st["local_weight_bytes"] + (8 << 20), st


def test_a_stalled_rank_is_named(tmp_path: Path) -> None:
    t0 = time.monotonic()
    p = run_ranks(2, tmp_path / "out.npz", "--stall-rank", "1", env={"PYGGML_MPI_TIMEOUT": "5"}, timeout=120)
    assert p.returncode != 0
    assert "did not complete within 5 s" in p.stderr and "lost rank(s): 1" in p.stderr, p.stderr[-4000:]
    assert time.monotonic() - t0 < 60


def test_ranks_that_disagree_are_refused(tmp_path: Path) -> None:
    p = run_ranks(2, tmp_path / "out.npz", "--mismatch-rank", "1", timeout=120)
    assert p.returncode != 0
    assert "run something else than rank 0" in p.stderr, p.stderr[-4000:]


def test_a_killed_rank_ends_the_job(tmp_path: Path) -> None:
    """mpirun itself ends the job when a rank dies, naming it; the others do not wait for it."""
    t0 = time.monotonic()
    p = run_ranks(2, tmp_path / "out.npz", "--die-rank", "1", env={"PYGGML_MPI_TIMEOUT": "5"}, timeout=120)
    assert p.returncode != 0
    assert "rank 1" in p.stdout + p.stderr, (p.stdout + p.stderr)[-4000:]
    assert time.monotonic() - t0 < 60
