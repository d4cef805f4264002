"""Element-wise math and activations (Sign, Floor, Ceil, Round, Log, trigonometric and
hyperbolic functions, Softplus, Softsign, Mish, Elu, Selu, Celu, ThresholdedRelu,
Shrink, Abs) imported as `unary` and compared with ONNX Runtime and numpy."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from lightnet import LightNetError, Session  # noqa: E402
from lightnet.frontends.onnx import convert  # noqa: E402
from tests.frontends.onnxutil import run_lightnet, run_ort  # noqa: E402


def one_node(op, shape=(3, 17), elem=TensorProto.FLOAT, opset=18, **attrs):
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g",
                              [helper.make_tensor_value_info("x", elem, list(shape))],
                              [helper.make_tensor_value_info("y", elem, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def unary_funcs(ir):
    return [p["value"] for op in ir["ops"] if op["optype"] == "unary" for p in op["params"]
            if p["arg_name"] == "func"]


# (op, attributes, the input's range, the unary func)
CASES = [
    ("Floor", {}, (-5, 5), "floor"), ("Ceil", {}, (-5, 5), "ceil"),
    ("Log", {}, (0.01, 10), "log"), ("Sin", {}, (-7, 7), "sin"), ("Cos", {}, (-7, 7), "cos"),
    ("Tan", {}, (-1.5, 1.5), "tan"), ("Asin", {}, (-1, 1), "asin"),
    ("Acos", {}, (-1, 1), "acos"), ("Atan", {}, (-9, 9), "atan"),
    ("Sinh", {}, (-5, 5), "sinh"), ("Cosh", {}, (-5, 5), "cosh"),
    ("Asinh", {}, (-9, 9), "asinh"), ("Acosh", {}, (1, 9), "acosh"),
    ("Atanh", {}, (-0.99, 0.99), "atanh"), ("Softplus", {}, (-30, 30), "softplus"),
    ("Softsign", {}, (-9, 9), "softsign"), ("Mish", {}, (-9, 9), "mish"),
    ("Elu", {"alpha": 0.7}, (-4, 4), "elu"), ("Selu", {}, (-4, 4), "elu"),
    ("Celu", {"alpha": 1.7}, (-4, 4), "celu"),
    ("ThresholdedRelu", {"alpha": 0.5}, (-2, 2), "thresholded_relu"),
    ("Shrink", {"lambd": 0.8, "bias": 0.3}, (-2, 2), "shrink"),
    ("Sign", {}, (-2, 2), "sign"), ("Abs", {}, (-2, 2), "abs"),
]


@pytest.mark.parametrize("op,attrs,span,func", CASES, ids=[c[0] for c in CASES])
def test_matches_onnxruntime(op, attrs, span, func, tmp_path):
    m = one_node(op, **attrs)
    x = np.random.default_rng(1).uniform(*span, (3, 17)).astype(np.float32)
    x[0, :3] = [0, span[0], span[1] * 0.999] if op not in ("Log", "Acosh") else x[0, :3]
    got, ir = run_lightnet(m, {"x": x}, tmp_path)
    assert unary_funcs(ir) == [func]
    want = run_ort(m, {"x": x})["y"]
    np.testing.assert_allclose(got["y"], want, rtol=2e-6, atol=2e-6)


def test_round_takes_halves_to_even(tmp_path):
    m = one_node("Round", shape=(8,))
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 3.5001], np.float32)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got["y"], [0, 2, 2, -0, -2, -2, 2, 4])
    np.testing.assert_array_equal(got["y"], run_ort(m, {"x": x})["y"])


@pytest.mark.parametrize("elem,dtype", [(TensorProto.INT32, np.int32),
                                        (TensorProto.INT8, np.int8),
                                        (TensorProto.DOUBLE, np.float64)])
@pytest.mark.parametrize("op", ["Sign", "Abs"])
def test_sign_and_abs_of_other_dtypes(op, elem, dtype, tmp_path):
    m = one_node(op, shape=(6,), elem=elem)
    x = np.array([-7, -1, 0, 1, 5, 100], dtype)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    assert got["y"].dtype == dtype
    np.testing.assert_array_equal(got["y"], {"Sign": np.sign, "Abs": np.abs}[op](x))


def test_double_log_and_cos_against_numpy():
    for op, ref in (("Log", np.log), ("Cos", np.cos)):
        m = one_node(op, shape=(5,), elem=TensorProto.DOUBLE)
        x = np.array([0.1, 0.5, 1, 2, 30])
        (got,) = Session(convert(m)[0]).run({"x": x}).values()
        np.testing.assert_allclose(got, ref(x), rtol=1e-15)


def test_outside_the_domain_is_nan_and_log_zero_minus_inf():
    x = np.array([-1, 0, 2], np.float32)
    got = {op: next(iter(Session(convert(one_node(op, shape=(3,)))[0]).run({"x": x}).values()))
           for op in ("Log", "Asin", "Acosh")}
    assert np.isnan(got["Log"][0]) and got["Log"][1] == -np.inf
    assert np.isnan(got["Asin"][2]) and np.isnan(got["Acosh"][0])


@pytest.mark.parametrize("op", ["Floor", "Log", "Sin", "Softplus", "Celu", "Shrink"])
def test_an_integer_input_is_refused(op):
    with pytest.raises(LightNetError, match=f"{op} input of dtype TL_INT32"):
        convert(one_node(op, elem=TensorProto.INT32))


def test_celu_alpha_zero_is_refused():
    with pytest.raises(LightNetError, match="alpha 0"):
        convert(one_node("Celu", alpha=0.0))


def mod_model(shape_a, shape_b, elem, fmod, opset=13):
    graph = helper.make_graph([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)], "g",
                              [helper.make_tensor_value_info("a", elem, list(shape_a)),
                               helper.make_tensor_value_info("b", elem, list(shape_b))],
                              [helper.make_tensor_value_info("y", elem, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("elem,dtype,fmod", [(TensorProto.INT32, np.int32, 0),
                                             (TensorProto.INT32, np.int32, 1),
                                             (TensorProto.INT16, np.int16, 0),
                                             (TensorProto.FLOAT, np.float32, 1),
                                             (TensorProto.DOUBLE, np.float64, 1)])
def test_mod_matches_onnxruntime(elem, dtype, fmod, tmp_path):
    m = mod_model((3, 1, 5), (4, 5), elem, fmod)
    rng = np.random.default_rng(2)
    a = (rng.uniform(-50, 50, (3, 1, 5))).astype(dtype)
    b = rng.uniform(-9, 9, (4, 5)).astype(dtype)
    b[b == 0] = 3
    got, ir = run_lightnet(m, {"a": a, "b": b}, tmp_path)
    assert [op["optype"] for op in ir["ops"]].count("mod") == 1
    want = run_ort(m, {"a": a, "b": b})["y"]
    assert got["y"].dtype == want.dtype
    np.testing.assert_allclose(got["y"], want, rtol=1e-6, atol=1e-5)


def test_mod_of_floats_with_fmod_0_is_the_floor_remainder(tmp_path):
    m = mod_model((4,), (4,), TensorProto.FLOAT, 0, opset=18)
    a = np.array([5.5, -5.5, 5.5, -5.5], np.float32)
    b = np.array([2, 2, -2, -2], np.float32)
    got, _ = run_lightnet(m, {"a": a, "b": b}, tmp_path)
    np.testing.assert_array_equal(got["y"], [1.5, 0.5, -0.5, -1.5])


def test_mod_of_two_dtypes_is_refused():
    m = mod_model((2,), (2,), TensorProto.INT32, 0)
    m.graph.input[1].type.tensor_type.elem_type = TensorProto.INT16
    with pytest.raises(LightNetError, match="operands of dtypes TL_INT32 and TL_INT16"):
        convert(m)


@pytest.mark.parametrize("opset,axis,shape", [(13, -1, (3, 40)), (13, 1, (2, 5, 7)),
                                              (11, 1, (2, 5, 7)), (11, -1, (2, 5, 7))])
def test_log_softmax_matches_onnxruntime(opset, axis, shape, tmp_path):
    m = one_node("LogSoftmax", shape=shape, opset=opset, axis=axis)
    x = (np.random.default_rng(4).standard_normal(shape) * 30).astype(np.float32)
    got, ir = run_lightnet(m, {"x": x}, tmp_path)
    assert "log_softmax" in [op["optype"] for op in ir["ops"]]
    np.testing.assert_allclose(got["y"], run_ort(m, {"x": x})["y"], rtol=1e-5, atol=1e-5)


def test_log_softmax_stays_finite_where_softmax_underflows():
    m = one_node("LogSoftmax", shape=(1, 3), axis=-1)
    x = np.array([[0, 500, 1000]], np.float32)
    (got,) = Session(convert(m)[0]).run({"x": x}).values()
    np.testing.assert_allclose(got, [[-1000, -500, 0]], rtol=1e-6)


def test_log_softmax_of_integers_is_refused():
    with pytest.raises(LightNetError, match="LogSoftmax input of dtype TL_INT32"):
        convert(one_node("LogSoftmax", elem=TensorProto.INT32, axis=-1))


def test_a_bfloat16_graph_input_is_refused():
    """numpy has no bfloat16, so Session could not take the input."""
    with pytest.raises(LightNetError, match="'x' is a bfloat16 input, which Session cannot take"):
        convert(one_node("Celu", elem=TensorProto.BFLOAT16, opset=22))
