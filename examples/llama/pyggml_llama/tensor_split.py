"""--split-mode tensor: the listed devices become one meta device (pyggml.backend.meta), the weights and KV cache
are split by the llama table (split_states.py), and a CPU backend stays last for the scheduler (llama.cpp's
LLAMA_SPLIT_MODE_TENSOR).

KV heads are split among the devices, so each device needs whole KV heads (more devices than KV heads is an error)
and attention must run as FLASH_ATTN_EXT, which reads each device's heads of the cache."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyggml.backend.extensions import SET_N_THREADS, SetNThreads
from pyggml.backend.meta import MetaBackend, MetaBufferType
from pyggml.backend.meta.mpi import MPICommunicator, MPIWorld, spmd_devices
from pyggml.backend.protocol import Backend
from pyggml.backend.registry import get_device
from pyggml.errors import PyGGMLError
from pyggml.gguf import GGUFFile
from pyggml_llama.hparams import HParams
from pyggml_llama.split_states import llama_meta_device

log = logging.getLogger(__name__)


def meta_backends(names: Sequence[str], hp: HParams, gguf: GGUFFile, tensor_split: Sequence[float] | None,
                  n_threads: int | None, world: MPIWorld | None = None) -> tuple[list[Backend], MetaBufferType]:
    """[meta backend over `names` (in order; a name may repeat), CPU backend] and the meta buffer type. The
    session builds attention as FLASH_ATTN_EXT (llama.cpp turns flash attention on for this mode); the meta
    device refuses the mul_mat + soft_max attention over a head-split cache before anything runs.

    With `world` (MPI), the meta device has one device per rank: this rank's `names[0]`, and placeholders for the
    other ranks' (each rank runs the same program on its own device and holds only its slices)."""
    types = {name: info.type for name, info in gguf.tensors.items()}
    if world is None:
        log.info("split mode 'tensor' over %s: attention runs as FLASH_ATTN_EXT", ", ".join(names))
        meta = llama_meta_device([get_device(n) for n in names], hp, tensor_split, types)
    else:
        if len(names) != 1:
            raise PyGGMLError(f"--comm mpi: give one --backend, the device every rank uses (got {list(names)})")
        if tensor_split is not None and len(tensor_split) != world.size:
            raise PyGGMLError(f"--tensor-split has {len(tensor_split)} shares for {world.size} ranks")
        log.info("split mode 'tensor' over %d MPI ranks, this is rank %d on %s", world.size, world.rank, names[0])
        meta = llama_meta_device(spmd_devices(world, get_device(names[0])), hp, tensor_split, types, world.spmd())
    try:
        host = get_device("cpu")
    except PyGGMLError:
        host = get_device("numpy")
    backend = MetaBackend(meta, comm=MPICommunicator(world) if world is not None else None)
    backends: list[Backend] = [backend, host.init_backend()]
    if n_threads:
        for b in [*backend.backends, backends[1]]:
            ext = b.device.reg.get_extension(SET_N_THREADS)
            if ext is not None:
                fn: SetNThreads = ext  # type: ignore[assignment]
                fn(b, n_threads)
    return backends, meta.buffer_type()
