"""Small float models quantized by ONNX Runtime's quantize_static into QDQ models, for
the tests of quantized import (test_onnx_quantized.py): a conv-relu-conv, a ResNet-style
block, a matrix-product model and a small classifier, with the inputs they were
calibrated on."""

from __future__ import annotations

import numpy as np
import pytest

from tests.frontends.onnxutil import init, model


def _weights(rng, shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def conv_relu_conv(rng):
    """x [1, 3, 12, 12] -> Conv 3x3 (8) -> Relu -> Conv 3x3 stride 2 (4) -> y."""
    from onnx import helper

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], pads=[1, 1, 1, 1],
                              strides=[2, 2])]
    inits = [init("w1", _weights(rng, (8, 3, 3, 3))), init("b1", _weights(rng, (8,))),
             init("w2", _weights(rng, (4, 8, 3, 3))), init("b2", _weights(rng, (4,)))]
    return model(nodes, [("x", [1, 3, 12, 12])], [("y", [1, 4, 6, 6])], inits), (1, 3, 12, 12)


def resnet_block(rng):
    """x [1, 8, 10, 10] -> Conv 3x3 - Relu - Conv 3x3, plus x, Relu, then a depthwise
    Conv 3x3 and a MaxPool 2x2 -> y (a ResNet basic block and a MobileNet-style tail)."""
    from onnx import helper

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1],
                              group=8),
             helper.make_node("MaxPool", ["c3"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    inits = [init("w1", _weights(rng, (8, 8, 3, 3), 0.2)), init("b1", _weights(rng, (8,))),
             init("w2", _weights(rng, (8, 8, 3, 3), 0.2)), init("b2", _weights(rng, (8,))),
             init("w3", _weights(rng, (8, 1, 3, 3))), init("b3", _weights(rng, (8,)))]
    return model(nodes, [("x", [1, 8, 10, 10])], [("y", [1, 8, 5, 5])], inits), (1, 8, 10, 10)


def matmul_model(rng):
    """x [6, 16] -> Gemm (transB, a bias) -> Relu -> MatMul [12, 5] -> y."""
    from onnx import helper

    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["g"], transB=1),
             helper.make_node("Relu", ["g"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    inits = [init("w1", _weights(rng, (12, 16))), init("b1", _weights(rng, (12,))),
             init("w2", _weights(rng, (12, 5)))]
    return model(nodes, [("x", [6, 16])], [("y", [6, 5])], inits), (6, 16)


def classifier(rng):
    """x [1, 3, 8, 8] -> Conv - Relu - Conv - Add (the residual) - Relu -
    GlobalAveragePool - Flatten - Gemm -> y [1, 10]: in QOperator form QLinearConv,
    QLinearAdd, QLinearGlobalAveragePool and QGemm."""
    from onnx import helper

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s"]),
             helper.make_node("Relu", ["s"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    inits = [init("w1", _weights(rng, (8, 3, 3, 3))), init("b1", _weights(rng, (8,))),
             init("w2", _weights(rng, (8, 8, 3, 3))), init("b2", _weights(rng, (8,))),
             init("wf", _weights(rng, (10, 8), 0.5)), init("bf", _weights(rng, (10,)))]
    return model(nodes, [("x", [1, 3, 8, 8])], [("y", [1, 10])], inits), (1, 3, 8, 8)


def quantized(build, tmp_path, *, activation="int8", per_channel=True, reduce_range=False,
              seed=0, quant_format="QDQ"):
    """(the quantized model, calibration-like inputs to run it on): the float model
    `build` makes, quantized by quantize_static (`quant_format` QDQ or QOperator, s8
    weights per channel or per tensor, 7-bit with `reduce_range`, `activation` int8 or
    uint8) on 8 random inputs."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    import onnx

    rng = np.random.default_rng(seed)
    float_model, shape = build(rng)
    inputs = [rng.standard_normal(shape).astype(np.float32) for _ in range(8)]

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{"x": x} for x in inputs])

        def get_next(self):
            return next(self.feeds, None)

    src, dst = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    onnx.save(float_model, src)
    quantization.quantize_static(
        str(src), str(dst), Reader(),
        quant_format=getattr(quantization.QuantFormat, quant_format),
        per_channel=per_channel, reduce_range=reduce_range, weight_type=quantization.QuantType.QInt8,
        activation_type=(quantization.QuantType.QInt8 if activation == "int8"
                         else quantization.QuantType.QUInt8))
    return onnx.load(dst), inputs


def transformer_block(rng, hidden=40, heads=2, seq=7, ffn=56):
    """x [1, seq, hidden] -> a post-norm transformer encoder block: Q, K, V projections
    (MatMul + Add), split into `heads` heads (Reshape, Transpose), scores Q @ K^T scaled
    by 1 / sqrt(head size) (Mul), Softmax, times V, heads joined (Transpose, Reshape), the
    output projection, the residual Add, LayerNormalization, then the FFN MatMul - Gelu
    (its Erf form) - MatMul, the residual and LayerNormalization -> y. Sizes (40, 7, 56,
    head 20) are no multiples of 16."""
    from onnx import helper

    head = hidden // heads
    nodes, inits = [], []

    def linear(x, name, n_in, n_out):
        inits.extend([init(f"w{name}", _weights(rng, (n_in, n_out), n_in ** -0.5)),
                      init(f"b{name}", _weights(rng, (n_out,), 0.1))])
        nodes.extend([helper.make_node("MatMul", [x, f"w{name}"], [f"m{name}"]),
                      helper.make_node("Add", [f"m{name}", f"b{name}"], [name])])
        return name

    def layer_norm(x, name):
        inits.extend([init(f"g{name}", 1 + _weights(rng, (hidden,), 0.1)),
                      init(f"be{name}", _weights(rng, (hidden,), 0.1))])
        nodes.append(helper.make_node("LayerNormalization", [x, f"g{name}", f"be{name}"],
                                      [name], axis=-1, epsilon=1e-5))
        return name

    inits.extend([init("heads_shape", np.array([1, seq, heads, head], np.int64)),
                  init("joined_shape", np.array([1, seq, hidden], np.int64)),
                  init("scale", np.float32(head ** -0.5)), init("sqrt2", np.float32(2 ** 0.5)),
                  init("one", np.float32(1)), init("half", np.float32(0.5))])
    split = {}
    for part in "qkv":
        linear("x", part, hidden, hidden)
        nodes.append(helper.make_node("Reshape", [part, "heads_shape"], [f"{part}4"]))
        perm = [0, 2, 3, 1] if part == "k" else [0, 2, 1, 3]
        nodes.append(helper.make_node("Transpose", [f"{part}4"], [f"{part}h"], perm=perm))
        split[part] = f"{part}h"
    nodes += [helper.make_node("MatMul", [split["q"], split["k"]], ["scores"]),
              helper.make_node("Mul", ["scores", "scale"], ["scaled"]),
              helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", split["v"]], ["context"]),
              helper.make_node("Transpose", ["context"], ["context_t"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["context_t", "joined_shape"], ["joined"])]
    linear("joined", "o", hidden, hidden)
    nodes.append(helper.make_node("Add", ["o", "x"], ["res1"]))
    layer_norm("res1", "ln1")
    linear("ln1", "f1", hidden, ffn)
    nodes += [helper.make_node("Div", ["f1", "sqrt2"], ["f1s"]),
              helper.make_node("Erf", ["f1s"], ["erf"]),
              helper.make_node("Add", ["erf", "one"], ["erf1"]),
              helper.make_node("Mul", ["f1", "erf1"], ["gx"]),
              helper.make_node("Mul", ["gx", "half"], ["gelu"])]
    linear("gelu", "f2", ffn, hidden)
    nodes.append(helper.make_node("Add", ["f2", "ln1"], ["res2"]))
    layer_norm("res2", "y")
    shape = (1, seq, hidden)
    return model(nodes, [("x", list(shape))], [("y", list(shape))], inits, opset=17), shape


def concat_pool(rng):
    """x [1, 3, 11, 11] -> two Convs 3x3 (6 and 4 channels, each its own output scale) -
    Concat - AveragePool 3x3 stride 2 pads 1 (count_include_pad 0) - Conv 1x1 -> y: in
    QOperator form QLinearConcat (requantizing its inputs) and QLinearAveragePool."""
    from onnx import helper

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["c1", "c2"], ["cat"], axis=1),
             helper.make_node("AveragePool", ["cat"], ["p"], kernel_shape=[3, 3],
                              strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["p", "w3", "b3"], ["y"])]
    inits = [init("w1", _weights(rng, (6, 3, 3, 3))), init("b1", _weights(rng, (6,))),
             init("w2", _weights(rng, (4, 3, 3, 3), 1.0)), init("b2", _weights(rng, (4,))),
             init("w3", _weights(rng, (5, 10, 1, 1))), init("b3", _weights(rng, (5,)))]
    return model(nodes, [("x", [1, 3, 11, 11])], [("y", [1, 5, 6, 6])], inits), (1, 3, 11, 11)
