"""Quantized ONNX models: QDQ models made by ONNX Runtime's quantize_static (qdqmodels.py)
import as quantized operators and compute what ONNX Runtime computes, on cpu and dnnl.

ONNX Runtime runs a QDQ model two ways: as written (graph optimizations off: each
DequantizeLinear, the float Conv, each QuantizeLinear), which is ONNX's semantics, and
optimized into its int8 kernels, whose u8 x s8 products on AVX2 without VNNI add pairs in
int16 and saturate with full-range weights (quantize_static's reduce_range exists for
that). LightNet is compared with the first on full-range weights, and with the second on
reduce_range weights, where both are exact."""

from __future__ import annotations

import numpy as np
import pytest

from lightnet import Session
from lightnet.frontends import onnx as onnx2ln
from tests.frontends import qdqmodels

MODELS = {"conv_relu_conv": qdqmodels.conv_relu_conv, "resnet_block": qdqmodels.resnet_block,
          "matmul": qdqmodels.matmul_model}
# The ops each model is made of once imported: every Conv, Gemm, MatMul and Add quantized.
QUANTIZED_OPS = {"conv_relu_conv": {"qconv2d": 2, "conv2d": 0},
                 "resnet_block": {"qconv2d": 3, "conv2d": 0, "qelew": 1, "elew": 0},
                 "matmul": {"qmatmul": 2, "matmul": 0}}


def _ort(m, feeds, optimized: bool):
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(m.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _output_step(m) -> float:
    """The quantization step of the model's output: the scale of the last
    DequantizeLinear."""
    from onnx import numpy_helper

    inits = {t.name: t for t in m.graph.initializer}
    last = [n for n in m.graph.node if n.op_type == "DequantizeLinear"][-1]
    return float(numpy_helper.to_array(inits[last.input[1]]).max())


def _session(m, tmp_path, target):
    ir, weights = onnx2ln.convert(m)
    npz = tmp_path / "weights.npz"
    onnx2ln.save_weights(npz, weights)
    return Session(ir, datafile=npz, target=target), ir


@pytest.mark.parametrize("target", ["cpu", "dnnl"])
@pytest.mark.parametrize("activation", ["int8", "uint8"])
@pytest.mark.parametrize("name", list(MODELS))
def test_qdq_model_as_onnx_runtime_runs_it_as_written(name, activation, target, tmp_path):
    m, inputs = qdqmodels.quantized(MODELS[name], tmp_path, activation=activation)
    session, ir = _session(m, tmp_path, target)
    optypes = [op["optype"] for op in ir["ops"]]
    for optype, count in QUANTIZED_OPS[name].items():
        assert optypes.count(optype) == count, optypes
    step = _output_step(m)
    for x in inputs:
        got = session.run({"x": x})["y"]
        want = _ort(m, {"x": x}, optimized=False)
        assert np.abs(got - want).max() <= step * 1.001


@pytest.mark.parametrize("target", ["cpu", "dnnl"])
@pytest.mark.parametrize("name", list(MODELS))
def test_qdq_model_as_onnx_runtime_int8_kernels_run_it(name, target, tmp_path):
    m, inputs = qdqmodels.quantized(MODELS[name], tmp_path, activation="uint8",
                                    reduce_range=True)
    session, _ = _session(m, tmp_path, target)
    step = _output_step(m)
    for x in inputs:
        got = session.run({"x": x})["y"]
        assert np.abs(got - _ort(m, {"x": x}, optimized=True)).max() <= step * 1.001


def test_per_tensor_weights(tmp_path):
    m, inputs = qdqmodels.quantized(qdqmodels.conv_relu_conv, tmp_path, per_channel=False)
    session, ir = _session(m, tmp_path, "cpu")
    assert [op["optype"] for op in ir["ops"]].count("qconv2d") == 2
    for x in inputs:
        np.testing.assert_array_equal(session.run({"x": x})["y"],
                                      _ort(m, {"x": x}, optimized=False))


@pytest.mark.parametrize("name", list(MODELS))
def test_qdq_model_on_onednn_int8_kernels(name, tmp_path, monkeypatch):
    """Lowered to oneDNN's int8 kernels even below VNNI (on reduce_range weights, which
    they sum exactly there), the quantized ops compute what ONNX Runtime's do."""
    capi = pytest.importorskip("lightnet.archs.dnnl.capi")
    if capi.unavailable_reason() is not None:
        pytest.skip(capi.unavailable_reason())
    from lightnet.archs.dnnl import ops as dnnl_ops

    monkeypatch.setattr(dnnl_ops, "int8_exact", lambda: True)
    m, inputs = qdqmodels.quantized(MODELS[name], tmp_path, activation="uint8",
                                    reduce_range=True)
    session, _ = _session(m, tmp_path, "dnnl")
    optypes = [op.optype for op in session.ctx.ops]
    # (qelew, an Add quantized, has no oneDNN variant: it stays on the cpu.)
    quantized = [t for t in optypes if t.startswith(("qconv2d", "qmatmul"))]
    assert quantized and all(t.endswith("_dnnl") for t in quantized), optypes
    step = _output_step(m)
    for x in inputs:
        got = session.run({"x": x})["y"]
        assert np.abs(got - _ort(m, {"x": x}, optimized=True)).max() <= step * 1.001


def _moving_model(second_scale: float):
    """x1, x2 [1, 4, 6, 6] each quantized (uint8, zero point 128) and dequantized, a
    MaxPool 2x2 of the first and a Concat of both, each quantized with scale 0.05 and
    dequantized: y [1, 4, 3, 3] and z [1, 8, 6, 6]. The second input's scale is
    `second_scale`."""
    from onnx import TensorProto, helper

    from tests.frontends.onnxutil import init, model

    inits = [init("s", np.float32(0.05)), init("s2", np.float32(second_scale)),
             init("z", np.uint8(128))]
    nodes = [helper.make_node("QuantizeLinear", ["x1", "s", "z"], ["q1"]),
             helper.make_node("DequantizeLinear", ["q1", "s", "z"], ["d1"]),
             helper.make_node("QuantizeLinear", ["x2", "s2", "z"], ["q2"]),
             helper.make_node("DequantizeLinear", ["q2", "s2", "z"], ["d2"]),
             helper.make_node("MaxPool", ["d1"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("QuantizeLinear", ["p", "s", "z"], ["pq"]),
             helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["y"]),
             helper.make_node("Concat", ["d1", "d2"], ["c"], axis=1),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["zz"])]
    shape = [1, 4, 6, 6]
    return model(nodes, [("x1", shape), ("x2", shape)],
                 [("y", [1, 4, 3, 3], TensorProto.FLOAT), ("zz", [1, 8, 6, 6])], inits)


@pytest.mark.parametrize("target", ["cpu", "dnnl"])
@pytest.mark.parametrize("second_scale, moved", [(0.05, {"maxpool2d", "concat"}),
                                                 (0.04, {"maxpool2d"})])
def test_max_pool_and_concat_of_one_quantization_read_the_integers(
        second_scale, moved, target, tmp_path):
    """DequantizeLinear - MaxPool / Concat - QuantizeLinear of one scale and zero point
    is the op on the integers (no dequantize, no quantize): as ONNX Runtime, exactly. A
    Concat of another scale runs in float, as written."""
    m = _moving_model(second_scale)
    session, ir = _session(m, tmp_path, target)
    ctx = session.ctx

    def reads_integers(optype):
        op = next(o for o in ctx.ops if o.optype.startswith(optype))
        return all(ctx.tensors[t].dtype.name == "TL_UINT8" for t in op.tensors_in.values())

    assert {t for t in ("maxpool2d", "concat") if reads_integers(t)} == moved
    quantizes = [o["optype"] for o in ir["ops"]].count("quantize")
    assert quantizes == (2 if "concat" in moved else 3)
    rng = np.random.default_rng(4)
    for _ in range(3):
        feeds = {"x1": rng.standard_normal((1, 4, 6, 6)).astype(np.float32) * 4,
                 "x2": rng.standard_normal((1, 4, 6, 6)).astype(np.float32) * 4}
        got = session.run(feeds)
        want = dict(zip(("y", "zz"), _ort_all(m, feeds)))
        np.testing.assert_array_equal(got["y"], want["y"])
        np.testing.assert_array_equal(got["zz"], want["zz"])
    if target == "dnnl":
        optypes = [op.optype for op in session.ctx.ops]
        assert "maxpool2d_int8_dnnl" in optypes, optypes


def _ort_all(m, feeds):
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), options,
                                providers=["CPUExecutionProvider"]).run(None, feeds)


# The QOperator forms against ONNX's reference, and what the importer refuses -----------------

def _qlinear_conv_model(rng, c, o, group, k, stride, pads, x_dtype, per_channel):
    from onnx import TensorProto, helper

    from tests.frontends.onnxutil import init, model

    info = np.iinfo(x_dtype)
    elem = TensorProto.UINT8 if x_dtype == np.uint8 else TensorProto.INT8
    inits = [init("xs", np.float32(0.03)), init("xz", np.array(info.min + 100, x_dtype)),
             init("w", rng.integers(-128, 128, (o, c // group, k, k)).astype(np.int8)),
             init("ws", np.asarray(rng.uniform(0.001, 0.01, o if per_channel else None),
                                   np.float32)),
             init("wz", np.zeros(o if per_channel else (), np.int8)),
             init("ys", np.float32(0.2)), init("yz", np.array(info.min + 60, x_dtype)),
             init("B", rng.integers(-3000, 3000, o).astype(np.int32))]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "B"],
                            ["y"], group=group, strides=[stride] * 2, pads=pads)
    return model([node], [("x", [2, c, 9, 8], elem)], [("y", None, elem)], inits)


@pytest.mark.parametrize("geometry", [(8, 16, 1, 3, 1, [1, 1, 1, 1], np.uint8, True),
                                      (6, 6, 6, 3, 2, [0, 1, 2, 0], np.int8, True),
                                      (4, 8, 2, 1, 1, [0, 0, 0, 0], np.uint8, False)],
                         ids=str)
def test_qlinear_conv_is_onnx_reference_exactly(geometry, tmp_path):
    from onnx.reference import ReferenceEvaluator

    from tests.frontends.onnxutil import run_lightnet

    rng = np.random.default_rng(1)
    m = _qlinear_conv_model(rng, *geometry)
    info = np.iinfo(geometry[6])
    x = rng.integers(info.min, info.max + 1, (2, geometry[0], 9, 8)).astype(geometry[6])
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got["y"], ReferenceEvaluator(m).run(None, {"x": x})[0])


def _refusal(m) -> str:
    with pytest.raises(onnx2ln.UnsupportedModelError) as info:
        onnx2ln.convert(m)
    return str(info.value)


def test_blocked_quantization_is_refused():
    from onnx import TensorProto, helper

    from tests.frontends.onnxutil import init, model

    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)
    m = model([node], [("x", [2, 4])], [("y", None, TensorProto.UINT8)],
              [init("s", np.ones((2, 2), np.float32)), init("z", np.zeros((2, 2), np.uint8))],
              opset=21)
    assert "QuantizeLinear-21): blocked quantization (block_size)" in _refusal(m)


def test_computed_quantized_weights_and_per_row_zero_points_are_refused():
    from onnx import TensorProto, helper

    from tests.frontends.onnxutil import init, model

    node = helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"])
    m = model([node], [("a", [2, 3], TensorProto.UINT8), ("b", [3, 2], TensorProto.INT8)],
              [("y", None, TensorProto.INT32)], [init("az", np.array([1, 2], np.uint8))],
              opset=10)
    assert "MatMulInteger-10): B 'b' must be a constant" in _refusal(m)
    m = model([node], [("a", [2, 3], TensorProto.UINT8)], [("y", None, TensorProto.INT32)],
              [init("b", np.ones((3, 2), np.int8)), init("az", np.array([1, 2], np.uint8))],
              opset=10)
    assert "a_zero_point of shape [2] (one zero point per tensor)" in _refusal(m)


# ONNX Runtime's QOperator element-wise operators and pooling, and DynamicQuantizeLinear ---

def _microsoft(m):
    """`m` with the com.microsoft domain imported, as ONNX Runtime's quantizer writes it."""
    from onnx import helper

    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return m


def _qelew_model(op_type, dtype, a_shape, b_shape):
    from onnx import TensorProto, helper

    from tests.frontends.onnxutil import init, model

    elem = TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT8
    info = np.iinfo(dtype)
    inits = [init("as", np.float32(0.05)), init("az", np.array(info.min + 120, dtype)),
             init("bs", np.float32(0.08)), init("bz", np.array(info.min + 131, dtype)),
             init("ys", np.float32(0.11 if op_type == "QLinearAdd" else 0.09)),
             init("yz", np.array(info.min + 125, dtype))]
    node = helper.make_node(op_type, ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"],
                            domain="com.microsoft")
    return _microsoft(model([node], [("a", a_shape, elem), ("b", b_shape, elem)],
                            [("y", None, elem)], inits))


def _qelew_reference(op_type, a, b, dtype):
    """QLinearAdd / QLinearMul as ONNX Runtime's reference computes them: dequantized in
    float32, added or multiplied, quantized (round half to even, saturated)."""
    info = np.iinfo(dtype)
    zero = info.min
    x = (a.astype(np.int32) - (zero + 120)).astype(np.float32) * np.float32(0.05)
    y = (b.astype(np.int32) - (zero + 131)).astype(np.float32) * np.float32(0.08)
    r = x + y if op_type == "QLinearAdd" else x * y
    step = np.float32(0.11 if op_type == "QLinearAdd" else 0.09)
    return np.clip(np.rint(r / step) + (zero + 125), info.min, info.max).astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["uint8", "int8"])
@pytest.mark.parametrize("op_type", ["QLinearAdd", "QLinearMul"])
def test_qlinear_add_and_mul_as_onnx_runtime(op_type, dtype, tmp_path):
    from tests.frontends.onnxutil import run_lightnet, run_ort

    rng = np.random.default_rng(2)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, (2, 3, 4, 5)).astype(dtype)
    b = rng.integers(info.min, info.max + 1, (3, 1, 5)).astype(dtype)
    m = _qelew_model(op_type, dtype, [2, 3, 4, 5], [3, 1, 5])
    got, ir = run_lightnet(m, {"a": a, "b": b}, tmp_path)
    assert [op["optype"] for op in ir["ops"]].count("qelew") == 1
    np.testing.assert_array_equal(got["y"], _qelew_reference(op_type, a, b, dtype))
    # ONNX Runtime's vector kernels use fixed-point multipliers: a step apart at most.
    theirs = run_ort(m, {"a": a, "b": b})["y"]
    diff = np.abs(got["y"].astype(np.int32) - theirs)
    assert diff.max() <= 1 and np.mean(diff == 0) >= 0.95


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["uint8", "int8"])
def test_qlinear_global_average_pool_is_onnx_runtimes_exactly(dtype, channels_last, tmp_path):
    from onnx import TensorProto, helper

    from tests.frontends.onnxutil import init, model, run_lightnet, run_ort

    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    elem = TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT8
    shape = [2, 7, 6, 5] if channels_last else [2, 5, 7, 6]
    node = helper.make_node("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", channels_last=channels_last)
    inits = [init("xs", np.float32(0.07)), init("xz", np.array(info.min + 90, dtype)),
             init("ys", np.float32(0.03)), init("yz", np.array(info.min + 20, dtype))]
    m = _microsoft(model([node], [("x", shape, elem)], [("y", None, elem)], inits))
    x = rng.integers(info.min, info.max + 1, shape).astype(dtype)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    want = run_ort(m, {"x": x})["y"]
    assert got["y"].shape == want.shape == ((2, 1, 1, 5) if channels_last else (2, 5, 1, 1))
    np.testing.assert_array_equal(got["y"], want)


@pytest.mark.parametrize("values", ["mixed", "positive", "negative", "zeros"])
def test_dynamic_quantize_linear_is_onnx_runtimes_and_the_references(values, tmp_path):
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from tests.frontends.onnxutil import model, run_lightnet, run_ort

    rng = np.random.default_rng(4)
    x = {"mixed": rng.standard_normal((3, 4, 5)) * 3, "positive": rng.random((3, 4, 5)),
         "negative": -rng.random((3, 4, 5)) - 1, "zeros": np.zeros((3, 4, 5))}[values]
    x = x.astype(np.float32)
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    m = model([node], [("x", [3, 4, 5])], [("y", None, TensorProto.UINT8),
                                           ("s", None, TensorProto.FLOAT),
                                           ("z", None, TensorProto.UINT8)], opset=11)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    reference = dict(zip("ysz", ReferenceEvaluator(m).run(None, {"x": x})))
    theirs = run_ort(m, {"x": x})
    for name in "ysz":
        np.testing.assert_array_equal(got[name].reshape(np.shape(reference[name])),
                                      reference[name], err_msg=name)
        # An empty range has no scale: ONNX's reference takes 1 / 255, ONNX Runtime 1
        # (the same integers either way).
        if not (name == "s" and values == "zeros"):
            np.testing.assert_array_equal(got[name].reshape(np.shape(theirs[name])),
                                          theirs[name], err_msg=name)
    assert values != "zeros" or theirs["s"] == 1


def test_an_onnx_runtime_qoperator_model_computes_what_onnx_runtime_does(tmp_path):
    m, inputs = qdqmodels.quantized(qdqmodels.classifier, tmp_path, activation="uint8",
                                    reduce_range=True, quant_format="QOperator")
    made = {(n.domain, n.op_type) for n in m.graph.node}
    assert {("com.microsoft", "QLinearAdd"), ("com.microsoft", "QLinearGlobalAveragePool"),
            ("com.microsoft", "QGemm")} <= made
    session, ir = _session(m, tmp_path, "cpu")
    optypes = [op["optype"] for op in ir["ops"]]
    assert {"qelew", "qglobal_avgpool2d", "qmatmul", "qconv2d"} <= set(optypes)
    for x in inputs:
        np.testing.assert_array_equal(session.run({"x": x})["y"],
                                      _ort(m, {"x": x}, optimized=True))


def _qdq_pool_model(x_scale, y_scale, size):
    """x uint8 [1, 3, size, size] -> DequantizeLinear - GlobalAveragePool - QuantizeLinear
    -> y uint8."""
    from onnx import TensorProto, helper

    from tests.frontends.onnxutil import init, model

    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["d"]),
             helper.make_node("GlobalAveragePool", ["d"], ["g"]),
             helper.make_node("QuantizeLinear", ["g", "ys", "yz"], ["y"])]
    inits = [init("xs", np.float32(x_scale)), init("xz", np.uint8(100)),
             init("ys", np.float32(y_scale)), init("yz", np.uint8(30))]
    return model(nodes, [("x", [1, 3, size, size], TensorProto.UINT8)],
                 [("y", None, TensorProto.UINT8)], inits)


@pytest.mark.parametrize("x_scale,y_scale,size,fused", [(0.25, 0.125, 4, True),
                                                         (0.25, 0.125, 3, False),
                                                         (0.3, 0.125, 4, False)])
def test_qdq_global_average_pool_is_fused_where_exact(x_scale, y_scale, size, fused,
                                                      tmp_path):
    from tests.frontends.onnxutil import run_lightnet

    m = _qdq_pool_model(x_scale, y_scale, size)
    rng = np.random.default_rng(5)
    _, ir = run_lightnet(m, {"x": np.zeros((1, 3, size, size), np.uint8)}, tmp_path)
    optypes = [op["optype"] for op in ir["ops"]]
    assert ("qglobal_avgpool2d" in optypes) == fused and ("global_avgpool2d" in optypes) != fused
    for _ in range(5):
        x = rng.integers(0, 256, (1, 3, size, size)).astype(np.uint8)
        got, _ = run_lightnet(m, {"x": x}, tmp_path)
        np.testing.assert_array_equal(got["y"], _ort(m, {"x": x}, optimized=False))


def test_per_channel_scales_of_an_element_wise_operator_are_refused():
    from tests.frontends.onnxutil import init

    m = _qelew_model("QLinearAdd", np.uint8, [2, 3], [2, 3])
    m.graph.initializer[0].CopyFrom(init("as", np.array([0.1, 0.2, 0.3], np.float32)))
    assert "com.microsoft.QLinearAdd" in _refusal(m)
    assert "'as' of shape [3] (one value per tensor)" in _refusal(m)


@pytest.mark.parametrize("op_type,b_dtype,fused", [("Mul", np.uint8, True),
                                                   ("Add", np.uint8, True),
                                                   ("Add", np.int8, False)])
def test_qdq_add_and_mul_become_qelew(op_type, b_dtype, fused, tmp_path):
    """DequantizeLinear(a), DequantizeLinear(b) - Add / Mul - QuantizeLinear is one qelew
    computing what ONNX Runtime computes running the nodes as written (on the cpu; on
    dnnl, where oneDNN rounds after adding the zero point, within one step); with
    inputs of two dtypes (which qelew does not take) the nodes run as written."""
    from onnx import TensorProto, helper

    from tests.frontends.onnxutil import init, model, run_lightnet

    elem = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}
    nodes = [helper.make_node("DequantizeLinear", ["a", "as", "az"], ["da"]),
             helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["db"]),
             helper.make_node(op_type, ["da", "db"], ["s"]),
             helper.make_node("QuantizeLinear", ["s", "ys", "yz"], ["y"])]
    inits = [init("as", np.float32(0.043)), init("az", np.uint8(121)),
             init("bs", np.float32(0.061)), init("bz", np.array(7, b_dtype)),
             init("ys", np.float32(0.07 if op_type == "Add" else 0.2)), init("yz", np.uint8(90))]
    m = model(nodes, [("a", [2, 4, 3, 3], TensorProto.UINT8), ("b", [4, 1, 1], elem[b_dtype])],
              [("y", None, TensorProto.UINT8)], inits)
    rng = np.random.default_rng(6)
    info = np.iinfo(b_dtype)
    for _ in range(3):
        feeds = {"a": rng.integers(0, 256, (2, 4, 3, 3)).astype(np.uint8),
                 "b": rng.integers(info.min, info.max + 1, (4, 1, 1)).astype(b_dtype)}
        want = _ort(m, feeds, optimized=False)
        got, ir = run_lightnet(m, feeds, tmp_path, target="cpu")
        assert ("qelew" in [op["optype"] for op in ir["ops"]]) == fused
        np.testing.assert_array_equal(got["y"], want)
        got, _ = run_lightnet(m, feeds, tmp_path)
        assert np.abs(got["y"].astype(int) - want.astype(int)).max() <= 1


# A transformer block: attention's products of two activations quantized too ------------------

def _graph_output_step(m) -> float:
    """The scale of the DequantizeLinear making the model's (first) output."""
    from onnx import numpy_helper

    inits = {t.name: t for t in m.graph.initializer}
    last = next(n for n in m.graph.node if m.graph.output[0].name in n.output)
    assert last.op_type == "DequantizeLinear"
    return float(numpy_helper.to_array(inits[last.input[1]]))


@pytest.mark.parametrize("target", ["cpu", "dnnl"])
@pytest.mark.parametrize("activation,reduce_range", [("uint8", False), ("uint8", True),
                                                     ("int8", False)])
def test_a_transformer_block_as_onnx_runtime_runs_it_as_written(activation, reduce_range,
                                                                target, tmp_path):
    """Every MatMul of a quantized attention + FFN block is a qmatmul (Q @ K^T and
    probabilities @ V too, on the 8-bit integers of both), every quantized Add / Mul a
    qelew, its Reshapes and Transposes move the integers; Softmax, LayerNormalization and
    the Gelu's Erf run in float between DequantizeLinear and QuantizeLinear, as written.
    The output is within a step of ONNX Runtime's running the QDQ file as written."""
    m, inputs = qdqmodels.quantized(qdqmodels.transformer_block, tmp_path,
                                    activation=activation, reduce_range=reduce_range)
    session, ir = _session(m, tmp_path, target)
    optypes = [op["optype"] for op in ir["ops"]]
    assert optypes.count("qmatmul") == 8 and "matmul" not in optypes, optypes
    # The Gelu's Div, Erf, Add and two Muls: one table lookup; the scale's Mul another, or
    # nothing where its table maps every code to itself.
    assert optypes.count("qlookup") in (1, 2), optypes
    assert optypes.count("qelew") == 8 and not {"elew", "erf"} & set(optypes), optypes
    ctx = session.ctx
    moved = [o for o in ctx.ops if o.optype.startswith(("transpose", "reshape"))]
    assert sum(ctx.tensors[o.tensors_in["src"]].dtype.name in ("TL_UINT8", "TL_INT8")
               for o in moved) >= 8
    if target == "dnnl":  # its scale, DequantizeLinear of a constant, folded at import
        assert [o.optype for o in ctx.ops].count("layernorm_dnnl") == 2
    step = _graph_output_step(m)
    for x in inputs:
        got = session.run({"x": x})["y"]
        assert np.abs(got - _ort(m, {"x": x}, optimized=False)).max() <= step * 1.001


@pytest.mark.parametrize("target", ["cpu", "dnnl"])
@pytest.mark.parametrize("a_shape,b_shape,b_dtype", [
    ((2, 3, 7, 300), (2, 3, 300, 5), np.uint8),  # K 300: sums beyond 2^24, in float64
    ((3, 7, 20), (3, 20, 9), np.int8),  # K 20: in float32, exactly
    ((4, 258), (258, 6), np.uint8)])  # the largest K summed in float32
def test_a_quantized_product_of_two_activations_is_onnx_runtimes(a_shape, b_shape, b_dtype,
                                                                 target, tmp_path):
    from onnx import TensorProto, helper

    from tests.frontends.onnxutil import init, model, run_lightnet

    elem = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}
    info = np.iinfo(b_dtype)
    nodes = [helper.make_node("DequantizeLinear", ["a", "as", "az"], ["da"]),
             helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["db"]),
             helper.make_node("MatMul", ["da", "db"], ["p"]),
             helper.make_node("QuantizeLinear", ["p", "ys", "yz"], ["y"])]
    inits = [init("as", np.float32(0.043)), init("az", np.uint8(255)),
             init("bs", np.float32(0.061)), init("bz", np.array(info.min, b_dtype)),
             init("ys", np.float32(40.0)), init("yz", np.uint8(131))]
    m = model(nodes, [("a", list(a_shape), TensorProto.UINT8),
                      ("b", list(b_shape), elem[b_dtype])], [("y", None, TensorProto.UINT8)],
              inits)
    rng = np.random.default_rng(9)
    # A at 0 and B at its top: every product (0 - 255) * (max - min) = -65025, the
    # extreme; then random values.
    extreme = {"a": np.zeros(a_shape, np.uint8), "b": np.full(b_shape, info.max, b_dtype)}
    for feeds in (extreme, {"a": rng.integers(0, 256, a_shape).astype(np.uint8),
                            "b": rng.integers(info.min, info.max + 1, b_shape).astype(b_dtype)}):
        got, ir = run_lightnet(m, feeds, tmp_path, target=target)
        assert [op["optype"] for op in ir["ops"]].count("qmatmul") == 1
        np.testing.assert_array_equal(got["y"], _ort(m, feeds, optimized=False))


def test_a_transformer_block_on_onednn_int8_kernels(tmp_path, monkeypatch):
    """On reduce_range weights oneDNN runs the weight products on its int8 kernels and
    the two products of activations (uint8 with zero points, which oneDNN's int8 weights
    are not) as float32 products of the integers less their zero points, still within a
    step of ONNX Runtime as written."""
    capi = pytest.importorskip("lightnet.archs.dnnl.capi")
    if capi.unavailable_reason() is not None:
        pytest.skip(capi.unavailable_reason())
    from lightnet.archs.dnnl import ops as dnnl_ops

    monkeypatch.setattr(dnnl_ops, "int8_exact", lambda: True)
    m, inputs = qdqmodels.quantized(qdqmodels.transformer_block, tmp_path, activation="uint8",
                                    reduce_range=True)
    session, _ = _session(m, tmp_path, "dnnl")
    optypes = [op.optype for op in session.ctx.ops]
    assert optypes.count("qmatmul_dnnl") == 6 and optypes.count("matmul_dnnl") == 2, optypes
    assert "qmatmul_cpu" not in optypes, optypes
    step = _graph_output_step(m)
    for x in inputs:
        got = session.run({"x": x})["y"]
        assert np.abs(got - _ort(m, {"x": x}, optimized=False)).max() <= step * 1.001



# ONNX Runtime's QLinearConcat and QLinearAveragePool ------------------------------------------

@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["uint8", "int8"])
def test_qlinear_concat_is_onnx_runtimes_exactly(dtype, tmp_path):
    """Inputs of other scales and zero points than the output's are requantized (as
    ONNX Runtime's lookup table does), one of the output's own is copied."""
    from onnx import TensorProto, helper

    from tests.frontends.onnxutil import init, model, run_lightnet, run_ort

    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    elem = TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT8
    inits = [init("ys", np.float32(0.05)), init("yz", np.array(info.min + 128, dtype)),
             init("s1", np.float32(0.05)), init("z1", np.array(info.min + 128, dtype)),
             init("s2", np.float32(0.0371)), init("z2", np.array(info.min + 90, dtype)),
             init("s3", np.float32(0.13)), init("z3", np.array(info.min + 200, dtype))]
    node = helper.make_node("QLinearConcat", ["ys", "yz", "a", "s1", "z1", "b", "s2", "z2",
                                              "c", "s3", "z3"], ["y"], axis=-2,
                            domain="com.microsoft")
    shapes = {"a": [2, 3, 4], "b": [2, 5, 4], "c": [2, 1, 4]}
    m = _microsoft(model([node], [(k, v, elem) for k, v in shapes.items()],
                         [("y", None, elem)], inits))
    feeds = {k: rng.integers(info.min, info.max + 1, v).astype(dtype)
             for k, v in shapes.items()}
    for target in ("cpu", "dnnl"):
        got, ir = run_lightnet(m, feeds, tmp_path, target=target)
        assert [op["optype"] for op in ir["ops"]].count("quantize") == 2  # not the first
        want = run_ort(m, feeds)["y"]
        assert got["y"].shape == want.shape == (2, 9, 4)
        np.testing.assert_array_equal(got["y"], want)


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("geometry", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [2, 3], "strides": [1, 2], "pads": [0, 1, 1, 0], "count_include_pad": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}], ids=str)
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["uint8", "int8"])
def test_qlinear_average_pool_as_onnx_runtime(dtype, geometry, channels_last, tmp_path):
    """QLinearAveragePool is dequantize - avgpool2d - quantize: ONNX Runtime sums each
    window in float32 in its own order, divides by the count (avgpool2d multiplies by
    its inverse) and adds the zero point before rounding, so an average near a rounding
    boundary may round the other way: a step apart at most (measured: 1 - 3 % of the
    outputs)."""
    from onnx import TensorProto, helper

    from tests.frontends.onnxutil import init, model, run_lightnet, run_ort

    rng = np.random.default_rng(8)
    info = np.iinfo(dtype)
    elem = TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT8
    spatial = [9, 10][:len(geometry["kernel_shape"])]
    shape = [2] + spatial + [6] if channels_last else [2, 6] + spatial
    inits = [init("xs", np.float32(0.07)), init("xz", np.array(info.min + 90, dtype)),
             init("ys", np.float32(0.03)), init("yz", np.array(info.min + 20, dtype))]
    node = helper.make_node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", channels_last=channels_last, **geometry)
    m = _microsoft(model([node], [("x", shape, elem)], [("y", None, elem)], inits))
    for _ in range(3):
        x = rng.integers(info.min, info.max + 1, shape).astype(dtype)
        for target in ("cpu", "dnnl"):
            got, _ = run_lightnet(m, {"x": x}, tmp_path, target=target)
            want = run_ort(m, {"x": x})["y"]
            assert got["y"].shape == want.shape
            diff = np.abs(got["y"].astype(np.int32) - want)
            assert diff.max() <= 1 and np.mean(diff == 0) >= 0.95, (diff.max(), diff.mean())


@pytest.mark.parametrize("target", ["cpu", "dnnl"])
@pytest.mark.parametrize("activation", ["int8", "uint8"])
def test_a_qoperator_model_of_concat_and_average_pool_is_onnx_runtimes(activation, target,
                                                                       tmp_path):
    m, inputs = qdqmodels.quantized(qdqmodels.concat_pool, tmp_path, activation=activation,
                                    reduce_range=True, quant_format="QOperator")
    made = {(n.domain, n.op_type) for n in m.graph.node}
    assert {("com.microsoft", "QLinearConcat"), ("com.microsoft", "QLinearAveragePool")} <= made
    session, ir = _session(m, tmp_path, target)
    optypes = [op["optype"] for op in ir["ops"]]
    assert {"concat", "avgpool2d", "qconv2d"} <= set(optypes)
    for x in inputs:
        np.testing.assert_array_equal(session.run({"x": x})["y"],
                                      _ort(m, {"x": x}, optimized=True))


@pytest.mark.parametrize("b_dtype", [np.uint8, np.int8], ids=["uint8", "int8"])
def test_qlinear_matmul_of_a_computed_b_is_onnx_reference_exactly(b_dtype, tmp_path):
    """QLinearMatMul's B an input (ONNX Runtime's QOperator attention: Q @ K^T): its
    zero point taken off on every run."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from tests.frontends.onnxutil import init, model, run_lightnet

    elem = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}
    info = np.iinfo(b_dtype)
    inits = [init("as", np.float32(0.02)), init("az", np.uint8(120)),
             init("bs", np.float32(0.03)), init("bz", np.array(info.min + 77, b_dtype)),
             init("ys", np.float32(0.4)), init("yz", np.uint8(128))]
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                            ["y"])
    m = model([node], [("a", [2, 5, 9], TensorProto.UINT8), ("b", [2, 9, 6], elem[b_dtype])],
              [("y", None, TensorProto.UINT8)], inits)
    rng = np.random.default_rng(10)
    feeds = {"a": rng.integers(0, 256, (2, 5, 9)).astype(np.uint8),
             "b": rng.integers(info.min, info.max + 1, (2, 9, 6)).astype(b_dtype)}
    for target in ("cpu", "dnnl"):
        got, _ = run_lightnet(m, feeds, tmp_path, target=target)
        np.testing.assert_array_equal(got["y"], ReferenceEvaluator(m).run(None, feeds)[0])


@pytest.mark.parametrize("target", ["cpu", "dnnl"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_an_embedding_lookup_gathers_the_integers(dtype, target, tmp_path):
    """A Gather of computed indices from a constant 8-bit table dequantized per tensor
    gathers the rows of the integers and dequantizes only them (a word embedding is not
    dequantized whole on every run), giving what ONNX's reference does."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from tests.frontends.onnxutil import init, model, run_lightnet

    info = np.iinfo(dtype)
    table = np.random.default_rng(4).integers(info.min, info.max + 1, (50, 6)).astype(dtype)
    nodes = [helper.make_node("DequantizeLinear", ["table", "s", "z"], ["dq"]),
             helper.make_node("Gather", ["dq", "ids"], ["y"])]
    inits = [init("table", table), init("s", np.float32(0.037)), init("z", np.array(3, dtype))]
    ids = np.array([[0, 5, 2], [5, 1, 0]], np.int64)
    m = model(nodes, [("ids", [2, 3], TensorProto.INT64)], [("y", None, TensorProto.FLOAT)],
              inits, opset=19)
    got, ir = run_lightnet(m, {"ids": ids}, tmp_path, target=target)
    dequantized = [op for op in ir["ops"] if op["optype"] == "dequantize"]
    assert len(dequantized) == 1, ir["ops"]
    want = ReferenceEvaluator(m).run(None, {"ids": ids})[0]
    assert got["y"].shape == want.shape == (2, 3, 6)
    np.testing.assert_array_equal(got["y"], want)
