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
# The ops each model is made of once imported: every Conv, Gemm and MatMul quantized.
QUANTIZED_OPS = {"conv_relu_conv": {"qconv2d": 2, "conv2d": 0},
                 "resnet_block": {"qconv2d": 3, "conv2d": 0},
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
    quantized = [t for t in optypes if t.startswith("q") and t != "quantize_cpu"]
    assert quantized and all(t.endswith("_dnnl") for t in quantized), optypes
    step = _output_step(m)
    for x in inputs:
        got = session.run({"x": x})["y"]
        assert np.abs(got - _ort(m, {"x": x}, optimized=True)).max() <= step * 1.001
