"""The standard ONNX operators beyond CNN blocks (reductions, strided slices, TopK,
ArgMax / ArgMin, GatherND, ScatterElements, DepthToSpace / SpaceToDepth, group and
instance normalization): small onnx.helper graphs run by LightNet and by ONNX Runtime."""

from __future__ import annotations

import functools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from lightnet.frontends import onnx as onnx2ln  # noqa: E402
from tests.frontends.onnxutil import init, run_lightnet, run_ort  # noqa: E402
from tests.frontends.onnxutil import model as onnx_model  # noqa: E402

RNG = np.random.default_rng(2028)
F, I64 = TensorProto.FLOAT, TensorProto.INT64


# Opset 18 (a reduction's axes as an input) unless a test says otherwise.
model = functools.partial(onnx_model, opset=18)


def check(m, feeds, tmp_path, rtol=1e-5, atol=1e-6):
    """LightNet's outputs equal ONNX Runtime's: values, dtype and shape. Returns the IR."""
    want = run_ort(m, feeds)
    got, ir = run_lightnet(m, feeds, tmp_path)
    for name, value in want.items():
        assert (got[name].dtype, got[name].shape) == (value.dtype, value.shape), name
        np.testing.assert_allclose(got[name], value, rtol=rtol, atol=atol, err_msg=name)
    return ir


def optypes(ir):
    return [op["optype"] for op in ir["ops"] if op["optype"] not in ("input", "create")]


def refusal(m) -> str:
    with pytest.raises(onnx2ln.UnsupportedModelError) as info:
        onnx2ln.convert(m)
    return str(info.value)


# --- reductions ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
                                "ReduceLogSum", "ReduceLogSumExp", "ReduceMean", "ReduceMax"])
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([0, -1], 0), (None, 1)])
def test_reductions_match_onnxruntime(op, axes, keepdims, tmp_path):
    ins, inits = ["x"], []
    if axes is not None:
        ins.append("axes")
        inits.append(init("axes", np.array(axes, np.int64)))
    m = model([helper.make_node(op, ins, ["y"], keepdims=keepdims)], [("x", [2, 3, 4])],
              [("y", None)], inits)
    x = RNG.uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)
    ir = check(m, {"x": x}, tmp_path)
    assert "reduce" in optypes(ir)


def test_reduction_of_an_older_opset_takes_axes_as_attribute(tmp_path):
    m = model([helper.make_node("ReduceL2", ["x"], ["y"], axes=[2], keepdims=0)],
              [("x", [2, 3, 4])], [("y", None)], opset=13)
    check(m, {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32)}, tmp_path)


@pytest.mark.parametrize("op", ["ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum",
                                "ReduceProd"])
def test_empty_axes_with_noop_reduce_each_element_alone(op, tmp_path):
    m = model([helper.make_node(op, ["x", "axes"], ["y"], noop_with_empty_axes=1)],
              [("x", [2, 3])], [("y", None)], [init("axes", np.zeros(0, np.int64))])
    ir = check(m, {"x": RNG.uniform(0.5, 2, (2, 3)).astype(np.float32)}, tmp_path)
    assert "reduce" not in optypes(ir) if op == "ReduceProd" else "reduce" in optypes(ir)


def test_integer_reductions_and_float_only_ones(tmp_path):
    m = model([helper.make_node("ReduceProd", ["x"], ["y"], keepdims=0),
               helper.make_node("ReduceL1", ["x"], ["z"], keepdims=0)],
              [("x", [2, 3], TensorProto.INT32)],
              [("y", None, TensorProto.INT32), ("z", None, TensorProto.INT32)])
    check(m, {"x": np.array([[1, -2, 3], [4, 5, -6]], np.int32)}, tmp_path)
    m = model([helper.make_node("ReduceLogSumExp", ["x"], ["y"])],
              [("x", [2, 3], TensorProto.INT32)], [("y", None, TensorProto.INT32)])
    assert "ReduceLogSumExp" in refusal(m) and "float" in refusal(m)


def test_axes_computed_at_run_time_are_refused():
    m = model([helper.make_node("ReduceL1", ["x", "axes"], ["y"])],
              [("x", [2, 3]), ("axes", [1], I64)], [("y", None)])
    assert "axes 'axes' must be a constant" in refusal(m)


# --- ArgMax / ArgMin ----------------------------------------------------------------------

@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [{}, {"axis": -1, "keepdims": 0},
                                   {"axis": 1, "select_last_index": 1}])
def test_arg_max_and_min_match_onnxruntime(op, attrs, tmp_path):
    m = model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", [3, 4, 5])],
              [("y", None, I64)], opset=13)
    x = RNG.integers(-2, 3, (3, 4, 5)).astype(np.float32)  # ties
    ir = check(m, {"x": x}, tmp_path)
    assert optypes(ir)[0] == "arg_reduce"


def test_arg_max_of_an_integer_tensor(tmp_path):
    m = model([helper.make_node("ArgMax", ["x"], ["y"], axis=0, keepdims=0)],
              [("x", [4, 2], TensorProto.INT32)], [("y", None, I64)], opset=11)
    check(m, {"x": np.array([[1, 9], [7, 9], [7, 0], [-3, 2]], np.int32)}, tmp_path)


# --- Slice with steps -------------------------------------------------------------------

def test_patch_merging_takes_every_other_row_and_column(tmp_path):
    """Swin's patch merging: x[:, 0::2, 0::2], x[:, 1::2, 0::2], ... concatenated."""
    nodes, parts, inits = [], [], [init("axes", np.array([1, 2], np.int64)),
                                    init("steps", np.array([2, 2], np.int64)),
                                    init("ends", np.array([2**62, 2**62], np.int64))]
    for k, (r, col) in enumerate([(0, 0), (1, 0), (0, 1), (1, 1)]):
        inits.append(init(f"starts{k}", np.array([r, col], np.int64)))
        nodes.append(helper.make_node("Slice", ["x", f"starts{k}", "ends", "axes", "steps"],
                                      [f"p{k}"]))
        parts.append(f"p{k}")
    nodes.append(helper.make_node("Concat", parts, ["y"], axis=-1))
    m = model(nodes, [("x", [1, 8, 6, 3])], [("y", None)], inits, opset=13)
    ir = check(m, {"x": RNG.standard_normal((1, 8, 6, 3)).astype(np.float32)}, tmp_path)
    assert optypes(ir).count("strided_slice") == 8


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([-1], [-2**62], [1], [-1]),          # reversed
    ([8, 1], [0, 5], [0, 2], [-3, 2]),    # backwards and forwards, clamped
    ([0], [3], [-1], [5]),                # one entry: a plain slice
])
def test_slices_with_steps_match_onnxruntime(starts, ends, axes, steps, tmp_path):
    inits = [init("s", np.array(starts, np.int64)), init("e", np.array(ends, np.int64)),
             init("a", np.array(axes, np.int64)), init("t", np.array(steps, np.int64))]
    m = model([helper.make_node("Relu", ["x"], ["r"]),
               helper.make_node("Slice", ["r", "s", "e", "a", "t"], ["y"])],
              [("x", [9, 4, 6])], [("y", None)], inits, opset=13)
    check(m, {"x": RNG.standard_normal((9, 4, 6)).astype(np.float32)}, tmp_path)


def test_an_empty_strided_slice_is_refused():
    inits = [init("s", np.array([0], np.int64)), init("e", np.array([3], np.int64)),
             init("a", np.array([0], np.int64)), init("t", np.array([-1], np.int64))]
    m = model([helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])],
              [("x", [4, 2])], [("y", None)], inits, opset=13)
    assert "an empty slice" in refusal(m)


# --- TopK ---------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs", [{}, {"axis": 0, "largest": 0}])
def test_topk_matches_onnxruntime(attrs, tmp_path):
    m = model([helper.make_node("Relu", ["x"], ["r"]),
               helper.make_node("TopK", ["r", "k"], ["v", "i"], **attrs)],
              [("x", [4, 6])], [("v", None), ("i", None, I64)],
              [init("k", np.array([3], np.int64))], opset=11)
    x = RNG.integers(-3, 4, (4, 6)).astype(np.float32)  # ties, and zeros from the Relu
    ir = check(m, {"x": x}, tmp_path)
    assert "topk" in optypes(ir)


def test_topk_unsorted_gives_the_same_entries(tmp_path):
    """sorted 0 lets ONNX Runtime return the k entries in any order; LightNet sorts them."""
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, sorted=0)],
              [("x", [4, 6])], [("v", None), ("i", None, I64)],
              [init("k", np.array([3], np.int64))], opset=11)
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    want = run_ort(m, {"x": x})
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got["v"], -np.sort(-want["v"], axis=1))
    np.testing.assert_array_equal(np.sort(got["i"], axis=1), np.sort(want["i"], axis=1))
    np.testing.assert_array_equal(np.take_along_axis(x, got["i"], axis=1), got["v"])


def test_topk_of_opset_1_and_its_values_alone(tmp_path):
    m = model([helper.make_node("TopK", ["x"], ["v", "i"], k=2)],
              [("x", [3, 5])], [("v", None)], opset=1)
    m.ir_version = 3
    got, _ = run_lightnet(m, {"x": np.array([[1, 4, 2, 4, 0]] * 3, np.float32)}, tmp_path)
    np.testing.assert_array_equal(got["v"], [[4, 4]] * 3)


def test_topk_with_k_beyond_the_axis_is_refused():
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"])], [("x", [2, 3])],
              [("v", None), ("i", None, I64)], [init("k", np.array([4], np.int64))], opset=11)
    assert "K 4 for an axis of 3 (expected 1 to 3" in refusal(m)


# --- GatherND, ScatterElements ---------------------------------------------------------

@pytest.mark.parametrize("batch_dims,ishape", [(0, [2, 3, 2]), (1, [2, 4, 1]), (0, [5, 3])])
def test_gather_nd_of_computed_indices_matches_onnxruntime(batch_dims, ishape, tmp_path):
    m = model([helper.make_node("Relu", ["x"], ["r"]),
               helper.make_node("GatherND", ["r", "i"], ["y"], batch_dims=batch_dims)],
              [("x", [2, 3, 4]), ("i", ishape, I64)], [("y", None)], opset=13)
    q = ishape[-1]
    dims = [2, 3, 4][batch_dims:batch_dims + q]
    i = np.stack([RNG.integers(-d, d, ishape[:-1]) for d in dims], -1).astype(np.int64)
    ir = check(m, {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32), "i": i}, tmp_path)
    assert "gather_nd" in optypes(ir)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_matches_onnxruntime(reduction, tmp_path):
    m = model([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1,
                                reduction=reduction)],
              [("x", [3, 5]), ("i", [3, 2], I64), ("u", [3, 2])], [("y", None)], opset=18)
    i = np.array([[0, 4], [-1, 2], [3, 1]], np.int64)
    feeds = {"x": RNG.standard_normal((3, 5)).astype(np.float32), "i": i,
             "u": RNG.standard_normal((3, 2)).astype(np.float32)}
    check(m, feeds, tmp_path)


def test_an_index_outside_its_axis_is_an_error_when_the_model_runs(tmp_path):
    from lightnet import LightNetError

    m = model([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0)],
              [("x", [3]), ("i", [1], I64), ("u", [1])], [("y", None)], opset=13)
    feeds = {"x": np.zeros(3, np.float32), "i": np.array([3], np.int64),
             "u": np.ones(1, np.float32)}
    with pytest.raises(LightNetError, match=r"\(scatter_elements.*\): run: IndexError: "
                                            r"index 3 on axis 0 is out of range for its 3 entries"):
        run_lightnet(m, feeds, tmp_path)


# --- DepthToSpace, SpaceToDepth -----------------------------------------------------------

@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_matches_onnxruntime(mode, tmp_path):
    m = model([helper.make_node("Relu", ["x"], ["r"]),
               helper.make_node("DepthToSpace", ["r"], ["y"], blocksize=2, mode=mode)],
              [("x", [2, 12, 3, 4])], [("y", None)], opset=13)
    ir = check(m, {"x": RNG.standard_normal((2, 12, 3, 4)).astype(np.float32)}, tmp_path)
    assert "transpose" in optypes(ir)


def test_space_to_depth_matches_onnxruntime_and_inverts_depth_to_space(tmp_path):
    m = model([helper.make_node("SpaceToDepth", ["x"], ["s"], blocksize=3),
               helper.make_node("DepthToSpace", ["s"], ["y"], blocksize=3)],
              [("x", [1, 2, 6, 9])], [("s", None), ("y", None)], opset=13)
    x = RNG.standard_normal((1, 2, 6, 9)).astype(np.float32)
    check(m, {"x": x}, tmp_path)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    np.testing.assert_array_equal(got["y"], x)


def test_space_to_depth_of_a_size_not_a_multiple_of_the_block_is_refused():
    m = model([helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=4)],
              [("x", [1, 2, 6, 8])], [("y", None)], opset=13)
    assert "spatial size 6x8 for blocksize 4 (not multiples of it)" in refusal(m)


# --- GroupNormalization, InstanceNormalization ---------------------------------------------

def group_norm_reference(x, scale, bias, groups, epsilon):
    """Per-channel scale and bias (GroupNormalization-21), in float64."""
    n, c = x.shape[:2]
    g = x.astype(np.float64).reshape(n, groups, -1)
    y = (g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + epsilon)
    return (y.reshape(n, c, -1) * scale[:, None] + bias[:, None]).reshape(x.shape)


def test_group_normalization_21_per_channel(tmp_path):
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2,
                                epsilon=1e-3)],
              [("x", [2, 6, 3, 3]), ("s", [6]), ("b", [6])], [("y", None)], opset=21)
    feeds = {k: RNG.standard_normal(s).astype(np.float32)
             for k, s in (("x", (2, 6, 3, 3)), ("s", (6,)), ("b", (6,)))}
    got, ir = run_lightnet(m, feeds, tmp_path)
    np.testing.assert_allclose(got["y"], group_norm_reference(feeds["x"], feeds["s"],
                                                               feeds["b"], 2, 1e-3),
                               rtol=1e-4, atol=1e-5)
    assert "groupnorm" in optypes(ir)


def test_group_normalization_18_repeats_the_group_scale_and_bias(tmp_path):
    s, b = np.array([2.0, -1.0], np.float32), np.array([0.5, 0.0], np.float32)
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)],
              [("x", [1, 4, 5])], [("y", None)], [init("s", s), init("b", b)], opset=18)
    x = RNG.standard_normal((1, 4, 5)).astype(np.float32)
    got, _ = run_lightnet(m, {"x": x}, tmp_path)
    want = group_norm_reference(x, np.repeat(s, 2), np.repeat(b, 2), 2, 1e-5)
    np.testing.assert_allclose(got["y"], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["y"], run_ort(m, {"x": x})["y"], rtol=1e-4, atol=1e-5)


def test_group_normalization_with_groups_not_dividing_the_channels_is_refused():
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=4)],
              [("x", [1, 6, 5]), ("s", [6]), ("b", [6])], [("y", None)], opset=21)
    assert "4 groups of the channels of [1, 6, 5]" in refusal(m)


def test_instance_normalization_matches_onnxruntime(tmp_path):
    m = model([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)],
              [("x", [2, 3, 4, 5])], [("y", None)],
              [init("s", RNG.standard_normal(3).astype(np.float32)),
               init("b", RNG.standard_normal(3).astype(np.float32))], opset=6)
    check(m, {"x": RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)}, tmp_path,
          rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", ["dnnl", "cpu"])
def test_instance_normalization_of_large_planes_keeps_float32_accuracy(target, tmp_path):
    """BiT's GroupNorm (an InstanceNormalization of 32 groups of 8 channels of 56x56):
    the statistics of planes of 25088 values, far from zero on average. oneDNN's
    average pooling summed each plane in one float32 accumulator (5.8e-6 off); a
    reduction is within 1e-6 of float64 numpy on both targets."""
    plane = 25088
    m = model([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"])],
              [("x", [1, 32, plane])], [("y", None)],
              [init("s", np.ones(32, np.float32)), init("b", np.zeros(32, np.float32))],
              opset=6)
    x = (RNG.standard_normal((1, 32, plane)) + 3).astype(np.float32)
    got, _ = run_lightnet(m, {"x": x}, tmp_path, target=target)
    want = group_norm_reference(x, np.ones(32), np.zeros(32), 32, 1e-5)
    assert np.abs(got["y"] - want).max() / np.abs(want).max() <= 1e-6


def test_weight_standardized_convolution_folds(tmp_path):
    """BiT's StdConv2d as torch exports it: BatchNormalization-15 in training mode over
    the weight reshaped to [1, out, in * kh * kw] (each filter normalized by its own
    mean and variance), its mean and var inputs ReduceMeans of the weight whose
    running outputs nobody reads. The standardized weight is folded at import (no
    batchnorm, no reduce op is left) and the convolution matches numpy and ONNX
    Runtime."""
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.1 + 0.05
    nodes = [
        helper.make_node("Reshape", ["w", "flat"], ["w3"]),
        helper.make_node("ReduceMean", ["w3"], ["mean"], axes=[0, 2], keepdims=0),
        helper.make_node("ReduceMean", ["w3"], ["mean_sq"], axes=[0, 2], keepdims=0),
        helper.make_node("BatchNormalization", ["w3", "ones", "zeros", "mean", "mean_sq"],
                         ["ws", "running_mean", "running_var"], epsilon=1e-8, momentum=1.0,
                         training_mode=1),
        helper.make_node("Reshape", ["ws", "shape"], ["w4"]),
        helper.make_node("Conv", ["x", "w4"], ["y"], pads=[1, 1, 1, 1]),
    ]
    inits = [init("w", w), init("flat", np.array([1, 4, -1], np.int64)),
             init("ones", np.ones(4, np.float32)), init("zeros", np.zeros(4, np.float32)),
             init("shape", np.array(w.shape, np.int64))]
    m = model(nodes, [("x", [1, 3, 6, 6])], [("y", None)], inits, opset=17)
    x = RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)
    got, ir = run_lightnet(m, {"x": x}, tmp_path)
    assert optypes(ir) == ["conv2d"]
    w64 = w.astype(np.float64).reshape(4, -1)
    std = ((w64 - w64.mean(1, keepdims=True)) / np.sqrt(w64.var(1, keepdims=True) + 1e-8))
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 4, 6, 6))
    for i in range(6):
        for j in range(6):
            want[0, :, i, j] = std @ xp[0, :, i:i + 3, j:j + 3].reshape(-1)
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["y"], run_ort(m, {"x": x})["y"], rtol=1e-5, atol=1e-5)


# --- blocks of real models ------------------------------------------------------------------

def test_convnext_v2_global_response_normalization(tmp_path):
    """ConvNeXt-V2's GRN (channels last): Gx = ReduceL2 over H, W; Nx = Gx / (mean_C(Gx) +
    1e-6); y = gamma * (x * Nx) + beta + x."""
    nodes = [
        helper.make_node("ReduceL2", ["x", "hw"], ["gx"], keepdims=1),
        helper.make_node("ReduceMean", ["gx", "c"], ["gm"], keepdims=1),
        helper.make_node("Add", ["gm", "eps"], ["gd"]),
        helper.make_node("Div", ["gx", "gd"], ["nx"]),
        helper.make_node("Mul", ["x", "nx"], ["xn"]),
        helper.make_node("Mul", ["xn", "gamma"], ["g"]),
        helper.make_node("Add", ["g", "beta"], ["gb"]),
        helper.make_node("Add", ["gb", "x"], ["y"]),
    ]
    inits = [init("hw", np.array([1, 2], np.int64)), init("c", np.array([-1], np.int64)),
             init("eps", np.array(1e-6, np.float32)),
             init("gamma", RNG.standard_normal(8).astype(np.float32)),
             init("beta", RNG.standard_normal(8).astype(np.float32))]
    m = model(nodes, [("x", [2, 5, 5, 8])], [("y", None)], inits, opset=18)
    ir = check(m, {"x": RNG.standard_normal((2, 5, 5, 8)).astype(np.float32)}, tmp_path,
               rtol=1e-4, atol=1e-5)
    assert optypes(ir).count("reduce") == 2


def test_tile_of_a_computed_tensor(tmp_path):
    m = model([helper.make_node("Relu", ["x"], ["r"]),
               helper.make_node("Tile", ["r", "reps"], ["y"])],
              [("x", [2, 3])], [("y", None)], [init("reps", np.array([3, 2], np.int64))])
    check(m, {"x": RNG.standard_normal((2, 3)).astype(np.float32)}, tmp_path)
