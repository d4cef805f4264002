"""Detection-head decoders: SqueezeDet box transform and YOLOv3 feature decoding.

Both follow TensorLight's CUDA kernels (tl_tensor_transform_bboxSQD_cuda and
tl_tensor_detect_yolov3_cuda), the only implementations TensorLight has.
"""

import numpy as np

from lightnet.archs.cpu.kernels.elementwise import sigmoid

__all__ = [
    "detect_yolov3",
    "transform_bboxSQD",
]


def transform_bboxSQD(
    src_delta: np.ndarray,
    src_anchor: np.ndarray,
    dst: np.ndarray,
    *,
    width: int,
    height: int,
    img_width: int,
    img_height: int,
    x_shift: int,
    y_shift: int,
) -> None:
    """Turn SqueezeDet box deltas into clipped corner boxes in image pixels.

    src_delta [N, H, W, A, 4] holds (dx, dy, dw, dh); src_anchor [H, W, A, 4]
    (or [N, H, W, A, 4]) holds anchors (cx, cy, w, h) in the `width` x `height`
    network input; dst [N, H, W, A, 4] gets (xmin, ymin, xmax, ymax) for an
    `img_width` x `img_height` image. With sx = img_width / width and
    sy = img_height / height, per TensorLight:

        cx = (a_cx + dx * a_w) * sx + x_shift
        cy = (a_cy + dy * a_h) * sy + y_shift
        w  = a_w * (dw < 1 ? exp(dw) : dw * e) * sx
        h  = a_h * (dh < 1 ? exp(dh) : dh * e) * sy
        xmin, xmax = cx -/+ w / 2, clipped to [0, img_width - 1]
        ymin, ymax = cy -/+ h / 2, clipped to [0, img_height - 1]

    The piecewise growth factor is computed as exp(min(d, 1)) * max(d, 1),
    which is the same function. Everything is built in dst's channels, so no
    temporaries are allocated.
    """
    sx = img_width / width
    sy = img_height / height
    dx, dy, dw, dh = (src_delta[..., k] for k in range(4))
    acx, acy, aw, ah = (src_anchor[..., k] for k in range(4))
    x0, y0, x1, y1 = (dst[..., k] for k in range(4))
    # x1 <- w and y1 <- h, with x0 as scratch for the max(d, 1) factor.
    for size, d, a, scale in ((x1, dw, aw, sx), (y1, dh, ah, sy)):
        np.minimum(d, 1, out=size)
        np.exp(size, out=size)
        np.maximum(d, 1, out=x0)
        np.multiply(size, x0, out=size)
        np.multiply(size, a, out=size)
        np.multiply(size, scale, out=size)
    # x0 <- cx and y0 <- cy.
    for center, d, a_center, a_size, scale, shift in (
        (x0, dx, acx, aw, sx, x_shift),
        (y0, dy, acy, ah, sy, y_shift),
    ):
        np.multiply(d, a_size, out=center)
        np.add(center, a_center, out=center)
        np.multiply(center, scale, out=center)
        np.add(center, shift, out=center)
    # (center, size) -> (center - size/2, center + size/2), then clip.
    for lo, hi, limit in ((x0, x1, img_width - 1), (y0, y1, img_height - 1)):
        np.multiply(hi, 0.5, out=hi)
        np.subtract(lo, hi, out=lo)
        np.multiply(hi, 2, out=hi)
        np.add(hi, lo, out=hi)
        np.clip(lo, 0, limit, out=lo)
        np.clip(hi, 0, limit, out=hi)


def detect_yolov3(
    feature: np.ndarray,
    anchors: np.ndarray,
    box_centers: np.ndarray,
    box_sizes: np.ndarray,
    boxes: np.ndarray,
    confs: np.ndarray,
    probs: np.ndarray,
    *,
    img_width: int,
    img_height: int,
) -> None:
    """Decode a YOLOv3 head feature map into boxes, confidences and class probs.

    feature [N, A*(5+C), H, W] is read as [N, A, 5+C, H, W] with channels
    (tx, ty, tw, th, conf, class_0 .. class_C-1); anchors [A, 2] are (w, h) in
    image pixels. Shapes as in detect_yolov3_shapes. Per TensorLight:

        box_centers[:, a, 0, y, x] = (sigmoid(tx) + x) * img_width / W
        box_centers[:, a, 1, y, x] = (sigmoid(ty) + y) * img_height / H
        box_sizes[:, a, 0/1]        = anchors[a, 0/1] * clip(exp(tw/th), 1e-9, 50)
        boxes[:, a, 0:2]            = box_centers - box_sizes / 2   (xmin, ymin)
        boxes[:, a, 2:4]            = box_centers + box_sizes / 2   (xmax, ymax)
        confs[:, a, 0]              = sigmoid(conf)
        probs[:, a, c]              = sigmoid(class_c)
    """
    n, a, _, h, w = box_centers.shape
    f = feature.reshape(n, a, -1, h, w)
    sigmoid(f[:, :, 0:2], box_centers)
    np.add(box_centers[:, :, 0], np.arange(w, dtype=box_centers.dtype), out=box_centers[:, :, 0])
    np.multiply(box_centers[:, :, 0], img_width / w, out=box_centers[:, :, 0])
    np.add(
        box_centers[:, :, 1],
        np.arange(h, dtype=box_centers.dtype)[:, None],
        out=box_centers[:, :, 1],
    )
    np.multiply(box_centers[:, :, 1], img_height / h, out=box_centers[:, :, 1])
    with np.errstate(over="ignore"):
        np.exp(f[:, :, 2:4], out=box_sizes)
    np.clip(box_sizes, 1e-9, 50, out=box_sizes)
    np.multiply(box_sizes, anchors.reshape(1, a, 2, 1, 1), out=box_sizes)
    sigmoid(f[:, :, 4:5], confs)
    sigmoid(f[:, :, 5:], probs)
    half = boxes[:, :, 2:4]
    np.multiply(box_sizes, 0.5, out=half)
    np.subtract(box_centers, half, out=boxes[:, :, 0:2])
    np.add(box_centers, half, out=half)
