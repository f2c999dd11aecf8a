"""One MPI rank of a SmolLM2 tensor split, for test_mpi.py (run under mpirun): every rank loads its slices and
evaluates the same tokens; rank 0 writes the teacher-forced logits, a greedy continuation and every rank's memory
figures to OUT (.npz).

    mpirun -n 2 python mpi_run.py OUT [--shares 2,1,1] [--stall-rank R] [--mismatch-rank R]

--stall-rank R: rank R stops itself (SIGSTOP) after the first evaluation, so the others must find it lost.
--die-rank R: rank R kills itself (SIGKILL) there instead.
--mismatch-rank R: rank R asks for another context size, so start-up must refuse the run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

import numpy as np

from pyggml.backend.meta.mpi import MPIWorld
from pyggml.errors import PyGGMLError
from pyggml_llama.session import Session

TEXT = ("In the spring the river rose over its banks, and the people of the valley moved their animals to the hills. "
        "When the water went down they found the fields covered with a fine grey silt, which made the next harvest "
        "the richest anyone could remember.")


def resident(lo: int, hi: int) -> int:
    """Resident bytes of this process's memory in [lo, hi) (from /proc/self/smaps: whole mappings overlapping it,
    so a buffer in a larger heap mapping counts that mapping's resident pages)."""
    total = 0
    with open("/proc/self/smaps") as f:
        overlap = False
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                a, b = (int(x, 16) for x in head.split("-"))
                overlap = a < hi and lo < b
            elif overlap and head == "Rss:":
                total += int(line.split()[1]) * 1024
    return total


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--shares", default="")
    p.add_argument("--stall-rank", type=int, default=-1)
    p.add_argument("--mismatch-rank", type=int, default=-1)
    p.add_argument("--die-rank", type=int, default=-1)
    args = p.parse_args()
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    shares = [float(x) for x in args.shares.split(",")] if args.shares else None
    n_ctx = 192 if rank == args.mismatch_rank else 256
    s = Session(None, ["cpu"], n_ctx=n_ctx, split_mode="tensor", comm="mpi", tensor_split=shares, n_threads=1)
    parts = [b.parts[rank] for b in s.weights.buffers]  # type: ignore[attr-defined]  # this rank's weights memory
    held = sum(resident(p.address, p.address + p.size) for p in parts)
    meta = s.backends[0].device
    local = sum(meta.simple_tensors(t)[rank].nbytes() for t in s.weights.tensors.values())  # type: ignore[attr-defined]
    full = sum(t.nbytes() for t in s.weights.tensors.values())
    toks = s.tokenizer.encode(TEXT)
    logits = s.eval(toks, all_logits=True)
    if rank == args.stall_rank:
        os.kill(os.getpid(), signal.SIGSTOP)
    if rank == args.die_rank:
        os.kill(os.getpid(), signal.SIGKILL)
    s.reset()
    greedy = list(s.generate(toks[:6], 12))
    stats = MPI.COMM_WORLD.gather({"rank": rank, "local_weight_bytes": local, "full_weight_bytes": full,
                                   "resident_weight_bytes": held}, root=0)
    if rank == 0:
        np.savez(args.out, logits=logits, greedy=np.array(greedy), tokens=np.array(toks), stats=json.dumps(stats))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PyGGMLError as e:  # a lost rank or a refused set-up: say so, then end every rank (see MPIWorld.abort)
        print(f"mpi_run: {e}", file=sys.stderr, flush=True)
        MPIWorld().abort(1)
