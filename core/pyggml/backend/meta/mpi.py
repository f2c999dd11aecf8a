"""The meta device over MPI ranks: one process per rank, each driving its own device and holding only its slices.

`MPIWorld` wraps mpi4py's COMM_WORLD (optional dependency: `pip install 'pyggml[mpi]'`, with Open MPI's mpirun from
Debian's openmpi-bin); `MPICommunicator` is the meta backend's allreduce across ranks, `spmd_devices` lays out the
device list every rank builds alike (its own device at its rank, `PeerDevice`s elsewhere).

Every collective waits at most PYGGML_MPI_TIMEOUT seconds (`MPIOptions.timeout`, default 60). A rank that dies
makes mpirun end the job; one that stalls is found by the others when their wait runs out: each then sends every rank
a probe and names the ranks whose probe did not come (`RankLostError`). Ranks that disagree on what they run (model
file, shares, context) are refused at start-up (`check_agreement`).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from pyggml.backend.core_options import MPIOptions
from pyggml.backend.meta.allreduce import REDUCIBLE, Communicator
from pyggml.backend.meta.spmd import PeerDevice, Spmd
from pyggml.backend.protocol import Backend, Device
from pyggml.errors import ComputeError, PyGGMLError, UnsupportedTypeError
from pyggml.tensor import Tensor
from pyggml.types import GGMLType, from_f32, to_f32

PROBE_TAG = 7301
PROBE_WAIT = 3.0
SPIN_S = 2e-3


class RankLostError(ComputeError):
    """A collective did not complete: a rank died or stalled."""


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError:
        raise PyGGMLError("--comm mpi needs mpi4py and an MPI library: apt-get install openmpi-bin libopenmpi-dev; "
                          "pip install 'pyggml[mpi]' (mpi4py); then run under mpirun") from None
    return MPI


class MPIWorld:
    """This process's place among the ranks, and the collectives the meta device needs, each with a deadline."""

    def __init__(self, timeout: float | None = None) -> None:
        """`timeout`: seconds a collective waits (None: `MPIOptions.timeout`, PYGGML_MPI_TIMEOUT)."""
        self.timeout = timeout if timeout is not None else MPIOptions.from_env().timeout
        self.MPI = _mpi()
        self.comm = self.MPI.COMM_WORLD
        self.rank: int = self.comm.Get_rank()
        self.size: int = self.comm.Get_size()

    def _wait(self, req: Any, what: str) -> None:
        """Wait for a non-blocking collective: yield the core for the first SPIN_S (a rank a few microseconds late
        is then met within microseconds; sleeping at once cost ~200 us per allreduce, 60 times a token), then poll
        with short sleeps until the deadline."""
        start = time.monotonic()
        spin_end, deadline = start + SPIN_S, start + self.timeout
        while not req.Test():
            now = time.monotonic()
            if now < spin_end:
                os.sched_yield()
                continue
            if now > deadline:
                lost = self._probe()
                who = ", ".join(map(str, lost)) if lost else "unknown"
                raise RankLostError(f"rank {self.rank} of {self.size}: {what} did not complete within "
                                    f"{self.timeout:g} s (PYGGML_MPI_TIMEOUT); lost rank(s): {who}")
            time.sleep(5e-5)

    def _probe(self) -> list[int]:
        """Ranks that do not answer a probe within PROBE_WAIT seconds (every live rank probes when it times out)."""
        others = [r for r in range(self.size) if r != self.rank]
        bufs = {r: np.zeros(1, np.int32) for r in others}
        recvs = {r: self.comm.Irecv(bufs[r], source=r, tag=PROBE_TAG) for r in others}
        for r in others:
            self.comm.Isend(np.array([self.rank], np.int32), dest=r, tag=PROBE_TAG)
        deadline = time.monotonic() + PROBE_WAIT
        while time.monotonic() < deadline and not all(q.Test() for q in recvs.values()):
            time.sleep(1e-3)
        return [r for r, q in recvs.items() if not q.Test()]

    def allreduce_sum(self, arr: np.ndarray, what: str) -> None:
        """Sum a float32 array across ranks in place, in rank order (0 + r0 + r1 + ...), the same bits on every
        rank and the order of the in-process communicator: gathered, then added here (MPI_Allreduce leaves the
        order to the implementation, so a split over 3 ranks would part from its in-process twin)."""
        everyone = np.empty((self.size, arr.size), dtype=np.float32)
        self._wait(self.comm.Iallgather(arr, everyone), what)
        arr[...] = 0
        for r in range(self.size):
            arr += everyone[r]

    def combine(self, arr: np.ndarray) -> None:
        """OR a uint8 array across ranks in place (each rank holds non-zero bytes only where it owns data)."""
        self._wait(self.comm.Iallreduce(self.MPI.IN_PLACE, arr, op=self.MPI.BOR), "gathering a split tensor")

    def bcast_ints(self, values: Sequence[int], root: int = 0) -> list[int]:
        arr = np.array(values, dtype=np.int64)
        self._wait(self.comm.Ibcast(arr, root=root), "broadcasting from rank 0")
        return [int(v) for v in arr]

    def check_agreement(self, what: dict[str, object]) -> None:
        """Every rank must run the same thing: a hash of `what` is exchanged and compared."""
        digest = hashlib.sha256(repr(sorted(what.items())).encode()).digest()[:16]
        mine = np.frombuffer(digest, dtype=np.uint8).copy()
        everyone = np.zeros((self.size, 16), dtype=np.uint8)
        self._wait(self.comm.Iallgather(mine, everyone), "comparing the ranks' set-up")
        differ = [r for r in range(self.size) if not np.array_equal(everyone[r], everyone[0])]
        if differ:
            raise PyGGMLError(f"rank {self.rank}: ranks {', '.join(map(str, differ))} run something else than rank "
                              f"0 (model file, shares, context or graph settings differ); this rank has "
                              f"{sorted((k, str(v)) for k, v in what.items())}")

    def abort(self, code: int = 1) -> None:
        """End every rank now (MPI_Abort): after a lost rank, MPI_Finalize at exit would wait for it forever."""
        self.comm.Abort(code)

    def spmd(self) -> Spmd:
        return Spmd(frozenset({self.rank}), self.combine)


def spmd_devices(world: MPIWorld, local: Device) -> list[Device]:
    """The device list every rank builds alike: its own device at its rank, placeholders for the others'."""
    return [local if r == world.rank else PeerDevice(local, r) for r in range(world.size)]


class MPICommunicator(Communicator):
    """Allreduce across ranks: this rank's tensor to the host, summed in float32 across ranks in rank order (the
    in-process communicator's order), back."""

    name = "mpi"

    def __init__(self, world: MPIWorld) -> None:
        self.world = world
        self.backends: list[Backend] = []

    def bind(self, backends: Sequence[Backend]) -> None:
        self.backends = list(backends)

    def allreduce(self, tensors: Sequence[Tensor]) -> bool:
        t = tensors[self.world.rank]
        if t.type not in REDUCIBLE:
            raise UnsupportedTypeError(f"allreduce of '{t.name}': {t.type} cannot be summed across ranks")
        if not t.is_contiguous():  # its bytes would carry the gaps, and the sums would land in them
            raise ComputeError(f"allreduce of '{t.name}' across ranks: the partial sum must be contiguous, "
                               f"nb={list(t.nb)}")
        buf = t.buffer
        assert buf is not None
        if self.backends:
            self.backends[self.world.rank].synchronize()
        raw = buf.get_tensor(t)
        dtype = t.type.traits.np_dtype
        assert dtype is not None
        acc = np.ascontiguousarray(to_f32(raw.view(dtype), t.type), dtype=np.float32)
        self.world.allreduce_sum(acc, f"the allreduce of '{t.name}'")
        out = acc.view(np.uint8) if t.type == GGMLType.F32 else from_f32(acc, t.type).view(np.uint8)
        buf.set_tensor(t, out)
        return True
