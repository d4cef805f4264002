"""numpy references of the ops, written from their definitions with loops, in float64.

The kernel tests (tests/kernels) and the op tests through the runtime (tests/ops,
tests/core) hold the kernels to these same definitions:

    np.testing.assert_allclose(got, ref_conv2d(x, w, b, stride=(2, 2)), rtol=1e-5)
"""

from __future__ import annotations

import itertools

import numpy as np


def ref_conv2d(x, w, b, group=1, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1)):
    """Direct definition: every output pixel, one kernel tap at a time. `padding` is
    (top, left, bottom, right)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n_, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sy, sx = stride
    dy, dx = dilation
    top, left, bottom, right = padding
    oh = (h + top + bottom - (dy * (kh - 1) + 1)) // sy + 1
    ow = (wd + left + right - (dx * (kw - 1) + 1)) // sx + 1
    og = o // group
    out = np.zeros((n_, o, oh, ow))
    for n in range(n_):
        for g in range(group):
            for oy in range(oh):
                for ox in range(ow):
                    acc = np.zeros(og)
                    for i in range(kh):
                        for j in range(kw):
                            y = oy * sy - top + i * dy
                            xx = ox * sx - left + j * dx
                            if 0 <= y < h and 0 <= xx < wd:
                                acc += w[g * og:(g + 1) * og, :, i, j] @ \
                                    x[n, g * cg:(g + 1) * cg, y, xx]
                    out[n, g * og:(g + 1) * og, oy, ox] = acc
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def ref_conv3d(x, w, b, group=1, stride=(1, 1, 1), padding=(0,) * 6, dilation=(1, 1, 1)):
    """Direct definition of a 3-D convolution: every output cell, one kernel tap at a
    time. `padding` is (front, top, left, back, bottom, right)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n_, _ = x.shape[:2]
    o, cg = w.shape[:2]
    dims, kernel = x.shape[2:], w.shape[2:]
    out_dims = [(d + p0 + p1 - (dl * (k - 1) + 1)) // s + 1 for d, k, s, dl, p0, p1 in
                zip(dims, kernel, stride, dilation, padding[:3], padding[3:])]
    og = o // group
    out = np.zeros((n_, o, *out_dims))
    for n in range(n_):
        for g in range(group):
            for cell in itertools.product(*map(range, out_dims)):
                acc = np.zeros(og)
                for tap in itertools.product(*map(range, kernel)):
                    at = [c * s - p + t * dl for c, s, p, t, dl in
                          zip(cell, stride, padding[:3], tap, dilation)]
                    if all(0 <= a < d for a, d in zip(at, dims)):
                        acc += w[(slice(g * og, (g + 1) * og), slice(None)) + tap] @ \
                            x[(n, slice(g * cg, (g + 1) * cg)) + tuple(at)]
                out[(n, slice(g * og, (g + 1) * og)) + cell] = acc
    if b is not None:
        out += b.reshape(1, -1, 1, 1, 1)
    return out


def ref_deconv2d(x, w, b, group=1, stride=(1, 1), padding=(0, 0, 0, 0),
                 output_padding=(0, 0), dilation=(1, 1)):
    """Scatter definition: each input pixel adds value * kernel at stride spacing; the
    padding crops the result."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n_, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    sy, sx = stride
    dy, dx = dilation
    top, left, bottom, right = padding
    oh = sy * (h - 1) + output_padding[0] + (kh - 1) * dy + 1 - top - bottom
    ow = sx * (wd - 1) + output_padding[1] + (kw - 1) * dx + 1 - left - right
    cg = c // group
    out = np.zeros((n_, og * group, oh, ow))
    for n in range(n_):
        for ci in range(c):
            g = ci // cg
            for iy in range(h):
                for ix in range(wd):
                    for i in range(kh):
                        for j in range(kw):
                            y = iy * sy + i * dy - top
                            xx = ix * sx + j * dx - left
                            if 0 <= y < oh and 0 <= xx < ow:
                                out[n, g * og:(g + 1) * og, y, xx] += \
                                    x[n, ci, iy, ix] * w[ci, :, i, j]
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def ref_pool(x, kind, size, stride=(1, 1), padding=(0, 0, 0, 0), out_hw=None,
             count_include_pad=False, dilation=(1, 1)):
    """Max or average ("max", "avg") over each window, cell by cell (window cell (i, j)
    at (i * dilation[0], j * dilation[1]) from its corner). Cells outside the input are
    skipped; for the average with count_include_pad they still count if they lie inside
    the explicit padding. `out_hw` is the floor of the window count unless given (ceil
    mode). The max keeps x's dtype (every integer exact)."""
    n_, c_, h, w = x.shape
    top, left, bottom, right = padding
    if out_hw is None:
        out_hw = ((h + top + bottom - (size[0] - 1) * dilation[0] - 1) // stride[0] + 1,
                  (w + left + right - (size[1] - 1) * dilation[1] - 1) // stride[1] + 1)
    out = np.zeros((n_, c_, *out_hw), x.dtype if kind == "max" else np.float64)
    for n in range(n_):
        for c in range(c_):
            for oy in range(out_hw[0]):
                for ox in range(out_hw[1]):
                    values, count = [], 0
                    for i in range(size[0]):
                        for j in range(size[1]):
                            y = oy * stride[0] - top + i * dilation[0]
                            xx = ox * stride[1] - left + j * dilation[1]
                            if 0 <= y < h and 0 <= xx < w:
                                values.append(x[n, c, y, xx])
                                count += 1
                            elif count_include_pad and -top <= y < h + bottom \
                                    and -left <= xx < w + right:
                                count += 1
                    out[n, c, oy, ox] = (max(values) if kind == "max"
                                         else sum(float(v) for v in values) / count)
    return out


def ref_lrn(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    """ONNX LRN: each channel over the sum of squares of the `size` channels around it
    ((size - 1) // 2 before, the rest after, clipped at the ends)."""
    x = x.astype(np.float64)
    c = x.shape[1]
    out = np.empty_like(x)
    for ch in range(c):
        lo = max(0, ch - (size - 1) // 2)
        hi = min(c - 1, ch + size // 2)
        square_sum = (x[:, lo:hi + 1] ** 2).sum(axis=1)
        out[:, ch] = x[:, ch] / (bias + alpha / size * square_sum) ** beta
    return out


def _source_index(i, n, mode):
    """Where padded coordinate i (relative to the first source element) reads from, or
    None (the constant)."""
    if 0 <= i < n:
        return i
    if mode == "constant":
        return None
    if mode == "edge":
        return min(max(i, 0), n - 1)
    if mode == "wrap":
        return i % n
    while not 0 <= i < n:  # reflect about the first and last elements
        i = -i if i < 0 else 2 * (n - 1) - i
    return i


def ref_pad(x, pads, mode="constant", value=0.0):
    """pad: `pads` is every axis's begin, then every axis's end; a negative one crops
    first, then each output element maps back to the source element it reads."""
    nd = x.ndim
    begins, ends = pads[:nd], pads[nd:]
    x = x[tuple(slice(max(0, -b), d - max(0, -e)) for d, b, e in zip(x.shape, begins, ends))]
    begins, ends = [max(0, b) for b in begins], [max(0, e) for e in ends]
    out_shape = [d + b + e for d, b, e in zip(x.shape, begins, ends)]
    out = np.empty(out_shape)
    for idx in np.ndindex(*out_shape):
        src = [_source_index(i - b, n, mode) for i, b, n in zip(idx, begins, x.shape)]
        out[idx] = value if None in src else x[tuple(src)]
    return out
