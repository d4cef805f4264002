"""conv2d (2-D and 3-D) / deconv2d against naive loop references."""

import numpy as np
import pytest

from lightnet.archs.cpu.kernels import conv
from lightnet.archs.cpu.kernels.scratch import scratch_bytes
from lightnet.archs.cpu.kernels.conv import (
    depthwise_conv2d,
    depthwise_conv2d_workspace,
    conv2d,
    conv2d_workspace,
    deconv2d,
    deconv2d_workspace,
)
from lightnet.ir.shapes import conv2d_output_hw, deconv2d_output_hw
from tests.helpers import arena_view, assert_guards, rand
from tests.references import ref_conv2d, ref_conv3d, ref_deconv2d

TOL = dict(rtol=1e-5, atol=1e-5)


def check_arena(arena, dst, expected):
    np.testing.assert_allclose(dst, expected, **TOL)
    assert_guards(arena, np.nan)


# ---------------------------------------------------------------- references


# ---------------------------------------------------------------- conv2d


def run_conv(x, w, b, *, group, stride, padding, dilation, use_ws):
    n = x.shape[0]
    oh, ow = conv2d_output_hw(x.shape[2:], w.shape[2:], stride, padding, dilation)
    arena, dst = arena_view((n, w.shape[0], oh, ow), fill=np.nan)
    params = dict(group=group, stride=stride, padding=padding, dilation=dilation)
    ws = conv2d_workspace(x.shape, w.shape, dst.shape, **params) if use_ws else None
    expected = ref_conv2d(x, w, b, group, stride, padding, dilation)
    for _ in range(2):  # a reused workspace must give the same answer
        assert conv2d(x, w, b, dst, **params, ws=ws) is None
        check_arena(arena, dst, expected)
    return dst


CONV_CASES = [
    # (N, C, H, W), (O, kh, kw), group, stride, padding, dilation
    ((2, 3, 7, 6), (4, 3, 3), 1, (1, 1), (0, 0, 0, 0), (1, 1)),
    ((1, 3, 7, 8), (5, 3, 3), 1, (2, 2), (1, 1, 1, 1), (1, 1)),
    ((1, 2, 8, 7), (3, 3, 2), 1, (2, 3), (1, 0, 2, 1), (1, 1)),  # asymmetric pads, strides
    ((1, 2, 9, 9), (2, 3, 3), 1, (1, 1), (2, 2, 2, 2), (2, 2)),  # dilation
    ((2, 3, 9, 8), (2, 2, 3), 1, (2, 1), (0, 3, 1, 0), (3, 2)),  # everything at once
    ((1, 4, 6, 6), (6, 3, 3), 2, (1, 1), (1, 1, 1, 1), (1, 1)),  # groups
    ((2, 6, 7, 7), (9, 2, 2), 3, (2, 2), (0, 1, 1, 0), (2, 1)),  # groups, stride, dilation
    ((2, 4, 7, 7), (4, 3, 3), 4, (1, 1), (1, 1, 1, 1), (1, 1)),  # depthwise
    ((1, 3, 8, 7), (6, 3, 3), 3, (2, 2), (1, 0, 0, 1), (2, 1)),  # depthwise, multiplier 2
    ((1, 3, 5, 5), (3, 3, 3), 3, (1, 1), (0, 0, 0, 0), (1, 1)),  # depthwise, unpadded
    ((2, 5, 4, 6), (7, 1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1)),  # pointwise, no im2col
    ((1, 4, 5, 5), (6, 1, 1), 2, (1, 1), (0, 0, 0, 0), (1, 1)),  # grouped pointwise
    ((1, 3, 7, 7), (2, 1, 1), 1, (2, 2), (0, 0, 0, 0), (1, 1)),  # strided 1x1
    ((1, 3, 4, 4), (2, 1, 1), 1, (1, 1), (1, 0, 1, 0), (1, 1)),  # padded 1x1
    ((1, 2, 5, 5), (3, 5, 5), 1, (1, 1), (0, 0, 0, 0), (1, 1)),  # kernel covers input
]


@pytest.mark.parametrize("use_ws", [True, False])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d(case, with_bias, use_ws):
    (n, c, h, w), (o, kh, kw), group, stride, padding, dilation = case
    rng = np.random.default_rng(0)
    x = rand(rng, n, c, h, w)
    wt = rand(rng, o, c // group, kh, kw)
    b = rand(rng, o) if with_bias else None
    run_conv(x, wt, b, group=group, stride=stride, padding=padding, dilation=dilation, use_ws=use_ws)


@pytest.mark.parametrize("band_bytes", [1, 700])  # one output row / a few rows per band
@pytest.mark.parametrize("case", [c for c in CONV_CASES if c[1][1:] != (1, 1)])
def test_conv2d_in_bands_of_output_rows(case, band_bytes, monkeypatch):
    """Big im2col buffers are filled a band of output rows at a time (the last band
    shorter); forced here on small shapes, with the scratch full of garbage."""
    monkeypatch.setattr(conv, "_IM2COL_BAND_BYTES", band_bytes)
    (n, c, h, w), (o, kh, kw), group, stride, padding, dilation = case
    rng = np.random.default_rng(1)
    x, wt, b = rand(rng, n, c, h, w), rand(rng, o, c // group, kh, kw), rand(rng, o)
    oh, ow = conv2d_output_hw((h, w), (kh, kw), stride, padding, dilation)
    dst = np.empty((n, o, oh, ow), np.float32)
    layout = conv.conv2d_scratch(x.shape, wt.shape, dst.shape, stride=stride, padding=padding,
                                 dtype=np.float32)
    banded = n * c * kh * kw * oh * ow * 4 > 2 * band_bytes
    assert (layout[0][1][4] < oh) == (banded and oh > 1)
    buffer, clobber = garbage(layout)
    params = dict(group=group, stride=stride, padding=padding, dilation=dilation)
    ws = conv2d_workspace(x.shape, wt.shape, dst.shape, **params, scratch=buffer)
    for _ in range(2):
        clobber()
        conv2d(x, wt, b, dst, **params, ws=ws)
        np.testing.assert_allclose(dst, ref_conv2d(x, wt, b, group, stride, padding, dilation),
                                   **TOL)


def test_conv2d_hand_computed():
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    w = np.ones((1, 1, 2, 2), np.float32)
    dst = np.zeros((1, 1, 2, 2), np.float32)
    conv2d(x, w, np.array([1.0], np.float32), dst, group=1, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1))
    np.testing.assert_array_equal(dst[0, 0], [[9, 13], [21, 25]])
    # one zero pixel on the left and top, stride 2: windows [[0,0],[0,0]] [[0,0],[1,2]] ...
    dst = np.zeros((1, 1, 2, 2), np.float32)
    conv2d(x, w, None, dst, group=1, stride=(2, 2), padding=(1, 1, 0, 0), dilation=(1, 1))
    np.testing.assert_array_equal(dst[0, 0], [[0, 3], [9, 24]])


def test_conv2d_noncontiguous_and_float64_inputs():
    rng = np.random.default_rng(1)
    x = rand(rng, 1, 8, 7, 3).transpose(0, 3, 1, 2)  # non-contiguous [1, 3, 8, 7]
    w = rng.standard_normal((4, 3, 3, 3))  # float64 weight, computed in dst's float32
    b = rng.standard_normal(4)
    for padding in [(0, 0, 0, 0), (1, 1, 1, 1)]:
        run_conv(x, w, b, group=1, stride=(1, 2), padding=padding, dilation=(1, 1), use_ws=True)
    run_conv(x, rng.standard_normal((6, 1, 1, 1)), None, group=3, stride=(1, 1), padding=(0, 0, 0, 0),
             dilation=(1, 1), use_ws=False)


def test_conv2d_workspace_contents():
    params = dict(group=1, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1))
    assert conv2d_workspace((1, 4, 5, 5), (8, 4, 1, 1), (1, 8, 5, 5), **params) == {}
    ws = conv2d_workspace((1, 4, 5, 5), (8, 4, 3, 3), (1, 8, 3, 3), **params)
    assert set(ws) == {"cols"} and ws["cols"].shape == (1, 4, 3, 3, 3, 3)  # im2col
    ws = conv2d_workspace((1, 4, 5, 5), (4, 1, 3, 3), (1, 4, 5, 5), **{**params, "group": 4,
                                                                      "padding": (1, 1, 1, 1)})
    assert set(ws) == {"padded", "cols"} and ws["padded"].shape == (1, 4, 7, 7)
    assert ws["cols"].shape == (1, 4, 3, 3, 5, 5)


CONV3D_CASES = [
    # (N, C, D, H, W), (O, kd, kh, kw), group, stride, padding, dilation
    ((2, 3, 4, 5, 6), (4, 3, 3, 3), 1, (1, 1, 1), (1, 1, 1, 1, 1, 1), (1, 1, 1)),
    ((1, 2, 5, 6, 5), (3, 3, 2, 3), 1, (2, 1, 2), (1, 0, 2, 0, 1, 1), (1, 1, 1)),  # asymmetric
    ((1, 4, 6, 5, 7), (6, 2, 3, 2), 2, (1, 2, 1), (0, 1, 1, 1, 0, 0), (2, 1, 3)),  # groups, dil.
    ((1, 4, 3, 5, 5), (4, 1, 3, 3), 4, (1, 1, 1), (0, 1, 1, 0, 1, 1), (1, 1, 1)),  # depthwise
    ((2, 5, 3, 4, 4), (6, 1, 1, 1), 1, (1, 1, 1), (0,) * 6, (1, 1, 1)),  # pointwise
    ((1, 3, 5, 5, 5), (2, 1, 1, 1), 1, (2, 2, 2), (0,) * 6, (1, 1, 1)),  # strided 1x1x1
    ((1, 2, 5, 4, 4), (3, 3, 1, 1), 1, (1, 1, 1), (1, 0, 0, 1, 0, 0), (1, 1, 1)),  # (2+1)-D's
]


@pytest.mark.parametrize("band_bytes", [None, 1, 4000])  # whole; one row; a few rows
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("case", CONV3D_CASES)
def test_conv3d(case, with_bias, band_bytes, monkeypatch):
    """3-D convolutions (NCDHW) through the same kernel, with the scratch full of
    garbage; big im2col buffers (forced here) filled a band of rows of one output depth
    slice at a time."""
    if band_bytes is not None:
        monkeypatch.setattr(conv, "_IM2COL_BAND_BYTES", band_bytes)
    (n, c, d, h, w), (o, kd, kh, kw), group, stride, padding, dilation = case
    rng = np.random.default_rng(2)
    x, wt = rand(rng, n, c, d, h, w), rand(rng, o, c // group, kd, kh, kw)
    b = rand(rng, o) if with_bias else None
    out = conv2d_output_hw((d, h, w), (kd, kh, kw), stride, padding, dilation)
    arena, dst = arena_view((n, o) + out, fill=np.nan)
    layout = conv.conv2d_scratch(x.shape, wt.shape, dst.shape, stride=stride, padding=padding,
                                 dtype=np.float32)
    if (kd, kh, kw) != (1, 1, 1) or any(padding) or max(stride) > 1:
        row = c * kd * kh * kw * out[2] * 4
        banded = band_bytes is not None and n * out[0] * out[1] * row > 2 * band_bytes
        cols = layout[0][1]
        if banded:  # [1, C, kd, kh, kw, 1, rows, OW]: rows of one depth slice
            rows = 1 if band_bytes == 1 else max(1, min(out[1], band_bytes // row))
            assert cols == (1, c, kd, kh, kw, 1, rows, out[2])
        else:
            assert cols == (n, c, kd, kh, kw) + out
    buffer, clobber = garbage(layout)
    params = dict(group=group, stride=stride, padding=padding, dilation=dilation)
    ws = conv2d_workspace(x.shape, wt.shape, dst.shape, **params, scratch=buffer)
    expected = ref_conv3d(x, wt, b, group, stride, padding, dilation)
    for _ in range(2):
        clobber()
        conv2d(x, wt, b, dst, **params, ws=ws)
        check_arena(arena, dst, expected)


def garbage(layout):
    """A scratch buffer for `layout`, and how to fill it with what other ops leave
    there (NaN as float32 and float64): kernels must not rely on its contents."""
    buffer = np.empty(scratch_bytes(layout), np.uint8)

    def clobber():
        buffer[:] = 0xFF
    return buffer, clobber


def test_conv2d_with_clobbered_scratch():
    rng = np.random.default_rng(4)
    x, w, b = rand(rng, 1, 3, 6, 7), rand(rng, 4, 3, 3, 3), rand(rng, 4)
    params = dict(group=1, stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1))
    dst = np.empty((1, 4, 6, 7), np.float32)
    buffer, clobber = garbage(conv.conv2d_scratch(x.shape, w.shape, dst.shape, stride=(1, 1),
                                                  padding=(1, 1, 1, 1), dtype=np.float32))
    # im2col 1 * 3 * 3 * 3 * 6 * 7 float32 (4536 bytes -> 4544, 64-byte aligned), then the
    # padded input 1 * 3 * 8 * 9 float32 (864 -> 896): its border is rewritten every call
    assert buffer.size == 4544 + 896
    ws = conv2d_workspace(x.shape, w.shape, dst.shape, **params, scratch=buffer)
    for _ in range(2):
        clobber()
        conv2d(x, w, b, dst, **params, ws=ws)
        np.testing.assert_allclose(dst, ref_conv2d(x, w, b, 1, (1, 1), (1, 1, 1, 1), (1, 1)), **TOL)


# ---------------------------------------------------------------- deconv2d


def run_deconv(x, w, b, *, group, stride, padding, output_padding, dilation, use_ws):
    oh, ow = deconv2d_output_hw(x.shape[2:], w.shape[2:], stride, padding, output_padding, dilation)
    arena, dst = arena_view((x.shape[0], w.shape[1] * group, oh, ow), fill=np.nan)
    params = dict(group=group, stride=stride, padding=padding, output_padding=output_padding, dilation=dilation)
    ws = deconv2d_workspace(x.shape, w.shape, dst.shape, **params) if use_ws else None
    expected = ref_deconv2d(x, w, b, group, stride, padding, output_padding, dilation)
    for _ in range(2):
        assert deconv2d(x, w, b, dst, **params, ws=ws) is None
        check_arena(arena, dst, expected)


DECONV_CASES = [
    # (N, C, H, W), (O/group, kh, kw), group, stride, padding, output_padding, dilation
    ((1, 2, 3, 3), (3, 3, 3), 1, (1, 1), (0, 0, 0, 0), (0, 0), (1, 1)),
    ((2, 3, 4, 3), (2, 3, 3), 1, (2, 2), (0, 0, 0, 0), (0, 0), (1, 1)),
    ((1, 2, 3, 4), (2, 3, 3), 1, (3, 2), (1, 2, 1, 2), (0, 0), (1, 1)),
    ((1, 2, 3, 3), (2, 3, 2), 1, (2, 3), (1, 0, 0, 1), (1, 2), (1, 1)),  # output_padding
    ((1, 2, 4, 3), (3, 2, 3), 1, (2, 1), (0, 1, 2, 0), (1, 0), (2, 2)),  # dilation
    ((2, 4, 3, 3), (3, 3, 3), 2, (2, 2), (1, 1, 1, 1), (1, 1), (1, 1)),  # groups
    ((1, 3, 3, 4), (1, 3, 3), 3, (2, 2), (1, 1, 0, 0), (0, 1), (1, 2)),  # depthwise
    ((1, 3, 3, 3), (2, 2, 2), 1, (2, 2), (0, 0, 0, 0), (0, 0), (1, 1)),  # non-overlapping upsample
    ((1, 2, 3, 3), (2, 1, 1), 1, (1, 1), (0, 0, 0, 0), (0, 0), (1, 1)),  # 1x1
    ((1, 2, 3, 3), (2, 3, 3), 1, (2, 2), (-1, 0, -2, -1), (0, 0), (1, 1)),  # negative pads
]


@pytest.mark.parametrize("use_ws", [True, False])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("case", DECONV_CASES)
def test_deconv2d(case, with_bias, use_ws):
    (n, c, h, w), (og, kh, kw), group, stride, padding, output_padding, dilation = case
    rng = np.random.default_rng(2)
    x = rand(rng, n, c, h, w)
    wt = rand(rng, c, og, kh, kw)
    b = rand(rng, og * group) if with_bias else None
    run_deconv(x, wt, b, group=group, stride=stride, padding=padding, output_padding=output_padding,
               dilation=dilation, use_ws=use_ws)


def test_deconv2d_onnx_example():
    """The ONNX ConvTranspose doc example: 3x3 input 0..8, two 3x3 all-ones filters."""
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    w = np.ones((1, 2, 3, 3), np.float32)
    dst = np.empty((1, 2, 5, 5), np.float32)
    deconv2d(x, w, None, dst, group=1, stride=(1, 1), padding=(0, 0, 0, 0), output_padding=(0, 0), dilation=(1, 1))
    expected = [[0, 1, 3, 3, 2], [3, 8, 15, 12, 7], [9, 21, 36, 27, 15], [9, 20, 33, 24, 13], [6, 13, 21, 15, 8]]
    np.testing.assert_array_equal(dst[0, 0], expected)
    np.testing.assert_array_equal(dst[0, 1], expected)


def test_deconv2d_output_padding_cells_hold_bias():
    x = np.ones((1, 1, 2, 2), np.float32)
    w = np.ones((1, 1, 1, 1), np.float32)
    dst = np.full((1, 1, 4, 4), np.nan, np.float32)
    deconv2d(x, w, np.array([0.5], np.float32), dst, group=1, stride=(2, 2), padding=(0, 0, 0, 0),
             output_padding=(1, 1), dilation=(1, 1))
    np.testing.assert_array_equal(dst[0, 0], [[1.5, 0.5, 1.5, 0.5], [0.5] * 4, [1.5, 0.5, 1.5, 0.5], [0.5] * 4])


def test_deconv2d_is_adjoint_of_conv2d():
    """<conv(x), y> == <x, deconv(y)> with the same weights when shapes line up."""
    rng = np.random.default_rng(3)
    stride, padding, dilation = (2, 3), (1, 2, 0, 1), (2, 1)
    x = rand(rng, 2, 4, 9, 11).astype(np.float64)
    w = rand(rng, 6, 2, 3, 3).astype(np.float64)  # conv [O, C/g, ...] == deconv [C_in, O/g, ...]
    oh, ow = conv2d_output_hw((9, 11), (3, 3), stride, padding, dilation)
    y = np.empty((2, 6, oh, ow))
    conv2d(x, w, None, y, group=2, stride=stride, padding=padding, dilation=dilation)
    r = rand(rng, 2, 6, oh, ow).astype(np.float64)
    natural = deconv2d_output_hw((oh, ow), (3, 3), stride, padding, (0, 0), dilation)
    output_padding = (9 - natural[0], 11 - natural[1])
    back = np.empty_like(x)
    deconv2d(r, w, None, back, group=2, stride=stride, padding=padding, output_padding=output_padding,
             dilation=dilation)
    np.testing.assert_allclose(np.vdot(y, r), np.vdot(x, back), rtol=1e-10)


DEPTHWISE_CASES = [
    # C, (H, W), (kh, kw), stride, padding, dilation
    (3, (7, 6), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),     # same size: one strided gather
    (5, (6, 9), (3, 3), (1, 1), (2, 0, 0, 2), (1, 1)),     # same size, asymmetric padding
    (3, (9, 8), (3, 5), (1, 1), (2, 4, 2, 4), (2, 2)),     # same size, dilation
    (4, (9, 9), (3, 3), (2, 2), (0, 1, 1, 0), (1, 1)),     # stride 2
    (7, (11, 10), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),   # stride 2, odd channels
    (2, (8, 7), (2, 2), (1, 2), (0, 0, 0, 0), (2, 1)),     # mixed stride and dilation
    (5, (5, 5), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),     # 1x1
    (3, (6, 6), (3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),     # stride 1, output smaller
    (3, (4, 5), (3, 3), (1, 1), (3, 3, 3, 3), (1, 1)),     # taps wholly in the padding
    (2, (3, 3), (5, 5), (1, 1), (4, 4, 4, 4), (2, 2)),     # same size, taps outside src
    (3, (8, 8), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),     # stride 2 as phases (MobileNet)
    (2, (9, 7), (3, 3), (3, 2), (1, 1, 1, 1), (1, 1)),     # strides 3 and 2: six phases
    (2, (8, 8), (3, 3), (2, 2), (2, 2, 2, 2), (2, 2)),     # phases, dilation 2
]

# Which cases gather their taps as runs of the phases (the rest: strided copies).
RUNS = {0, 1, 2, 4, 6, 8, 9, 10, 11, 12}


@pytest.mark.parametrize("index, case", list(enumerate(DEPTHWISE_CASES)))
def test_depthwise_taps_are_runs_when_the_phases_fit(index, case):
    c, hw, k, stride, padding, dilation = case
    oh, ow = conv2d_output_hw(hw, k, stride, padding, dilation)
    plan = conv._depthwise_plan((1, c) + hw, (c, 1) + k, (1, c, oh, ow), stride, padding,
                                dilation)
    assert (plan["taps"] is not None) == (index in RUNS)


def run_depthwise(c, hw, k, stride, padding, dilation, *, dtype=np.float32, residual=False,
                  activation="none"):
    """depthwise_conv2d (twice, with shared buffers clobbered in between) against the
    loop reference, with the fused residual and activation applied to the reference."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, c) + hw).astype(dtype)
    w = rng.standard_normal((c, 1) + k).astype(dtype)
    b = rng.standard_normal(c).astype(dtype)
    oh, ow = conv2d_output_hw(hw, k, stride, padding, dilation)
    res = rng.standard_normal((2, c, oh, ow)).astype(dtype) if residual else None
    expected = ref_conv2d(x, w, b, c, stride, padding, dilation)
    if residual:
        expected = expected + res
    if activation == "relu":
        expected = np.maximum(expected, 0)
    elif activation == "clip":
        expected = np.clip(expected, -0.5, 0.75)
    dst = np.full((2, c, oh, ow), np.nan, dtype)
    buffer, clobber = garbage(conv.depthwise_conv2d_scratch(
        x.shape, w.shape, dst.shape, stride=stride, padding=padding, dilation=dilation,
        dtype=dtype))
    ws = depthwise_conv2d_workspace(x.shape, w.shape, dst.shape, stride=stride,
                                    padding=padding, dilation=dilation, dtype=dtype,
                                    scratch=buffer)
    for _ in range(2):  # the workspace is reused, its scratch holds garbage
        clobber()
        assert depthwise_conv2d(x, w, b, dst, stride=stride, padding=padding,
                                dilation=dilation, ws=ws, residual=res, activation=activation,
                                clip_min=-0.5, clip_max=0.75) is None
        np.testing.assert_allclose(dst, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("c, hw, k, stride, padding, dilation", DEPTHWISE_CASES)
def test_depthwise_conv2d_matches_loops(c, hw, k, stride, padding, dilation):
    run_depthwise(c, hw, k, stride, padding, dilation)


@pytest.mark.parametrize("chunk_bytes", [1, 700])  # one channel / a few channels per chunk
@pytest.mark.parametrize("case", [DEPTHWISE_CASES[1], DEPTHWISE_CASES[4]])
def test_depthwise_conv2d_in_chunks(case, chunk_bytes, monkeypatch):
    monkeypatch.setattr(conv, "_DEPTHWISE_CHUNK_BYTES", chunk_bytes)
    run_depthwise(*case)


@pytest.mark.parametrize("activation", ["none", "relu", "clip"])
@pytest.mark.parametrize("case", [DEPTHWISE_CASES[0], DEPTHWISE_CASES[3]])
def test_depthwise_conv2d_fused_residual_and_activation(case, activation, monkeypatch):
    monkeypatch.setattr(conv, "_DEPTHWISE_CHUNK_BYTES", 700)
    run_depthwise(*case, residual=True, activation=activation)


@pytest.mark.parametrize("case", [DEPTHWISE_CASES[2], DEPTHWISE_CASES[4]])
def test_depthwise_conv2d_float64(case):
    run_depthwise(*case, dtype=np.float64)


def test_depthwise_conv2d_without_bias_or_workspace():
    rng = np.random.default_rng(5)
    x, w = rand(rng, 1, 3, 5, 6), rand(rng, 3, 1, 3, 3)
    dst = np.empty((1, 3, 5, 6), np.float32)
    depthwise_conv2d(x, w, None, dst, stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1))
    np.testing.assert_allclose(dst, ref_conv2d(x, w, None, 3, (1, 1), (1, 1, 1, 1), (1, 1)), **TOL)


def random_depthwise_cases(count: int, seed: int = 11):
    """Depthwise convolutions of random geometry: strides 1-3, dilations 1-2,
    asymmetric padding up to the dilated kernel, odd and even sizes."""
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        k = tuple(int(v) for v in rng.integers(1, 4, 2))
        stride = tuple(int(v) for v in rng.integers(1, 4, 2))
        dilation = tuple(int(v) for v in rng.integers(1, 3, 2))
        hw = tuple(int(v) for v in rng.integers(1, 10, 2))
        span = [(kk - 1) * d for kk, d in zip(k, dilation)]
        padding = tuple(int(rng.integers(0, span[i % 2] + 1)) for i in range(4))
        if min(conv2d_output_hw(hw, k, stride, padding, dilation)) > 0:
            cases.append((int(rng.integers(1, 6)), hw, k, stride, padding, dilation))
    return cases


@pytest.mark.parametrize("case", random_depthwise_cases(120))
def test_depthwise_conv2d_random_geometry(case, monkeypatch):
    monkeypatch.setattr(conv, "_DEPTHWISE_CHUNK_BYTES", 300)  # a few channels per chunk
    run_depthwise(*case, residual=True, activation="relu")
