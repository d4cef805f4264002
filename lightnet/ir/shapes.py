"""Output shapes of ops and the window arithmetic behind them.

What shape an op's output has is part of what the op is, not of one architecture's
kernel: op descriptions (their `tensors_out` shapes, checks and params, as
`shapes.NAME`), the ONNX importer and every architecture read these helpers.
They raise ValueError naming the clash; the op checks turn it into a LightNetError.
"""

from __future__ import annotations

import math


# Broadcasting

def broadcast_shape(a, b) -> tuple:
    """The numpy broadcast of shapes `a` and `b`; ValueError naming the clash if none."""
    a, b = tuple(a), tuple(b)
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        if x != y and x != 1 and y != 1:
            raise ValueError(
                f"shapes {list(a)} and {list(b)} do not broadcast: "
                f"dimension {i - n} is {x} in one and {y} in the other"
            )
        out.append(y if x == 1 else x)
    return tuple(out)


def broadcasts_to(shape, target) -> bool:
    """Whether `shape` broadcasts to `target` unchanged (numpy's rules: aligned at the
    last dim, each dim equal or 1, no more dims than target)."""
    shape, target = tuple(shape), tuple(target)
    return len(shape) <= len(target) and all(
        s in (t, 1) for s, t in zip(shape, target[len(target) - len(shape):]))


def broadcastable(*shapes) -> bool:
    """Whether the shapes broadcast together (numpy's rules: aligned at the last dim,
    each dim equal or 1)."""
    n = max(len(s) for s in shapes)
    padded = [(1,) * (n - len(s)) + tuple(s) for s in shapes]
    return all(len({d for d in dims if d != 1}) <= 1 for dims in zip(*padded))


def where_shape(cond_shape, src1_shape, src2_shape) -> tuple:
    """The broadcast shape of where's three inputs."""
    n = max(len(cond_shape), len(src1_shape), len(src2_shape))
    padded = [(1,) * (n - len(s)) + tuple(s) for s in (cond_shape, src1_shape, src2_shape)]
    return tuple(max(dims) for dims in zip(*padded))


# Convolution and pooling windows

_AUTOPADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def _check_autopad(autopad: str) -> None:
    if autopad not in _AUTOPADS:
        raise ValueError(f"autopad must be one of {_AUTOPADS}, got {autopad!r}")


def _split_total(total: int, autopad: str) -> tuple[int, int]:
    """Split a total padding into (begin, end); the odd pixel goes to the end for SAME_UPPER."""
    small, big = total // 2, total - total // 2
    return (small, big) if autopad == "SAME_UPPER" else (big, small)


def autopad_padding(in_hw, size, stride, dilation, autopad: str):
    """Padding (top, left, bottom, right) implied by an ONNX Conv/Pool `auto_pad` value;
    for k spatial dims, the k begins then the k ends.

    NOTSET returns None (the caller keeps its explicit padding); VALID returns zeros.
    SAME_UPPER / SAME_LOWER aim at out = ceil(in / stride) with total padding
    max(0, (out - 1) * stride + (size - 1) * dilation + 1 - in), the odd pixel going
    to the end (bottom/right) for SAME_UPPER and to the beginning for SAME_LOWER.
    """
    _check_autopad(autopad)
    if autopad == "NOTSET":
        return None
    if autopad == "VALID":
        return (0,) * (2 * len(in_hw))
    begin, end = [], []
    for n, k, s, d in zip(in_hw, size, stride, dilation):
        out = -(-n // s)
        b, e = _split_total(max(0, (out - 1) * s + (k - 1) * d + 1 - n), autopad)
        begin.append(b)
        end.append(e)
    return tuple(begin + end)


def conv2d_output_hw(in_hw, size, stride, padding, dilation) -> tuple[int, ...]:
    """Output (oh, ow) of a convolution (of any number of spatial dims, `padding` their
    begins then their ends: (od, oh, ow) in 3-D): floor((in + pads - dilated_size) /
    stride) + 1."""
    rank = len(in_hw)
    return tuple(
        (n + b + e - ((k - 1) * d + 1)) // s + 1
        for n, k, s, d, b, e in zip(in_hw, size, stride, dilation, padding[:rank],
                                    padding[rank:])
    )


def deconv2d_output_hw(in_hw, size, stride, padding, output_padding, dilation) -> tuple[int, int]:
    """Output (oh, ow) of a transposed convolution (ONNX ConvTranspose with explicit pads):
    stride * (in - 1) + output_padding + (size - 1) * dilation + 1 - pad_begin - pad_end."""
    top, left, bottom, right = padding
    return tuple(
        s * (n - 1) + op + (k - 1) * d + 1 - b - e
        for n, k, s, op, d, b, e in zip(
            in_hw, size, stride, output_padding, dilation, (top, left), (bottom, right)
        )
    )


def deconv2d_autopad_padding(in_hw, size, stride, output_padding, dilation, output_dims, autopad: str):
    """Padding (top, left, bottom, right) of an ONNX ConvTranspose, following the ONNX spec.

    `output_dims` (None, empty, or containing a 0 means "not given") wins over
    `autopad`: total = stride * (in - 1) + output_padding + (size - 1) * dilation + 1
    - output_dim, split as begin = total // 2 for SAME_UPPER and begin = total - total // 2
    for every other autopad value, end = total - begin. Without output_dims, SAME_UPPER /
    SAME_LOWER target output_dim = in * stride with the same split, VALID gives zeros
    and NOTSET returns None (the caller keeps its explicit padding).

    The total is not clamped at zero: a negative total (output_dims larger than the
    natural output) yields negative pads, which `deconv2d` supports (the extra output
    cells receive only the bias). Note ONNX Runtime splits an odd total the other way
    round for SAME_UPPER and clamps at zero; this helper follows the ONNX spec text.
    """
    _check_autopad(autopad)
    given = output_dims is not None and len(output_dims) > 0 and all(output_dims)
    if not given:
        if autopad == "NOTSET":
            return None
        if autopad == "VALID":
            return (0, 0, 0, 0)
        output_dims = [n * s for n, s in zip(in_hw, stride)]
    begin, end = [], []
    for n, k, s, op, d, out in zip(in_hw, size, stride, output_padding, dilation, output_dims):
        b, e = _split_total(s * (n - 1) + op + (k - 1) * d + 1 - out, autopad)
        begin.append(b)
        end.append(e)
    return tuple(begin + end)


def pool2d_output_hw(in_hw, size, stride, padding, *, ceil_mode=False,
                     dilation=(1, 1)) -> tuple[int, ...]:
    """Output (oh, ow) of a pooling (of any number of spatial dims, `padding` their
    begins then their ends): floor (or ceil) of (in + pads - ((size - 1) * dilation +
    1)) / stride, plus 1.

    With ceil_mode a last window that would start inside the end padding is dropped
    (the PyTorch / ONNX Runtime rule), so every window overlaps the input or begin pad.
    """
    rank = len(in_hw)
    out = []
    for n, k, s, b, e, d in zip(in_hw, size, stride, padding[:rank], padding[rank:], dilation):
        span = n + b + e - ((k - 1) * d + 1)
        if ceil_mode:
            o = -(-span // s) + 1
            if (o - 1) * s >= n + b:
                o -= 1
        else:
            o = span // s + 1
        out.append(o)
    return tuple(out)


# Reductions and products

def reduce_shape(shape, axis: int) -> tuple:
    """Shape after reducing `axis` of `shape`, keeping it with size 1.

    TensorLight's tl_tensor_maxreduce (and LightNet's maxreduce op) keeps the
    reduced dim: [N, C, H, W] reduced on axis 1 gives [N, 1, H, W].
    """
    shape = tuple(shape)
    if not 0 <= axis < len(shape):
        raise ValueError(f"axis {axis} is out of range for a {len(shape)}-D shape {list(shape)}")
    return shape[:axis] + (1,) + shape[axis + 1 :]


def reduce_axes_shape(shape, axes, keepdims: bool) -> tuple:
    """Shape after reducing `axes` of `shape`: each kept with size 1 when
    `keepdims`, else dropped (all dropped: [1], a tensor has a dimension)."""
    shape, axes = tuple(shape), tuple(axes)
    bad = [a for a in axes if not 0 <= a < len(shape)]
    if bad:
        raise ValueError(f"axis {bad[0]} is out of range for a {len(shape)}-D shape {list(shape)}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"axes {list(axes)} name an axis twice")
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes) or (1,)


def matmul_shape(a_shape, b_shape, *, transA=False, transB=False) -> tuple:
    """Shape of op(A) @ op(B) for stacks of matrices [..., M, K] @ [..., K, N]: the
    broadcast of the leading (batch) dims, then [M, N]. ValueError naming the
    mismatch when the inner dims differ or the batch dims do not broadcast."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise ValueError(f"matrices have 2 or more dimensions, found shapes {list(a_shape)} "
                         f"and {list(b_shape)}")
    (m, k), (k2, n) = a_shape[-2:][::-1] if transA else a_shape[-2:], (
        b_shape[-2:][::-1] if transB else b_shape[-2:])
    if k != k2:
        raise ValueError(f"inner dimensions differ: {list(a_shape)} and {list(b_shape)} give "
                         f"K = {k} and {k2}")
    try:
        batch = broadcast_shape(a_shape[:-2], b_shape[:-2])
    except ValueError as e:
        raise ValueError(f"batch dimensions: {e}") from None
    return batch + (m, n)


# Reshaping, indexing, padding, resampling

def arange_len(start: float, stop: float, step: float) -> int:
    """Number of elements of arange(start, stop, step): ceil((stop - start) / step).

    That is LightNet's arange length. Never raises: a zero or non-finite step,
    or a range the step walks away from, gives 0.
    """
    try:
        n = math.ceil((stop - start) / step)
    except (ZeroDivisionError, OverflowError, ValueError):
        return 0
    return max(n, 0)


def reshape_dims(src_shape, dims) -> tuple:
    """The shape `dims` asks for, with at most one -1 entry resolved from `src_shape`.

    Other entries must be >= 1 (TensorLight dims are positive). ValueError when
    the element counts cannot match.
    """
    dims = tuple(int(d) for d in dims)
    total = math.prod(src_shape)
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1:
        raise ValueError(f"reshape dims {list(dims)} have more than one -1")
    bad = [d for d in dims if d < 1 and d != -1]
    if bad:
        raise ValueError(f"reshape dims {list(dims)} have invalid entry {bad[0]} (need >= 1 or -1)")
    known = math.prod(d for d in dims if d != -1)
    if unknown:
        if total % known:
            raise ValueError(
                f"cannot reshape {list(src_shape)} ({total} elements) to {list(dims)}: "
                f"{total} is not a multiple of {known}"
            )
        i = unknown[0]
        return dims[:i] + (total // known,) + dims[i + 1 :]
    if known != total:
        raise ValueError(
            f"cannot reshape {list(src_shape)} ({total} elements) to {list(dims)} "
            f"({known} elements)"
        )
    return dims


def pick1d_shape(len: int, stride: int) -> tuple:
    """Shape of pick1d's dst: (len * stride,)."""
    return (len * stride,)


def gather_shape(src_shape, indices_shape, axis: int) -> tuple:
    """Shape of gather's dst: src's with `axis` replaced by the indices' shape."""
    src_shape = tuple(src_shape)
    if not 0 <= axis < len(src_shape):
        raise ValueError(f"axis {axis} is out of range for a {len(src_shape)}-D shape "
                         f"{list(src_shape)}")
    return src_shape[:axis] + tuple(indices_shape) + src_shape[axis + 1:]


def scatter_nd_updates_shape(data_shape, indices_shape) -> tuple:
    """The shape scatter_nd's updates must have: indices' without its last axis, then
    data's after the k axes an index names (k = indices' last dim)."""
    k = indices_shape[-1]
    return tuple(indices_shape[:-1]) + tuple(data_shape[k:])


def split_pads(pads, ndim):
    """ONNX pads [x1_begin, x2_begin, ..., x1_end, ...] as (begins, ends)."""
    pads = [int(p) for p in pads]
    if len(pads) != 2 * ndim:
        raise ValueError(f"pads needs {2 * ndim} values for a {ndim}-D tensor, got {len(pads)}")
    return pads[:ndim], pads[ndim:]


def pad_output_shape(shape, pads) -> tuple[int, ...]:
    """Shape after padding: dim + begin + end for each axis (pads in ONNX order
    [x1_begin, x2_begin, ..., x1_end, x2_end, ...]; negative values crop)."""
    begins, ends = split_pads(pads, len(shape))
    return tuple(d + b + e for d, b, e in zip(shape, begins, ends))


def upsample_shape(shape, scales) -> tuple:
    """Output shape of upsample: floor(dim * scale) per axis (LightNet's upsample op)."""
    shape, scales = tuple(shape), tuple(scales)
    if len(scales) != len(shape):
        raise ValueError(
            f"upsample needs one scale per dimension: shape {list(shape)} has "
            f"{len(shape)} dims, scales {list(scales)} has {len(scales)}"
        )
    if any(s <= 0 for s in scales):
        raise ValueError(f"upsample scales {list(scales)} must all be > 0")
    return tuple(math.floor(d * s) for d, s in zip(shape, scales))


def submean_shape(src_shape) -> tuple:
    """Shape of submean's dst for an [H, W, C] src: (C, H, W)."""
    h, w, c = src_shape
    return (c, h, w)


# Detection

def transform_bboxSQD_shape(delta_shape, anchor_shape) -> tuple:
    """Shape of transform_bboxSQD's dst: the delta shape [N, H, W, A, 4].

    The anchor must be [H, W, A, 4] or the full delta shape (TensorLight asks
    for the same shape as delta, with N = 1).
    """
    delta_shape, anchor_shape = tuple(delta_shape), tuple(anchor_shape)
    if len(delta_shape) != 5 or delta_shape[4] != 4:
        raise ValueError(
            f"transform_bboxSQD delta must be [N, H, W, A, 4], not {list(delta_shape)}"
        )
    if anchor_shape not in (delta_shape, delta_shape[1:]):
        raise ValueError(
            f"transform_bboxSQD anchor must be {list(delta_shape[1:])} or "
            f"{list(delta_shape)} to match delta, not {list(anchor_shape)}"
        )
    return delta_shape


def detect_yolov3_shapes(feature_shape, anchors_shape) -> dict:
    """Output shapes of detect_yolov3, by output name.

    feature [N, A*(5+C), H, W] and anchors [A, 2] give box_centers, box_sizes
    [N, A, 2, H, W], boxes [N, A, 4, H, W], confs [N, A, 1, H, W] and probs
    [N, A, C, H, W] (TensorLight / LightNet fix N = 1; any N works here).
    """
    feature_shape, anchors_shape = tuple(feature_shape), tuple(anchors_shape)
    if len(feature_shape) != 4:
        raise ValueError(
            f"detect_yolov3 feature must be [N, A*(5+C), H, W], not {list(feature_shape)}"
        )
    if len(anchors_shape) != 2 or anchors_shape[1] != 2 or anchors_shape[0] < 1:
        raise ValueError(f"detect_yolov3 anchors must be [A, 2], not {list(anchors_shape)}")
    n, channels, h, w = feature_shape
    a = anchors_shape[0]
    if channels % a or channels // a < 5:
        raise ValueError(
            f"detect_yolov3 feature has {channels} channels, which is not "
            f"{a} anchors x (5 + classes)"
        )
    return {
        "box_centers": (n, a, 2, h, w),
        "box_sizes": (n, a, 2, h, w),
        "boxes": (n, a, 4, h, w),
        "confs": (n, a, 1, h, w),
        "probs": (n, a, channels // a - 5, h, w),
    }
