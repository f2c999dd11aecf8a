"""Plans stay with their graphs: a llama decode step split over two OpenCL devices by the meta device (tensor
parallelism) hands each device more distinct graphs than a cache of recent plans would hold, and the next decode
step (the same graph, replayed) builds no plan on either device."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.meta import MetaBackend
from pyggml.backend.plan_cache import RECENT
from pyggml.backend.registry import get_device
from pyggml.backend.sched import Scheduler
from pyggml.errors import PyGGMLError
from pyggml.types import GGMLType as T

pytest.importorskip("pyggml_llama")
from pyggml_llama.hparams import HParams
from pyggml_llama.split_states import llama_meta_device
from pyggml_llama.synthetic import synthetic_llama

TINY = HParams(arch="llama", n_layer=8, n_embd=64, n_head=4, n_head_kv=2, n_ff=128, n_vocab=96, n_ctx_train=64,
               head_dim=16, rope_dims=16, rope_type=0, rope_freq_base=10000.0, rope_freq_scale=1.0, norm_eps=1e-5)


def test_second_decode_step_builds_no_plan_on_a_tensor_split(dev, dev2) -> None:  # type: ignore[no-untyped-def]
    llama = synthetic_llama(TINY, wtype=T.Q8_0, embd_type=T.F32, n_ctx=32, kv_type=T.F16, flash_attn=True)
    meta = llama_meta_device([dev, dev2], TINY, None, {t.name: t.type for t in llama.ctx})
    backend = MetaBackend(meta)
    buf = alloc_ctx_tensors(llama.ctx, meta.buffer_type())
    assert buf is not None
    buf.clear(0)
    rng = np.random.default_rng(0)
    for t in llama.ctx:
        if not t.name.startswith("cache_"):
            t.set(rng.standard_normal(t.nelements()).astype(np.float32) * 0.1)
    try:
        host = get_device("cpu")
    except PyGGMLError:
        host = get_device("numpy")
    sched = Scheduler([backend, host.init_backend()])
    built = llama.graph(n_tokens=1, n_past=7, n_outputs=1)
    sched.alloc_graph(built.graph)
    n_kv = built.key.n_kv

    def decode_step(pos: int) -> None:
        built.tokens.set(np.array([pos % TINY.n_vocab], dtype=np.int32))
        built.set_positions(np.array([pos], dtype=np.int32), 32)
        built.mask.set(np.where(np.arange(n_kv) <= pos, 0.0, -np.inf).astype(np.float32).reshape(1, n_kv))
        if built.out_ids is not None:
            built.out_ids.set(np.zeros(1, dtype=np.int32))
        sched.graph_compute(built.graph)

    decode_step(6)
    first = [b.plans_built for b in backend.backends]
    decode_step(7)
    assert [b.plans_built for b in backend.backends] == first
    assert np.isfinite(built.logits.numpy()).all()
    # 2 allreduces per layer: each device runs 2 * n_layer + 1 subgraphs and 2 * n_layer ADD graphs per step,
    # more than the RECENT plans kept by fingerprint alone
    assert backend.last_plan.n_allreduce == 2 * TINY.n_layer
    assert min(first) > RECENT

