"""Convolution and pooling: Conv, ConvTranspose, MaxPool, AveragePool, LpPool and the
global pools, 2-D, with 1-D lifted to 2-D (H = 1); Conv, MaxPool and AveragePool 3-D too;
MaxUnpool."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from lightnet.ir.shapes import autopad_padding, pool2d_output_hw

from ..dispatch import handler
from ..errors import Unsupported
from ..graph import Node, Val

if TYPE_CHECKING:
    from ..converter import Converter


def _spatial_params(k: int, kernel, strides, dilations, pads, auto_pad):
    """strides, dilations, pads ([top, left, bottom, right] for 2-D), autopad and kernel
    of a conv / pool node with `k` spatial dims (ONNX defaults filled in)."""
    strides = list(strides or [1] * k)
    dilations = list(dilations or [1] * k)
    pads = list(pads or [0] * (2 * k))
    autopad = auto_pad or "NOTSET"
    if autopad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"auto_pad {autopad}")
    if autopad != "NOTSET":
        pads = [0] * (2 * k)
    if len(strides) != k or len(dilations) != k or len(pads) != 2 * k or len(kernel) != k:
        raise Unsupported("attribute lengths do not match the spatial rank")
    if k == 1:  # lift 1-D to 2-D with H = 1
        return [1] + strides, [1] + dilations, [0, pads[0], 0, pads[1]], autopad, [1] + list(kernel)
    return strides, dilations, pads, autopad, list(kernel)


def _lift(c: Converter, x: Val) -> Val:
    """[N, C, L] -> [N, C, 1, L]."""
    return c.reshape(x, x.shape[:2] + (1,) + x.shape[2:])


@handler("Conv", 1, 11, 22)
def conv(c: Converter, n: Node, *, auto_pad="NOTSET", dilations=None, group=1,
         kernel_shape=None, pads=None, strides=None):
    x = c.val(n.input(0))
    x.require_float("Conv input")
    if x.rank not in (3, 4, 5):
        raise Unsupported(f"{x.rank - 2}-D convolution (only 1-D, 2-D and 3-D)")
    k = x.rank - 2
    w = c.val(n.input(1))
    if w.rank != x.rank:
        raise Unsupported(f"a rank-{w.rank} W for a rank-{x.rank} X (W is [M, C / group, "
                          "*kernel], of X's rank)")
    strides, dilations, pads, autopad, kernel = _spatial_params(
        k, kernel_shape or w.shape[2:], strides, dilations, pads, auto_pad)
    if n.has_input(2):
        b = c.val(n.input(2))
    else:
        b = c.zeros([w.shape[0]], w.dtype, f"{n.outputs[0]}_bias")
    if k == 1:
        x, w = _lift(c, x), _lift(c, w)
    params = {"group": group, "size": kernel, "stride": strides, "dilation": dilations,
              "padding": pads, "autopad": autopad}
    shape = c.out_shape(n)
    optype = "conv3d" if k == 3 else "conv2d"
    if k == 1:
        y = c.emit(optype, {"src": x, "weight": w, "bias": b}, params, x.dtype,
                   shape[:2] + (1,) + shape[2:], hint=n.outputs[0])
        c.reshape(y, shape, out=n.outputs[0])
    else:
        c.emit(optype, {"src": x, "weight": w, "bias": b}, params, x.dtype, shape,
               out=n.outputs[0], hint=n.name or n.outputs[0])


@handler("ConvTranspose", 1, 11, 22)
def conv_transpose(c: Converter, n: Node, *, auto_pad="NOTSET", dilations=None, group=1,
                   kernel_shape=None, output_padding=None, output_shape=None, pads=None,
                   strides=None):
    x = c.val(n.input(0))
    x.require_float("ConvTranspose input")
    if x.rank not in (3, 4):
        raise Unsupported(f"{x.rank - 2}-D transposed convolution (only 1-D and 2-D)")
    k = x.rank - 2
    w = c.val(n.input(1))
    strides, dilations, pads, autopad, kernel = _spatial_params(
        k, kernel_shape or w.shape[2:], strides, dilations, pads, auto_pad)
    output_padding = list(output_padding or [0] * k)
    output_shape = list(output_shape or [])[-k:]
    in_hw = list(x.shape[2:])
    if k == 1:
        output_padding = [0] + output_padding
        output_shape = [1] + output_shape if output_shape else []
        in_hw = [1] + in_hw
    natural = [s * (i - 1) + p + (kk - 1) * d + 1 for i, s, p, kk, d in
               zip(in_hw, strides, output_padding, kernel, dilations)]
    if output_shape:
        # The padding comes from output_shape, cropping the uncropped output as the
        # spec splits it; a larger output_shape extends the end, as output_padding
        # does (ONNX Runtime's behaviour).
        pads = [0] * 4
        output_padding = [p + max(0, o - full)
                          for p, o, full in zip(output_padding, output_shape, natural)]
    elif autopad in ("SAME_UPPER", "SAME_LOWER") and any(
            full < i * s for full, i, s in zip(natural, in_hw, strides)):
        # SAME aims at in * stride by cropping; an axis that is shorter keeps its
        # natural size (the padding clamps at 0, as ONNX inference and Runtime do).
        begin, end = [], []
        for full, i, s in zip(natural, in_hw, strides):
            total = max(0, full - i * s)
            small = total // 2
            begin.append(small if autopad == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        pads, autopad = begin + end, "NOTSET"
    if n.has_input(2):
        b = c.val(n.input(2))
    else:
        b = c.zeros([w.shape[1] * group], w.dtype, f"{n.outputs[0]}_bias")
    if k == 1:
        x, w = _lift(c, x), _lift(c, w)
    params = {"group": group, "size": kernel, "stride": strides, "dilation": dilations,
              "padding": pads, "output_padding": output_padding, "autopad": autopad}
    if output_shape:
        params["output_dims"] = [x.shape[0], w.shape[1] * group] + output_shape
    shape = c.out_shape(n)
    if k == 1:
        y = c.emit("deconv2d", {"src": x, "weight": w, "bias": b}, params, x.dtype,
                   shape[:2] + (1,) + shape[2:], hint=n.outputs[0])
        c.reshape(y, shape, out=n.outputs[0])
    else:
        c.emit("deconv2d", {"src": x, "weight": w, "bias": b}, params, x.dtype, shape,
               out=n.outputs[0], hint=n.name or n.outputs[0])


def _pool(optype2d: str):
    def handle(c: Converter, n: Node, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0,
               count_include_pad=0, dilations=None, pads=None, strides=None, storage_order=0):
        pool(c, n, optype2d, c.val(n.input(0)), c.out_shape(n), kernel_shape=kernel_shape,
             auto_pad=auto_pad, ceil_mode=ceil_mode, count_include_pad=count_include_pad,
             dilations=dilations, pads=pads, strides=strides, storage_order=storage_order)
    return handle


def pooled_shape(x: Val, **attributes) -> tuple[int, ...]:
    """The output shape of an ONNX AveragePool (opset 19) of `x` with `attributes` (for
    an operator ONNX's shape inference does not know)."""
    from onnx import TensorProto, helper, shape_inference

    node = helper.make_node("AveragePool", ["x"], ["y"], **attributes)
    graph = helper.make_graph(
        [node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=True)
    except Exception as e:
        raise Unsupported(f"pooling {list(x.shape)} with {attributes}: {e}") from None
    dims = inferred.graph.output[0].type.tensor_type.shape.dim
    return tuple(d.dim_value for d in dims)


def pool(c: Converter, n: Node, optype2d: str, x: Val, shape, *, kernel_shape,
         auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None, pads=None,
         strides=None, storage_order=0, out: str | None = None) -> Val | None:
    """`optype2d` (maxpool2d, avgpool2d; 3-D pools likewise) of `x` into `shape`: node
    `n`'s output, or, given `out` (a fresh name), that tensor, returned."""
    if x.rank not in (3, 4, 5):
        raise Unsupported(f"{x.rank - 2}-D pooling (only 1-D, 2-D and 3-D)")
    if optype2d == "avgpool2d":
        x.require_float("AveragePool input")
    k = x.rank - 2
    optype = optype2d.replace("2d", "3d") if k == 3 else optype2d
    given_dilations = dilations
    strides, dilations, pads, autopad, kernel = _spatial_params(
        k, kernel_shape, strides, dilations, pads, auto_pad)
    params = {"size": kernel, "stride": strides, "padding": pads, "autopad": autopad}
    if any(d != 1 for d in dilations):
        if not c.has_param(optype, "dilation"):
            raise Unsupported(f"dilations {given_dilations}")
        params["dilation"] = dilations
    if count_include_pad and (any(pads) or autopad in ("SAME_UPPER", "SAME_LOWER")):
        # (Without padding it changes nothing: oneDNN, which refuses it with ceil_mode,
        # then pools EfficientNet's ceil-mode pooler.)
        if c.has_param(optype, "count_include_pad"):
            params["count_include_pad"] = True
        elif any(pads) or autopad in ("SAME_UPPER", "SAME_LOWER"):
            raise Unsupported("count_include_pad 1 with padding")
    if ceil_mode:
        if c.has_param(optype, "ceil_mode"):
            params["ceil_mode"] = True
        else:
            in_hw = x.shape[2:] if k == 2 else (1,) + x.shape[2:]
            padding = autopad_padding(in_hw, kernel, strides, [1, 1], autopad) or pads
            if tuple(pool2d_output_hw(in_hw, kernel, strides, padding)) != tuple(
                    pool2d_output_hw(in_hw, kernel, strides, padding, ceil_mode=True)):
                raise Unsupported("ceil_mode 1 where it changes the output size")
    if out is None and c.used(n, 1):
        if k == 3:
            raise Unsupported("the Indices of a 3-D MaxPool")
        _maxpool_indices(c, n, x, params, bool(storage_order))
    elif k == 1:
        y = c.emit(optype, {"src": _lift(c, x)}, params, x.dtype,
                   shape[:2] + (1,) + shape[2:], hint=n.outputs[0])
        return c.reshape(y, shape, out=out or n.outputs[0])
    else:
        return c.emit(optype, {"src": x}, params, x.dtype, shape, out=out or n.outputs[0],
                      hint=n.name or n.outputs[0])


def _maxpool_indices(c: Converter, n: Node, x: Val, params: dict, storage_order: bool):
    """MaxPool with its Indices output read: one maxpool2d_argmax (1-D through H = 1,
    where the flattened positions are the same); its int32 indices are ONNX's int64."""
    shape = c.out_shape(n)
    if x.rank == 4:
        c.emit_outputs("maxpool2d_argmax", {"src": x},
                       {**params, "storage_order": storage_order},
                       {"dst": (x.dtype, shape, n.outputs[0]),
                        "indices": ("TL_INT32", shape, n.outputs[1])},
                       hint=n.name or n.outputs[0])
        return
    lifted = shape[:2] + (1,) + shape[2:]
    out = c.emit_outputs("maxpool2d_argmax", {"src": _lift(c, x)},
                         {**params, "storage_order": storage_order},
                         {"dst": (x.dtype, lifted, None), "indices": ("TL_INT32", lifted, None)},
                         hint=n.name or n.outputs[0])
    c.reshape(out["dst"], shape, out=n.outputs[0])
    c.reshape(out["indices"], shape, out=n.outputs[1])


handler("MaxPool", 1, 8, 10, 11, 12, 22)(_pool("maxpool2d"))
handler("AveragePool", 1, 7, 10, 11, 19, 22)(_pool("avgpool2d"))


@handler("MaxUnpool", 9, 11, 22)
def max_unpool(c: Converter, n: Node, *, kernel_shape, pads=None, strides=None):
    """A `max_unpool` into the shape of the input the pooling read: (in - 1) * stride -
    pads + kernel per spatial axis. An output_shape (a constant) must be that shape:
    for another, ONNX's reference places the values by that shape and pads the end,
    ONNX Runtime by the output_shape itself."""
    x, indices = c.val(n.input(0)), c.val(n.input(1))
    k = x.rank - 2
    strides, pads = list(strides or [1] * k), list(pads or [0] * (2 * k))
    if len(kernel_shape) != k or len(strides) != k or len(pads) != 2 * k:
        raise Unsupported("attribute lengths do not match the spatial rank")
    dims = list(x.shape[:2]) + [(i - 1) * s - b - e + w for i, s, b, e, w in zip(
        x.shape[2:], strides, pads[:k], pads[k:], kernel_shape)]
    if n.has_input(2):
        given = [int(d) for d in c.const(n.input(2), "output_shape").reshape(-1)]
        if given != dims:
            raise Unsupported(f"output_shape {given} other than the pooled input's {dims} "
                              "(ONNX's reference and ONNX Runtime place the values otherwise)")
    c.emit("max_unpool", {"src": x, "indices": indices}, {"dims": dims}, x.dtype, tuple(dims),
           out=n.outputs[0], hint=n.name or n.outputs[0])


def _global_pool(optype: str):
    def handle(c: Converter, n: Node):
        x = c.val(n.input(0))
        if x.rank < 3:
            raise Unsupported(f"rank-{x.rank} input")
        if optype == "global_avgpool2d":
            x.require_float("GlobalAveragePool input")
        shape = x.shape[:2] + (1,) * (x.rank - 2)
        if x.rank == 4:
            c.emit(optype, {"src": x}, {}, x.dtype, shape, out=n.outputs[0],
                   hint=n.name or n.outputs[0])
            return
        flat = c.reshape(x, x.shape[:2] + (math.prod(x.shape[2:]), 1))
        y = c.emit(optype, {"src": flat}, {}, x.dtype, x.shape[:2] + (1, 1), hint=n.outputs[0])
        c.reshape(y, shape, out=n.outputs[0])
    return handle


handler("GlobalAveragePool", 1, 22)(_global_pool("global_avgpool2d"))
handler("GlobalMaxPool", 1, 22)(_global_pool("global_maxpool2d"))


@handler("GlobalLpPool", 2, 22)
def global_lp_pool(c: Converter, n: Node, *, p=2):
    """(sum over all spatial cells of |x|^p)^(1/p): a `reduce` l1 or l2 for p 1 and 2,
    else |x|^p (`unary` abs, `elew` TL_POW), a `reduce` sum and the power 1 / p."""
    x = c.val(n.input(0))
    x.require_float("GlobalLpPool input")
    if x.rank < 3:
        raise Unsupported(f"rank-{x.rank} input")
    if p <= 0:
        raise Unsupported(f"p must be positive, found {p}")
    axes = list(range(2, x.rank))
    shape = x.shape[:2] + (1,) * (x.rank - 2)
    hint = n.outputs[0]
    if p in (1, 2):
        c.emit("reduce", {"src": x}, {"func": f"l{p}", "axes": axes, "keepdims": True},
               x.dtype, shape, out=n.outputs[0], hint=n.name or hint)
        return
    mag = c.emit("unary", {"src": x}, {"func": "abs"}, x.dtype, x.shape, hint=f"{hint}_abs")
    power = c.emit("elew", {"src1": mag, "src2": c.scalar(float(p), x.dtype, f"{hint}_p")},
                   {"elew_op": "TL_POW"}, x.dtype, x.shape, hint=f"{hint}_pow")
    total = c.emit("reduce", {"src": power}, {"func": "sum", "axes": axes, "keepdims": True},
                   x.dtype, shape, hint=f"{hint}_sum")
    c.emit("elew", {"src1": total, "src2": c.scalar(1.0 / p, x.dtype, f"{hint}_root")},
           {"elew_op": "TL_POW"}, x.dtype, shape, out=n.outputs[0], hint=n.name or hint)


@handler("LpPool", 2, 11, 18, 22)
def lp_pool(c: Converter, n: Node, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0,
            dilations=None, p=2, pads=None, strides=None):
    """(sum over the window of |x|^p)^(1/p), 1-D, 2-D and 3-D: |x|^p (a `unary` abs and
    an `elew` TL_POW), an `avgpool2d` (3-D: `avgpool3d`) counting the padding, times the
    window's area, to the power 1 / p. The padding (also auto_pad's) is zeros, which add
    nothing."""

    x = c.val(n.input(0))
    x.require_float("LpPool input")
    if x.rank not in (3, 4, 5):
        raise Unsupported(f"{x.rank - 2}-D pooling (only 1-D, 2-D and 3-D)")
    if p <= 0:
        raise Unsupported(f"p must be positive, found {p}")
    k = x.rank - 2
    strides, dilations, pads, autopad, kernel = _spatial_params(
        k, kernel_shape, strides, dilations, pads, auto_pad)
    in_hw = tuple(x.shape[2:]) if k != 1 else (1,) + tuple(x.shape[2:])
    padding = list(autopad_padding(in_hw, kernel, strides, dilations, autopad) or pads)
    if ceil_mode and tuple(pool2d_output_hw(in_hw, kernel, strides, padding,
                                            dilation=dilations)) != tuple(
            pool2d_output_hw(in_hw, kernel, strides, padding, ceil_mode=True,
                             dilation=dilations)):
        raise Unsupported("ceil_mode 1 where it changes the output size")
    shape = c.out_shape(n)
    src = _lift(c, x) if k == 1 else x
    hint = n.outputs[0]
    mag = c.emit("unary", {"src": src}, {"func": "abs"}, x.dtype, src.shape, hint=f"{hint}_abs")
    power = c.emit("elew", {"src1": mag, "src2": c.scalar(float(p), x.dtype, f"{hint}_p")},
                   {"elew_op": "TL_POW"}, x.dtype, src.shape, hint=f"{hint}_pow")
    shape2d = shape if k != 1 else shape[:2] + (1,) + shape[2:]
    mean = c.emit("avgpool3d" if k == 3 else "avgpool2d", {"src": power},
                  {"size": kernel, "stride": strides, "padding": padding, "autopad": "NOTSET",
                   "count_include_pad": True, "dilation": dilations}, x.dtype, shape2d,
                  hint=f"{hint}_mean")
    total = c.emit("elew", {"src1": mean, "src2": c.scalar(float(math.prod(kernel)), x.dtype,
                                                           f"{hint}_area")},
                   {"elew_op": "TL_MUL"}, x.dtype, shape2d, hint=f"{hint}_sum")
    if k != 1:
        c.emit("elew", {"src1": total, "src2": c.scalar(1.0 / p, x.dtype, f"{hint}_root")},
               {"elew_op": "TL_POW"}, x.dtype, shape, out=n.outputs[0], hint=n.name or hint)
        return
    y = c.emit("elew", {"src1": total, "src2": c.scalar(1.0 / p, x.dtype, f"{hint}_root")},
               {"elew_op": "TL_POW"}, x.dtype, shape2d, hint=f"{hint}_norm")
    c.reshape(y, shape, out=n.outputs[0])
