"""MaxPool's Indices output, dilated AveragePool, 3-D MaxPool and AveragePool and
GlobalLpPool, MaxUnpool against ONNX Runtime (and a naive sum, a naive loop)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from lightnet import LightNetError, Session  # noqa: E402
from lightnet.frontends.onnx import convert  # noqa: E402
from tests.frontends.onnxutil import run_lightnet, run_ort  # noqa: E402


def pool_model(op_type, shape, outputs=("y",), dtype=TensorProto.FLOAT, **attrs):
    outs = [helper.make_tensor_value_info("y", dtype, None)]
    if "z" in outputs:
        outs.append(helper.make_tensor_value_info("z", TensorProto.INT64, None))
    graph = helper.make_graph([helper.make_node(op_type, ["x"], list(outputs), **attrs)], "g",
                              [helper.make_tensor_value_info("x", dtype, list(shape))], outs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ((1, 2, 6, 7), {"kernel_shape": [2, 3], "pads": [1, 1, 0, 2], "storage_order": 1}),
    ((1, 2, 9, 8), {"kernel_shape": [2, 2], "dilations": [2, 3], "strides": [1, 2]}),
    ((1, 1, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                    "pads": [1, 1, 1, 1]}),
    ((1, 2, 5, 6), {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "storage_order": 1}),
    ((2, 3, 11), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
])
def test_maxpool_indices_match_onnxruntime(shape, attrs, tmp_path):
    m = pool_model("MaxPool", shape, outputs=("y", "z"), **attrs)
    # Distinct values: ties would let any of the equal cells be the index.
    x = np.random.default_rng(0).permutation(np.prod(shape)).reshape(shape).astype(np.float32)
    got, ir = run_lightnet(m, {"x": x}, tmp_path)
    assert "maxpool2d_argmax" in [op["optype"] for op in ir["ops"]]
    want = run_ort(m, {"x": x})
    np.testing.assert_array_equal(got["y"], want["y"])
    assert got["z"].dtype == np.int64
    np.testing.assert_array_equal(got["z"], want["z"])


def test_maxpool_indices_of_int8(tmp_path):
    m = pool_model("MaxPool", (1, 2, 4, 4), outputs=("y", "z"), dtype=TensorProto.INT8,
                   kernel_shape=[2, 2], strides=[2, 2])
    x = np.random.default_rng(1).permutation(32).reshape(1, 2, 4, 4).astype(np.int8) - 16
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    want = run_ort(m, {"x": x})
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["z"], want["z"])


@pytest.mark.parametrize("shape,attrs", [
    ((1, 2, 7, 8), {"kernel_shape": [2, 2], "dilations": [2, 3]}),
    ((2, 1, 9, 9), {"kernel_shape": [3, 2], "dilations": [2, 2], "strides": [2, 1],
                    "pads": [1, 1, 2, 1]}),
    ((1, 1, 9, 9), {"kernel_shape": [3, 2], "dilations": [2, 2], "strides": [2, 1],
                    "pads": [1, 1, 2, 1], "count_include_pad": 1}),
    ((1, 2, 4, 4), {"kernel_shape": [2, 2], "dilations": [2, 2], "ceil_mode": 1}),
])
def test_dilated_averagepool_matches_onnxruntime(shape, attrs, tmp_path):
    m = pool_model("AveragePool", shape, **attrs)
    m.opset_import[0].version = 19  # AveragePool-19 has dilations
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    np.testing.assert_allclose(got["y"], run_ort(m, {"x": x})["y"], rtol=1e-5, atol=1e-6)


def test_maxpool_indices_of_3d_pooling_are_refused():
    m = pool_model("MaxPool", (1, 1, 4, 4, 4), outputs=("y", "z"), kernel_shape=[2, 2, 2])
    with pytest.raises(LightNetError, match="the Indices of a 3-D MaxPool"):
        convert(m)


def naive_pool3d(x, kind, kernel, strides, pads, dilations, out_dims, count_include_pad):
    """Max or average over each window of NCDHW x, cell by cell: cells outside the input
    are skipped, counted by the average with count_include_pad inside the explicit pads."""
    dims = x.shape[2:]
    out = np.zeros(x.shape[:2] + tuple(out_dims))
    for o in itertools.product(*map(range, out_dims)):
        values, count = [], 0
        for t in itertools.product(*map(range, kernel)):
            at = [oi * s - p + ti * d for oi, s, p, ti, d in zip(o, strides, pads, t, dilations)]
            if all(0 <= a < n for a, n in zip(at, dims)):
                values.append(x[(slice(None), slice(None)) + tuple(at)])
                count += 1
            elif count_include_pad and all(-b <= a < n + e for a, n, b, e in
                                            zip(at, dims, pads[:3], pads[3:])):
                count += 1
        out[(slice(None), slice(None)) + o] = (np.max(values, axis=0) if kind == "max"
                                               else np.sum(values, axis=0) / count)
    return out


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2]}),
    ((1, 2, 6, 5, 5), {"kernel_shape": [3, 2, 2], "pads": [1, 0, 1, 1, 1, 0],
                       "strides": [2, 1, 2]}),
    ((1, 2, 6, 5, 5), {"kernel_shape": [3, 2, 2], "pads": [1, 0, 1, 1, 1, 0],
                       "count_include_pad": 1}),
    ((1, 1, 7, 6, 7), {"kernel_shape": [2, 2, 3], "strides": [2, 2, 2], "ceil_mode": 1}),
    ((1, 2, 8, 7, 6), {"kernel_shape": [2, 2, 2], "dilations": [2, 1, 2],
                       "pads": [1, 1, 0, 0, 1, 1]}),
    ((1, 1, 5, 6, 7), {"kernel_shape": [3, 3, 2], "strides": [2, 2, 2], "auto_pad": "SAME_UPPER"}),
])
@pytest.mark.parametrize("target", ["cpu", "dnnl"])
def test_3d_pooling_matches_onnxruntime_and_a_naive_loop(op_type, shape, attrs, target,
                                                          tmp_path):
    if op_type == "MaxPool" and "count_include_pad" in attrs:
        pytest.skip("count_include_pad is AveragePool's")
    m = pool_model(op_type, shape, **attrs)
    m.opset_import[0].version = 19  # AveragePool-19 has dilations
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    ir, weights = convert(m)
    assert f"{'max' if op_type == 'MaxPool' else 'avg'}pool3d" in [o["optype"] for o in ir["ops"]]
    session = Session(ir, target=target)
    got = session.run({"x": x})["y"]
    # oneDNN pools dilated windows with its reference kernel only: the cpu's then.
    refused = target == "dnnl" and "dilations" in attrs
    assert bool(session.ctx.refused) == refused
    optype = f"{'max' if op_type == 'MaxPool' else 'avg'}pool3d_{'cpu' if refused else target}"
    pool = next(o for o in session.ctx.ops if o.optype == optype)
    if optype.endswith("_dnnl"):  # a plain source reordered into channel blocks: jit
        assert pool.values["call"].impl_info.startswith("jit"), pool.values["call"].impl_info
    want = run_ort(m, {"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    k = len(shape) - 2
    pads = list(attrs.get("pads", [0] * 2 * k))
    if attrs.get("auto_pad") == "SAME_UPPER":
        total = [max(0, (-(-n // s) - 1) * s + kk - n)
                 for n, s, kk in zip(shape[2:], attrs["strides"], attrs["kernel_shape"])]
        pads = [t // 2 for t in total] + [t - t // 2 for t in total]
    naive = naive_pool3d(x.astype(np.float64), "max" if op_type == "MaxPool" else "avg",
                         attrs["kernel_shape"], attrs.get("strides", [1] * k), pads,
                         attrs.get("dilations", [1] * k), want.shape[2:],
                         attrs.get("count_include_pad", 0))
    np.testing.assert_allclose(got, naive, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op_type", ["GlobalMaxPool", "GlobalAveragePool"])
def test_3d_global_pooling_matches_onnxruntime(op_type, tmp_path):
    m = pool_model(op_type, (2, 3, 4, 5, 6))
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    np.testing.assert_allclose(got["y"], run_ort(m, {"x": x})["y"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,p", [((2, 3, 5, 4), 2), ((1, 2, 6), 1), ((1, 2, 3, 4, 2), 3)])
def test_global_lppool_matches_onnxruntime(shape, p, tmp_path):
    m = pool_model("GlobalLpPool", shape, p=p)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    want = np.sum(np.abs(x.astype(np.float64)) ** p, axis=tuple(range(2, len(shape))),
                  keepdims=True) ** (1 / p)
    np.testing.assert_allclose(got["y"], want, rtol=1e-5)
    np.testing.assert_allclose(got["y"], run_ort(m, {"x": x})["y"], rtol=1e-5, atol=1e-6)


def test_global_lppool_refusals():
    with pytest.raises(LightNetError, match="GlobalLpPool.*p must be positive, found 0"):
        convert(pool_model("GlobalLpPool", (1, 2, 3, 3), p=0))
    with pytest.raises(LightNetError, match="GlobalLpPool.*rank-2 input"):
        convert(pool_model("GlobalLpPool", (1, 2), p=2))


def unpool_model(shape, output_shape=None, **attrs):
    """x -> MaxPool (values, indices) -> MaxUnpool (with `output_shape`, a constant, if given)."""
    from onnx import numpy_helper

    ins = ["v", "i"] + (["out_shape"] if output_shape is not None else [])
    nodes = [helper.make_node("MaxPool", ["x"], ["v", "i"], **attrs),
             helper.make_node("MaxUnpool", ins, ["y"], **attrs)]
    inits = ([numpy_helper.from_array(np.array(output_shape, np.int64), "out_shape")]
             if output_shape is not None else [])
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("shape,output_shape,attrs", [
    ((2, 3, 6, 8), None, {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((1, 2, 7, 7), None, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 6, 8), [1, 2, 6, 8], {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((1, 1, 9), [1, 1, 9], {"kernel_shape": [3], "strides": [3]}),
])
def test_max_unpool_matches_onnxruntime(shape, output_shape, attrs, tmp_path):
    m = unpool_model(shape, output_shape, **attrs)
    x = np.random.default_rng(6).permutation(np.prod(shape)).reshape(shape).astype(np.float32)
    got, ir = run_lightnet(m, {"x": x}, tmp_path)
    assert "max_unpool" in [op["optype"] for op in ir["ops"]]
    want = run_ort(m, {"x": x})["y"]
    assert got["y"].shape == want.shape
    np.testing.assert_array_equal(got["y"], want)


def test_max_unpool_of_indices_outside_the_output_is_an_error(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("MaxUnpool", ["v", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        "g", [helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 1, 1, 2]),
              helper.make_tensor_value_info("i", TensorProto.INT64, [1, 1, 1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 8
    v = np.array([[[[5, 8]]]], np.float32)
    got, _ = run_lightnet(m, {"v": v, "i": np.array([[[[4, 3]]]], np.int64)}, tmp_path)
    np.testing.assert_array_equal(got["y"], [[[[0, 0, 0, 8], [5, 0, 0, 0]]]])
    with pytest.raises(LightNetError, match=r"indices holds 8: expected a position in \[0, 7\] "
                                            r"of the output flattened"):
        run_lightnet(m, {"v": v, "i": np.array([[[[4, 8]]]], np.int64)}, tmp_path)


def test_max_unpool_to_another_output_shape_is_refused():
    """ONNX's reference puts the values by the pooled input's shape [1, 2, 6, 8] and pads
    the end to output_shape; ONNX Runtime puts them by output_shape itself."""
    m = unpool_model((1, 2, 7, 9), [1, 2, 7, 9], kernel_shape=[2, 2], strides=[2, 2])
    with pytest.raises(LightNetError, match=r"MaxUnpool.*output_shape \[1, 2, 7, 9\] other "
                                            r"than the pooled input's \[1, 2, 6, 8\]"):
        convert(m)


@pytest.mark.parametrize("target", ["dnnl", "cpu"])
@pytest.mark.parametrize("op_type, attrs", [
    ("AveragePool", {"count_include_pad": 1}), ("AveragePool", {}), ("MaxPool", {})])
def test_a_ceil_mode_window_wider_than_the_input(op_type, attrs, target, tmp_path):
    """Hugging Face's EfficientNet pools its 7x7 features with AvgPool2d(1280,
    ceil_mode=True): one window, starting in the input, far wider than it, the
    mean of the input's cells (count_include_pad without padding counting nothing
    more). It was refused ("the padded input holds at least one window")."""
    m = pool_model(op_type, [1, 4, 7, 7], kernel_shape=[20, 20], strides=[20, 20],
                   ceil_mode=1, **attrs)
    x = np.random.default_rng(5).standard_normal((1, 4, 7, 7)).astype(np.float32)
    got, _ = run_lightnet(m, {"x": x}, tmp_path, target=target)
    want = run_ort(m, {"x": x})["y"]
    reduce = np.mean if op_type == "AveragePool" else np.max
    np.testing.assert_allclose(want, reduce(x, axis=(2, 3), keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(got["y"], want, rtol=1e-6, atol=1e-7)
