"""Scheduler pass 5: splits, input copies (once per tensor and backend, named <backend>#<tensor>#<copy>), src
rewiring and its undoing, the allocation graph, pipeline slots."""

from __future__ import annotations

import numpy as np

import pyggml as gg
from pyggml import ops
from pyggml.backend.protocol import DeviceType
from pyggml.backend.sched import Scheduler
from pyggml.ops.base import Op
from pyggml.tensor import Tensor, TensorFlag
from pyggml_testing.compare import nmse
from pyggml_testing.devices import fake_device, numpy_backend
from pyggml_testing.sched import build_graph, inp, make_model, run_single, set_inputs, weight


def backends_of_splits(s: Scheduler) -> list[str]:
    return [s.backends[sp.backend_id].name for sp in s.splits]


def test_llama_with_ops_missing_on_the_accelerator() -> None:
    """Both layers' weights on the gpu, which lacks ROPE and SOFT_MAX; embeddings and output on the cpu.
    Per layer the cpu runs rope(k), rope(q) and soft_max: 3 cpu splits, each followed by a gpu split; plus the
    get_rows split first and the output split last: 1 + 2 * 3 + 1 = 8 cpu and 7 gpu splits.
    Copies: layer 0 has 8 (inp_embd, k before rope, k after rope for the cache store, q before rope, permuted
    k and q after rope, kq before and after soft_max), layer 1 the same minus inp_embd, and the final norm's
    input goes back to the cpu: 8 + 7 + 1 = 16."""
    ref = run_single()
    dev = fake_device("gpu", exclude={Op.ROPE, Op.SOFT_MAX})
    gpu, cpu = dev.init_backend(), numpy_backend()
    m = make_model({"0": dev.buffer_type(), "1": dev.buffer_type()}, cpu.device.buffer_type())
    r = build_graph(m)
    s = Scheduler([gpu, cpu])
    s.alloc_graph(r.graph)
    assert s.n_splits == 15
    assert s.n_split_inputs == 16
    assert backends_of_splits(s) == ["numpy", "gpu"] * 7 + ["numpy"]
    set_inputs(r)
    assert s.graph_compute(r.graph)
    assert nmse(r.logits.numpy(), ref) < 1e-7
    # the embeddings are copied to the gpu once and that copy feeds both of their gpu consumers
    plan = s.plan
    assert plan is not None
    cp = plan.copies[(id(r.graph.get_tensor("inp_embd")), 0)][0]
    assert cp.name == "gpu#inp_embd#0"
    users = [n.name for n in r.graph.nodes if cp in n.src]
    assert len(users) == 2 and "ffn_inp-0" in users
    assert sum(t.name == "inp_embd" for sp in s.splits for t in sp.inputs) == 1
    # every node the gpu computed is one it supports, and the cpu ran only what the gpu could not or what
    # its weights asked for
    assert "kq_soft_max-0" not in dev.computed and "ffn_inp-1" in dev.computed


def test_partial_offload() -> None:
    """Layer 0 on the gpu, layer 1 on the cpu: cpu (get_rows) | gpu (layer 0, and the first rms_norm of layer 1,
    which the gpu sweep reaches before the first cpu-weighted node) | cpu (rest). Copies: inp_embd, inp_pos,
    inp_mask to the gpu; the norm's output and the residual l_out-0 back."""
    ref = run_single()
    dev = fake_device("gpu")
    gpu, cpu = dev.init_backend(), numpy_backend()
    r = build_graph(make_model({"0": dev.buffer_type()}, cpu.device.buffer_type()))
    s = Scheduler([gpu, cpu])
    s.alloc_graph(r.graph)
    assert backends_of_splits(s) == ["numpy", "gpu", "numpy"]
    assert [t.name for t in s.splits[1].inputs] == ["inp_embd", "inp_pos", "inp_mask"]
    assert sorted(t.name for t in s.splits[2].inputs) == ["l_out-0", r.graph.nodes[s.splits[2].i_start - 1].name]
    set_inputs(r)
    s.graph_compute(r.graph)
    assert nmse(r.logits.numpy(), ref) < 1e-7


def _offload_chain(op_offload: bool, n_copies: int = 1) -> tuple[Scheduler, gg.Graph, list[Tensor], Tensor]:
    dev = fake_device("gpu", offload={Op.MUL_MAT})
    gpu, cpu = dev.init_backend(), numpy_backend()
    hb = cpu.device.buffer_type()
    ws = [weight(hb, 4, 4, name=f"w{i}") for i in range(3)]
    for i, w in enumerate(ws):
        w.set(np.eye(4, dtype=np.float32) * (i + 2))
    x = inp(4, 2)
    y = x
    for w in ws:
        y = ops.mul_mat(w, y)
    return Scheduler([gpu, cpu], op_offload=op_offload, n_copies=n_copies), gg.build_graph(y), ws, x


def test_weight_on_incompatible_backend_opens_a_split() -> None:
    """Three host weights offloaded to the gpu (offload_op): each weight must be copied; a split that already has
    inputs is cut before the next weight copy, so the previous weight's memory can be reused."""
    s, g, _ws, x = _offload_chain(True)
    s.alloc_graph(g)
    assert backends_of_splits(s) == ["gpu"] * 3
    assert [[t.name for t in sp.inputs] for sp in s.splits] == [["w0", "x"], ["w1"], ["w2"]]
    x.set(np.arange(8, dtype=np.float32))
    s.graph_compute(g)
    assert np.array_equal(g.nodes[-1].numpy(), np.arange(8, dtype=np.float32).reshape(2, 4) * 24)
    s2, g2, _, _ = _offload_chain(False)
    s2.alloc_graph(g2)
    assert backends_of_splits(s2) == ["numpy"] and s2.n_split_inputs == 0


def test_rewiring_is_undone_by_reset() -> None:
    s, g, ws, x = _offload_chain(True)
    first = g.nodes[0]
    original = first.src
    s.split_graph(g)
    assert [t.name for t in first.src if t is not None] == ["gpu#w0#0", "gpu#x#0"]
    assert first.src[0] is not ws[0]
    s.reset()
    assert first.src == original and first.src[0] is ws[0] and first.src[1] is x
    s.split_graph(g)          # planning again starts from the original srcs
    s.split_graph(g)
    assert [t.name for t in first.src if t is not None] == ["gpu#w0#0", "gpu#x#0"]


def test_allocation_graph_layout() -> None:
    """Per split: for each input a dependency node (keeps the source alive on its backend until the copy) and
    the copy (allocated at the split's start), then the split's own nodes."""
    s, g, _ws, x = _offload_chain(True)
    plan = s.split_graph(g)
    ag = plan.alloc_graph
    names = [t.name for t in ag.nodes]
    assert names == ["w0 (dep)", "gpu#w0#0", "x (dep)", "gpu#x#0", g.nodes[0].name,
                     "w1 (dep)", "gpu#w1#0", g.nodes[1].name, "w2 (dep)", "gpu#w2#0", g.nodes[2].name]
    assert plan.node_ids == [1, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0]
    dep = ag.nodes[2]
    assert dep.op is Op.NONE and dep.src == (x,) and dep.view_src is x
    assert ag.leafs == g.leafs


def test_pipeline_slots() -> None:
    """With n_copies = 3 every input has 3 copies, flagged INPUT|OUTPUT and placed as leafs (stable, never reused);
    each alloc_graph moves to the next slot and rewires the srcs to its copies."""
    s, g, _ws, x = _offload_chain(True, n_copies=3)
    s.alloc_graph(g)
    plan = s.plan
    assert plan is not None
    cps = plan.copies[(id(x), 0)]
    assert [c.name for c in cps] == ["gpu#x#0", "gpu#x#1", "gpu#x#2"]
    assert all(c.flags & TensorFlag.INPUT and c.flags & TensorFlag.OUTPUT for c in cps)
    assert [t.name for t in plan.alloc_graph.leafs[:3]] == ["gpu#w0#0", "gpu#w0#1", "gpu#w0#2"]
    assert not any("#" in t.name for t in plan.alloc_graph.nodes)
    offsets = {(c.buffer, c.offset) for c in cps}
    assert len(offsets) == 3                      # three distinct places
    first = g.nodes[0]
    seen = []
    for k in range(4):
        if k:
            s.alloc_graph(g)
        seen.append(first.src[1])
        x.set(np.full(8, k, dtype=np.float32))
        s.graph_compute(g)
        assert np.array_equal(g.nodes[-1].numpy(), np.full((2, 4), 24.0 * k, dtype=np.float32))
    assert seen == [cps[0], cps[1], cps[2], cps[0]]
    assert s.stats.plans == 1 and s.stats.allocs == 1


def test_user_inputs_get_slots_on_async_backends() -> None:
    """In pipeline mode a user input read by an asynchronous backend is copied even on its own backend, so the
    caller may overwrite it as soon as graph_compute_async returns."""
    dev = fake_device("agpu", async_ops=True)
    gpu, cpu = dev.init_backend(), numpy_backend()
    x = inp(4, name="x")
    y = ops.sqr(x)
    g = gg.build_graph(y)
    s = Scheduler([gpu, cpu], parallel=True)
    s.set_tensor_backend(x, gpu)
    s.alloc_graph(g)
    assert [t.name for t in s.splits[0].inputs] == ["x"]
    assert y.src[0] is not None and y.src[0].name == "agpu#x#0"
    x.set(np.arange(4, dtype=np.float32))
    s.graph_compute(g)
    assert np.array_equal(y.numpy(), np.arange(4.0) ** 2)
    sgpu = fake_device("sgpu").init_backend()   # a synchronous backend reads its own input in place
    s1 = Scheduler([sgpu, numpy_backend()], parallel=True)
    x1 = inp(4)
    s1.set_tensor_backend(x1, sgpu)
    s1.alloc_graph(gg.build_graph(ops.sqr(x1)))
    assert s1.n_split_inputs == 0


def test_shared_memory_reads_wait_for_the_producer() -> None:
    """blas-like and cpu backends share one buffer type: no copies, but each split waits for the backend whose
    results it reads directly."""
    cpu = numpy_backend()
    blas = fake_device("blas", dev_type=DeviceType.CPU, memory="host", ops={Op.SQR}).init_backend()
    hb = cpu.device.buffer_type()
    a = ops.mul(inp(4, 2), weight(hb, 4, name="w1"))
    out = ops.mul(ops.sqr(a), weight(hb, 4, name="w2"))
    s = Scheduler([blas, cpu], bufts=[hb, hb])
    s.alloc_graph(gg.build_graph(out))
    assert backends_of_splits(s) == ["numpy", "blas", "numpy"]
    assert s.n_split_inputs == 0
    assert [sp.wait_for for sp in s.splits] == [(), (1,), (0,)]
