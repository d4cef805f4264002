"""3-D convolution (ONNX Conv of 5-D input: conv3d) against ONNX Runtime and a naive
loop, on the cpu and dnnl targets; its fusions (a batchnorm folded, a residual added, a
relu applied inside it) like the 2-D convolution's; 5-D batchnorm on oneDNN; the errors
of what does not fit."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from lightnet import LightNetError  # noqa: E402
from lightnet.frontends.onnx import convert, save_weights  # noqa: E402
from tests.frontends.onnxutil import init, model, run_ort  # noqa: E402
from tests.helpers import compiled, run  # noqa: E402
from tests.references import ref_conv3d  # noqa: E402

TARGETS = ["cpu", "dnnl"]


def conv_model(shape, weight, bias, **attrs):
    """x [shape] -> Conv(weight, bias) -> y, the weights initializers (opset 17)."""
    inputs = ["x", "w"] + (["b"] if bias is not None else [])
    inits = [init("w", weight)] + ([init("b", bias)] if bias is not None else [])
    return model([helper.make_node("Conv", inputs, ["y"], **attrs)], [("x", list(shape))],
                 [("y", None)], inits, opset=17)


def run_target(m, feeds, target, tmp_path, fold=True):
    """(outputs, compiled Context): `m` imported and compiled for `target`, with its
    weights known (`fold`: what a batchnorm folds into at compile time) or not (read from
    the weight file at load), and run on `feeds`."""
    ir, weights = convert(m)
    if fold:
        ctx = compiled(ir, target, load=True, weights=weights)
    else:
        npz = tmp_path / "weights.npz"
        save_weights(npz, weights)
        ctx = compiled(ir, target, load=str(npz))
    return run(ctx, feeds), ctx


def check_kernels(ctx):
    """No dnnl op runs oneDNN's reference kernel."""
    for op in ctx.ops:
        call = op.values.get("call")
        if call is not None and getattr(call, "impl_info", None):
            assert not call.impl_info.startswith("ref"), (op.name, call.impl_info)


CASES = [
    # (N, C, D, H, W), (O, kd, kh, kw), attributes
    ((1, 3, 6, 9, 9), (4, 3, 3, 3), {}),
    ((2, 3, 5, 8, 7), (5, 3, 3, 3), {"strides": [1, 2, 2], "pads": [1, 1, 1, 1, 1, 1]}),
    ((1, 2, 7, 6, 8), (3, 3, 2, 3), {"strides": [2, 1, 2], "pads": [1, 0, 2, 0, 1, 1]}),
    ((1, 2, 8, 7, 7), (4, 2, 3, 2), {"dilations": [2, 1, 3], "pads": [1, 1, 0, 1, 1, 2]}),
    ((1, 4, 5, 6, 6), (6, 3, 3, 3), {"group": 2, "pads": [1, 1, 1, 1, 1, 1]}),
    ((1, 4, 4, 6, 6), (4, 3, 3, 3), {"group": 4, "strides": [1, 2, 2],
                                     "pads": [1, 1, 1, 1, 1, 1]}),  # depthwise
    ((1, 3, 5, 6, 7), (4, 3, 3, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 2, 1]}),
    ((1, 8, 4, 7, 7), (16, 1, 1, 1), {"strides": [2, 2, 2]}),  # a shortcut's 1x1x1
    ((1, 6, 6, 5, 5), (8, 3, 1, 1), {"pads": [1, 0, 0, 1, 0, 0]}),  # (2+1)-D's temporal
]


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("shape,kernel,attrs", CASES)
@pytest.mark.parametrize("target", TARGETS)
def test_conv3d_matches_onnxruntime_and_a_naive_loop(target, shape, kernel, attrs, with_bias,
                                                     tmp_path):
    rng = np.random.default_rng(3)
    group = attrs.get("group", 1)
    o, *taps = kernel
    weight = rng.standard_normal((o, shape[1] // group, *taps)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32) if with_bias else None
    m = conv_model(shape, weight, bias, kernel_shape=taps, **attrs)
    x = rng.standard_normal(shape).astype(np.float32)
    got, ctx = run_target(m, {"x": x}, target, tmp_path)
    assert [op.optype for op in ctx.ops if op.optype.startswith("conv")] == [f"conv3d_{target}"]
    check_kernels(ctx)
    want = run_ort(m, {"x": x})["y"]
    np.testing.assert_allclose(got["y"], want, rtol=1e-4, atol=1e-5)
    pads = attrs.get("pads", [0] * 6)
    if attrs.get("auto_pad") == "SAME_UPPER":
        total = [max(0, (-(-n // s) - 1) * s + k - n)
                 for n, s, k in zip(shape[2:], attrs["strides"], taps)]
        pads = [t // 2 for t in total] + [t - t // 2 for t in total]
    naive = ref_conv3d(x, weight, bias, group, attrs.get("strides", [1] * 3), pads,
                       attrs.get("dilations", [1] * 3))
    assert naive.shape == want.shape
    np.testing.assert_allclose(got["y"], naive, rtol=1e-4, atol=1e-5)


def residual_block(shape):
    """A stem (Conv-Relu) and ResNet-3D's basic block on it: Conv-BatchNorm-Relu,
    Conv-BatchNorm, + the stem's output, Relu."""
    rng = np.random.default_rng(5)
    c = shape[1]
    inits = [init("w0", rng.standard_normal((c, c, 1, 3, 3)).astype(np.float32) * 0.3)]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], kernel_shape=[1, 3, 3],
                              pads=[0, 1, 1, 0, 1, 1]),
             helper.make_node("Relu", ["c0"], ["stem"])]
    src = "stem"
    for i in (1, 2):
        inits += [init(f"w{i}", rng.standard_normal((c, c, 3, 3, 3)).astype(np.float32) * 0.2),
                  init(f"scale{i}", rng.uniform(0.5, 1.5, c).astype(np.float32)),
                  init(f"offset{i}", rng.standard_normal(c).astype(np.float32)),
                  init(f"mean{i}", rng.standard_normal(c).astype(np.float32)),
                  init(f"var{i}", rng.uniform(0.5, 2, c).astype(np.float32))]
        nodes += [helper.make_node("Conv", [src, f"w{i}"], [f"c{i}"], kernel_shape=[3, 3, 3],
                                   pads=[1] * 6),
                  helper.make_node("BatchNormalization", [f"c{i}", f"scale{i}", f"offset{i}",
                                                          f"mean{i}", f"var{i}"], [f"n{i}"])]
        if i == 1:
            nodes.append(helper.make_node("Relu", ["n1"], ["r1"]))
            src = "r1"
    nodes += [helper.make_node("Add", ["n2", "stem"], ["sum"]),
              helper.make_node("Relu", ["sum"], ["y"])]
    return model(nodes, [("x", list(shape))], [("y", None)], inits, opset=17)


@pytest.mark.parametrize("fold", [True, False])
@pytest.mark.parametrize("target", TARGETS)
def test_residual_block_is_two_fused_convolutions(target, fold, tmp_path):
    """The batchnorms fold into the convolutions (at compile time, with the weights
    known; on the cpu at load otherwise: oneDNN folds only known ones), the relus and the
    residual add run inside them: the block is its two convolutions, as in 2-D."""
    shape = (1, 4, 4, 6, 6)
    m = residual_block(shape)
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    got, ctx = run_target(m, {"x": x}, target, tmp_path, fold=fold)
    np.testing.assert_allclose(got["y"], run_ort(m, {"x": x})["y"], rtol=1e-4, atol=1e-5)
    check_kernels(ctx)
    computed = [op for op in ctx.ops if op.optype.split("_")[0] not in
                ("create", "input", "weights", "reorder")]
    conv = f"conv3d_{target}"
    if target == "dnnl" and not fold:  # unknown batchnorm weights stay a batchnorm
        assert [op.optype for op in computed] == [
            conv, conv, "batchnorm_dnnl", conv, "batchnorm_dnnl", "elew_dnnl", "relu_dnnl"]
        assert computed[2].values["activation"] == "relu"  # its fuse_norm_relu
        return
    stem, first, second = computed
    assert (stem.optype, first.optype, second.optype) == (conv,) * 3
    assert stem.values["activation"] == first.values["activation"] == "relu"
    assert second.values["activation"] == "relu"
    assert second.tensors_in.get("residual") == stem.tensors_out["dst"]
    if target == "cpu":
        assert ("bn_scale" in first.tensors_in) == (not fold)


@pytest.mark.parametrize("target", TARGETS)
def test_5d_batchnorm_relu_matches_onnxruntime(target, tmp_path):
    """A batchnorm of NCDHW that follows no convolution: oneDNN's (with its relu) on dnnl."""
    shape = (2, 5, 3, 4, 6)
    rng = np.random.default_rng(7)
    inits = [init("scale", rng.uniform(0.5, 1.5, 5).astype(np.float32)),
             init("offset", rng.standard_normal(5).astype(np.float32)),
             init("mean", rng.standard_normal(5).astype(np.float32)),
             init("var", rng.uniform(0.5, 2, 5).astype(np.float32))]
    m = model([helper.make_node("BatchNormalization", ["x", "scale", "offset", "mean", "var"],
                                ["n"], epsilon=1e-3),
               helper.make_node("Relu", ["n"], ["y"])],
              [("x", list(shape))], [("y", None)], inits, opset=15)
    x = rng.standard_normal(shape).astype(np.float32)
    got, ctx = run_target(m, {"x": x}, target, tmp_path)
    computed = [op.optype for op in ctx.ops if op.optype.split("_")[0] not in
                ("create", "input", "reorder")]
    assert computed == [f"batchnorm_{target}"] + (["relu_cpu"] if target == "cpu" else [])
    check_kernels(ctx)
    want = run_ort(m, {"x": x})["y"]
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-6)
    scale, offset, mean, var = (onnx.numpy_helper.to_array(t).reshape(1, 5, 1, 1, 1)
                                for t in inits)
    naive = np.maximum((x - mean) / np.sqrt(var + 1e-3) * scale + offset, 0)
    np.testing.assert_allclose(got["y"], naive, rtol=1e-5, atol=1e-5)


def test_conv3d_in_a_small_graph_runs_end_to_end(tmp_path):
    """Conv (3-D) -> Relu -> GlobalAveragePool -> Flatten, the end of a video classifier,
    on the default target."""
    rng = np.random.default_rng(8)
    weight = rng.standard_normal((6, 3, 3, 3, 3)).astype(np.float32)
    m = model([helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3, 3],
                                pads=[1] * 6, strides=[1, 2, 2]),
               helper.make_node("Relu", ["c"], ["r"]),
               helper.make_node("GlobalAveragePool", ["r"], ["p"]),
               helper.make_node("Flatten", ["p"], ["y"])],
              [("x", [1, 3, 4, 8, 8])], [("y", None)], [init("w", weight)], opset=17)
    x = rng.standard_normal((1, 3, 4, 8, 8)).astype(np.float32)
    got, _ = run_target(m, {"x": x}, "cpu", tmp_path)
    naive = np.maximum(ref_conv3d(x, weight, None, 1, (1, 2, 2), [1] * 6), 0).mean((2, 3, 4))
    np.testing.assert_allclose(got["y"], naive, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["y"], run_ort(m, {"x": x})["y"], rtol=1e-5, atol=1e-6)


def test_conv_errors():
    """A 4-D convolution is refused, and so are a weight or kernel_shape of another rank
    than the source's; a weight of other channels than the source's is an error naming
    what does not fit."""
    w = np.ones((2, 3, 1, 1, 1, 1), np.float32)
    with pytest.raises(LightNetError, match=r"4-D convolution \(only 1-D, 2-D and 3-D\)"):
        convert(conv_model((1, 3, 2, 2, 2, 2), w, None))
    with pytest.raises(LightNetError) as e:
        convert(conv_model((1, 3, 4, 4, 4), np.ones((2, 3, 3, 3), np.float32), None,
                           kernel_shape=[3, 3]))
    assert ("Conv (opset 17, Conv-11): a rank-4 W for a rank-5 X (W is [M, C / group, "
            "*kernel], of X's rank)") in str(e.value)
    with pytest.raises(LightNetError, match="attribute lengths do not match the spatial rank"):
        convert(conv_model((1, 3, 4, 4, 4), np.ones((2, 3, 3, 3, 3), np.float32), None,
                           kernel_shape=[3, 3]))
    with pytest.raises(LightNetError) as e:
        convert(conv_model((1, 3, 4, 4, 4), np.ones((2, 2, 3, 3, 3), np.float32), None))
    assert ("op 'y' (conv3d): tensor_in 'weight': check: expected weight.shape[1] * group "
            "== src.shape[1] (weight.shape[1] is src's channels per group), found "
            "src=float32[1, 3, 4, 4, 4], weight=float32[2, 2, 3, 3, 3], group=1") in str(e.value)
