"""Resize and Upsample, mapped to LightNet's upsample (by scales) or resize (to dims),
whichever computes exactly what ONNX's coordinate rules prescribe, else (Resize from
version 11: cubic, antialiasing, tf_crop_and_resize, any coordinate rule) to interpolate."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..dispatch import handler
from ..errors import Unsupported
from ..folding import normalize_axes
from ..graph import FLOAT_TL, Node, Val

if TYPE_CHECKING:
    from ..converter import Converter


def _onnx_resample_1d(x, n_out, scale, mode, ctm, nearest_mode):
    """ONNX Resize along one axis of 1-D `x` (float64), by the spec's formulas."""
    n_in = len(x)
    i = np.arange(n_out, dtype=np.float64)
    if ctm == "half_pixel":
        xo = (i + 0.5) / scale - 0.5
    elif ctm == "half_pixel_symmetric":
        adjustment = n_out / (scale * n_in)
        xo = n_in / 2 * (1 - adjustment) + (i + 0.5) / scale - 0.5
    elif ctm == "pytorch_half_pixel":
        xo = (i + 0.5) / scale - 0.5 if n_out > 1 else np.zeros(n_out)
    elif ctm == "align_corners":
        xo = i * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    elif ctm == "asymmetric":
        xo = i / scale
    elif ctm == "tf_half_pixel_for_nn":
        xo = (i + 0.5) / scale
    else:
        raise Unsupported(f"coordinate_transformation_mode {ctm}")
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            idx = np.ceil(xo - 0.5)
        elif nearest_mode == "round_prefer_ceil":
            idx = np.floor(xo + 0.5)
        elif nearest_mode == "floor":
            idx = np.floor(xo)
        elif nearest_mode == "ceil":
            idx = np.ceil(xo)
        elif nearest_mode == "simple":  # Upsample and Resize-10 (ONNX Runtime)
            idx = np.ceil(xo) if scale < 1 else np.trunc(xo)
        else:
            raise Unsupported(f"nearest_mode {nearest_mode}")
        return x[np.clip(idx, 0, n_in - 1).astype(np.intp)]
    xo = np.clip(xo, 0, n_in - 1)
    i0 = np.floor(xo).astype(np.intp)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w = xo - i0
    return x[i0] * (1 - w) + x[i1] * w




def _resample(c: Converter, n: Node, x: Val, scales, sizes, mode, ctm, nearest_mode,
              general=None):
    """Map an ONNX resize of `x` to LightNet's upsample (by scales) or resize (to dims),
    whichever computes exactly the same along every axis; else call `general` (which maps
    it to `interpolate`), or without one refuse it."""
    if mode not in ("nearest", "linear"):
        raise Unsupported(f"mode {mode}")
    from lightnet.archs.cpu import kernels

    if sizes is not None:
        out = [int(s) for s in sizes]
        scales = [o / i for o, i in zip(out, x.shape)]
    else:
        scales = [float(s) for s in scales]
        out = [int(math.floor(i * s)) for i, s in zip(x.shape, scales)]
    if len(scales) != x.rank:
        raise Unsupported(f"{len(scales)} scales for a rank-{x.rank} input")
    if any(o < 1 for o in out):
        raise Unsupported(f"empty output {out}")
    if x.dtype not in FLOAT_TL and mode == "linear":
        raise Unsupported(f"linear mode on {x.dtype}")
    tl_mode = "TL_NEAREST" if mode == "nearest" else "TL_LINEAR"
    rows = sum(n_in + n_out for n_in, n_out in zip(x.shape, out) if n_in != n_out)
    if not c.take(rows, n.outputs):  # a row of each axis is resampled below
        raise Unsupported(f"output {out}: comparing its coordinates with LightNet's ops' "
                          f"would touch {rows} elements")  # (explain says the limit ran out)
    # upsample's scales are float32 params: match with the rounded values.
    scales32 = [float(np.float32(s)) for s in scales]
    rng = np.random.default_rng(0)
    ok_up, ok_resize = True, True
    for n_in, n_out, s, s32 in zip(x.shape, out, scales, scales32):
        if n_in == n_out and s == 1:
            continue
        src = rng.random(n_in)
        want = _onnx_resample_1d(src, n_out, s, mode, ctm, nearest_mode)
        got = np.empty(n_out)
        if ok_up and math.floor(n_in * s32) == n_out:
            kernels.upsample(src, got, mode=tl_mode, scales=(s32,))
            ok_up = np.allclose(got, want, rtol=1e-9, atol=1e-12)
        else:
            ok_up = False
        if ok_resize:
            kernels.resize(src, got, mode=tl_mode, dims=(n_out,))
            ok_resize = np.allclose(got, want, rtol=1e-9, atol=1e-12)
    shape = tuple(out)
    if not (ok_up or ok_resize) and general is not None:
        general()
        return
    if not (ok_up or ok_resize):
        detail = f"mode {mode}, coordinate_transformation_mode {ctm}"
        if mode == "nearest":
            detail += f", nearest_mode {nearest_mode}"
        raise Unsupported(f"{detail} with scales {[round(s, 4) for s in scales]} "
                           "(LightNet's upsample / resize compute other coordinates)")
    # Sizes given: resize to them; scales given: upsample by them (either when equal).
    if ok_resize and (sizes is not None or not ok_up):
        c.emit("resize", {"src": x}, {"mode": tl_mode, "dims": list(shape)}, x.dtype, shape,
               out=n.outputs[0], hint=n.name or n.outputs[0])
    else:
        c.emit("upsample", {"src": x}, {"mode": tl_mode, "scales": scales32}, x.dtype, shape,
               out=n.outputs[0], hint=n.name or n.outputs[0])


@handler("Upsample", 7)
def upsample_7(c: Converter, n: Node, *, scales, mode="nearest"):
    _upsample(c, n, c.val(n.input(0)), scales, mode)


@handler("Upsample", 9, 10)
def upsample(c: Converter, n: Node, *, mode="nearest"):
    x = c.val(n.input(0))
    _upsample(c, n, x, c.const(n.input(1), "scales").reshape(-1), mode)


def _upsample(c: Converter, n: Node, x: Val, scales, mode):
    _resample(c, n, x, scales, None, "linear" if mode == "bilinear" else mode, "asymmetric",
              "simple")


@handler("Resize", 10)
def resize_10(c: Converter, n: Node, *, mode="nearest"):
    x = c.val(n.input(0))
    scales = c.const(n.input(1), "scales").reshape(-1)
    _resample(c, n, x, scales, None, mode, "asymmetric", "simple")


@handler("Resize", 11, 13, 18, 19)
def resize(c: Converter, n: Node, *, mode="nearest", coordinate_transformation_mode="half_pixel",
           nearest_mode="round_prefer_floor", antialias=0, axes=None,
           keep_aspect_ratio_policy="stretch", cubic_coeff_a=-0.75, exclude_outside=0,
           extrapolation_value=0.0):
    """Scales and the output shape as ONNX's reference computes them; upsample or resize
    where one computes exactly the same (they have oneDNN variants), else interpolate."""
    x = c.val(n.input(0))
    ctm = coordinate_transformation_mode
    if mode not in ("nearest", "linear", "cubic"):
        raise Unsupported(f"mode {mode}")
    scales = sizes = None
    if n.has_input(3):
        sizes = [int(s) for s in c.const(n.input(3), "sizes").reshape(-1)]
    elif n.has_input(2) and c.const(n.input(2), "scales").size:
        scales = [float(s) for s in c.const(n.input(2), "scales").reshape(-1)]
    else:
        raise Unsupported("neither scales nor sizes")
    sel = list(range(x.rank)) if axes is None else normalize_axes(axes, x.rank)
    given = scales if scales is not None else sizes
    if len(given) != len(sel):
        raise Unsupported(f"{len(given)} {'scales' if scales else 'sizes'} for {len(sel)} axes")
    roi = []
    if ctm == "tf_crop_and_resize":
        if not n.has_input(1):
            raise Unsupported("tf_crop_and_resize without a roi")
        given_roi = [float(v) for v in c.const(n.input(1), "roi").reshape(-1)]
        if len(given_roi) != 2 * len(sel):
            raise Unsupported(f"a roi of {len(given_roi)} values for {len(sel)} axes")
        roi = [0.0] * x.rank + [1.0] * x.rank
        for k, a in enumerate(sel):
            roi[a], roi[x.rank + a] = given_roi[k], given_roi[len(sel) + k]
    full_scales = [1.0] * x.rank
    dims = list(x.shape)
    if scales is not None:
        for k, a in enumerate(sel):
            full_scales[a] = scales[k]
            dims[a] = int(math.floor(x.shape[a] * scales[k]))
    else:
        for k, a in enumerate(sel):
            full_scales[a] = sizes[k] / x.shape[a]
            dims[a] = sizes[k]
        if keep_aspect_ratio_policy not in ("stretch", "not_larger", "not_smaller"):
            raise Unsupported(f"keep_aspect_ratio_policy {keep_aspect_ratio_policy}")
        if keep_aspect_ratio_policy != "stretch":
            ratios = [full_scales[a] for a in sel]
            r = min(ratios) if keep_aspect_ratio_policy == "not_larger" else max(ratios)
            for a in sel:
                full_scales[a] = r
                dims[a] = int(r * x.shape[a] + 0.5)
    if any(d < 1 for d in dims):
        raise Unsupported(f"empty output {dims}")
    if x.dtype not in FLOAT_TL and mode != "nearest":
        raise Unsupported(f"{mode} mode on {x.dtype}")

    def general():
        c.require("interpolate")
        c.emit("interpolate", {"src": x},
               {"dims": dims, "scales": full_scales, "mode": mode, "coordinate_mode": ctm,
                "nearest_mode": nearest_mode, "cubic_coeff_a": float(cubic_coeff_a),
                "exclude_outside": bool(exclude_outside), "antialias": bool(antialias),
                "roi": roi, "extrapolation_value": float(extrapolation_value)},
               x.dtype, tuple(dims), out=n.outputs[0], hint=n.name or n.outputs[0])

    simple = (mode in ("nearest", "linear") and not roi
              and not (antialias and mode != "nearest" and any(s < 1 for s in full_scales))
              and ctm in ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                          "align_corners", "asymmetric", "tf_half_pixel_for_nn")
              and nearest_mode in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
              and all(d == math.floor(i * s) for d, i, s in zip(dims, x.shape, full_scales)))
    if simple:
        by_sizes = sizes is not None and keep_aspect_ratio_policy == "stretch"
        _resample(c, n, x, full_scales, dims if by_sizes else None, mode, ctm, nearest_mode,
                  general)
    else:
        general()
