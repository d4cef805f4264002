"""The output-shape helpers of lightnet.ir.shapes against hand-computed shapes and numpy."""

import numpy as np
import pytest

from lightnet.ir.shapes import (
    arange_len,
    autopad_padding,
    broadcast_shape,
    broadcastable,
    conv2d_output_hw,
    deconv2d_autopad_padding,
    deconv2d_output_hw,
    detect_yolov3_shapes,
    matmul_shape,
    pad_output_shape,
    pick1d_shape,
    pool2d_output_hw,
    reduce_axes_shape,
    reduce_shape,
    reshape_dims,
    transform_bboxSQD_shape,
    upsample_shape,
    where_shape,
)


@pytest.mark.parametrize(
    "a, b",
    [((2, 3), (4,)), ((2, 3), (3, 2)), ((5, 1, 3), (1, 4, 2)), ((2,), (3,))],
)
def test_broadcast_shape_failures(a, b):
    with pytest.raises(ValueError, match="do not broadcast"):
        broadcast_shape(a, b)


def test_broadcast_shape_message_names_shapes():
    with pytest.raises(ValueError) as info:
        broadcast_shape((2, 3), (4,))
    assert "[2, 3]" in str(info.value) and "[4]" in str(info.value)
    assert "3" in str(info.value) and "4" in str(info.value)


def test_broadcast_shape_matches_numpy():
    for a, b in [((), ()), ((1,), ()), ((4, 1, 3), (5, 1)), ((1, 1), (7,)), ((2, 0), (1,))]:
        assert broadcast_shape(a, b) == np.broadcast_shapes(a, b)


def test_conv2d_output_hw():
    assert conv2d_output_hw((7, 9), (3, 3), (1, 1), (0, 0, 0, 0), (1, 1)) == (5, 7)
    assert conv2d_output_hw((7, 9), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)) == (4, 5)
    assert conv2d_output_hw((8, 8), (3, 2), (2, 3), (1, 0, 0, 2), (2, 1)) == (3, 3)
    assert conv2d_output_hw((10, 10), (3, 3), (1, 1), (0, 0, 0, 0), (3, 2)) == (4, 6)


@pytest.mark.parametrize(
    "args, expected",
    [
        # in (5, 7), size (4, 2), stride (1, 2): totals 3 (H) and 1 (W)
        (((5, 7), (4, 2), (1, 2), (1, 1), "SAME_UPPER"), (1, 0, 2, 1)),
        (((5, 7), (4, 2), (1, 2), (1, 1), "SAME_LOWER"), (2, 1, 1, 0)),
        (((5, 7), (4, 2), (1, 2), (1, 1), "VALID"), (0, 0, 0, 0)),
        (((5, 7), (4, 2), (1, 2), (1, 1), "NOTSET"), None),
        # dilation: totals 4 and 6
        (((6, 6), (3, 3), (1, 1), (2, 3), "SAME_UPPER"), (2, 3, 2, 3)),
        (((6, 6), (3, 3), (1, 1), (2, 3), "SAME_LOWER"), (2, 3, 2, 3)),
        # stride larger than the kernel: the total would be negative, clamped to 0
        (((6, 5), (1, 1), (4, 2), (1, 1), "SAME_UPPER"), (0, 0, 0, 0)),
        # stride 2, in 8, kernel 3: out 4, total 1
        (((8, 8), (3, 3), (2, 2), (1, 1), "SAME_UPPER"), (0, 0, 1, 1)),
        (((8, 8), (3, 3), (2, 2), (1, 1), "SAME_LOWER"), (1, 1, 0, 0)),
    ],
)
def test_autopad_padding(args, expected):
    assert autopad_padding(*args) == expected


@pytest.mark.parametrize("autopad", ["SAME_UPPER", "SAME_LOWER"])
def test_autopad_same_output_is_ceil(autopad):
    for n in range(1, 12):
        for k in (1, 2, 3, 4):
            for s in (1, 2, 3):
                for d in (1, 2):
                    pads = autopad_padding((n, n), (k, k), (s, s), (d, d), autopad)
                    oh, ow = conv2d_output_hw((n, n), (k, k), (s, s), pads, (d, d))
                    assert oh == ow == -(-n // s)


def test_autopad_rejects_unknown():
    with pytest.raises(ValueError):
        autopad_padding((4, 4), (3, 3), (1, 1), (1, 1), "SAME")


def test_deconv2d_output_hw():
    # ONNX ConvTranspose examples: 3x3 in, 3x3 kernel -> 5x5; strides (3, 2) pads (1, 2, 1, 2) -> 7x3
    assert deconv2d_output_hw((3, 3), (3, 3), (1, 1), (0, 0, 0, 0), (0, 0), (1, 1)) == (5, 5)
    assert deconv2d_output_hw((3, 3), (3, 3), (3, 2), (1, 2, 1, 2), (0, 0), (1, 1)) == (7, 3)
    assert deconv2d_output_hw((3, 3), (3, 3), (3, 2), (0, 0, 0, 0), (1, 1), (1, 1)) == (10, 8)
    assert deconv2d_output_hw((4, 5), (2, 3), (2, 1), (0, 1, 1, 0), (1, 0), (2, 2)) == (9, 8)


@pytest.mark.parametrize(
    "output_dims, output_padding, autopad, expected",
    [
        # in 3, kernel 3, stride 2: natural extent 7
        ((6, 6), (0, 0), "SAME_UPPER", (0, 0, 1, 1)),
        ((6, 6), (0, 0), "NOTSET", (1, 1, 0, 0)),
        ((6, 6), (0, 0), "SAME_LOWER", (1, 1, 0, 0)),
        ((6, 6), (1, 1), "SAME_UPPER", (1, 1, 1, 1)),
        ((5, 4), (0, 0), "SAME_UPPER", (1, 1, 1, 2)),
        ((5, 4), (0, 0), "NOTSET", (1, 2, 1, 1)),
        # output larger than natural: negative pads (total -2 and -1)
        ((9, 8), (0, 0), "SAME_UPPER", (-1, -1, -1, 0)),
        ((9, 8), (0, 0), "NOTSET", (-1, 0, -1, -1)),
        # not given: SAME targets in * stride = 6, VALID zeros, NOTSET keeps explicit pads
        ((), (0, 0), "SAME_UPPER", (0, 0, 1, 1)),
        ((0, 0), (0, 0), "SAME_LOWER", (1, 1, 0, 0)),
        (None, (0, 0), "VALID", (0, 0, 0, 0)),
        ((), (0, 0), "NOTSET", None),
    ],
)
def test_deconv2d_autopad_padding(output_dims, output_padding, autopad, expected):
    pads = deconv2d_autopad_padding((3, 3), (3, 3), (2, 2), output_padding, (1, 1), output_dims, autopad)
    assert pads == expected
    if pads is not None and output_dims and all(output_dims):
        out = deconv2d_output_hw((3, 3), (3, 3), (2, 2), pads, output_padding, (1, 1))
        assert out == tuple(output_dims)


def test_deconv2d_autopad_same_gives_in_times_stride():
    for n in range(1, 7):
        for k in (1, 2, 3, 4):
            for s in (1, 2, 3):
                for op in range(s):
                    for autopad in ("SAME_UPPER", "SAME_LOWER"):
                        pads = deconv2d_autopad_padding((n, n), (k, k), (s, s), (op, op), (1, 1), (), autopad)
                        out = deconv2d_output_hw((n, n), (k, k), (s, s), pads, (op, op), (1, 1))
                        assert out == (n * s, n * s)


def test_pool2d_output_hw():
    assert pool2d_output_hw((5, 5), (2, 2), (2, 2), (0, 0, 0, 0)) == (2, 2)
    assert pool2d_output_hw((5, 5), (2, 2), (2, 2), (0, 0, 0, 0), ceil_mode=True) == (3, 3)
    assert pool2d_output_hw((4, 6), (3, 3), (2, 2), (1, 1, 1, 1)) == (2, 3)
    assert pool2d_output_hw((4, 6), (3, 3), (2, 2), (1, 1, 1, 1), ceil_mode=True) == (3, 4)
    assert pool2d_output_hw((7, 8), (3, 2), (1, 3), (1, 0, 0, 2)) == (6, 3)
    # the last ceil window would start inside the end padding: dropped
    assert pool2d_output_hw((3, 3), (2, 2), (2, 2), (1, 1, 1, 1), ceil_mode=True) == (2, 2)
    assert pool2d_output_hw((3, 3), (2, 2), (2, 2), (1, 1, 1, 1)) == (2, 2)


def test_reduce_shape_keeps_axis():
    assert reduce_shape((2, 3, 4, 5), 1) == (2, 1, 4, 5)
    assert reduce_shape([7], 0) == (1,)
    with pytest.raises(ValueError, match="axis 3 is out of range"):
        reduce_shape((2, 3, 4), 3)
    with pytest.raises(ValueError, match="out of range"):
        reduce_shape((2, 3, 4), -1)


def test_matmul_shape_errors():
    with pytest.raises(ValueError, match=r"inner dimensions differ: \[2, 3, 4\] and \[3, 5, 6\]"):
        matmul_shape((2, 3, 4), (3, 5, 6))
    with pytest.raises(ValueError, match="batch dimensions: shapes \\[2\\] and \\[3\\] do not "
                                         "broadcast"):
        matmul_shape((2, 3, 4), (3, 4, 6))
    with pytest.raises(ValueError, match="matrices have 2 or more dimensions"):
        matmul_shape((4,), (4, 6))


@pytest.mark.parametrize(
    "start, stop, step, n",
    [
        (0, 10, 1, 10),
        (0, 10, 3, 4),
        (0, 9, 3, 3),
        (10, 0, -2, 5),
        (10, 0, -3, 4),
        (0, 1, 0.1, 10),
        (1.5, 2.0, 0.25, 2),
        (5, 0, 1, 0),
        (0, 5, -1, 0),
        (3, 3, 1, 0),
        (0, 5, 0, 0),
        (0, float("inf"), 1, 0),
        (0, float("nan"), 1, 0),
    ],
)
def test_arange_len(start, stop, step, n):
    assert arange_len(start, stop, step) == n
    assert isinstance(arange_len(start, stop, step), int)


@pytest.mark.parametrize(
    "src_shape, dims, expected",
    [
        ((2, 3, 4), (6, 4), (6, 4)),
        ((2, 3, 4), (-1, 4), (6, 4)),
        ((2, 3, 4), (2, -1), (2, 12)),
        ((2, 3, 4), (4, -1, 3), (4, 2, 3)),
        ((2, 3, 4), (-1,), (24,)),
        ((24,), (1, 1, -1, 1), (1, 1, 24, 1)),
        ((5,), [5], (5,)),
    ],
)
def test_reshape_dims(src_shape, dims, expected):
    got = reshape_dims(src_shape, dims)
    assert got == expected and isinstance(got, tuple)


@pytest.mark.parametrize(
    "src_shape, dims, message",
    [
        ((2, 3, 4), (5, 5), r"24 elements.*\(25 elements\)"),
        ((2, 3, 4), (-1, 5), "not a multiple of 5"),
        ((2, 3, 4), (-1, -1), "more than one -1"),
        ((2, 3, 4), (0, 24), "invalid entry 0"),
        ((2, 3, 4), (-2, -12), "invalid entry -2"),
    ],
)
def test_reshape_dims_mismatch(src_shape, dims, message):
    with pytest.raises(ValueError, match=message):
        reshape_dims(src_shape, dims)


def test_pick1d_shape():
    assert pick1d_shape(5, 4) == (20,)


def test_pad_output_shape():
    assert pad_output_shape((2, 3), [1, 0, 2, 4]) == (5, 7)
    assert pad_output_shape((1, 3, 4, 4), [0, 0, 1, 2, 0, 0, 3, 4]) == (1, 3, 8, 10)
    assert pad_output_shape((5, 6), [-1, 2, 0, -3]) == (4, 5)
    with pytest.raises(ValueError):
        pad_output_shape((2, 3), [1, 1])


def test_upsample_shape():
    assert upsample_shape((1, 3, 4, 5), (1, 1, 2, 2)) == (1, 3, 8, 10)
    assert upsample_shape((3, 5), (1.5, 0.5)) == (4, 2)
    with pytest.raises(ValueError, match="one scale per dimension"):
        upsample_shape((1, 3, 4, 5), (2, 2))
    with pytest.raises(ValueError, match="must all be > 0"):
        upsample_shape((4, 5), (2, 0))


def test_transform_bboxSQD_shape_errors():
    with pytest.raises(ValueError, match=r"delta must be \[N, H, W, A, 4\]"):
        transform_bboxSQD_shape((1, 3, 4, 9, 5), (3, 4, 9, 5))
    with pytest.raises(ValueError, match="anchor must be"):
        transform_bboxSQD_shape((1, 3, 4, 9, 4), (3, 4, 8, 4))


def test_detect_yolov3_shapes_and_errors():
    shapes = detect_yolov3_shapes((1, 255, 13, 13), (3, 2))
    assert shapes == {
        "box_centers": (1, 3, 2, 13, 13),
        "box_sizes": (1, 3, 2, 13, 13),
        "boxes": (1, 3, 4, 13, 13),
        "confs": (1, 3, 1, 13, 13),
        "probs": (1, 3, 80, 13, 13),
    }
    with pytest.raises(ValueError, match="not 3 anchors x"):
        detect_yolov3_shapes((1, 100, 13, 13), (3, 2))
    with pytest.raises(ValueError, match="not 3 anchors x"):
        detect_yolov3_shapes((1, 12, 13, 13), (3, 2))
    with pytest.raises(ValueError, match=r"anchors must be \[A, 2\]"):
        detect_yolov3_shapes((1, 255, 13, 13), (3, 3))
    with pytest.raises(ValueError, match=r"feature must be"):
        detect_yolov3_shapes((255, 13, 13), (3, 2))


def test_reduce_shapes_and_errors():
    assert reduce_axes_shape((2, 3, 4), (1,), True) == (2, 1, 4)
    assert reduce_axes_shape((2, 3, 4), (0, 2), False) == (3,)
    assert reduce_axes_shape((2, 3), (0, 1), False) == (1,)
    with pytest.raises(ValueError, match="axis 3 is out of range for a 3-D shape"):
        reduce_axes_shape((2, 3, 4), (3,), True)
    with pytest.raises(ValueError, match=r"axes \[1, 1\] name an axis twice"):
        reduce_axes_shape((2, 3, 4), (1, 1), True)


def test_broadcastable_and_where_shape():
    assert broadcastable((2, 3), (1, 3), (4, 1, 1))
    assert not broadcastable((2, 3), (3,), (4, 1, 2))
    assert where_shape((2, 1, 3), (4, 1), (1,)) == (2, 4, 3)
