"""Checks of a device backend's convolution and spatial kernels beyond the conformance suite's one-op cases,
shared by the OpenCL and Vulkan tests (each runs them as ConvGraphTests on its device): the front ends of real model
families as whole graphs (whisper's encoder convolutions, a CLIP / SigLIP patch embedding, a diffusion UNet block, a
vocoder's upsampling) and a small CNN's backward pass run on the device with every node supported there and match
the numpy reference; sums without atomics give the same bits on every run; UPSCALE's nearest pixel follows ggml's
float32 quotient where it differs from the exact one."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from pyggml import ops
from pyggml.autodiff import build_backward
from pyggml.backend.protocol import Device
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml.ops.spatial import PoolOp, ScaleMode
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_testing.compare import nmse
from pyggml_testing.devices import numpy_device
from pyggml_testing.on_device import place, run_on

F32, F16 = GGMLType.F32, GGMLType.F16
BuildFn = Callable[[Context], list[Tensor]]
TOLERANCE = 5e-4
"""ggml's NMSE threshold for ops that sum F16 products (the graphs use F16 weights and patches)."""


def whisper_front(c: Context) -> list[Tensor]:
    """Whisper's encoder stem: conv_1d k3 p1 + GELU, conv_1d k3 s2 p1 + GELU over a [T, n_mels] spectrogram."""
    mel = c.new_tensor(F32, 48, 12)
    h = ops.gelu(ops.conv_1d(c.new_tensor(F16, 3, 12, 16), mel, 1, 1, 1))
    return [ops.gelu(ops.conv_1d(c.new_tensor(F16, 3, 16, 16), h, 2, 1, 1))]


def patch_embedding(c: Context) -> list[Tensor]:
    """CLIP / SigLIP: a stride = kernel convolution of the image into patches (IM2COL + MUL_MAT)."""
    img = c.new_tensor(F32, 28, 28, 3, 1)
    return [ops.conv_2d_sk_p0(c.new_tensor(F16, 7, 7, 3, 24), img)]


def unet_block(c: Context) -> list[Tensor]:
    """A diffusion UNet's pieces: timestep embedding, direct and depthwise convs, group norm + SiLU, an average
    pool down, a nearest and a bilinear upsample and a transposed conv up."""
    x = c.new_tensor(F32, 16, 12, 8, 2)
    emb = ops.timestep_embedding(c.new_tensor(F32, 2), 8)
    h = ops.conv_2d_direct(c.new_tensor(F16, 3, 3, 8, 8), x, 1, 1, 1, 1, 1, 1)
    h = ops.silu(ops.group_norm(h, 4))
    h = ops.add(h, ops.reshape(emb, 1, 1, 8, 2))
    h = ops.conv_2d_dw_direct(c.new_tensor(F32, 3, 3, 1, 8), h, 1, 1, 1, 1, 1, 1)
    down = ops.pool_2d(h, PoolOp.AVG, 2, 2, 2, 2)
    up = ops.upscale(down, 2)
    smooth = ops.interpolate(down, 16, 12, 8, 2, ScaleMode.BILINEAR)
    tr = ops.conv_transpose_2d_p0(c.new_tensor(F16, 2, 2, 8, 8), ops.cont(ops.view(down, (8, 6, 8, 1),
                                                                                  down.nb[1:], 0)), 2)
    return [up, smooth, tr, ops.pool_2d(h, PoolOp.MAX, 3, 3, 1, 1, 1, 1)]


def vocoder_up(c: Context) -> list[Tensor]:
    """An audio decoder: reflection padding, a transposed 1-D conv upsampling by 4, an average pool."""
    x = ops.pad_reflect_1d(c.new_tensor(F32, 40, 6), 3, 3)
    y = ops.conv_transpose_1d(c.new_tensor(F32, 8, 4, 6), x, 4)
    return [y, ops.pool_1d(y, PoolOp.AVG, 4, 2, 1)]


def sam_windows(c: Context) -> list[Tensor]:
    """SAM's image encoder pieces: window partition (padded), a shifted window (ROLL), decomposed relative
    positions (GET_REL_POS, ADD_REL_POS in place) and the windows put back."""
    x = c.new_tensor(F32, 8, 13, 11)
    win = ops.win_part(ops.roll(x, 0, 3, -2), 5)
    rel = ops.get_rel_pos(c.new_tensor(F16, 8, 9), 5, 5)
    scores = ops.add_rel_pos(c.new_tensor(F32, 25, 25, 2), c.new_tensor(F32, 5, 5, 5, 2),
                             c.new_tensor(F32, 5, 5, 5, 2), inplace=True)
    return [ops.win_unpart(ops.scale(win, 2.0), 13, 11, 5), rel, scores]


def codec_decoder(c: Context) -> list[Tensor]:
    """An audio codec's decoder upsampling as a GEMM then COL2IM_1D (a transposed conv, K = 6 taps, OC = 4, stride
    3): columns [K*OC, T_in] from 16 input channels."""
    cols = ops.mul_mat(c.new_tensor(F32, 16, 6 * 4), c.new_tensor(F32, 16, 20))
    return [ops.col2im_1d(cols, 3, 4, 1)]


def cnn_training(c: Context) -> list[Tensor]:
    """A small CNN's backward pass: conv_2d k3 p1 (IM2COL + MUL_MAT), a max pool, an average pool and a squared
    sum as the loss; the gradients of the image and the F16 kernel (POOL_2D_BACK avg and max, OUT_PROD,
    IM2COL_BACK). The loss's gradient seed is a leaf like the others, so a device check that fills every leaf at
    random runs the backward pass of a randomly scaled loss: the same graph on both sides."""
    img = c.new_tensor(F32, 13, 10, 3, 2).set_param()
    k = c.new_tensor(F16, 3, 3, 3, 4).set_param()
    h = ops.pool_2d(ops.conv_2d(k, img, 1, 1, 1, 1, 1, 1), PoolOp.MAX, 2, 2, 2, 2)
    loss = ops.sum(ops.sqr(ops.pool_2d(h, PoolOp.AVG, 3, 3, 1, 1, 1, 1))).set_loss()
    grads = build_backward(build_graph(loss))
    outs = [grads.grad(img), grads.grad(k)]
    assert all(o is not None for o in outs)
    return [o for o in outs if o is not None]


MODEL_GRAPHS: dict[str, BuildFn] = {f.__name__: f for f in (whisper_front, patch_embedding, unet_block,
                                                            vocoder_up, sam_windows, codec_decoder, cnn_training)}


def check_model_graph(device: Device, name: str) -> None:
    """Every node of the graph runs on `device` and each output matches the numpy reference."""
    build = MODEL_GRAPHS[name]
    ctx = Context(no_alloc=True)
    g = build_graph(*build(ctx))
    missing = [n.op.name for n in g.nodes if not device.supports_op(n)]
    assert not missing, f"{device.name} refuses {missing}"
    ref, got = run_on(numpy_device(), build), run_on(device, build)
    for i, (r, o) in enumerate(zip(ref, got, strict=True)):
        assert r.shape == o.shape
        err = nmse(o, r)
        assert err < TOLERANCE, f"{name} output {i}: nmse {err:.3g}"


def check_deterministic(device: Device) -> None:
    """Two runs of the same graph give the same bits (each element is summed by one thread in a fixed order), the
    gradients' gathers included."""
    for build in (unet_block, cnn_training):
        first, second = run_on(device, build, seed=3), run_on(device, build, seed=3)
        for a, b in zip(first, second, strict=True):
            assert np.array_equal(a, b), build.__name__


def nearest_boundary() -> tuple[int, int]:
    """(n_src, n_dst) with an output whose nearest pixel by ggml's float32 quotient i / (n_dst / n_src) is not the
    exact floor(i * n_src / n_dst): where a device's inexact division would pick the neighbour."""
    for ns in range(2, 64):
        for nd in range(ns + 1, 4 * ns):
            sf = np.float32(nd) / np.float32(ns)
            i = np.arange(nd)
            if np.any((i.astype(np.float32) / sf).astype(np.int64) != i * ns // nd):
                return ns, nd
    raise AssertionError("no float32 rounding boundary among the sizes searched")


def _upscale_ramp(device: Device, ns: int, nd: int) -> np.ndarray:
    """UPSCALE nearest of a ramp [0 .. ns-1] (3 rows) to nd columns on `device`: each value is its source index."""
    ctx = Context(no_alloc=True)
    src = ctx.new_tensor(F32, ns, 3)
    out = ops.interpolate(src, nd, 3)
    place(ctx, device.buffer_type())
    src.set(np.tile(np.arange(ns, dtype=np.float32), 3))
    device.init_backend().graph_compute(build_graph(out))
    return out.numpy()


def check_nearest_boundary(device: Device) -> None:
    """UPSCALE nearest at ggml's float32 rounding boundary picks ggml's pixel, not the exact quotient's."""
    ns, nd = nearest_boundary()
    want = _upscale_ramp(numpy_device(), ns, nd)
    exact = np.broadcast_to(np.arange(nd) * ns // nd, want.shape)
    assert not np.array_equal(want, exact), "the case has no boundary"
    assert np.array_equal(_upscale_ramp(device, ns, nd), want)


class ConvGraphTests:
    """The checks above as pytest tests, for a plugin's test module to subclass (`class TestConvGraphs(
    ConvGraphTests)`); they run on the module's `device` fixture."""

    @pytest.mark.parametrize("name", sorted(MODEL_GRAPHS))
    def test_model_graph(self, device: Device, name: str) -> None:
        check_model_graph(device, name)

    def test_sums_are_deterministic(self, device: Device) -> None:
        check_deterministic(device)

    def test_nearest_pixel_at_a_rounding_boundary(self, device: Device) -> None:
        check_nearest_boundary(device)
