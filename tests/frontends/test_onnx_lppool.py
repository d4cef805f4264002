"""LpPool (made of abs, pow, a padding-counting average pool, a scale and a root) against
ONNX Runtime and a naive loop."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from tests.frontends.onnxutil import run_lightnet, run_ort  # noqa: E402


def lppool_model(shape, opset=18, **attrs):
    graph = helper.make_graph([helper.make_node("LpPool", ["x"], ["y"], **attrs)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("shape,attrs", [
    ((1, 3, 8, 9), {"kernel_shape": [3, 3], "p": 2}),
    ((2, 2, 7, 7), {"kernel_shape": [2, 3], "p": 3, "strides": [2, 1], "pads": [1, 0, 0, 2]}),
    ((1, 2, 6, 5), {"kernel_shape": [3, 3], "p": 1, "auto_pad": "SAME_UPPER"}),
    ((1, 4, 10), {"kernel_shape": [3], "p": 2, "strides": [2]}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "p": 3, "strides": [1, 2, 2],
                       "pads": [1, 0, 1, 0, 1, 1]}),
])
def test_matches_onnxruntime(shape, attrs, tmp_path):
    m = lppool_model(shape, **attrs)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got, ir = run_lightnet(m, {"x": x}, tmp_path)
    pool = "avgpool3d" if len(shape) == 5 else "avgpool2d"
    assert pool in [op["optype"] for op in ir["ops"]]
    np.testing.assert_allclose(got["y"], run_ort(m, {"x": x})["y"], rtol=1e-5, atol=1e-6)


def test_against_a_naive_loop(tmp_path):
    m = lppool_model((1, 1, 4, 4), kernel_shape=[2, 2], strides=[2, 2], p=3)
    x = np.random.default_rng(1).standard_normal((1, 1, 4, 4)).astype(np.float32)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    want = [[np.sum(np.abs(x[0, 0, i:i + 2, j:j + 2]).astype(np.float64) ** 3) ** (1 / 3)
             for j in (0, 2)] for i in (0, 2)]
    np.testing.assert_allclose(got["y"][0, 0], want, rtol=1e-5)


@pytest.mark.parametrize("shape,attrs", [
    ((1, 2, 7, 8), {"kernel_shape": [2, 2], "dilations": [2, 3], "p": 2}),
    ((1, 1, 9, 9), {"kernel_shape": [3, 2], "dilations": [2, 2], "strides": [2, 1],
                    "pads": [1, 1, 0, 1], "p": 3}),
])
def test_dilations_match_onnxruntime(shape, attrs, tmp_path):
    m = lppool_model(shape, **attrs)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    np.testing.assert_allclose(got["y"], run_ort(m, {"x": x})["y"], rtol=1e-5, atol=1e-6)
