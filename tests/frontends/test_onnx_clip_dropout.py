"""Clip with computed bounds, Dropout's mask at inference and Identity, against ONNX
Runtime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lightnet import LightNetError  # noqa: E402
from lightnet.frontends.onnx import convert  # noqa: E402
from tests.frontends.onnxutil import run_lightnet, run_ort  # noqa: E402


def clip_model(bounds, inits=(), elem=TensorProto.FLOAT, bound_shape=()):
    """Clip of x [3, 8] by `bounds` ('min', 'max' or '' per input); names in `inits` are
    initializers, the others graph inputs."""
    inputs = [helper.make_tensor_value_info("x", elem, [3, 8])]
    inputs += [helper.make_tensor_value_info(b, elem, list(bound_shape)) for b in bounds
               if b and b not in dict(inits)]
    graph = helper.make_graph(
        [helper.make_node("Clip", ["x", *bounds], ["y"])], "g", inputs,
        [helper.make_tensor_value_info("y", elem, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("bounds,lo,hi", [(["min", "max"], -0.5, 0.7),
                                          (["min", "max"], 0.9, -0.2),
                                          (["min"], -0.3, None), (["", "max"], None, 0.4)])
def test_computed_bounds_match_onnxruntime(bounds, lo, hi, tmp_path):
    m = clip_model(bounds)
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    feeds = {"x": x}
    if lo is not None:
        feeds["min"] = np.array(lo, np.float32)
    if hi is not None:
        feeds["max"] = np.array(hi, np.float32)
    got, _ = run_lightnet(m, feeds, tmp_path)
    np.testing.assert_array_equal(got["y"], run_ort(m, feeds)["y"])


def test_a_constant_and_a_computed_bound_on_int8(tmp_path):
    m = clip_model(["min", "max"], {"min": np.array(-3, np.int8)}, elem=TensorProto.INT8)
    x = np.arange(-12, 12, dtype=np.int8).reshape(3, 8)
    feeds = {"x": x, "max": np.array(5, np.int8)}
    got, _ = run_lightnet(m, feeds, tmp_path)
    np.testing.assert_array_equal(got["y"], np.clip(x, -3, 5))


def test_constant_min_above_max_gives_max(tmp_path):
    m = clip_model(["min", "max"], {"min": np.array(2.0, np.float32),
                                    "max": np.array(1.0, np.float32)})
    x = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got["y"], np.full((3, 8), 1.0, np.float32))
    np.testing.assert_array_equal(got["y"], run_ort(m, {"x": x})["y"])


def test_a_bound_that_is_not_a_scalar_is_an_invalid_model():
    with pytest.raises(LightNetError, match="min has shape \\[8\\], expected a scalar"):
        convert(clip_model(["min"], bound_shape=(8,)))


def dropout_model(opset):
    graph = helper.make_graph(
        [helper.make_node("Dropout", ["x"], ["y", "mask"],
                          **({"ratio": 0.3} if opset < 12 else {}))], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("mask", TensorProto.BOOL, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("opset", [13, 22])
def test_dropout_mask_keeps_everything(opset, tmp_path):
    m = dropout_model(opset)
    x = np.random.default_rng(2).standard_normal((2, 5)).astype(np.float32)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    want = run_ort(m, {"x": x})
    np.testing.assert_array_equal(got["y"], x)
    assert got["mask"].dtype == np.bool_ and want["mask"].dtype == np.bool_
    np.testing.assert_array_equal(got["mask"], want["mask"])
    assert got["mask"].all() and got["mask"].shape == (2, 5)


def test_dropout_mask_before_version_12_is_refused():
    """The spec leaves it open (ONNX Runtime gives false)."""
    with pytest.raises(LightNetError, match="the mask output of Dropout-10"):
        convert(dropout_model(10))
