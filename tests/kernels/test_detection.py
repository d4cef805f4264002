import math

import numpy as np
import pytest

from lightnet.archs.cpu.kernels.detection import detect_yolov3, transform_bboxSQD
from lightnet.ir.shapes import detect_yolov3_shapes, transform_bboxSQD_shape
from tests.helpers import arena_view, assert_guards

RTOL, ATOL = 1e-5, 1e-6
E = 2.718281828  # TensorLight's constant


def naive_bboxSQD(delta, anchor, width, height, img_width, img_height, x_shift, y_shift):
    """tl_tensor_transform_bboxSQD_cuda's per-box formulas, one box at a time."""
    x_scale = img_width / width
    y_scale = img_height / height
    out = np.zeros(delta.shape)
    n = delta.shape[0]
    boxes_per_batch = math.prod(delta.shape[1:4])
    d_flat = delta.reshape(n, boxes_per_batch, 4)
    a_flat = anchor.reshape(-1, boxes_per_batch, 4)
    o_flat = out.reshape(n, boxes_per_batch, 4)
    for b in range(n):
        for i in range(boxes_per_batch):
            d = [float(v) for v in d_flat[b, i]]
            a = [float(v) for v in a_flat[b % a_flat.shape[0], i]]
            cx = (a[0] + d[0] * a[2]) * x_scale + x_shift
            cy = (a[1] + d[1] * a[3]) * y_scale + y_shift
            w = a[2] * (math.exp(d[2]) if d[2] < 1 else d[2] * E) * x_scale
            h = a[3] * (math.exp(d[3]) if d[3] < 1 else d[3] * E) * y_scale
            o_flat[b, i, 0] = min(max(cx - w * 0.5, 0), img_width - 1)
            o_flat[b, i, 1] = min(max(cy - h * 0.5, 0), img_height - 1)
            o_flat[b, i, 2] = max(min(cx + w * 0.5, img_width - 1), 0)
            o_flat[b, i, 3] = max(min(cy + h * 0.5, img_height - 1), 0)
    return out


def make_sqd_inputs(rng, n, h, w, a, width, height):
    delta = rng.uniform(-2.0, 2.5, (n, h, w, a, 4)).astype(np.float32)
    anchor = np.empty((h, w, a, 4), np.float32)
    anchor[..., 0] = rng.uniform(0, width, (h, w, a))
    anchor[..., 1] = rng.uniform(0, height, (h, w, a))
    anchor[..., 2] = rng.uniform(5, 120, (h, w, a))
    anchor[..., 3] = rng.uniform(5, 120, (h, w, a))
    return delta, anchor


@pytest.mark.parametrize("n, full_anchor", [(1, False), (1, True), (2, False)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_transform_bboxSQD_against_loop(n, full_anchor, dtype):
    rng = np.random.default_rng(n * 2 + full_anchor)
    width, height, img_width, img_height = 1248, 384, 1242, 375
    delta, anchor = make_sqd_inputs(rng, n, 3, 4, 9, width, height)
    delta, anchor = delta.astype(dtype), anchor.astype(dtype)
    if full_anchor:
        anchor = np.broadcast_to(anchor, delta.shape).copy()
    shape = transform_bboxSQD_shape(delta.shape, anchor.shape)
    assert shape == delta.shape
    arena, dst = arena_view(shape, dtype=dtype)
    params = dict(
        width=width, height=height, img_width=img_width, img_height=img_height, x_shift=2, y_shift=3
    )
    assert transform_bboxSQD(delta, anchor, dst, **params) is None
    expected = naive_bboxSQD(delta, anchor, **params)
    # float32 centers reach ~1e3 pixels, so a corner near 0 carries ~1e-4 of cancellation error
    atol = ATOL if dtype == np.float64 else 1e-3
    np.testing.assert_allclose(dst, expected, rtol=RTOL, atol=atol)
    assert_guards(arena)
    # both growth branches and both clipping sides were exercised
    assert (delta[..., 2:] < 1).any() and (delta[..., 2:] >= 1).any()
    assert (dst[..., 0] == 0).any() and (dst[..., 2] == img_width - 1).any()


def test_transform_bboxSQD_hand():
    # one box: anchor centered at (50, 40), 20 x 10; image twice the net size
    delta = np.array([0.5, -1.0, 0.0, 1.0], np.float32).reshape(1, 1, 1, 1, 4)
    anchor = np.array([50, 40, 20, 10], np.float32).reshape(1, 1, 1, 4)
    dst = np.empty((1, 1, 1, 1, 4), np.float32)
    transform_bboxSQD(
        delta,
        anchor,
        dst,
        width=100,
        height=100,
        img_width=200,
        img_height=200,
        x_shift=1,
        y_shift=0,
    )
    cx = (50 + 0.5 * 20) * 2 + 1  # 121
    cy = (40 - 1.0 * 10) * 2  # 60
    w = 20 * math.exp(0.0) * 2  # 40
    h = 10 * (1.0 * E) * 2  # 54.36...
    np.testing.assert_allclose(
        dst.ravel(), [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], rtol=RTOL, atol=1e-4
    )


def naive_yolov3_batch(feature, anchors, img_width, img_height):
    """tl_tensor_detect_yolov3_cuda's thread loop, transcribed on flat indices (N = 1)."""
    _, channels, grid_h, grid_w = feature.shape
    anchor_num = anchors.shape[0]
    class_num = channels // anchor_num - 5
    hw = grid_h * grid_w
    feat = feature.ravel()
    anc = anchors.ravel()
    feature_len = feat.size
    box_centers = np.zeros(anchor_num * 2 * hw)
    box_sizes = np.zeros(anchor_num * 2 * hw)
    boxes = np.zeros(anchor_num * 4 * hw)
    confs = np.zeros(anchor_num * hw)
    probs = np.zeros(anchor_num * class_num * hw)
    anchor_volumn = feature_len // anchor_num
    for ti in range(feature_len):
        ai = ti % anchor_volumn
        a = ti // anchor_volumn
        exp_f = math.exp(float(feat[ti]))
        sigmoided = 1 / (1 + 1 / exp_f)
        if ai < hw * 2:
            if ai < hw:
                center = (sigmoided + ai % grid_w) * (img_width / grid_w)
            else:
                center = (sigmoided + (ai - hw) // grid_w) * (img_height / grid_h)
            box_centers[ai + a * hw * 2] = center
        if hw * 2 <= ai < hw * 4:
            k = 0 if ai < hw * 3 else 1
            box_sizes[ai - hw * 2 + a * hw * 2] = anc[a * 2 + k] * max(min(exp_f, 50), 1e-9)
        if hw * 4 <= ai < hw * 5:
            confs[ai - hw * 4 + a * hw] = sigmoided
        if ai >= hw * 5:
            probs[ai - hw * 5 + a * hw * class_num] = sigmoided
    for ti in range(anchor_num * hw * 2):
        outer_index = ti // (hw * 2) * hw * 4
        inner_index = ti % (hw * 2)
        boxes[outer_index + inner_index] = box_centers[ti] - box_sizes[ti] / 2
        boxes[outer_index + hw * 2 + inner_index] = box_centers[ti] + box_sizes[ti] / 2
    shape = (1, anchor_num, -1, grid_h, grid_w)
    return {
        "box_centers": box_centers.reshape(shape),
        "box_sizes": box_sizes.reshape(shape),
        "boxes": boxes.reshape(shape),
        "confs": confs.reshape(shape),
        "probs": probs.reshape(shape),
    }


NAMES = ("box_centers", "box_sizes", "boxes", "confs", "probs")


@pytest.mark.parametrize("n, classes, grid_h, grid_w", [(1, 4, 3, 5), (1, 1, 2, 2), (2, 3, 4, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_detect_yolov3_against_loop(n, classes, grid_h, grid_w, dtype):
    rng = np.random.default_rng(n * 100 + classes * 10 + grid_h)
    anchors = np.array([[10, 13], [16, 30], [33, 23]], dtype)
    a = anchors.shape[0]
    feature = rng.uniform(-4, 4, (n, a * (5 + classes), grid_h, grid_w)).astype(dtype)
    feature[0, 2, 0, 0] = 10.0  # exp clamps to 50
    feature[0, 3, 0, 0] = -30.0  # exp clamps to 1e-9
    shapes = detect_yolov3_shapes(feature.shape, anchors.shape)
    assert shapes["probs"] == (n, a, classes, grid_h, grid_w)
    arenas, outs = {}, {}
    for name in NAMES:
        arenas[name], outs[name] = arena_view(shapes[name], dtype=dtype)
    result = detect_yolov3(
        feature, anchors, *(outs[name] for name in NAMES), img_width=416, img_height=320
    )
    assert result is None
    # float32 box corners are differences of values up to ~400, hence ~1e-5 cancellation error
    atol = ATOL if dtype == np.float64 else 1e-4
    for b in range(n):
        expected = naive_yolov3_batch(feature[b : b + 1], anchors, 416, 320)
        for name in NAMES:
            np.testing.assert_allclose(
                outs[name][b : b + 1], expected[name], rtol=RTOL, atol=atol, err_msg=name
            )
    for name in NAMES:
        assert (arenas[name][:8] == -777).all() and (arenas[name][-8:] == -777).all()


def test_detect_yolov3_hand():
    # 1 anchor, 1 class, 1 x 2 grid; all logits 0 -> sigmoid 0.5, exp 1
    feature = np.zeros((1, 6, 1, 2), np.float32)
    anchors = np.array([[8.0, 4.0]], np.float32)
    shapes = detect_yolov3_shapes(feature.shape, anchors.shape)
    outs = [np.empty(shapes[name], np.float32) for name in NAMES]
    detect_yolov3(feature, anchors, *outs, img_width=100, img_height=50)
    centers, sizes, boxes, confs, probs = outs
    # x = (0.5 + col) * 100 / 2, y = (0.5 + row) * 50 / 1
    np.testing.assert_allclose(centers[0, 0, 0, 0], [25, 75])
    np.testing.assert_allclose(centers[0, 0, 1, 0], [25, 25])
    np.testing.assert_allclose(sizes[0, 0, :, 0], [[8, 8], [4, 4]])
    np.testing.assert_allclose(boxes[0, 0, :, 0], [[21, 71], [23, 23], [29, 79], [27, 27]])
    np.testing.assert_allclose(confs, 0.5)
    np.testing.assert_allclose(probs, 0.5)

