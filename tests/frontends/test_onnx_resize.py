"""Resize in every mode of ONNX's backend node tests (their scales, sizes and roi made
initializers, as exporters write them: LightNet plans static shapes), against the tests'
expected outputs, and against ONNX Runtime on graphs built here."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lightnet import LightNetError, Session  # noqa: E402
from lightnet.frontends.onnx import convert  # noqa: E402
from tests.frontends.onnxutil import run_lightnet, run_ort  # noqa: E402


def resize_node_cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return [c for c in cases if c.name.startswith("test_resize_")
            and [nd.op_type for nd in c.model.graph.node] == ["Resize"]]


CASES = resize_node_cases()


def with_constant_inputs(case):
    """The case's model with every input but the first an initializer of its test value,
    and the first input's value and the expected output."""
    (inputs, outputs), = case.data_sets
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    graph = model.graph
    for info, value in zip(list(graph.input)[1:], inputs[1:]):
        graph.initializer.append(numpy_helper.from_array(np.asarray(value), info.name))
    return model, inputs[0], outputs[0]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_case(case):
    model, x, want = with_constant_inputs(case)
    ir, _ = convert(model)
    (got,) = Session(ir).run({model.graph.input[0].name: x}).values()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_every_node_case_is_here():
    assert len(CASES) >= 39


def resize_model(shape, scales=None, sizes=None, roi=None, elem=TensorProto.FLOAT, **attrs):
    inits = {"roi": np.array(roi if roi is not None else [], np.float32),
             "scales": np.array(scales if scales is not None else [], np.float32)}
    if sizes is not None:
        inits["sizes"] = np.array(sizes, np.int64)
    graph = helper.make_graph(
        [helper.make_node("Resize", ["x", *inits], ["y"], **attrs)], "g",
        [helper.make_tensor_value_info("x", elem, list(shape))],
        [helper.make_tensor_value_info("y", elem, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("attrs,scales,sizes", [
    ({"mode": "cubic"}, [1, 1, 1.7, 0.6], None),
    ({"mode": "cubic", "coordinate_transformation_mode": "align_corners"}, None, [1, 3, 11, 4]),
    ({"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, [1, 1, 2, 3], None),
    ({"mode": "linear", "antialias": 1}, [1, 1, 0.4, 0.7], None),
    ({"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 1.5, 2.5], None),
    ({"mode": "nearest", "coordinate_transformation_mode": "align_corners",
      "nearest_mode": "round_prefer_ceil"}, None, [1, 3, 5, 17]),
    ({"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
      "extrapolation_value": -3.0}, None, [1, 3, 5, 6]),
])
def test_general_modes_match_onnxruntime(attrs, scales, sizes, tmp_path):
    roi = [0, 0, 0.2, -0.1, 1, 1, 0.9, 1.3] \
        if attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize" else None
    m = resize_model((1, 3, 7, 9), scales, sizes, roi, **attrs)
    x = np.random.default_rng(0).standard_normal((1, 3, 7, 9)).astype(np.float32)
    got, ir = run_lightnet(m, {"x": x}, tmp_path)
    assert "interpolate" in [op["optype"] for op in ir["ops"]]
    np.testing.assert_allclose(got["y"], run_ort(m, {"x": x})["y"], rtol=1e-5, atol=1e-5)


def test_integer_nearest_is_exact(tmp_path):
    m = resize_model((1, 1, 3, 4), [1, 1, 1.7, 0.6], elem=TensorProto.INT32,
                     coordinate_transformation_mode="asymmetric", nearest_mode="ceil")
    x = (np.arange(12, dtype=np.int32) * 100_003).reshape(1, 1, 3, 4)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    assert got["y"].dtype == np.int32
    np.testing.assert_array_equal(got["y"], run_ort(m, {"x": x})["y"])


def test_cubic_of_integers_is_refused():
    with pytest.raises(LightNetError, match="cubic mode on TL_INT32"):
        convert(resize_model((1, 1, 3, 4), [1, 1, 2, 2], elem=TensorProto.INT32, mode="cubic"))


def test_tf_crop_and_resize_needs_its_roi():
    with pytest.raises(LightNetError, match="a roi of 2 values for 4 axes"):
        convert(resize_model((1, 1, 3, 4), [1, 1, 2, 2], roi=[0, 1],
                             coordinate_transformation_mode="tf_crop_and_resize"))


def test_align_corners_with_a_fractional_length_follows_onnx_reference():
    """Scale 0.6 of 4 is a length of 2.4, and the reference maps output 1 to 1 * 3 / 1.4
    (ONNX Runtime: 1 * 3 / 1). The node test test_resize_downsample_scales_linear_align_corners
    expects the same."""
    m = resize_model((1, 1, 1, 4), [1, 1, 1, 0.6], mode="linear",
                     coordinate_transformation_mode="align_corners")
    x = np.array([[[[1, 2, 3, 4]]]], np.float32)
    (got,) = Session(convert(m)[0]).run({"x": x}).values()
    np.testing.assert_allclose(got.ravel(), [1, 1 + 3 / 1.4], rtol=1e-6)
