"""The comm_init extension over the fake driver: NCCL calls (a fake libnccl) and the peer-copy path."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pyggml.backend.extensions import COMM_INIT
from pyggml.backend.meta.allreduce import make_communicator
from pyggml.context import Context
from pyggml.types import GGMLType
from pyggml_cuda import allreduce, nccl
from pyggml_cuda.allreduce import NcclComm, PeerComm, comm_init
from pyggml_cuda_testing import needs_nvcc
from pyggml_cuda_testing.fakedriver import State

T = GGMLType


class FakeNccl:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def ncclCommInitAll(self, comms: Any, n: Any, devs: Any) -> int:
        for i in range(n.value):
            comms[i] = 100 + devs[i]
        self.calls.append(("init", [devs[i] for i in range(n.value)]))
        return 0

    def ncclGroupStart(self) -> int:
        self.calls.append(("start",))
        return 0

    def ncclGroupEnd(self) -> int:
        self.calls.append(("end",))
        return 0

    def ncclAllReduce(self, send: Any, recv: Any, count: Any, dtype: Any, op: Any, comm: Any, stream: Any) -> int:
        self.calls.append(("allreduce", send.value, recv.value, count.value, dtype.value, op.value, comm.value,
                           stream.value))
        return 0

    def ncclCommDestroy(self, comm: Any) -> int:
        self.calls.append(("destroy", comm.value))
        return 0


def _per_device(devs, ttype: GGMLType = T.F32, n: int = 32):  # type: ignore[no-untyped-def]
    out = []
    for j, d in enumerate(devs):
        t = Context(no_alloc=True).new_tensor(ttype, n, name="partial")
        buf = d.buffer_type().alloc_buffer(t.nbytes() + 256)
        t.buffer, t.offset = buf, 256
        buf.set_tensor(t, np.full(n, j + 1, np.float32).astype(ttype.traits.np_dtype).view(np.uint8))
        out.append(t)
    return out


def test_comm_init_wants_cuda_backends(nccl_off, fake_devices) -> None:  # type: ignore[no-untyped-def]
    from pyggml.reference.backend import NumpyRegistry

    assert not fake_devices[0].options().nccl  # PYGGML_CUDA_NCCL=0, read when the devices were enumerated
    b = [d.init_backend() for d in fake_devices]
    assert comm_init(b[:1]) is None
    assert comm_init([b[0], NumpyRegistry().devices()[0].init_backend()]) is None
    assert comm_init([b[0], b[0]]) is None
    assert isinstance(comm_init(b), PeerComm)
    assert fake_devices[0].reg.get_extension(COMM_INIT) is comm_init
    assert make_communicator("auto", b).name == "extension"  # the meta device picks it up


def test_nccl_path(fake_devices, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    lib = FakeNccl()
    monkeypatch.setattr(nccl.Nccl, "load", staticmethod(lambda: nccl.Nccl(lib)))
    b = [d.init_backend() for d in fake_devices]
    comm = comm_init(b)
    assert isinstance(comm, NcclComm) and lib.calls == [("init", [0, 1])]
    ts = _per_device(fake_devices, T.BF16)
    assert comm.allreduce_tensor(ts)
    assert lib.calls[1] == ("start",) and lib.calls[-1] == ("end",)
    for j, c in enumerate(lib.calls[2:4]):
        ptr = ts[j].buffer.ptr + 256
        assert c == ("allreduce", ptr, ptr, 32, 9, 0, 100 + j, b[j].stream.handle)
    assert not comm.allreduce_tensor(_per_device(fake_devices, T.I32))  # not summable here: the caller falls back
    comm.close()
    assert lib.calls[-2:] == [("destroy", 100), ("destroy", 101)]


@needs_nvcc
def test_peer_path_copies_adds_and_broadcasts(nccl_off, fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    b = [d.init_backend() for d in fake_devices]
    comm = comm_init(b)
    assert isinstance(comm, allreduce.PeerComm)
    ts = _per_device(fake_devices)
    assert comm.allreduce_tensor(ts)
    (add,) = gpu_state.launches  # t0 += t1 on device 0 (the fake does not run kernels)
    assert add.symbol.startswith("k_binary__") and add.stream == b[0].stream.handle
    t0 = ts[0]
    assert add.args[0:2] == (t0.buffer.ptr, 256) and add.args[20:22] == (t0.buffer.ptr, 256)
    tmp_ptr = add.args[10]
    assert np.array_equal(gpu_state.find(tmp_ptr, 128)[0][:128].view(np.float32), np.full(32, 2, np.float32))
    # device 1 received device 0's tensor (here still 1s, since the fake did not add)
    assert np.array_equal(ts[1].buffer.get_tensor(ts[1]).view(np.float32), np.full(32, 1, np.float32))
    waits = [c for c in gpu_state.calls if c[0] == "wait_for_event"]
    assert [w[1] for w in waits] == [b[0].stream.handle, b[1].stream.handle, b[0].stream.handle]
    assert comm.allreduce_tensor(ts) and len(gpu_state.launches) == 2  # the add plan is reused
    comm.close()
