"""Scheduler passes 1-4: who decides each tensor's backend (cause tags), and the configuration / bad-input errors."""

from __future__ import annotations

import pytest

import pyggml as gg
from pyggml import ops
from pyggml.backend.protocol import Backend, BufferType, BufferUsage
from pyggml.backend.sched import MAX_BACKENDS, Scheduler, SchedulerConfigError
from pyggml.errors import GraphError, UnsupportedOpError
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_testing.devices import FakeDevice, fake_device, numpy_backend
from pyggml_testing.sched import inp, weight


def where(s: Scheduler, t: Tensor) -> tuple[str, str]:
    plan = s.plan
    assert plan is not None
    b = s.get_tensor_backend(t)
    assert b is not None, t.name
    return b.name, plan.cause[id(t)]


def gpu_pair(**kw: object) -> tuple[FakeDevice, Backend, Backend]:
    dev = fake_device("gpu", **kw)
    return dev, dev.init_backend(), numpy_backend()


# ---- configuration ------------------------------------------------------------------------------------------


def test_config_errors() -> None:
    _dev, gpu, cpu = gpu_pair()
    with pytest.raises(SchedulerConfigError, match="at least one backend"):
        Scheduler([])
    with pytest.raises(SchedulerConfigError, match="too many backends: 17"):
        Scheduler([fake_device(f"g{i}").init_backend() for i in range(MAX_BACKENDS)] + [cpu])
    with pytest.raises(SchedulerConfigError, match=r"last backend must be a CPU backend.*'gpu'"):
        Scheduler([cpu, gpu])
    with pytest.raises(SchedulerConfigError, match="cannot use its buffer type 'numpy'"):
        Scheduler([gpu, cpu], bufts=[cpu.device.buffer_type(), None])
    with pytest.raises(SchedulerConfigError, match="1 buffer types given for 2 backends"):
        Scheduler([gpu, cpu], bufts=[None])
    with pytest.raises(SchedulerConfigError, match="listed twice"):
        Scheduler([cpu, cpu])
    with pytest.raises(SchedulerConfigError, match=r"n_copies must be in 1\.\.4"):
        Scheduler([gpu, cpu], n_copies=5)
    assert Scheduler([gpu, cpu], parallel=True).n_copies == 4
    assert Scheduler([gpu, cpu]).n_copies == 1


def test_graph_larger_than_graph_size() -> None:
    cpu = numpy_backend()
    g = gg.build_graph(ops.sqr(ops.sqr(inp(4))))
    with pytest.raises(GraphError, match="graph_size=2"):
        Scheduler([cpu], graph_size=2).split_graph(g)


# ---- pass 1 -------------------------------------------------------------------------------------------------


def test_pass1_buffers_inputs_and_weights() -> None:
    dev, gpu, cpu = gpu_pair()
    w = weight(dev.buffer_type(), 4, 3)
    cache = weight(dev.buffer_type(), 12, usage=BufferUsage.ANY)
    x = inp(4, 2)
    y = ops.mul_mat(w, x)                                    # follows its weight
    store = ops.cpy(ops.cont(y, 6), ops.view(cache, (6,)))   # writes into a pre-allocated cache (a view of it)
    s = Scheduler([gpu, cpu])
    s.split_graph(gg.build_graph(store))
    assert where(s, w) == ("gpu", "1.dst")
    assert where(s, cache) == ("gpu", "1.dst")
    assert where(s, x) == ("numpy", "1.inp")
    assert where(s, y) == ("gpu", "1.wgt0")
    assert where(s, store) == ("gpu", "1.vsrc")


def test_rope_does_not_follow_small_weights() -> None:
    dev, gpu, cpu = gpu_pair()
    ff = weight(dev.buffer_type(), 4, name="rope_freqs")
    x = inp(8, 2, 3)
    pos = gg.Context(no_alloc=True).new_tensor(gg.I32, 3, name="pos").set_input()
    r = ops.rope(x, pos, 8, freq_factors=ff)
    m = ops.mul(inp(4, name="a"), ff)
    s = Scheduler([gpu, cpu])
    s.split_graph(gg.build_graph(r))
    # rope ignores its freq factors: two of its srcs are readable by the cpu, one by the gpu
    assert where(s, r) == ("numpy", "3.best")
    s.split_graph(gg.build_graph(m))
    assert where(s, m) == ("gpu", "1.wgt1")  # any other op follows the weight


@pytest.mark.parametrize("op_offload", [True, False])
def test_op_offload_of_host_weights(op_offload: bool) -> None:
    _dev, gpu, cpu = gpu_pair(offload={Op.MUL_MAT})
    w = weight(cpu.device.buffer_type(), 4, 3)
    y = ops.mul_mat(w, inp(4, 2))
    z = ops.mul(inp(4, name="a"), weight(cpu.device.buffer_type(), 4, name="wz"))
    s = Scheduler([gpu, cpu], op_offload=op_offload)
    s.split_graph(gg.build_graph(y, z))
    assert where(s, y) == (("gpu", "1.off") if op_offload else ("numpy", "1.wgt0"))
    assert where(s, z) == ("numpy", "1.wgt1")  # offload_op says no for MUL


def test_offload_needs_support() -> None:
    _dev, gpu, cpu = gpu_pair(offload={Op.MUL_MAT}, exclude={Op.MUL_MAT})
    y = ops.mul_mat(weight(cpu.device.buffer_type(), 4, 3), inp(4, 2))
    s = Scheduler([gpu, cpu])
    s.split_graph(gg.build_graph(y))
    assert where(s, y) == ("numpy", "1.wgt0")


# ---- passes 2-4 ---------------------------------------------------------------------------------------------


def test_expansion_assigns_only_supporting_backends() -> None:
    """a (gpu weight) -> b = sqr (gpu cannot) -> c = sqrt -> d (cpu weight) -> e = neg.
    gpu sweeps: c joins a's run past the unsupported b; d (cpu) stops the run, so e stays open; the
    any-backend sweeps give e the cpu; b goes to the only backend that runs it."""
    dev, gpu, cpu = gpu_pair(exclude={Op.SQR})
    a = ops.mul_mat(weight(dev.buffer_type(), 4, 4), inp(4, 2))
    b = ops.sqr(a)
    c = ops.sqrt(b)
    d = ops.mul(c, weight(cpu.device.buffer_type(), 4, name="wc"))
    e = ops.neg(d)
    s = Scheduler([gpu, cpu])
    s.split_graph(gg.build_graph(e))
    assert [where(s, t) for t in (a, b, c, d, e)] == [
        ("gpu", "1.wgt0"), ("numpy", "3.best"), ("gpu", "2.sup"), ("numpy", "1.wgt1"), ("numpy", "2.sup")]


def _blas_pair(shared: bool) -> tuple[Backend, Backend, list[BufferType | None] | None]:
    cpu = numpy_backend()
    blas = fake_device("blas", dev_type=gg.backend.DeviceType.CPU, memory="host", ops={Op.MUL_MAT, Op.SQR})
    return blas.init_backend(), cpu, [cpu.device.buffer_type()] * 2 if shared else None


@pytest.mark.parametrize("shared", [True, False])
def test_upgrade_to_higher_priority_with_same_buffer_type(shared: bool) -> None:
    """c = sqr(a) between two cpu nodes lands on the cpu in the sweeps; with the blas-like backend sharing the
    cpu's buffer type object it is upgraded there (no copy needed), else it stays."""
    blas, cpu, bufts = _blas_pair(shared)
    hw = cpu.device.buffer_type()
    a = ops.mul(inp(4, 2), weight(hw, 4, name="w1"))
    c = ops.sqr(a)
    out = ops.mul(c, weight(hw, 4, name="w2"))
    s = Scheduler([blas, cpu], bufts=bufts)
    s.split_graph(gg.build_graph(out))
    assert where(s, a) == ("numpy", "1.wgt1")
    assert where(s, c) == (("blas", "3.upg") if shared else ("numpy", "2.sup"))
    assert s.n_splits == (3 if shared else 1)
    assert s.n_split_inputs == 0


def test_most_supported_inputs_wins_over_priority() -> None:
    """z = add(a, h): a lives in g1's private memory, h is a host input; g1 cannot add, g2 can but reads
    neither src, the cpu reads h: the cpu gets z although g2 has the higher priority."""
    d1 = fake_device("g1", ops={Op.MUL_MAT})
    d2 = fake_device("g2", exclude={Op.MUL_MAT})
    cpu = numpy_backend()
    a = ops.mul_mat(weight(d1.buffer_type(), 4, 3), inp(4, 2))
    z = ops.add(a, inp(3, 2, name="h"))
    s = Scheduler([d1.init_backend(), d2.init_backend(), cpu])
    s.split_graph(gg.build_graph(z))
    assert where(s, z) == ("numpy", "3.best")


def test_pass4_views_srcs_and_first_supporting() -> None:
    dev, gpu, cpu = gpu_pair()
    leaf = gg.Context(no_alloc=True).new_tensor(gg.F32, 4, 2, name="const")  # no INPUT flag, no buffer
    y = ops.mul_mat(weight(dev.buffer_type(), 4, 3), leaf)
    loose = gg.Context(no_alloc=True).new_tensor(gg.F32, 8, name="loose")
    r = ops.reshape(loose, 4, 2)                       # a view of an unassigned leaf
    s = Scheduler([gpu, cpu])
    s.split_graph(gg.build_graph(y, ops.sqr(r)))
    assert where(s, leaf) == ("gpu", "4.cur")
    assert where(s, r) == ("gpu", "4.sup")
    assert where(s, loose) == ("gpu", "4.cur")
    t = ops.transpose(y)
    s.split_graph(gg.build_graph(ops.cont(t)))
    assert where(s, t) == ("gpu", "4.vsrc")


def test_user_assignment_survives_until_reset() -> None:
    dev, gpu, cpu = gpu_pair()
    y = ops.mul_mat(weight(dev.buffer_type(), 4, 3), inp(4, 2))
    z = ops.sqr(y)
    g = gg.build_graph(z)
    s = Scheduler([gpu, cpu])
    s.set_tensor_backend(z, cpu)
    s.split_graph(g)
    assert where(s, z) == ("numpy", "usr")
    assert s.n_splits == 2
    s.split_graph(g)                     # kept across plans ...
    assert where(s, z) == ("numpy", "usr")
    s.reset()                            # ... until reset
    assert s.get_tensor_backend(z) is None
    s.split_graph(g)
    assert where(s, z) == ("gpu", "2.sup")
    with pytest.raises(SchedulerConfigError, match="not one of this scheduler's"):
        s.set_tensor_backend(z, numpy_backend())


# ---- bad input ----------------------------------------------------------------------------------------------


def test_preallocated_tensor_in_unusable_buffer() -> None:
    other = fake_device("elsewhere")
    _dev, gpu, cpu = gpu_pair()
    w = weight(other.buffer_type(), 4, 3, name="stray.weight")
    s = Scheduler([gpu, cpu])
    with pytest.raises(UnsupportedOpError, match=r"pre-allocated tensor 'stray.weight'.*'elsewhere_mem'"):
        s.split_graph(gg.build_graph(ops.mul_mat(w, inp(4, 2))))


def test_preallocated_tensor_whose_op_nobody_runs_there() -> None:
    dev, gpu, cpu = gpu_pair(exclude={Op.SQR})
    out = weight(dev.buffer_type(), 4, name="out", usage=BufferUsage.ANY)
    store = ops.cpy(ops.sqr(inp(4)), out)
    s = Scheduler([gpu, cpu])
    s.split_graph(gg.build_graph(store))
    assert where(s, store) == ("gpu", "1.vsrc")    # the CPY runs where its destination lives
    sq_in_place = ops.sqr(ops.view(out, (4,)), inplace=True)
    with pytest.raises(UnsupportedOpError, match=r"pre-allocated tensor .*a view of 'out'.*runs its op SQR"):
        s.split_graph(gg.build_graph(sq_in_place))


def test_op_no_backend_supports() -> None:
    d1 = fake_device("g", exclude={Op.SQR})
    d2 = fake_device("c", exclude={Op.SQR}, dev_type=gg.backend.DeviceType.CPU, memory="host")
    x = inp(4, name="x")
    y = ops.sqr(x).set_name("the_square")
    s = Scheduler([d1.init_backend(), d2.init_backend()])
    with pytest.raises(UnsupportedOpError, match=r"no scheduler backend supports op SQR of node 'the_square'"):
        s.split_graph(gg.build_graph(y))


def test_user_assignment_to_unsupporting_backend() -> None:
    _dev, gpu, cpu = gpu_pair(exclude={Op.SQR})
    y = ops.sqr(inp(4)).set_name("sq")
    s = Scheduler([gpu, cpu])
    s.set_tensor_backend(y, gpu)
    with pytest.raises(UnsupportedOpError, match=r"'sq'.*backend 'gpu' \(usr\).*does not support op SQR"):
        s.split_graph(gg.build_graph(y))
