"""ONNX GridSample of a 4-D source (the `grid_sample` op): every output cell reads `src`
at the point its grid entry names, interpolated (nearest, linear or cubic) from the
source pixels around it, those outside the image padded (zeros, border or reflection).

The arithmetic is ONNX Runtime's (and PyTorch's grid_sample's): a grid value g in
[-1, 1] is the pixel coordinate ((g + 1) * size - 1) / 2 (align_corners 0: -1 and 1
are the outer edges of the edge pixels) or (g + 1) / 2 * (size - 1) (align_corners 1:
their centres), computed in the source's dtype. nearest reads the pixel at the
coordinate rounded half to even; linear the 2 x 2 pixels from floor(x), weighted by
the distances; cubic the 4 x 4 from floor(x) - 1 with Keys' kernel, a = -0.75. The
padding applies to each pixel read, never to the coordinate: zeros reads 0 outside the
image, border the nearest edge pixel, reflection the pixel mirrored at the edges
(across the pixels' outer edges with align_corners 0, their centres with 1) until it
is inside.

A NaN grid value reads as -1, as ONNX Runtime's does (an exporter's linspace of one
step is NaN), and coordinates beyond +-2^24 as at 2^24 (outside every image).

The grid changes with every run, so nothing is tabulated at load: each run turns the
grid into, per axis, the indices and weights of its taps, then gathers every tap of
every sample at once, each tap a row of all its channels (from the source's pixels laid
out channels-last, each sample's with a pixel of zeros appended, which the taps outside
read with zeros padding), and sums them weighted: one gather of whole rows, whatever the
number of samples (RAFT samples its correlation volume as 256 samples of one channel).
Deformable DETR's gather of 4 taps of 32 channels at 9,600 points took 0.87 ms by
channel, 0.20 by rows of channels.

A small image (grid_sample_by_product) is sampled as one product instead:
dst[n] [C, P] = src[n] [C, H * W] @ M[n] [H * W, P], where the interpolation matrix
M[n, (y, x), p] = Y[n, y, p] * X[n, x, p] holds, per axis, the weights of point p's taps
at each pixel (taps outside the image dropped under zeros padding, taps padded onto one
pixel summed): the weights separate by axis, so M is one broadcast product. Deformable
DETR samples maps of 7 x 7 to 1 x 1 at 1,200 points: 1.2-1.3 ms a call by the gather
(its weighted sum alone 0.46 ms), 0.3-0.8 by the product. A source with an infinity or
a NaN is gathered: the product would spread it to every point through the zero weights.

Every array it fills is the op's planned scratch; what the shapes alone give is made once
(grid_sample_workspace).
"""

import numpy as np

from lightnet.archs.cpu.kernels.scratch import carve

__all__ = ["GRID_SAMPLE_MODES", "GRID_SAMPLE_PADDINGS", "grid_sample", "grid_sample_by_product",
           "grid_sample_scratch", "grid_sample_workspace"]

GRID_SAMPLE_MODES = ("linear", "nearest", "cubic")
GRID_SAMPLE_PADDINGS = ("zeros", "border", "reflection")
_TAPS = {"nearest": 1, "linear": 2, "cubic": 4}
_CUBIC_A = -0.75
# Keys' kernel on [0, 1] (near) and [1, 2] (far), highest power first.
_NEAR = (_CUBIC_A + 2, -(_CUBIC_A + 3), 0.0, 1.0)
_FAR = (_CUBIC_A, -5 * _CUBIC_A, 8 * _CUBIC_A, -4 * _CUBIC_A)
# Coordinates are clipped to this before they become indices: every index beyond the
# image reads as at its edge (zeros, border), and reflection's period is exact below it.
_FAR_OUT = float(2 ** 24)
def grid_sample_by_product(src_shape, mode: str) -> bool:
    """Whether grid_sample samples a source of `src_shape` by a product (else a gather).
    Per output cell the product's work is about H * W * (40 + C), the gather's
    30 * K^2 * (12 + C) for K taps per axis (measured on AVX2 with numpy's BLAS on one
    thread, as in a dnnl model: with Deformable DETR's 32 channels the linear product is
    faster to about 90 pixels, with RAFT's one to about 45)."""
    c, pixels = src_shape[1], src_shape[2] * src_shape[3]
    return pixels * (40 + c) <= 30 * _TAPS[mode] ** 2 * (12 + c)


def _check(src_shape, grid_shape, mode: str, padding_mode: str) -> None:
    if mode not in GRID_SAMPLE_MODES:
        raise ValueError(f"unknown grid_sample mode {mode!r} "
                         f"(known: {', '.join(GRID_SAMPLE_MODES)})")
    if padding_mode not in GRID_SAMPLE_PADDINGS:
        raise ValueError(f"unknown grid_sample padding_mode {padding_mode!r} "
                         f"(known: {', '.join(GRID_SAMPLE_PADDINGS)})")
    if (len(src_shape) != 4 or len(grid_shape) != 4 or grid_shape[3] != 2
            or grid_shape[0] != src_shape[0]):
        raise ValueError(f"grid_sample of a {list(src_shape)} source by a "
                         f"{list(grid_shape)} grid (expected [N, C, H, W] and "
                         "[N, Ho, Wo, 2])")


def grid_sample_scratch(src_shape, grid_shape, dtype, *, mode: str,
                        padding_mode: str) -> tuple:
    """Scratch layout (see kernels.scratch) of grid_sample, for K taps per axis and P
    output cells per sample: per axis (x, then y) the coordinates and their floor
    [2, N, P], the taps' indices and whether each is outside the image [2, K, N, P];
    the K x K taps' flat indices and outside flags [N, K, K, P]; the pixels
    channels-last, each sample's with a pixel of zeros after them [N, H * W + 1, C]; the gathered taps [N, K * K, P, C]; the taps' weights per
    axis [2, K, N, P] (but for nearest's gather); and but for nearest a buffer [2, N, P],
    the weights in all [N, K, K, P] and their weighted sum [N, P, C]. A small image
    (grid_sample_by_product) adds where one tap's weights go in an axis's matrix [N, P],
    the weights there [N, P], the axes' matrices [N, W (+ 2K with zeros padding), P] and
    [N, H (+ 2K), P] and their product [N, H, W, P]."""
    _check(src_shape, grid_shape, mode, padding_mode)
    n, c, h, w = src_shape
    k, p = _TAPS[mode], grid_shape[1] * grid_shape[2]
    layout = [("coord", (2, n, p), dtype), ("base", (2, n, p), dtype),
              ("index", (2, k, n, p), np.intp), ("outside", (2, k, n, p), np.bool_),
              ("flat", (n, k, k, p), np.intp), ("outside2", (n, k, k, p), np.bool_),
              ("pixels", (n, h * w + 1, c), dtype),
              ("gathered", (n, k * k, p, c), dtype)]
    if mode != "nearest" or grid_sample_by_product(src_shape, mode):
        layout.append(("weight", (2, k, n, p), dtype))
    if mode != "nearest":
        layout += [("tmp", (2, n, p), dtype), ("weight2", (n, k, k, p), dtype),
                   ("summed", (n, p, c), dtype)]
    if grid_sample_by_product(src_shape, mode):
        rows = 2 * k if padding_mode == "zeros" else 0  # K before the image, K after
        layout += [("position", (n, p), np.intp), ("taken", (n, p), dtype), ("axis_x", (n, w + rows, p), dtype),
                   ("axis_y", (n, h + rows, p), dtype), ("matrix", (n, h, w, p), dtype)]
    return tuple(layout)


def grid_sample_workspace(src_shape, grid_shape, dtype, *, mode: str, padding_mode: str,
                          scratch=None) -> dict:
    """Arrays for `grid_sample`: its scratch (carved from `scratch`, new when None) and,
    made once (every run reads them), the image's sizes (x, then y) [2, 1, 1], where
    each sample's pixels start in the channels-last copy [N, 1, 1, 1] and, for a small
    image, where each point's weights of pixel 0 go in each axis's matrix [2 x [N, P]]."""
    ws = carve(scratch, grid_sample_scratch(src_shape, grid_shape, dtype, mode=mode,
                                            padding_mode=padding_mode))
    n, _, h, w = src_shape
    p = grid_shape[1] * grid_shape[2]
    ws["sizes"] = np.array([w, h], dtype).reshape(2, 1, 1)
    ws["starts"] = (np.arange(n) * (h * w + 1)).reshape(n, 1, 1, 1)
    if grid_sample_by_product(src_shape, mode):
        before = _TAPS[mode] if padding_mode == "zeros" else 0  # rows before pixel 0
        ws["offsets"] = [np.arange(n)[:, None] * ((size + 2 * before) * p)
                         + np.arange(before * p, (before + 1) * p) for size in (w, h)]
    return ws


def _denormalize(g, size, align_corners: bool, out) -> None:
    """out = the pixel coordinate of normalized grid values `g` on an axis of `size`
    pixels (sizes broadcast along g), in ONNX Runtime's order."""
    np.add(g, 1, out=out)
    if align_corners:
        np.multiply(out, 0.5, out=out)
        np.multiply(out, size - 1, out=out)
    else:
        np.multiply(out, size, out=out)
        np.subtract(out, 1, out=out)
        np.multiply(out, 0.5, out=out)


def _polynomial(d, coefficients, out) -> None:
    """out = the polynomial of `coefficients` (highest power first) at d, by Horner."""
    out.fill(coefficients[0])
    for a in coefficients[1:]:
        np.multiply(out, d, out=out)
        np.add(out, a, out=out)


def _axis_weights(coord, base, mode: str, weight, tmp) -> None:
    """weight[k] = the weight of tap k (from floor(x), less 1 for cubic) at coordinates
    `coord` (x) of floor `base`, as ONNX Runtime computes it; `tmp` a buffer like coord."""
    if mode == "linear":
        np.add(base, 1, out=weight[0])
        np.subtract(weight[0], coord, out=weight[0])  # (floor(x) + 1) - x
        np.subtract(coord, base, out=weight[1])  # x - floor(x)
        return
    for k, (shift, coefficients) in enumerate(((1, _FAR), (0, _NEAR), (-1, _NEAR),
                                               (-2, _FAR))):
        np.subtract(coord, base, out=tmp)  # the tap's distance from x, |x - floor(x) + shift|
        np.add(tmp, shift, out=tmp)
        np.abs(tmp, out=tmp)
        _polynomial(tmp, coefficients, weight[k])


def _pad(index, size: int, padding_mode: str, align_corners: bool, outside) -> None:
    """Indices of taps `index` (any integers) made ones inside [0, size) by the padding;
    with zeros, `outside` marks those that were not (they read 0), else it is scratch."""
    if padding_mode == "zeros":
        np.greater_equal(index.view(np.uintp), size, out=outside)  # negatives wrap: huge
        np.clip(index, 0, size - 1, out=index)
    elif padding_mode == "border":
        np.clip(index, 0, size - 1, out=index)
    elif align_corners and size == 1:
        index.fill(0)
    else:  # reflection: mirrored with period 2 * size (edges) or 2 * (size - 1) (centres)
        last = size - 1 if align_corners else size
        period = 2 * last
        np.mod(index, period, out=index)
        np.greater(index, size - 1, out=outside)
        np.subtract(period - (0 if align_corners else 1), index, out=index, where=outside)


def grid_sample(src: np.ndarray, grid: np.ndarray, dst: np.ndarray, *, mode: str = "linear",
                padding_mode: str = "zeros", align_corners: bool = False,
                ws: dict | None = None) -> None:
    """dst [N, C, Ho, Wo] = src [N, C, H, W] sampled at grid [N, Ho, Wo, 2] (x, y in
    [-1, 1]); `ws` grid_sample_workspace's arrays, new when None."""
    if ws is None:
        ws = grid_sample_workspace(src.shape, grid.shape, dst.dtype, mode=mode,
                                   padding_mode=padding_mode)
    n, c, h, w = src.shape
    taps, p = _TAPS[mode], grid.shape[1] * grid.shape[2]
    by_product = grid_sample_by_product(src.shape, mode) and bool(np.isfinite(src).all())
    # Both axes at once (x, then y): coordinates, their floor, the taps' weights and indices.
    coord, base, index, outside = ws["coord"], ws["base"], ws["index"], ws["outside"]
    sizes = ws["sizes"]
    _denormalize(grid.reshape(n, p, 2).transpose(2, 0, 1), sizes, align_corners, coord)
    nan = outside[:, 0]
    np.isnan(coord, out=nan)
    np.copyto(coord, -0.5 if not align_corners else 0, where=nan)
    np.clip(coord, -_FAR_OUT, _FAR_OUT, out=coord)
    if mode == "nearest":
        np.rint(coord, out=base)  # half to even
        if by_product:
            ws["weight"].fill(1)
    else:
        np.floor(coord, out=base)
        _axis_weights(coord, base, mode, ws["weight"].transpose(1, 0, 2, 3), ws["tmp"])
    first = -1 if mode == "cubic" else 0
    if by_product and padding_mode == "zeros":  # see _sample_by_product
        np.clip(base, -taps - first, sizes - first, out=base)
    for k in range(taps):
        np.add(base, first + k, out=index[:, k], casting="unsafe")
    if by_product:
        _sample_by_product(src, dst, padding_mode, align_corners, ws)
        return
    for axis, size in enumerate((w, h)):
        _pad(index[axis], size, padding_mode, align_corners, outside[axis])
    flat, outside2 = ws["flat"], ws["outside2"]
    taps_n = (1, 0, 2)  # [K, N, P] -> [N, K, P]
    np.multiply(index[1].transpose(taps_n)[:, :, None], w, out=flat)
    np.add(flat, index[0].transpose(taps_n)[:, None], out=flat)
    if padding_mode == "zeros":  # a tap outside reads pixel h * w, a 0 beyond the image
        np.logical_or(outside[1].transpose(taps_n)[:, :, None],
                      outside[0].transpose(taps_n)[:, None], out=outside2)
        np.copyto(flat, h * w, where=outside2)
    if mode != "nearest":
        weight = ws["weight"]
        np.multiply(weight[1].transpose(taps_n)[:, :, None], weight[0].transpose(taps_n)[:, None],
                    out=ws["weight2"])
    np.add(flat, ws["starts"], out=flat)  # sample i's pixels start at i * (h * w + 1)
    pixels, gathered = ws["pixels"], ws["gathered"]
    pixels[:, h * w] = 0  # the pixel every tap outside reads with zeros
    np.copyto(pixels[:, :h * w], src.reshape(n, c, h * w).transpose(0, 2, 1))
    np.take(pixels.reshape(-1, c), flat.reshape(-1), axis=0, out=gathered.reshape(-1, c),
            mode="clip")
    out = dst.reshape(n, c, p)
    if mode == "nearest":
        np.copyto(out, gathered.reshape(n, p, c).transpose(0, 2, 1))
        return
    # (one pass: a product broadcast along C and then a sum took twice as long)
    np.einsum("ntpc,ntp->npc", gathered, ws["weight2"].reshape(n, taps * taps, p),
              out=ws["summed"])
    np.copyto(out, ws["summed"].transpose(0, 2, 1))


def _sample_by_product(src, dst, padding_mode: str, align_corners: bool, ws) -> None:
    """dst [N, C, P] = src [N, C, H * W] @ the interpolation matrix [N, H * W, P] of the
    taps at ws["index"] [2, K, N, P] (x, y; unpadded) weighted by ws["weight"]. With
    zeros padding a tap outside the image reads nothing: each axis's matrix has K rows
    before the image's and K after, where those taps land (their floor was clipped so
    that they do), and only the image's rows are read."""
    n, c, h, w = src.shape
    index, weight = ws["index"], ws["weight"]
    position, taken = ws["position"], ws["taken"]
    taps, p = index.shape[1], index.shape[3]
    zeros = padding_mode == "zeros"
    for axis, (size, matrix, offset) in enumerate(zip((w, h), (ws["axis_x"], ws["axis_y"]),
                                                      ws["offsets"])):
        if not zeros:
            _pad(index[axis], size, padding_mode, align_corners, ws["outside"][axis])
        matrix.fill(0)
        entries = matrix.reshape(-1)
        for k in range(taps):
            np.multiply(index[axis, k], p, out=position)
            np.add(position, offset, out=position)
            if zeros:  # the taps of a point meet only outside the image
                entries[position] = weight[axis, k]
            else:  # padded, they may meet on a pixel: add
                np.take(entries, position, out=taken)
                np.add(taken, weight[axis, k], out=taken)
                entries[position] = taken
    image = slice(taps, -taps) if zeros else slice(None)
    matrix = ws["matrix"]
    np.multiply(ws["axis_y"][:, image, None], ws["axis_x"][:, None, image], out=matrix)
    out = dst.reshape(n, c, p)
    if h * w == 1:  # numpy's matmul of an inner size of 1 is its slow loop
        np.multiply(src.reshape(n, c, 1), matrix.reshape(n, 1, p), out=out)
    else:
        np.matmul(src.reshape(n, c, h * w), matrix.reshape(n, h * w, p), out=out)
