"""Convolution kernels: conv2d (NCHW, and NCDHW: 3-D) and transposed conv2d (NCHW).

Both kernels are GEMM based. conv2d gathers input windows into an im2col scratch
buffer and multiplies the weights into the destination; deconv2d multiplies the
weights into a col buffer and scatter-adds it back (col2im). Groups become a
batch axis of one `np.matmul`, so no Python loop runs over groups (for depthwise
convs this batched GEMM measured about twice as fast as per-tap multiply-adds).

Scratch memory comes from `conv2d_workspace` / `deconv2d_workspace` /
`depthwise_conv2d_workspace`, which the runtime calls once at load time with the
shapes of the array arguments (src, weight, dst) and the same keyword params as
the kernel. Every buffer is carved from the op's planned scratch
(`conv2d_scratch`, `deconv2d_scratch`, `depthwise_conv2d_scratch`; see
kernels.scratch), which every op shares, so they stay in cache from one op to
the next and the memory plan (and its limit) counts them.
"""

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from lightnet.archs.cpu.kernels.fused import activate, activate_scratch
from lightnet.archs.cpu.kernels.pad import place_in_border
from lightnet.archs.cpu.kernels.scratch import carve

__all__ = [
    "conv2d_scratch",
    "conv2d_workspace",
    "conv2d",
    "deconv2d_scratch",
    "deconv2d_workspace",
    "deconv2d",
    "depthwise_conv2d_scratch",
    "depthwise_conv2d_workspace",
    "depthwise_conv2d",
]

def _view(a: np.ndarray, shape) -> np.ndarray:
    """Reshape without copying, so that writes through the result land in `a`."""
    return np.reshape(a, shape, copy=False)


def _is_pointwise(weight_shape, stride, padding) -> bool:
    return (all(k == 1 for k in weight_shape[2:]) and all(s == 1 for s in stride)
            and not any(padding))


# An im2col buffer larger than twice this is filled and multiplied a band of
# output rows at a time, each band about this size: as fast on big layers
# (ResNet-50's 64 x 56 x 56 3x3 conv 1.92 -> 1.90 ms in 4 bands, VGG's 32 x 112 x
# 112 3.64 -> 3.45 ms) and its scratch a quarter or less (ResNet-50's arena 1.19 ->
# 1.0x the lower bound). Smaller buffers stay whole: bands slowed 28 x 28 layers.
# A 3-D convolution's bands are rows of one output depth slice at a time.
_IM2COL_BAND_BYTES = 2 << 20


def _band_rows(src_shape, weight_shape, dst_shape, dtype) -> int | None:
    """Output rows (of the next-to-last output axis) per im2col band; None when the
    whole output's buffer is small enough to fill at once."""
    row = src_shape[1] * math.prod(weight_shape[2:]) * dst_shape[-1] * np.dtype(dtype).itemsize
    if src_shape[0] * math.prod(dst_shape[2:-1]) * row <= 2 * _IM2COL_BAND_BYTES:
        return None
    return max(1, min(dst_shape[-2], _IM2COL_BAND_BYTES // row))


def conv2d_scratch(src_shape, weight_shape, dst_shape, *, stride, padding, dtype,
                   activation="none") -> tuple:
    """Scratch layout of `conv2d` (2-D or 3-D; see kernels.scratch): the im2col
    buffer [N, C, *kernel, *output], or that of a band of output rows [1, C, *kernel,
    1, .., rows, OW] (`_band_rows`), and, when padding is non-zero, the input with
    its zero border; neither for 1x1 stride-1 unpadded convs. Then `activation`'s
    (fused.activate_scratch)."""
    layout = ()
    if not _is_pointwise(weight_shape, stride, padding):
        out = tuple(dst_shape[2:])
        rows = _band_rows(src_shape, weight_shape, dst_shape, dtype)
        if rows is None:
            cols = (src_shape[0], src_shape[1]) + tuple(weight_shape[2:]) + out
        else:
            cols = (1, src_shape[1]) + tuple(weight_shape[2:]) + (1,) * (len(out) - 2) + (
                rows, out[-1])
        layout = (("cols", cols, dtype),)
        if any(padding):
            k = len(out)
            padded = tuple(d + b + e for d, b, e in zip(src_shape[2:], padding[:k], padding[k:]))
            layout += (("padded", tuple(src_shape[:2]) + padded, dtype),)
    return layout + activate_scratch(dst_shape, activation, dtype)


def conv2d_workspace(src_shape, weight_shape, dst_shape, *, group, stride, padding, dilation,
                     dtype=np.float32, scratch=None, activation="none") -> dict:
    """Arrays for `conv2d` (and `act`, the fused activation's), carved from
    `scratch` (new when None): see conv2d_scratch."""
    return carve(scratch, conv2d_scratch(src_shape, weight_shape, dst_shape, stride=stride,
                                         padding=padding, dtype=dtype, activation=activation))


def conv2d(src, weight, bias, dst, *, group, stride, padding, dilation, ws=None) -> None:
    """Convolution (ONNX Conv) of NCHW or NCDHW `src`: dst[N, O, *out] = src (*)
    weight[O, C/group, *kernel] + bias, over the 2 or 3 spatial axes.

    Cross-correlation as in every DL framework. `bias` may be None; `padding` is the
    spatial axes' zero padding, their begins then their ends ((top, left, bottom,
    right) in 2-D); `ws` comes from `conv2d_workspace`.
    """
    if ws is None:
        ws = conv2d_workspace(src.shape, weight.shape, dst.shape, group=group, stride=stride,
                              padding=padding, dilation=dilation, dtype=dst.dtype)
    n, c = src.shape[:2]
    o, cg = weight.shape[:2]
    kernel, out = tuple(weight.shape[2:]), tuple(dst.shape[2:])
    k, taps, cells = len(out), math.prod(weight.shape[2:]), math.prod(dst.shape[2:])
    og = o // group
    weight = np.asarray(weight, dtype=dst.dtype)

    if _is_pointwise(weight.shape, stride, padding):
        x = np.asarray(src, dtype=dst.dtype)
        np.matmul(weight.reshape(group, og, cg), x.reshape(n, group, cg, cells),
                  out=_view(dst, (n, group, og, cells)))
    else:
        x = src
        if any(padding):
            x = ws["padded"]
            place_in_border(x, src, padding[:k], 0)
        # windows[n, c, *tap, *cell]: src[n, c, cell * stride + tap * dilation] (padded)
        windows = as_strided(
            x, (n, c) + kernel + out,
            x.strides[:2] + tuple(d * t for d, t in zip(dilation, x.strides[2:]))
            + tuple(s * t for s, t in zip(stride, x.strides[2:])), writeable=False)
        cols = ws["cols"]
        w = weight.reshape(group, og, cg * taps)
        if cols.shape[0] == n and cols.shape[2 + k:] == out:  # the whole output at once
            np.copyto(cols, windows)
            np.matmul(w, _view(cols, (n, group, cg * taps, cells)),
                      out=_view(dst, (n, group, og, cells)))
        else:  # a band of output rows at a time (see _IM2COL_BAND_BYTES)
            rows, ow = cols.shape[-2:]
            oh = out[-2]
            every = (slice(None),) * (2 + k)  # the channels and taps of `windows`
            for b in range(n):
                image = _view(dst[b], (group, og) + out)
                for outer in np.ndindex(*out[:-2]):  # each output depth slice in 3-D
                    for y0 in range(0, oh, rows):
                        r = min(rows, oh - y0)
                        at = outer + (slice(y0, y0 + r),)
                        # the buffer's first r rows' worth, contiguous (the last band is
                        # shorter)
                        band = _view(cols.reshape(-1)[:c * taps * r * ow],
                                     (c,) + kernel + (r, ow))
                        np.copyto(band, windows[(b,) + every[1:] + at])
                        np.matmul(w, _view(band, (group, cg * taps, r * ow)),
                                  out=_view(image[every[:2] + at], (group, og, r * ow)))
    if bias is not None:
        np.add(dst, np.reshape(bias, (1, o) + (1,) * k), out=dst)


def _deconv_geometry(src_shape, weight_shape, dst_shape, stride, padding, dilation):
    """Rows/cols of the col2im accumulator: it spans the natural (uncropped) output and
    the dst window, so negative pads and output_padding need no special case. Returns
    (accumulator hw, tap origin in it, dst origin in it, whether dst itself can serve)."""
    origin, crop, acc_hw = [], [], []
    for n, k, s, d, b, out in zip(src_shape[2:], weight_shape[2:], stride, dilation,
                                  padding[:2], dst_shape[2:]):
        natural = s * (n - 1) + (k - 1) * d + 1
        lo, hi = min(0, b), max(natural, b + out)
        origin.append(-lo)
        crop.append(b - lo)
        acc_hw.append(hi - lo)
    direct = tuple(acc_hw) == tuple(dst_shape[2:]) and not any(crop)
    return tuple(acc_hw), tuple(origin), tuple(crop), direct


def deconv2d_scratch(src_shape, weight_shape, dst_shape, *, group, stride, padding,
                     dilation, dtype) -> tuple:
    """Scratch layout of `deconv2d` (see kernels.scratch): the GEMM result cols
    [N, O, kh, kw, H, W] and, unless dst can be accumulated into directly, an
    uncropped accumulator [N, O, AH, AW]."""
    n, _, h, w = src_shape
    _, og, kh, kw = weight_shape
    o = og * group
    acc_hw, _, _, direct = _deconv_geometry(src_shape, weight_shape, dst_shape, stride, padding, dilation)
    layout = (("cols", (n, o, kh, kw, h, w), dtype),)
    if not direct:
        layout += (("acc", (n, o) + acc_hw, dtype),)
    return layout


def deconv2d_workspace(src_shape, weight_shape, dst_shape, *, group, stride, padding,
                       output_padding, dilation, dtype=np.float32, scratch=None) -> dict:
    """Arrays for `deconv2d`, carved from `scratch` (new when None): see deconv2d_scratch."""
    return carve(scratch, deconv2d_scratch(src_shape, weight_shape, dst_shape, group=group,
                                           stride=stride, padding=padding, dilation=dilation,
                                           dtype=dtype))


def deconv2d(src, weight, bias, dst, *, group, stride, padding, output_padding, dilation, ws=None) -> None:
    """Transposed 2-D convolution (ONNX ConvTranspose, NCHW), weight [C, O/group, kh, kw].

    cols = weight^T @ src per group, then each kernel tap is scatter-added at
    stride spacing (col2im) and the result cropped by `padding` (top, left, bottom,
    right; negative values extend the output). `output_padding` only enters through
    dst's shape: the extra bottom/right cells receive no contribution but the bias.
    """
    if ws is None:
        ws = deconv2d_workspace(src.shape, weight.shape, dst.shape, group=group, stride=stride,
                                padding=padding, output_padding=output_padding,
                                dilation=dilation, dtype=dst.dtype)
    n, c, h, w = src.shape
    _, og, kh, kw = weight.shape
    cg = c // group
    o = og * group
    oh, ow = dst.shape[2:]
    sy, sx = stride
    dy, dx = dilation
    weight = np.asarray(weight, dtype=dst.dtype)
    _, (ay, ax), (cy, cx), direct = _deconv_geometry(src.shape, weight.shape, dst.shape,
                                                     stride, padding, dilation)

    cols = ws["cols"]
    w_t = weight.reshape(group, cg, og * kh * kw).transpose(0, 2, 1)
    x = np.asarray(src, dtype=dst.dtype)
    np.matmul(w_t, x.reshape(n, group, cg, h * w), out=_view(cols, (n, group, og * kh * kw, h * w)))

    acc = dst if direct else ws["acc"]
    acc.fill(0)
    for i in range(kh):
        y0 = ay + i * dy
        for j in range(kw):
            x0 = ax + j * dx
            target = acc[:, :, y0:y0 + sy * (h - 1) + 1:sy, x0:x0 + sx * (w - 1) + 1:sx]
            np.add(target, cols[:, :, i, j], out=target)
    if not direct:
        np.copyto(dst, acc[:, :, cy:cy + oh, cx:cx + ow])
    if bias is not None:
        np.add(dst, np.reshape(bias, (1, o, 1, 1)), out=dst)


def _tap_span(n_out, n_in, stride, offset):
    """Output cells [lo, hi) along one axis whose source cell o * stride + offset lies
    inside the input [0, n_in); lo == hi when none does."""
    lo = min(-(offset // stride) if offset < 0 else 0, n_out)
    hi = min(n_out, (n_in - 1 - offset) // stride + 1) if offset < n_in else 0
    return lo, max(lo, hi)


def _depthwise_plan(src_shape, weight_shape, dst_shape, stride, padding, dilation):
    """Where each kernel tap (i, j) reads: output (y, x) reads src[y * sy + oy, x * sx + ox]
    with (oy, ox) = (i * dy - top, j * dx - left), a cell inside src only for outputs in
    the rectangle rows[i][1:] x cols[j][1:] ([y0, y1) x [x0, x1)); elsewhere the tap is 0.

    `taps` is set when every phase of the input (rows p::sy, columns q::sx) fits the
    output grid [OH, OW] (stride 1 with an output at least the input's size, stride 2
    with the usual padding): tap (i, j) reads phase (oy mod sy, ox mod sx) at (y + oy //
    sy, x + ox // sx), so with each phase copied into an [OH, OW] grid, output cell
    p = (c * OH + y) * OW + x reads cell p + (oy // sy) * OW + ox // sx of its phase's
    flattened grid: every tap of a whole chunk of channels is one contiguous run.
    `taps` lists (phase, shift) per tap; the phases' grids (of a chunk of channels)
    lie one after the other between two `margin`s. With one phase (stride 1) the
    kh * kw runs are also one strided view (`steps`). Cells outside a tap's rectangle
    read a neighbouring row, channel or phase, or a margin, and are zeroed after the
    copy: only they read grid cells no input cell was copied to, so neither those
    nor the margins need clearing."""
    h, w = src_shape[2:]
    kh, kw = weight_shape[2:]
    oh, ow = dst_shape[2:]
    (sy, sx), (dy, dx) = stride, dilation
    top, left = padding[0], padding[1]
    rows = [(i * dy - top,) + _tap_span(oh, h, sy, i * dy - top) for i in range(kh)]
    cols = [(j * dx - left,) + _tap_span(ow, w, sx, j * dx - left) for j in range(kw)]
    plan = {"rows": rows, "cols": cols, "taps": None, "margin": None,
            "steps": (dy * ow, dx), "phases": sy * sx}
    if -(-h // sy) <= oh and -(-w // sx) <= ow:  # phase (0, 0) is the largest
        taps = [((oy % sy) * sx + ox % sx, (oy // sy) * ow + ox // sx)
                for oy, _, _ in rows for ox, _, _ in cols]
        shifts = [shift for _, shift in taps]
        plan["taps"] = taps
        plan["margin"] = max(0, -min(shifts), max(shifts))
    return plan


# Channels are processed this many bytes of taps at a time, so that the matrix-vector
# products read them from cache. Measured on MobileNet v2: 1-2 MB chunks were slower
# (their extra numpy calls cost more than the cache saves: up to 2x on 112x112 layers,
# 8 % on the whole model), 8 MB the same as 4 MB with twice the buffer.
_DEPTHWISE_CHUNK_BYTES = 4 << 20


def depthwise_conv2d_scratch(src_shape, weight_shape, dst_shape, *, stride, padding, dilation,
                             dtype, activation="none") -> tuple:
    """Scratch layout of `depthwise_conv2d` (see kernels.scratch): the taps of one
    chunk of channels, tap-major [kh*kw + 1, chunk, OH*OW] (the last row all ones,
    it multiplies the bias), the per-channel weights with the bias appended [C, 1,
    kh*kw + 1] and, when `_depthwise_plan` reads taps as runs, the same chunk's
    input phases, flattened, between margins. Then `activation`'s
    (fused.activate_scratch)."""
    n, c = src_shape[:2]
    oh, ow = dst_shape[2:]
    k = weight_shape[2] * weight_shape[3] + 1
    chunk = max(1, min(c, _DEPTHWISE_CHUNK_BYTES // (k * oh * ow * np.dtype(dtype).itemsize)))
    layout = [("taps", (k, chunk, oh * ow), dtype), ("weights", (c, 1, k), dtype)]
    plan = _depthwise_plan(src_shape, weight_shape, dst_shape, stride, padding, dilation)
    if plan["taps"] is not None:
        layout.append(("phases", (plan["phases"] * chunk * oh * ow + 2 * plan["margin"],),
                       dtype))
    return tuple(layout) + activate_scratch(dst_shape, activation, dtype)


def depthwise_conv2d_workspace(src_shape, weight_shape, dst_shape, *, stride, padding, dilation,
                               dtype=np.float32, scratch=None, activation="none") -> dict:
    """Arrays for `depthwise_conv2d`: its plan, and its scratch carved from `scratch`
    (new when None): see depthwise_conv2d_scratch."""
    ws = carve(scratch, depthwise_conv2d_scratch(src_shape, weight_shape, dst_shape,
                                                 stride=stride, padding=padding,
                                                 dilation=dilation, dtype=dtype,
                                                 activation=activation))
    ws["plan"] = _depthwise_plan(src_shape, weight_shape, dst_shape, stride, padding, dilation)
    return ws


def _zero_outside(grid, plan):
    """Zero the cells of each tap outside its rectangle: grid is the taps as
    [kh, kw, chunk, OH, OW]; one call per kernel row or column that has any."""
    oh, ow = grid.shape[3:]
    for i, (_, y0, y1) in enumerate(plan["rows"]):
        if y0 > 0:
            grid[i, :, :, :y0] = 0
        if y1 < oh:
            grid[i, :, :, y1:] = 0
    for j, (_, x0, x1) in enumerate(plan["cols"]):
        if x0 > 0:
            grid[:, j, :, :, :x0] = 0
        if x1 < ow:
            grid[:, j, :, :, x1:] = 0


def _fill_phases(buffer, src, plan, stride, out_hw):
    """Copy the phases of src [m, H, W] (a chunk of channels; rows p::sy, columns
    q::sx) into their [m, OH, OW] grids in `buffer`, after the first margin (see
    `_depthwise_plan`)."""
    m, h, w = src.shape
    (sy, sx), (oh, ow) = stride, out_hw
    margin, size = plan["margin"], (buffer.size - 2 * plan["margin"]) // plan["phases"]
    if (sy, sx) == (1, 1) and (h, w) == (oh, ow):  # the grid is src itself
        np.copyto(buffer[margin:margin + m * h * w], np.reshape(src, -1))
        return
    for p in range(sy):
        for q in range(sx):
            start = margin + (p * sx + q) * size
            phase = src[:, p::sy, q::sx]
            grid = _view(buffer[start:start + m * oh * ow], (m, oh, ow))
            np.copyto(grid[:, :phase.shape[1], :phase.shape[2]], phase)


def _gather_runs(buffer, taps, plan, out_hw):
    """Taps of a chunk of channels from its phases in `buffer` (see `_depthwise_plan`):
    a contiguous run per tap, all of them one strided copy when there is one phase;
    cells outside a tap's rectangle are zeroed afterwards."""
    kh, kw = len(plan["rows"]), len(plan["cols"])
    m, length = taps.shape[1:]
    grid = _view(taps[:-1], (kh * kw, m * length))
    margin = plan["margin"]
    if plan["phases"] == 1:
        item = buffer.itemsize
        runs = as_strided(buffer[margin + plan["taps"][0][1]:], (kh, kw, m * length),
                          (plan["steps"][0] * item, plan["steps"][1] * item, item),
                          writeable=False)
        np.copyto(_view(grid, (kh, kw, m * length)), runs)
    else:
        size = (buffer.size - 2 * margin) // plan["phases"]
        for t, (phase, shift) in enumerate(plan["taps"]):
            start = margin + phase * size + shift
            np.copyto(grid[t], buffer[start:start + m * length])
    _zero_outside(_view(taps[:-1], (kh, kw, m) + tuple(out_hw)), plan)


def _gather_strided(src, b, c0, taps, plan, stride, out_hw):
    """Taps of channels c0 .. c0 + chunk of image b in general: each tap's rectangle
    copied from a strided view of src, the cells outside it zeroed."""
    (sy, sx), (oh, ow) = stride, out_hw
    m = taps.shape[1]
    grid = _view(taps[:-1], (len(plan["rows"]), len(plan["cols"]), m, oh, ow))
    for i, (oy, y0, y1) in enumerate(plan["rows"]):
        for j, (ox, x0, x1) in enumerate(plan["cols"]):
            if y0 < y1 and x0 < x1:
                ys, xs = y0 * sy + oy, x0 * sx + ox
                np.copyto(grid[i, j, :, y0:y1, x0:x1],
                          src[b, c0:c0 + m, ys:ys + sy * (y1 - y0 - 1) + 1:sy,
                              xs:xs + sx * (x1 - x0 - 1) + 1:sx])
    _zero_outside(grid, plan)


def depthwise_conv2d(src, weight, bias, dst, *, stride, padding, dilation, ws=None,
                     residual=None, activation="none", negslope=0.0, clip_min=0.0,
                     clip_max=0.0, act_ws=None) -> None:
    """conv2d with one filter per channel (group == C == O, weight [C, 1, kh, kw]), then
    `residual` added and `activation` applied (as `fused.activate`; `act_ws` is its
    scratch, ws["act"] when the workspace was made with the activation).

    A chunk of channels at a time: gather each channel's kh*kw taps into a tap-major
    scratch (see `_depthwise_plan`: when the input's stride phases fit the output
    grid, as with stride 1 or 2 and "same" padding, each tap is one contiguous run of
    a copy of the chunk's phases, and with stride 1 all taps are one strided copy),
    then one matrix-vector product per channel with the weights and the bias (a row
    of ones in the scratch) writes straight into dst, and the residual and activation
    are applied to that part of dst while it is in cache. No padded copy, no
    compaction pass, no whole-tensor epilogue passes.
    """
    if ws is None:
        ws = depthwise_conv2d_workspace(src.shape, weight.shape, dst.shape, stride=stride,
                                        padding=padding, dilation=dilation, dtype=dst.dtype)
    n, c = src.shape[:2]
    k = weight.shape[2] * weight.shape[3]
    oh, ow = dst.shape[2:]
    plan, weights = ws["plan"], ws["weights"]
    np.copyto(weights[:, 0, :k], np.reshape(weight, (c, k)))
    if bias is None:
        weights[:, 0, k] = 0
    else:
        np.copyto(weights[:, 0, k], bias)
    taps = ws["taps"]
    taps[-1] = 1
    chunk = taps.shape[1]
    for b in range(n):
        for c0 in range(0, c, chunk):
            c1 = min(c, c0 + chunk)
            part = taps[:, :c1 - c0]
            if plan["taps"] is not None:
                _fill_phases(ws["phases"], src[b, c0:c1], plan, stride, (oh, ow))
                _gather_runs(ws["phases"], part, plan, (oh, ow))
            else:
                _gather_strided(src, b, c0, part, plan, stride, (oh, ow))
            out = dst[b, c0:c1]
            np.matmul(weights[c0:c1], part.transpose(1, 0, 2),
                      out=_view(out, (c1 - c0, 1, oh * ow)))
            if residual is not None:
                np.add(out, residual[b, c0:c1], out=out)
            activate(out, activation, negslope=negslope, clip_min=clip_min, clip_max=clip_max,
                     ws=act_ws)
