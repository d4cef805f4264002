"""NN ops (conv2d, deconv2d, pooling, batchnorm, bn2scale_wts, matmul, dot_product,
lrn, pad) through the whole runtime: small IR models of `create` ops feeding the op
are checked, compiled for cpu, loaded and run, and compared with naive loop
references (tests/references.py; and with ONNX Runtime, when installed, for the ONNX
semantics: autopad, ConvTranspose padding and output_shape)."""

import math
from functools import partial

import numpy as np
import pytest

from lightnet import Context, LightNetError
from tests import helpers
from tests.helpers import assert_check_error, rand
from tests.irbuild import op_model
from tests.references import ref_conv2d, ref_deconv2d, ref_lrn, ref_pad, ref_pool

TOL = dict(rtol=1e-4, atol=1e-5)
AUTOPADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


# The op reads create ops (constants), as a model's weights are.
op_context = partial(helpers.op_context, static=True)
run_op = partial(helpers.run_op, static=True)
op_error = partial(helpers.op_error, static=True)


# ---------------------------------------------------------------- references


def ref_same_pads(in_hw, size, stride, dilation, autopad):
    """ONNX Conv/Pool auto_pad, straight from the spec text."""
    if autopad == "VALID":
        return (0, 0, 0, 0)
    begin, end = [], []
    for n, k, s, d in zip(in_hw, size, stride, dilation):
        out = math.ceil(n / s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
        small = total // 2
        b = small if autopad == "SAME_UPPER" else total - small
        begin.append(b)
        end.append(total - b)
    return (begin[0], begin[1], end[0], end[1])


def ref_deconv_pads(in_hw, size, stride, output_padding, dilation, output_dims, autopad):
    """ONNX ConvTranspose padding, from the spec text: output_shape first, then
    auto_pad SAME_* (output = in * stride), VALID zeros; None: explicit pads."""
    if not any(output_dims):
        if autopad == "NOTSET":
            return None
        if autopad == "VALID":
            return (0, 0, 0, 0)
        output_dims = [n * s for n, s in zip(in_hw, stride)]
    begin, end = [], []
    for n, k, s, op, d, out in zip(in_hw, size, stride, output_padding, dilation, output_dims):
        total = s * (n - 1) + op + ((k - 1) * d + 1) - out
        b = total // 2 if autopad == "SAME_UPPER" else total - total // 2
        begin.append(b)
        end.append(total - b)
    return (begin[0], begin[1], end[0], end[1])


def f32(x):
    """Float params are float32 in LightNet (realtype float)."""
    return float(np.float32(x))


# ---------------------------------------------------------------- ONNX Runtime


def onnx_run(node, inputs):
    """Run one ONNX node on float32 `inputs` (name -> array) with ONNX Runtime."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in inputs.items()],
        [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)[0]


def onnx_node(op_type, inputs, **attrs):
    from onnx import helper

    pytest.importorskip("onnx")
    return helper.make_node(op_type, list(inputs), ["y"], **{k: v for k, v in attrs.items()
                                                              if v is not None})


# ---------------------------------------------------------------- conv2d

# (src shape, weight shape, params)
CONV_CASES = [
    ((1, 1, 5, 5), (1, 1, 3, 3), {}),
    ((2, 3, 6, 7), (4, 3, 3, 2), {"stride": [2, 3], "padding": [1, 0, 2, 1]}),
    ((1, 4, 7, 7), (6, 2, 3, 3), {"group": 2, "dilation": [2, 1], "padding": [0, 2, 1, 0]}),
    ((1, 3, 5, 6), (3, 1, 3, 3), {"group": 3, "stride": [2, 2], "padding": [1, 1, 1, 1]}),
    ((1, 2, 4, 4), (3, 2, 1, 1), {}),  # pointwise
    ((1, 2, 4, 5), (2, 2, 1, 1), {"stride": [2, 1]}),
    ((1, 2, 7, 8), (4, 1, 3, 2), {"group": 2, "stride": [2, 3], "dilation": [1, 2], "autopad": "VALID"}),
    ((1, 2, 7, 8), (4, 1, 3, 2), {"group": 2, "stride": [2, 3], "dilation": [1, 2], "autopad": "SAME_UPPER"}),
    ((1, 2, 7, 8), (4, 1, 3, 2), {"group": 2, "stride": [2, 3], "dilation": [1, 2], "autopad": "SAME_LOWER"}),
    ((2, 1, 6, 5), (2, 1, 4, 2), {"autopad": "SAME_UPPER"}),  # odd totals 3 and 1
    ((2, 1, 6, 5), (2, 1, 4, 2), {"autopad": "SAME_LOWER"}),
    ((1, 1, 5, 5), (1, 1, 2, 2), {"stride": [4, 4], "autopad": "SAME_UPPER"}),  # total clamps to 0
]


def _conv_ref_params(src_shape, weight_shape, p):
    size = weight_shape[2:]
    stride = p.get("stride", (1, 1))
    dilation = p.get("dilation", (1, 1))
    autopad = p.get("autopad", "NOTSET")
    padding = p.get("padding", (0, 0, 0, 0))
    if autopad != "NOTSET":
        padding = ref_same_pads(src_shape[2:], size, stride, dilation, autopad)
    return dict(group=p.get("group", 1), stride=stride, padding=padding, dilation=dilation)


@pytest.mark.parametrize("src_shape, weight_shape, params", CONV_CASES)
def test_conv2d_matches_loops(src_shape, weight_shape, params):
    rng = np.random.default_rng(1)
    x, w, b = rand(rng, *src_shape), rand(rng, *weight_shape), rand(rng, weight_shape[0])
    got = run_op("conv2d", {"src": x, "weight": w, "bias": b},
                 {"size": list(weight_shape[2:]), **params})
    expected = ref_conv2d(x, w, b, **_conv_ref_params(src_shape, weight_shape, params))
    assert got.dtype == np.float32
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, **TOL)


def test_conv2d_double():
    rng = np.random.default_rng(2)
    x, w, b = (rand(rng, 1, 2, 5, 4, dtype=np.float64), rand(rng, 2, 2, 2, 3, dtype=np.float64),
               rand(rng, 2, dtype=np.float64))
    got = run_op("conv2d", {"src": x, "weight": w, "bias": b},
                 {"size": [2, 3], "padding": [1, 2, 0, 1], "stride": [1, 2]})
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref_conv2d(x, w, b, stride=(1, 2), padding=(1, 2, 0, 1)),
                               rtol=1e-12, atol=1e-12)


def test_conv2d_lowers_to_cpu_and_reruns_with_new_data():
    rng = np.random.default_rng(3)
    x, w, b = rand(rng, 1, 2, 5, 5), rand(rng, 2, 2, 3, 3), rand(rng, 2)
    ctx = op_context("conv2d", {"src": x, "weight": w, "bias": b},
                     {"size": [3, 3], "padding": [1, 1, 1, 1]})
    assert [op.optype for op in ctx.ops][-1] == "conv2d_cpu"
    for _ in range(2):  # the workspace (zero-bordered copy) is reused run after run
        x = rand(rng, 1, 2, 5, 5)
        ctx.set_data("src", x)
        ctx.run()
        np.testing.assert_allclose(ctx.get_data("out_dst"),
                                   ref_conv2d(x, w, b, padding=(1, 1, 1, 1)), **TOL)


@pytest.mark.parametrize("autopad", AUTOPADS)
def test_conv2d_matches_onnxruntime(autopad):
    rng = np.random.default_rng(4)
    x, w, b = rand(rng, 1, 4, 7, 8), rand(rng, 6, 2, 3, 2), rand(rng, 6)
    stride, pads = [2, 3], [0, 0, 0, 0]
    # ONNX Runtime has no dilation with SAME_*: those are covered by the loop reference
    dilation = [1, 1] if autopad.startswith("SAME") else [1, 2]
    if autopad == "NOTSET":
        pads = [1, 0, 2, 1]
    got = run_op("conv2d", {"src": x, "weight": w, "bias": b},
                 {"group": 2, "size": [3, 2], "stride": stride, "dilation": dilation,
                  "padding": pads, "autopad": autopad})
    node = onnx_node("Conv", ["x", "w", "b"], group=2, kernel_shape=[3, 2], strides=stride,
                     dilations=dilation, auto_pad=autopad,
                     pads=pads if autopad == "NOTSET" else None)
    expected = onnx_run(node, {"x": x, "w": w, "b": b})
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, **TOL)


# ---------------------------------------------------------------- deconv2d

# (src shape, weight shape, params)
DECONV_CASES = [
    ((1, 1, 3, 3), (1, 1, 3, 3), {}),
    ((2, 3, 3, 4), (3, 2, 3, 2), {"stride": [2, 3], "padding": [1, 0, 2, 1]}),
    ((1, 4, 3, 3), (4, 3, 2, 3), {"group": 2, "stride": [2, 2], "dilation": [2, 1],
                                  "output_padding": [1, 1]}),
    ((1, 2, 4, 3), (2, 1, 3, 3), {"group": 2, "stride": [3, 2], "output_padding": [2, 1],
                                  "padding": [0, 1, 1, 0]}),
    ((1, 2, 3, 4), (2, 2, 3, 2), {"stride": [2, 2], "autopad": "VALID"}),
    ((1, 2, 3, 4), (2, 2, 3, 2), {"stride": [2, 2], "autopad": "SAME_UPPER"}),  # odd W total
    ((1, 2, 3, 4), (2, 2, 3, 2), {"stride": [2, 2], "autopad": "SAME_LOWER"}),
    ((1, 2, 3, 4), (2, 2, 3, 3), {"stride": [1, 1], "dilation": [2, 1], "autopad": "SAME_UPPER"}),
    ((1, 2, 3, 4), (2, 2, 3, 3), {"stride": [1, 1], "dilation": [2, 1], "autopad": "SAME_LOWER"}),
    ((1, 2, 3, 4), (2, 3, 3, 2), {"stride": [2, 2], "output_dims": [1, 3, 6, 7]}),  # odd totals 1, 1
    ((1, 2, 3, 4), (2, 3, 3, 2), {"stride": [2, 2], "output_dims": [1, 3, 6, 7], "autopad": "SAME_UPPER"}),
    ((1, 2, 3, 4), (2, 3, 3, 2), {"stride": [2, 2], "output_dims": [1, 3, 4, 5], "autopad": "VALID"}),
    ((1, 2, 3, 4), (2, 3, 3, 2), {"stride": [2, 2], "output_dims": [1, 3, 6, 8], "autopad": "SAME_LOWER"}),
]


def _deconv_ref_params(src_shape, weight_shape, p):
    size = weight_shape[2:]
    stride = p.get("stride", (1, 1))
    dilation = p.get("dilation", (1, 1))
    output_padding = p.get("output_padding", (0, 0))
    pads = ref_deconv_pads(src_shape[2:], size, stride, output_padding, dilation,
                           p.get("output_dims", (0, 0, 0, 0))[2:], p.get("autopad", "NOTSET"))
    return dict(group=p.get("group", 1), stride=stride, output_padding=output_padding,
                dilation=dilation, padding=pads or p.get("padding", (0, 0, 0, 0)))


@pytest.mark.parametrize("src_shape, weight_shape, params", DECONV_CASES)
def test_deconv2d_matches_loops(src_shape, weight_shape, params):
    rng = np.random.default_rng(5)
    group = params.get("group", 1)
    x, w = rand(rng, *src_shape), rand(rng, *weight_shape)
    b = rand(rng, weight_shape[1] * group)
    got = run_op("deconv2d", {"src": x, "weight": w, "bias": b},
                 {"size": list(weight_shape[2:]), **params})
    expected = ref_deconv2d(x, w, b, **_deconv_ref_params(src_shape, weight_shape, params))
    assert got.shape == expected.shape
    if "output_dims" in params:
        assert list(got.shape) == params["output_dims"]
    np.testing.assert_allclose(got, expected, **TOL)


def test_deconv2d_same_gives_in_times_stride():
    rng = np.random.default_rng(6)
    x, w, b = rand(rng, 1, 1, 3, 5), rand(rng, 1, 2, 3, 3), rand(rng, 2)
    for autopad in ("SAME_UPPER", "SAME_LOWER"):
        got = run_op("deconv2d", {"src": x, "weight": w, "bias": b},
                     {"size": [3, 3], "stride": [2, 3], "autopad": autopad})
        assert got.shape == (1, 2, 6, 15)


def test_deconv2d_double():
    rng = np.random.default_rng(7)
    x, w, b = (rand(rng, 1, 2, 3, 3, dtype=np.float64), rand(rng, 2, 1, 2, 2, dtype=np.float64),
               rand(rng, 2, dtype=np.float64))
    got = run_op("deconv2d", {"src": x, "weight": w, "bias": b},
                 {"group": 2, "size": [2, 2], "stride": [2, 1], "padding": [1, 0, 0, 1]})
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref_deconv2d(x, w, b, group=2, stride=(2, 1),
                                                 padding=(1, 0, 0, 1)), rtol=1e-12, atol=1e-12)


DECONV_ONNX_CASES = [
    {"group": 2, "stride": [2, 3], "dilation": [1, 2], "padding": [1, 0, 2, 1],
     "output_padding": [1, 2]},
    {"group": 2, "stride": [2, 2], "autopad": "VALID"},
    {"group": 2, "stride": [2, 2], "autopad": "SAME_UPPER"},
    {"group": 2, "stride": [2, 2], "autopad": "SAME_LOWER"},
    {"group": 2, "stride": [1, 1], "dilation": [2, 1], "autopad": "SAME_UPPER"},
    {"group": 2, "stride": [1, 1], "dilation": [2, 1], "autopad": "SAME_LOWER"},
    # output_shape wins over auto_pad; odd totals (1 and 3) pin the ONNX split rule
    {"group": 2, "stride": [2, 2], "output_dims": [1, 4, 6, 5]},
    {"group": 2, "stride": [2, 2], "output_dims": [1, 4, 6, 5], "autopad": "SAME_UPPER"},
    {"group": 2, "stride": [2, 2], "output_dims": [1, 4, 6, 5], "autopad": "SAME_LOWER"},
    {"group": 2, "stride": [2, 2], "output_dims": [1, 4, 5, 6], "output_padding": [1, 1]},
]


@pytest.mark.parametrize("params", DECONV_ONNX_CASES)
def test_deconv2d_matches_onnxruntime(params):
    rng = np.random.default_rng(8)
    x, w, b = rand(rng, 1, 4, 3, 4), rand(rng, 4, 2, 3, 2), rand(rng, 4)
    got = run_op("deconv2d", {"src": x, "weight": w, "bias": b}, {"size": [3, 2], **params})
    node = onnx_node(
        "ConvTranspose", ["x", "w", "b"], group=params["group"], kernel_shape=[3, 2],
        strides=params["stride"], dilations=params.get("dilation"),
        pads=params.get("padding"), output_padding=params.get("output_padding"),
        output_shape=params["output_dims"][2:] if "output_dims" in params else None,
        auto_pad=params.get("autopad", "NOTSET"),
    )
    expected = onnx_run(node, {"x": x, "w": w, "b": b})
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, **TOL)


# ---------------------------------------------------------------- pooling

POOL_CASES = [
    ((1, 2, 5, 5), {"size": [2, 2]}),
    ((2, 3, 7, 6), {"size": [3, 2], "stride": [2, 3], "padding": [1, 0, 2, 1]}),
    ((1, 1, 4, 5), {"size": [3, 3], "stride": [1, 2], "padding": [2, 2, 0, 1]}),
    ((1, 2, 7, 8), {"size": [3, 2], "stride": [2, 3], "autopad": "VALID"}),
    ((1, 2, 7, 8), {"size": [3, 2], "stride": [2, 3], "autopad": "SAME_UPPER"}),
    ((1, 2, 7, 8), {"size": [3, 2], "stride": [2, 3], "autopad": "SAME_LOWER"}),
    ((1, 1, 6, 5), {"size": [4, 2], "autopad": "SAME_UPPER"}),
    ((1, 1, 6, 5), {"size": [4, 2], "autopad": "SAME_LOWER"}),
]


def _pool_ref_params(src_shape, p):
    stride = p.get("stride", (1, 1))
    padding = p.get("padding", (0, 0, 0, 0))
    autopad = p.get("autopad", "NOTSET")
    if autopad != "NOTSET":
        padding = ref_same_pads(src_shape[2:], p["size"], stride, (1, 1), autopad)
    return dict(size=p["size"], stride=stride, padding=padding)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("src_shape, params", POOL_CASES)
def test_pool2d_matches_loops(kind, src_shape, params):
    rng = np.random.default_rng(9)
    x = rand(rng, *src_shape)
    got = run_op(f"{kind}pool2d", {"src": x}, params)
    expected = ref_pool(x, kind, **_pool_ref_params(src_shape, params))
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, **TOL)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.float64])
def test_maxpool2d_other_dtypes(dtype):
    rng = np.random.default_rng(10)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    x = (rng.integers(info.min, int(info.max) + 1, (1, 2, 5, 4)).astype(dtype) if info
         else rand(rng, 1, 2, 5, 4, dtype=dtype))
    params = {"size": [2, 3], "stride": [2, 1], "padding": [1, 2, 1, 0]}
    got = run_op("maxpool2d", {"src": x}, params)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, ref_pool(x, "max", [2, 3], (2, 1), (1, 2, 1, 0)))


def test_avgpool2d_double():
    rng = np.random.default_rng(11)
    x = rand(rng, 1, 2, 5, 4, dtype=np.float64)
    got = run_op("avgpool2d", {"src": x}, {"size": [2, 3], "padding": [1, 2, 1, 0]})
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref_pool(x, "avg", [2, 3], (1, 1), (1, 2, 1, 0)), rtol=1e-12)


@pytest.mark.parametrize("kind", ["Max", "Average"])
@pytest.mark.parametrize("autopad", AUTOPADS)
def test_pool2d_matches_onnxruntime(kind, autopad):
    rng = np.random.default_rng(12)
    x = rand(rng, 1, 2, 7, 8)
    pads = [1, 0, 2, 1] if autopad == "NOTSET" else [0, 0, 0, 0]
    got = run_op({"Max": "maxpool2d", "Average": "avgpool2d"}[kind], {"src": x},
                 {"size": [3, 2], "stride": [2, 3], "padding": pads, "autopad": autopad})
    node = onnx_node(f"{kind}Pool", ["x"], kernel_shape=[3, 2], strides=[2, 3], auto_pad=autopad,
                     pads=pads if autopad == "NOTSET" else None)
    expected = onnx_run(node, {"x": x})
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, **TOL)


@pytest.mark.parametrize("kind, count_include_pad", [("Max", 0), ("Average", 0), ("Average", 1)])
@pytest.mark.parametrize("shape, kernel, strides, pads", [
    ((1, 2, 7, 8), [3, 2], [2, 3], [1, 0, 1, 1]),
    ((1, 3, 6, 6), [3, 3], [2, 2], [0, 0, 0, 0]),   # SqueezeNet's ceil_mode max pools
    ((2, 1, 5, 9), [2, 4], [3, 2], [1, 1, 1, 2]),   # a last window in the end padding
])
def test_pool2d_ceil_mode_and_count_include_pad_match_onnxruntime(kind, count_include_pad, shape,
                                                                  kernel, strides, pads):
    rng = np.random.default_rng(15)
    x = rand(rng, *shape)
    params = {"size": kernel, "stride": strides, "padding": pads, "ceil_mode": True}
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads, "ceil_mode": 1}
    if kind == "Average":
        params["count_include_pad"] = bool(count_include_pad)
        attrs["count_include_pad"] = count_include_pad
    got = run_op({"Max": "maxpool2d", "Average": "avgpool2d"}[kind], {"src": x}, params)
    expected = onnx_run(onnx_node(f"{kind}Pool", ["x"], **attrs), {"x": x})
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, **TOL)


@pytest.mark.parametrize("dilations, pads, strides, ceil_mode", [
    ([2, 2], [0, 0, 0, 0], [1, 1], 0),
    ([2, 3], [1, 1, 2, 0], [2, 1], 0),
    ([3, 2], [1, 1, 1, 1], [2, 2], 1),
])
def test_maxpool2d_dilation_matches_onnxruntime(dilations, pads, strides, ceil_mode):
    rng = np.random.default_rng(16)
    x = rand(rng, 1, 2, 9, 10)
    got = run_op("maxpool2d", {"src": x}, {"size": [3, 2], "stride": strides, "padding": pads,
                                          "dilation": dilations, "ceil_mode": bool(ceil_mode)})
    node = onnx_node("MaxPool", ["x"], kernel_shape=[3, 2], strides=strides, pads=pads,
                     dilations=dilations, ceil_mode=ceil_mode)
    expected = onnx_run(node, {"x": x})
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_global_pools():
    rng = np.random.default_rng(13)
    x = rand(rng, 2, 3, 4, 5)
    np.testing.assert_allclose(run_op("global_avgpool2d", {"src": x}),
                               x.astype(np.float64).mean(axis=(2, 3), keepdims=True), **TOL)
    np.testing.assert_array_equal(run_op("global_maxpool2d", {"src": x}),
                                  x.max(axis=(2, 3), keepdims=True))
    xi = rng.integers(-100, 100, (1, 2, 3, 3)).astype(np.int16)
    got = run_op("global_maxpool2d", {"src": xi})
    assert got.dtype == np.int16 and got.shape == (1, 2, 1, 1)
    np.testing.assert_array_equal(got, xi.max(axis=(2, 3), keepdims=True))


# ---------------------------------------------------------------- normalization


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 3), (1, 3, 7)])
def test_batchnorm(shape):
    rng = np.random.default_rng(14)
    x = rand(rng, *shape)
    c = shape[1]
    scale, offset, mean = rand(rng, c), rand(rng, c), rand(rng, c)
    var = rng.uniform(0.1, 2, c).astype(np.float32)
    got = run_op("batchnorm", {"src": x, "scale": scale, "offset": offset, "mean": mean,
                               "var": var}, {"epsilon": 1e-3})
    view = (1, c) + (1,) * (len(shape) - 2)
    expected = ((x - mean.reshape(view)) / np.sqrt(var.reshape(view) + f32(1e-3))
                * scale.reshape(view) + offset.reshape(view))
    np.testing.assert_allclose(got, expected, **TOL)


def test_batchnorm_default_epsilon_is_onnx_1e_5():
    x = np.array([[[[1.0]]]], np.float32)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    got = run_op("batchnorm", {"src": x, "scale": one, "offset": zero, "mean": zero,
                               "var": np.zeros(1, np.float32)})
    np.testing.assert_allclose(got, 1 / np.sqrt(f32(1e-5)), rtol=1e-6)


def test_bn2scale_wts_reproduces_batchnorm():
    rng = np.random.default_rng(15)
    c = 5
    mean, scale, offset = rand(rng, c), rand(rng, c), rand(rng, c)
    var = rng.uniform(0.1, 2, c).astype(np.float32)
    dst_scale, dst_shift, dst_power = run_op(
        "bn2scale_wts",
        {"src_mean": mean, "src_var": var, "src_scale": scale, "src_offset": offset},
        {"epsilon": 1e-4}, outs=("dst_scale", "dst_shift", "dst_power"))
    a = scale / np.sqrt(var.astype(np.float64) + f32(1e-4))
    np.testing.assert_allclose(dst_scale, a, **TOL)
    np.testing.assert_allclose(dst_shift, offset - mean * a, **TOL)
    np.testing.assert_array_equal(dst_power, np.ones(c, np.float32))
    x = rand(rng, 2, c, 3, 3)
    bn = run_op("batchnorm", {"src": x, "scale": scale, "offset": offset, "mean": mean,
                              "var": var}, {"epsilon": 1e-4})
    view = (1, c, 1, 1)
    np.testing.assert_allclose((x * dst_scale.reshape(view) + dst_shift.reshape(view))
                               ** dst_power.reshape(view), bn, **TOL)


def test_bn2scale_wts_outputs_are_static():
    one = np.ones(2, np.float32)
    ctx = op_context("bn2scale_wts", {"src_mean": one, "src_var": one, "src_scale": one,
                                      "src_offset": one},
                     outs=("dst_scale", "dst_shift", "dst_power"))
    assert all(ctx.tensors[f"out_{o}"].static for o in ("dst_scale", "dst_shift", "dst_power"))


@pytest.mark.parametrize("size, alpha, beta, bias", [(3, 0.5, 0.75, 1.0), (2, 2.0, 0.5, 2.0),
                                                     (5, 1e-4, 0.75, 1.0), (1, 1.0, 1.0, 0.5)])
def test_lrn(size, alpha, beta, bias):
    rng = np.random.default_rng(16)
    x = rand(rng, 2, 6, 3, 4)
    got = run_op("lrn", {"src": x}, {"size": size, "alpha": alpha, "beta": beta, "bias": bias})
    np.testing.assert_allclose(got, ref_lrn(x, size, f32(alpha), f32(beta), f32(bias)), **TOL)


def test_lrn_defaults_and_double():
    rng = np.random.default_rng(17)
    x = rand(rng, 1, 4, 5, dtype=np.float64) * 30
    got = run_op("lrn", {"src": x}, {"size": 3})
    assert got.dtype == np.float64
    # a default is not rounded to float32 like a given float param: accept either alpha
    np.testing.assert_allclose(got, ref_lrn(x, 3, 1e-4, 0.75, 1.0), rtol=1e-7)


def test_lrn_matches_onnxruntime():
    rng = np.random.default_rng(18)
    x = rand(rng, 1, 7, 3, 3) * 5
    got = run_op("lrn", {"src": x}, {"size": 5, "alpha": 0.3, "beta": 0.6, "bias": 1.5})
    expected = onnx_run(onnx_node("LRN", ["x"], size=5, alpha=0.3, beta=0.6, bias=1.5), {"x": x})
    np.testing.assert_allclose(got, expected, **TOL)


# ---------------------------------------------------------------- matmul, dot_product


@pytest.mark.parametrize("transA", [False, True])
@pytest.mark.parametrize("transB", [False, True])
@pytest.mark.parametrize("bias_shape", [None, (4,), (1,), (3, 1), (3, 4), (1, 4)])
def test_matmul(transA, transB, bias_shape):
    rng = np.random.default_rng(19)
    a, b = rand(rng, 3, 5), rand(rng, 5, 4)
    inputs = {"src1": a.T.copy() if transA else a, "src2": b.T.copy() if transB else b}
    params = {"transA": transA, "transB": transB, "alpha": 0.75, "beta": -2.0}
    expected = 0.75 * a.astype(np.float64) @ b
    if bias_shape is not None:
        inputs["bias"] = rand(rng, *bias_shape)
        expected = expected - 2.0 * inputs["bias"]
    got = run_op("matmul", inputs, params)
    assert got.shape == (3, 4)
    np.testing.assert_allclose(got, expected, **TOL)


def test_matmul_defaults_and_double():
    rng = np.random.default_rng(20)
    a, b, c = (rand(rng, 2, 3, dtype=np.float64), rand(rng, 3, 2, dtype=np.float64),
               rand(rng, 2, 2, dtype=np.float64))
    got = run_op("matmul", {"src1": a, "src2": b, "bias": c})
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, a @ b + c, rtol=1e-12)


def test_matmul_matches_onnxruntime():
    rng = np.random.default_rng(21)
    a, b, c = rand(rng, 5, 3), rand(rng, 4, 5), rand(rng, 4)
    got = run_op("matmul", {"src1": a, "src2": b, "bias": c},
                 {"transA": True, "transB": True, "alpha": 1.5, "beta": 0.5})
    node = onnx_node("Gemm", ["a", "b", "c"], transA=1, transB=1, alpha=1.5, beta=0.5)
    np.testing.assert_allclose(got, onnx_run(node, {"a": a, "b": b, "c": c}), **TOL)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
def test_dot_product(dtype):
    rng = np.random.default_rng(22)
    a = rng.integers(0, 5, (2, 3, 4)).astype(dtype)
    b = rng.integers(0, 5, (2, 3, 4)).astype(dtype)
    got = run_op("dot_product", {"src1": a, "src2": b})
    assert got.shape == (1,) and got.dtype == dtype
    # 24 products of at most 16: fits every dtype
    assert got[0] == (a.astype(np.int64) * b).sum()


# ---------------------------------------------------------------- pad


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[1, 0, 2, 2, 1, 0], [0, 2, 1, 1, 0, 3], [-1, 1, 0, 1, -2, 1]])
def test_pad_modes(mode, pads):
    rng = np.random.default_rng(23)
    x = rand(rng, 3, 4, 5)
    got = run_op("pad", {"src": x}, {"pads": pads, "mode": mode, "value": 2.5})
    expected = ref_pad(x, pads, mode, 2.5)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_pad_integers_and_default_mode():
    x = np.arange(6, dtype=np.int16).reshape(2, 3)
    got = run_op("pad", {"src": x}, {"pads": [1, 1, 0, 2], "value": -7})
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got, np.pad(x, [(1, 0), (1, 2)], constant_values=-7))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_matches_onnxruntime(mode):
    rng = np.random.default_rng(24)
    x = rand(rng, 2, 3, 4)
    pads = [0, 2, 1, 1, 1, 3]
    got = run_op("pad", {"src": x}, {"pads": pads, "mode": mode, "value": 0.5})
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper

    ort = pytest.importorskip("onnxruntime")
    node = helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode=mode)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array(pads, np.int64), "pads"),
                     numpy_helper.from_array(np.array(0.5, np.float32), "value")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(got, sess.run(None, {"x": x})[0])


# ---------------------------------------------------------------- workspaces


def test_workspaces_are_made_once_at_load(monkeypatch):
    """run passes the workspaces static_run made; no kernel builds its own per run."""
    from lightnet.archs.cpu.kernels import conv, norm, pool

    rng = np.random.default_rng(25)
    x = rand(rng, 1, 2, 5, 5)
    ctxs = [
        op_context("conv2d", {"src": x, "weight": rand(rng, 2, 2, 3, 3), "bias": rand(rng, 2)},
                   {"size": [3, 3], "padding": [1, 1, 1, 1]}),
        op_context("deconv2d", {"src": x, "weight": rand(rng, 2, 2, 3, 3), "bias": rand(rng, 2)},
                   {"size": [3, 3], "padding": [1, 1, 0, 0]}),
        op_context("maxpool2d", {"src": x}, {"size": [2, 2], "padding": [1, 1, 1, 1]}),
        op_context("avgpool2d", {"src": x}, {"size": [2, 2], "autopad": "SAME_LOWER"}),
        op_context("lrn", {"src": x}, {"size": 3}),
    ]

    def forbidden(*args, **kwargs):
        raise AssertionError("a workspace was built while running")

    for module, name in ((conv, "conv2d_workspace"), (conv, "deconv2d_workspace"),
                         (pool, "maxpool_workspace"), (pool, "avgpool_workspace"),
                         (norm, "lrn_scratch")):
        monkeypatch.setattr(module, name, forbidden)
    for ctx in ctxs:
        ctx.run()


# ---------------------------------------------------------------- errors


def _conv_inputs(src=(1, 4, 5, 5), weight=(2, 4, 3, 3), bias=(2,)):
    rng = np.random.default_rng(26)
    return {"src": rand(rng, *src), "weight": rand(rng, *weight), "bias": rand(rng, *bias)}


@pytest.mark.parametrize("optype", ["conv2d", "deconv2d"])
def test_conv_wrong_ndim(optype):
    err = op_error(optype, _conv_inputs(src=(4, 5, 5)), {"size": [3, 3]})
    assert_check_error(err, optype, "tensor_in 'src'", "ndim", "4 dimensions, found 3")
    err = op_error(optype, _conv_inputs(bias=(1, 2)), {"size": [3, 3]})
    assert_check_error(err, optype, "tensor_in 'bias'", "ndim", "1 dimensions, found 2")


def test_conv2d_channel_mismatch():
    err = op_error("conv2d", _conv_inputs(weight=(2, 3, 3, 3)), {"size": [3, 3]})
    assert_check_error(err, "conv2d", "tensor_in 'weight'", "check",
                       "weight.shape[1] * group == src.shape[1]", "channels per group")
    err = op_error("conv2d", _conv_inputs(weight=(3, 2, 3, 3), bias=(3,)),
                   {"group": 2, "size": [3, 3]})
    assert_check_error(err, "conv2d", "tensor_in 'weight'", "check",
                       "weight.shape[0] % group == 0")
    err = op_error("conv2d", _conv_inputs(), {"size": [3, 2]})
    assert_check_error(err, "conv2d", "tensor_in 'weight'", "check",
                       "the kernel dims of weight are size")
    err = op_error("conv2d", _conv_inputs(bias=(3,)), {"size": [3, 3]})
    assert_check_error(err, "conv2d", "tensor_in 'bias'", "len", "weight.shape[0] (2) elements")


def test_deconv2d_channel_mismatch():
    err = op_error("deconv2d", _conv_inputs(weight=(3, 2, 3, 3)), {"size": [3, 3]})
    assert_check_error(err, "deconv2d", "tensor_in 'weight'", "check",
                       "weight.shape[0] == src.shape[1]")
    err = op_error("deconv2d", _conv_inputs(src=(1, 3, 5, 5), weight=(3, 1, 3, 3)),
                   {"group": 2, "size": [3, 3]})
    assert_check_error(err, "deconv2d", "tensor_in 'weight'", "check",
                       "src.shape[1] % group == 0")
    err = op_error("deconv2d", _conv_inputs(weight=(4, 2, 3, 3), bias=(2,)),
                   {"group": 2, "size": [3, 3]})
    assert_check_error(err, "deconv2d", "tensor_in 'bias'", "len", "weight.shape[1] * group (4)")


@pytest.mark.parametrize("optype", ["conv2d", "deconv2d", "maxpool2d", "avgpool2d"])
def test_bad_autopad(optype):
    inputs = _conv_inputs() if "conv" in optype else {"src": _conv_inputs()["src"]}
    err = op_error(optype, inputs, {"size": [3, 3], "autopad": "SAME"})
    assert_check_error(err, optype, "param 'autopad'", "choices",
                       "one of NOTSET, VALID, SAME_UPPER, SAME_LOWER, found 'SAME'")
    err = op_error(optype, inputs, {"size": [3, 3], "autopad": "VALID", "padding": [1, 1, 1, 1]})
    assert_check_error(err, optype, "param 'autopad'", "check",
                       "explicit padding needs autopad NOTSET")


@pytest.mark.parametrize("optype", ["conv2d", "deconv2d", "maxpool2d", "avgpool2d"])
def test_bad_geometry_params(optype):
    inputs = _conv_inputs() if "conv" in optype else {"src": _conv_inputs()["src"]}
    for params, arg, rule, text in [
        ({"size": [3, 3], "stride": [1, 0]}, "param 'stride'", "gt", "stride[1] = 0"),
        ({"size": [3, 3], "stride": [1, 1, 1]}, "param 'stride'", "len", "2 elements, found 3"),
        ({"size": [3, 3], "padding": [1, 1, 1]}, "param 'padding'", "len", "4 elements, found 3"),
        ({"size": [3, 3], "padding": [0, -1, 0, 0]}, "param 'padding'", "ge", "padding[1] = -1"),
        ({"size": [0, 3]}, "param 'size'", "gt", "size[0] = 0"),
        ({}, "param 'size'", "exists", "none given"),
    ]:
        assert_check_error(op_error(optype, inputs, params), optype, arg, rule, text)
    if "conv" in optype:
        err = op_error(optype, inputs, {"size": [3, 3], "group": 0})
        assert_check_error(err, optype, "param 'group'", "ge", "group >= 1, found 0")
        err = op_error(optype, inputs, {"size": [3, 3], "dilation": [0, 1]})
        assert_check_error(err, optype, "param 'dilation'", "gt", "dilation[0] = 0")


def test_empty_outputs_are_rejected():
    err = op_error("conv2d", _conv_inputs(src=(1, 4, 5, 2)), {"size": [3, 3], "dilation": [1, 1]})
    assert_check_error(err, "conv2d", "op", "check", "at least one dilated kernel window")
    err = op_error("conv2d", _conv_inputs(src=(1, 4, 5, 2)), {"size": [3, 3], "autopad": "VALID"})
    assert_check_error(err, "conv2d", "op", "check", "at least one dilated kernel window")
    # SAME always has an output
    assert run_op("conv2d", _conv_inputs(src=(1, 4, 5, 2)),
                  {"size": [3, 3], "autopad": "SAME_UPPER"}).shape == (1, 2, 5, 2)
    err = op_error("maxpool2d", {"src": _conv_inputs(src=(1, 4, 2, 5))["src"]}, {"size": [3, 3]})
    assert_check_error(err, "maxpool2d", "op", "check", "at least one window")
    err = op_error("deconv2d", _conv_inputs(src=(1, 4, 1, 1), weight=(4, 2, 3, 3)),
                   {"size": [3, 3], "padding": [2, 0, 1, 0]})
    assert_check_error(err, "deconv2d", "op", "check", "crops less than the whole output")


def test_pool_padding_below_size():
    err = op_error("maxpool2d", {"src": _conv_inputs()["src"]},
                   {"size": [2, 2], "padding": [0, 0, 2, 0]})
    assert_check_error(err, "maxpool2d", "param 'padding'", "check",
                       "every window overlaps the input")


def test_deconv2d_output_dims_errors():
    inputs = _conv_inputs(weight=(4, 2, 3, 3))
    err = op_error("deconv2d", inputs, {"size": [3, 3], "output_dims": [2, 2, 6, 6]})
    assert_check_error(err, "deconv2d", "param 'output_dims'", "check",
                       "output_dims[:2] are src's batch and the output channels")
    err = op_error("deconv2d", inputs, {"size": [3, 3], "output_dims": [1, 2, 8, 7]})
    assert_check_error(err, "deconv2d", "op", "check", "at most the uncropped output size")
    err = op_error("deconv2d", inputs, {"size": [3, 3], "output_dims": [1, 2, 6, 6],
                                        "padding": [1, 0, 0, 0], "autopad": "SAME_UPPER"})
    assert_check_error(err, "deconv2d", "param 'autopad'", "check",
                       "explicit padding needs autopad NOTSET")
    # LightNet's rule: explicit padding must give output_dims (here 5 x 7, not 6 x 6)
    err = op_error("deconv2d", inputs, {"size": [3, 3], "output_dims": [1, 2, 6, 6],
                                        "padding": [1, 0, 1, 0]})
    assert_check_error(err, "deconv2d", "op", "check", "output_dims is the output's shape")
    err = op_error("deconv2d", inputs, {"size": [3, 3], "stride": [4, 1], "autopad": "SAME_LOWER"})
    assert_check_error(err, "deconv2d", "op", "check",
                       "SAME autopad reaches in * stride by cropping only")


def test_dtype_errors():
    rng = np.random.default_rng(27)
    err = op_error("conv2d", {k: v.astype(np.int32) for k, v in _conv_inputs().items()},
                   {"size": [3, 3]})
    assert_check_error(err, "conv2d", "tensor_in 'src'", "dtype",
                       "TL_FLOAT or TL_DOUBLE, found TL_INT32")
    inputs = _conv_inputs()
    inputs["bias"] = inputs["bias"].astype(np.float64)
    err = op_error("conv2d", inputs, {"size": [3, 3]})
    assert_check_error(err, "conv2d", "tensor_in 'bias'", "sametype", "found TL_DOUBLE")
    err = op_error("avgpool2d", {"src": rng.integers(0, 5, (1, 1, 3, 3)).astype(np.uint8)},
                   {"size": [2, 2]})
    assert_check_error(err, "avgpool2d", "tensor_in 'src'", "dtype", "found TL_UINT8")
    err = op_error("matmul", {"src1": rand(rng, 2, 2).astype(np.int16), "src2": rand(rng, 2, 2)})
    assert_check_error(err, "matmul", "tensor_in 'src1'", "dtype", "found TL_INT16")


def test_matmul_errors():
    rng = np.random.default_rng(28)
    a, b = rand(rng, 3, 5), rand(rng, 5, 4)
    err = op_error("matmul", {"src1": a, "src2": b}, {"transA": True})
    assert_check_error(err, "matmul", "tensor_in 'src2'", "check", "share the inner dimension K")
    for bias_shape, text in [((3,), "last dim is 1 or N"), ((4, 4), "first dim is 1 or M"),
                             ((1, 3, 4), "bias is 1-D or 2-D")]:
        err = op_error("matmul", {"src1": a, "src2": b, "bias": rand(rng, *bias_shape)})
        assert_check_error(err, "matmul", "tensor_in 'bias'", "check", text)
    err = op_error("matmul", {"src1": a, "src2": b}, {"transA": 1})
    assert_check_error(err, "matmul", "param 'transA'", "type", "expected a bool")


def test_bn2scale_wts_needs_static_inputs():
    """A non-static input (here the output of a pad op) is refused."""
    one = np.ones(2, np.float32)
    m = op_model("bn2scale_wts", {"src_mean": one, "src_var": one, "src_scale": one,
                                  "src_offset": one}, outs=("dst_scale", "dst_shift", "dst_power"),
                 static=True)
    m["ops"].insert(-1, {"name": "pad", "optype": "pad",
                         "tensors_in": [{"arg_name": "src", "name": "src_var"}],
                         "tensors_out": [{"arg_name": "dst", "name": "var_copy"}],
                         "params": [{"arg_name": "pads", "value": [0, 0]}]})
    m["ops"][-1]["tensors_in"][1]["name"] = "var_copy"
    with pytest.raises(LightNetError) as info:
        Context().init(m)
    assert_check_error(info.value.__cause__, "bn2scale_wts", "tensor_in 'src_var'", "static",
                       "a static tensor (weights or a constant), found 'var_copy' is not static")


def test_norm_errors():
    rng = np.random.default_rng(29)
    x = rand(rng, 1, 3, 2, 2)
    c3 = rand(rng, 3)
    err = op_error("batchnorm", {"src": x, "scale": c3, "offset": c3, "mean": rand(rng, 2),
                                 "var": c3})
    assert_check_error(err, "batchnorm", "tensor_in 'mean'", "len", "src.shape[1] (3) elements")
    err = op_error("batchnorm", {"src": x, "scale": c3, "offset": c3, "mean": c3, "var": c3},
                   {"epsilon": -1})
    assert_check_error(err, "batchnorm", "param 'epsilon'", "gt", "epsilon > 0")
    err = op_error("lrn", {"src": rand(rng, 5)}, {"size": 3})
    assert_check_error(err, "lrn", "tensor_in 'src'", "ndim", "at least 2 dimensions, found 1")
    err = op_error("lrn", {"src": x}, {"size": 3, "alpha": -1})
    assert_check_error(err, "lrn", "param 'alpha'", "ge", "alpha >= 0")


def test_pad_errors():
    rng = np.random.default_rng(30)
    x = rand(rng, 2, 3)
    err = op_error("pad", {"src": x}, {"pads": [1, 1, 1]})
    assert_check_error(err, "pad", "param 'pads'", "len", "2 * src.ndim (4) elements")
    err = op_error("pad", {"src": x}, {"pads": [0, 0, 0, 0], "mode": "mirror"})
    assert_check_error(err, "pad", "param 'mode'", "choices", "found 'mirror'")
    err = op_error("pad", {"src": x}, {"pads": [0, 3, 0, 0], "mode": "reflect"})
    assert_check_error(err, "pad", "param 'mode'", "check",
                       "a reflect pad is smaller than its (cropped) axis")
    err = op_error("pad", {"src": x}, {"pads": [0, 4, 0, 0], "mode": "wrap"})
    assert_check_error(err, "pad", "param 'mode'", "check",
                       "a wrap pad is at most its (cropped) axis")
    err = op_error("pad", {"src": x}, {"pads": [0, -2, 0, -1]})
    assert_check_error(err, "pad", "param 'pads'", "check", "cropping leaves at least one cell")
    err = op_error("pad", {"src": x.astype(np.int8)}, {"pads": [1, 0, 0, 0], "value": 0.5})
    assert_check_error(err, "pad", "param 'value'", "check",
                       "an integer tensor pads with an integer")
    err = op_error("pad", {"src": x.astype(np.int8)}, {"pads": [1, 0, 0, 0], "value": 200})
    assert_check_error(err, "pad", "param 'value'", "check", "in its range")
    # exactly at the limits is fine
    assert run_op("pad", {"src": x}, {"pads": [1, 2, 1, 2], "mode": "reflect"}).shape == (4, 7)
    assert run_op("pad", {"src": x}, {"pads": [2, 3, 2, 3], "mode": "wrap"}).shape == (6, 9)
