"""GridSample: every mode, padding mode and align_corners against ONNX Runtime, on the cpu
and dnnl targets (dnnl has no grid-sample primitive: it runs the cpu kernel), with grids
reaching outside [-1, 1] and hitting exact half-pixel points; the kernel against a
per-pixel loop written from the spec, on images small enough for its product and large
enough for its gather; and the importer's refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from lightnet import LightNetError, Session  # noqa: E402
from lightnet.archs.cpu import kernels  # noqa: E402
from lightnet.archs.dnnl import capi  # noqa: E402
from lightnet.frontends.onnx import convert, save_weights  # noqa: E402
from tests.frontends.onnxutil import init, model, run_lightnet, run_ort  # noqa: E402

TARGETS = ["cpu", pytest.param("dnnl", marks=pytest.mark.skipif(
    capi.unavailable_reason() is not None, reason="oneDNN is unavailable"))]
MODES_16 = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}
# Image sizes [H, W] by align_corners whose half-pixel grid values are exact in float32
# (half_pixel_grid): small ones the kernel samples by a product for linear and cubic,
# large ones by its gather for every mode.
IMAGES = {"small": {0: (4, 8), 1: (3, 5)}, "large": {0: (16, 32), 1: (17, 33)}}


def kernel_path(shape, mode) -> str:
    """How the kernel samples an image of `shape` (the test's premise, checked)."""
    return "product" if kernels.grid_sample_by_product(shape, mode) else "gather"


def grid_model(x_shape, grid_shape, opset=16, elem=TensorProto.FLOAT, **attrs):
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], **attrs)
    return model([node], [("x", list(x_shape), elem), ("grid", list(grid_shape), elem)],
                 [("y", None, elem)], opset=opset)


def half_pixel_grid(rng, n, h, w, align_corners, out=(6, 10)):
    """A grid [n, *out, 2] uniform in [-1.6, 1.6], its first row (x) and column (y) at
    coordinates k + 0.5 from two pixels before the image to two past it, exact in float32
    (the sizes make the spacing a power of two)."""
    grid = rng.uniform(-1.6, 1.6, (n, *out, 2)).astype(np.float32)
    for axis, size, cells in ((0, w, grid[:, 0, :, 0]), (1, h, grid[:, :, 0, 1])):
        k = np.arange(-2, -2 + cells.shape[1])
        if align_corners:  # x = (g + 1) / 2 * (size - 1)
            g = (2 * k + 1) / (size - 1) - 1
        else:  # x = ((g + 1) * size - 1) / 2
            g = (2 * k + 2) / size - 1
        cells[:] = g.astype(np.float32)
    return grid


@pytest.mark.parametrize("image", IMAGES)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("align_corners", [0, 1])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_against_onnxruntime(mode, padding_mode, align_corners, target, image, tmp_path):
    rng = np.random.default_rng(7)
    h, w = IMAGES[image][align_corners]
    x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
    assert kernel_path(x.shape, mode) == ("product" if image == "small" and mode != "nearest"
                                          else "gather")
    grid = half_pixel_grid(rng, 2, h, w, align_corners)
    m = grid_model(x.shape, grid.shape, mode=MODES_16[mode], padding_mode=padding_mode,
                   align_corners=align_corners)
    want = run_ort(m, {"x": x, "grid": grid})["y"]
    got, ir = run_lightnet(m, {"x": x, "grid": grid}, tmp_path, target=target)
    assert [op["optype"] for op in ir["ops"] if op["optype"] != "input"] == ["grid_sample"]
    assert got["y"].shape == want.shape
    if mode == "nearest":  # a pixel's value, or 0: exact
        np.testing.assert_array_equal(got["y"], want)
    else:
        np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_opset_20_names(mode, tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 6, 5)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (1, 4, 3, 2)).astype(np.float32)
    m = grid_model(x.shape, grid.shape, opset=20, mode=mode, padding_mode="border")
    want = run_ort(m, {"x": x, "grid": grid})["y"]
    got, _ = run_lightnet(m, {"x": x, "grid": grid}, tmp_path)
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-6)


def test_double(tmp_path):
    """float64 (ONNX Runtime has a double kernel from version 20)."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 2, 5, 6))
    grid = rng.uniform(-1.4, 1.4, (1, 3, 4, 2))
    m = grid_model(x.shape, grid.shape, opset=20, elem=TensorProto.DOUBLE, mode="cubic",
                   padding_mode="reflection")
    want = run_ort(m, {"x": x, "grid": grid})["y"]
    got, _ = run_lightnet(m, {"x": x, "grid": grid}, tmp_path)
    assert got["y"].dtype == np.float64
    np.testing.assert_allclose(got["y"], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
def test_between_dnnl_ops(target, tmp_path):
    """A Conv making X and a Relu reading Y: on dnnl, the grid_sample between them runs
    the cpu kernel on plain tensors (the layout pass reorders around it)."""
    rng = np.random.default_rng(5)
    weight = rng.standard_normal((16, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["f"], pads=[1, 1, 1, 1]),
             helper.make_node("GridSample", ["f", "grid"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    m = model(nodes, [("x", [1, 3, 12, 12]), ("grid", [1, 7, 9, 2])], [("y", None)],
              [init("w", weight)], opset=16)
    x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (1, 7, 9, 2)).astype(np.float32)
    want = run_ort(m, {"x": x, "grid": grid})["y"]
    ir, weights = convert(m)
    save_weights(tmp_path / "w.npz", weights)
    session = Session(ir, target=target, datafile=tmp_path / "w.npz")
    optypes = [op.optype for op in session.ctx.ops]
    assert "grid_sample_cpu" in optypes
    assert ("conv2d_dnnl" in optypes) == (target == "dnnl"), optypes
    got = session.run({"x": x, "grid": grid})
    np.testing.assert_allclose(got["y"], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("align_corners", [0, 1])
@pytest.mark.parametrize("padding_mode", ["zeros", "reflection"])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_nan_grid_value_reads_as_minus_one(mode, padding_mode, align_corners, tmp_path):
    """A NaN grid value (an exporter's one-step linspace) reads as -1, as ONNX Runtime's."""
    x = np.arange(1, 13, dtype=np.float32).reshape(1, 1, 3, 4)
    grid = np.array([[[[np.nan, 0.2], [-1, 0.2], [0.5, np.nan], [0.5, -1],
                       [np.nan, np.nan]]]], np.float32)
    m = grid_model(x.shape, grid.shape, mode=MODES_16[mode], padding_mode=padding_mode,
                   align_corners=align_corners)
    want = run_ort(m, {"x": x, "grid": grid})["y"]
    got, _ = run_lightnet(m, {"x": x, "grid": grid}, tmp_path)
    assert np.isfinite(want).all()
    np.testing.assert_allclose(got["y"], want, rtol=1e-6)


def naive_grid_sample(x, grid, mode, padding_mode, align_corners):
    """ONNX GridSample by its definition, one output cell at a time (float64)."""
    n_, c_, h, w = x.shape
    out = np.zeros((n_, c_, *grid.shape[1:3]))

    def reflect(i, lo, hi):  # mirror at lo and hi until inside
        while not lo <= i <= hi:
            i = 2 * lo - i if i < lo else 2 * hi - i
        return i

    def pixel(img, r, col):
        if padding_mode == "zeros":
            return img[r, col] if 0 <= r < h and 0 <= col < w else 0.0
        if padding_mode == "border":
            return img[min(max(r, 0), h - 1), min(max(col, 0), w - 1)]
        lo, (hx, hy) = (0, (w - 1, h - 1)) if align_corners else (-0.5, (w - 0.5, h - 0.5))
        if (hx == lo) or (hy == lo):
            return img[0 if hy == lo else int(reflect(r, lo, hy)),
                       0 if hx == lo else int(reflect(col, lo, hx))]
        return img[int(reflect(r, lo, hy)), int(reflect(col, lo, hx))]

    def cubic(t):  # Keys, a = -0.75, weights of the taps at floor - 1 .. floor + 2
        a, d = -0.75, np.abs(t - np.array([-1, 0, 1, 2]))
        return np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                        ((a * d - 5 * a) * d + 8 * a) * d - 4 * a)

    for n in range(n_):
        for i in range(grid.shape[1]):
            for j in range(grid.shape[2]):
                gx, gy = (float(v) for v in grid[n, i, j])
                if align_corners:
                    px, py = (gx + 1) / 2 * (w - 1), (gy + 1) / 2 * (h - 1)
                else:
                    px, py = ((gx + 1) * w - 1) / 2, ((gy + 1) * h - 1) / 2
                for ch in range(c_):
                    img = x[n, ch]
                    if mode == "nearest":
                        out[n, ch, i, j] = pixel(img, round(py), round(px))  # half to even
                        continue
                    x0, y0 = math.floor(px), math.floor(py)
                    if mode == "linear":
                        taps, wx, wy = (0, 1), (x0 + 1 - px, px - x0), (y0 + 1 - py, py - y0)
                    else:
                        taps, wx, wy = (-1, 0, 1, 2), cubic(px - x0), cubic(py - y0)
                    out[n, ch, i, j] = sum(wy[a] * wx[b] * pixel(img, y0 + ta, x0 + tb)
                                           for a, ta in enumerate(taps)
                                           for b, tb in enumerate(taps))
    return out


@pytest.mark.parametrize("path", ["product", "gather"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_kernel_against_per_pixel_loop(mode, padding_mode, align_corners, path):
    rng = np.random.default_rng(11)
    h, w = {"product": (2, 4) if mode == "nearest" else (3, 5), "gather": (17, 33)}[path]
    assert kernel_path((2, 2, h, w), mode) == path
    x = rng.standard_normal((2, 2, h, w))
    grid = half_pixel_grid(rng, 2, h, w, align_corners, out=(5, 7)).astype(np.float64)
    grid[1, 2, :, 0] = np.linspace(-4.5, 4.5, 7)  # reflected more than once
    dst = np.full((2, 2, 5, 7), np.nan)
    kernels.grid_sample(x, grid, dst, mode=mode, padding_mode=padding_mode,
                        align_corners=align_corners)
    np.testing.assert_allclose(dst, naive_grid_sample(x, grid, mode, padding_mode,
                                                      align_corners), rtol=1e-12, atol=1e-12)


def test_kernel_one_pixel_wide_reflection():
    """align_corners 1 on a 1-pixel axis: every reflection reads that pixel."""
    x = np.arange(4.0).reshape(1, 1, 4, 1)
    grid = np.array([[[[-3.0, -1.0], [0.3, 1.0], [7.0, 0.0]]]])
    dst = np.empty((1, 1, 1, 3))
    kernels.grid_sample(x, grid, dst, mode="linear", padding_mode="reflection",
                        align_corners=True)
    np.testing.assert_allclose(dst, naive_grid_sample(x, grid, "linear", "reflection", True))


@pytest.mark.parametrize("value", [np.inf, np.nan])
def test_kernel_non_finite_source(value):
    """A source pixel of inf or NaN reaches only the points that read it (a small image:
    the product would spread it to every point through the zero weights)."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((1, 2, 4, 8))
    x[0, 1, 2, 5] = value
    assert kernel_path(x.shape, "linear") == "product"
    grid = half_pixel_grid(rng, 1, 4, 8, False, out=(5, 7)).astype(np.float64)
    dst = np.empty((1, 2, 5, 7))
    kernels.grid_sample(x, grid, dst, padding_mode="zeros")
    want = naive_grid_sample(x, grid, "linear", "zeros", False)
    assert np.isfinite(want[0, 0]).all() and 0 < np.isfinite(want[0, 1]).sum() < 35
    np.testing.assert_allclose(dst, want, rtol=1e-12, atol=1e-12)


def test_kernel_errors():
    x, dst = np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 1, 1))
    with pytest.raises(ValueError, match="unknown grid_sample mode 'area' "
                                         r"\(known: linear, nearest, cubic\)"):
        kernels.grid_sample(x, np.zeros((1, 1, 1, 2)), dst, mode="area")
    with pytest.raises(ValueError, match="unknown grid_sample padding_mode 'wrap'"):
        kernels.grid_sample(x, np.zeros((1, 1, 1, 2)), dst, padding_mode="wrap")
    with pytest.raises(ValueError, match=r"grid_sample of a \[1, 1, 2, 2\] source by a "
                                         r"\[1, 1, 1, 3\] grid \(expected \[N, C, H, W\]"):
        kernels.grid_sample(x, np.zeros((1, 1, 1, 3)), dst)


def refusal(m) -> str:
    with pytest.raises(LightNetError) as e:
        convert(m)
    return str(e.value)


def test_refusals():
    assert ("GridSample (opset 16, GridSample-16): mode 'linear' (GridSample-16 takes "
            "bilinear, nearest, bicubic)") in refusal(
        grid_model((1, 1, 2, 2), (1, 1, 1, 2), mode="linear"))
    assert "mode 'area' (GridSample-20 takes linear, nearest, cubic)" in refusal(
        grid_model((1, 1, 2, 2), (1, 1, 1, 2), opset=20, mode="area"))
    assert ("padding_mode 'wrap' (expected one of zeros, border, reflection)"
            in refusal(grid_model((1, 1, 2, 2), (1, 1, 1, 2), padding_mode="wrap")))
    assert ("a rank-5 X [1, 1, 2, 2, 2] (LightNet samples 4-D images [N, C, H, W] only)"
            in refusal(grid_model((1, 1, 2, 2, 2), (1, 1, 1, 1, 3), opset=20)))
    assert "GridSample input X of dtype TL_INT32 (only float and double)" in refusal(
        grid_model((1, 1, 2, 2), (1, 1, 1, 2), opset=20, elem=TensorProto.INT32))


@pytest.mark.parametrize("grid_shape", [(1, 2, 2, 3), (2, 2, 2, 2)])
def test_refuses_a_grid_not_matching_x(grid_shape):
    """An invalid model (ONNX's shape inference would reject it too): refused by name."""
    m = grid_model((1, 3, 4, 4), grid_shape)
    assert (f"a grid of shape {list(grid_shape)} for X of shape [1, 3, 4, 4] "
            "(expected [1, Ho, Wo, 2])") in refusal(m)
