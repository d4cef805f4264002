"""GatherElements, ScatterND, CumSum, Trilu and Expand on computed tensors through the
ONNX importer, against ONNX Runtime and numpy on both targets, their folding when every
input is a constant, and the errors of indices and shapes that do not fit."""

from __future__ import annotations

import numpy as np
import pytest

from lightnet import LightNetError
from lightnet.frontends import onnx as onnx2ln
from tests.frontends.test_onnx_logic import check, feed_of, model, optypes, run

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def doubled(name, elem, shape):
    """A node making `name` from input `name`_in (so the op under test reads a computed
    tensor) and the input's (name, elem, shape)."""
    op = "Or" if elem == B else "Add"
    return helper.make_node(op, [f"{name}_in", f"{name}_in"], [name]), (f"{name}_in", elem, shape)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_computed(axis):
    node, inp = doubled("x", F, [3, 4])
    idx = ("i", I64, [2, 4] if axis == 0 else [3, 2])
    m = model([node, helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)],
              [inp, idx], [("y", F, idx[2])])
    size = 3 if axis == 0 else 4
    feeds = feed_of([inp])
    feeds["i"] = np.random.default_rng(1).integers(-size, size, idx[2]).astype(np.int64)
    ir = check(m, feeds)
    assert "gather_elements" in optypes(ir)


def test_gather_elements_index_out_of_range_stops_the_run():
    node, inp = doubled("x", F, [3, 4])
    m = model([node, helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)],
              [inp, ("i", I64, [3, 1])], [("y", F, [3, 1])])
    feeds = {"x_in": np.ones((3, 4), np.float32), "i": np.array([[0], [4], [1]], np.int64)}
    with pytest.raises(LightNetError, match=r"gather_elements_cpu\): run: IndexError: index 4 "
                       r"on axis 1 is out of range for its 4 entries \(valid: -4 to 3\)"):
        run(m, feeds, "cpu")


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_computed(reduction):
    node, inp = doubled("x", F, [4, 3, 2])
    unode, uinp = doubled("u", F, [2, 3, 2])
    indices = numpy_helper.from_array(np.array([[3], [-4]], np.int64), "i")
    m = model([node, unode, helper.make_node("ScatterND", ["x", "i", "u"], ["y"],
                                             reduction=reduction)],
              [inp, uinp], [("y", F, [4, 3, 2])], opset=18, inits=[indices])
    ir = check(m, feed_of([inp, uinp]), rtol=1e-6)
    assert "scatter_nd" in optypes(ir)


def test_scatter_nd_element_indices_computed():
    node, inp = doubled("x", TensorProto.INT32, [3, 3])
    m = model([node, helper.make_node("ScatterND", ["x", "i", "u"], ["y"])],
              [inp, ("i", I64, [2, 2]), ("u", TensorProto.INT32, [2])],
              [("y", TensorProto.INT32, [3, 3])])
    feeds = feed_of([inp])
    feeds.update(i=np.array([[0, 2], [2, -3]], np.int64), u=np.array([7, 9], np.int32))
    check(m, feeds)
    with pytest.raises(LightNetError, match=r"index 3 on axis 1 is out of range"):
        run(m, {**feeds, "i": np.array([[0, 3], [1, 1]], np.int64)}, "cpu")


def test_scatter_nd_updates_of_another_shape():
    m = model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"])],
              [("x", F, [4, 3]), ("i", I64, [2, 1]), ("u", F, [2, 4])], [("y", F, [4, 3])])
    with pytest.raises(LightNetError, match=r"updates has the shape indices.shape\[:-1\] \+ "
                       r"data.shape\[indices.shape\[-1\]:\]\), found data=float32\[4, 3\], "
                       r"indices=int32\[2, 1\], updates=float32\[2, 4\]"):
        onnx2ln.convert(m)


def test_shift_tokens_right_scatters_a_folded_one_element_update():
    """BART's decoder input: the ids shifted right, then the start token scattered into
    column 0 from a one-element constant the import folds (a Reshape of [2] to [1, 1]):
    the folded constant keeps its [1, 1] shape (it became a [1] and the scatter_nd was
    refused)."""
    inits = [numpy_helper.from_array(a, n) for n, a in (
        ("zeros", np.zeros((1, 8), np.int64)), ("starts", np.array([0], np.int64)),
        ("ends", np.array([-1], np.int64)), ("axes", np.array([1], np.int64)),
        ("shift", np.array([[[0, j] for j in range(1, 8)]], np.int64)),
        ("start_token", np.array([2], np.int64)), ("matrix", np.array([1, 1], np.int64)),
        ("first", np.zeros((1, 1, 2), np.int64)))]
    nodes = [helper.make_node("Slice", ["ids", "starts", "ends", "axes"], ["head"]),
             helper.make_node("ScatterND", ["zeros", "shift", "head"], ["shifted"]),
             helper.make_node("Reshape", ["start_token", "matrix"], ["start"]),
             helper.make_node("ScatterND", ["shifted", "first", "start"], ["y"])]
    m = model(nodes, [("ids", I64, [1, 8])], [("y", I64, [1, 8])], inits=inits)
    ids = np.arange(10, 18, dtype=np.int64).reshape(1, 8)
    check(m, {"ids": ids})
    assert run(m, {"ids": ids}, "dnnl")["y"].tolist() == [[2, 10, 11, 12, 13, 14, 15, 16]]


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("axis, elem", [(1, F), (-3, TensorProto.INT32), (2, TensorProto.DOUBLE)])
def test_cumsum(exclusive, reverse, axis, elem):
    node, inp = doubled("x", elem, [2, 3, 4])
    ax = numpy_helper.from_array(np.array(axis, np.int64), "axis")
    m = model([node, helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive,
                                      reverse=reverse)],
              [inp], [("y", elem, [2, 3, 4])], inits=[ax])
    check(m, feed_of([inp]), rtol=1e-6)


def test_cumsum_against_a_loop():
    node, inp = doubled("x", TensorProto.INT32, [5])
    ax = numpy_helper.from_array(np.array([0], np.int32), "axis")
    m = model([node, helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=1, reverse=1)],
              [inp], [("y", TensorProto.INT32, [5])], inits=[ax])
    x = np.array([1, 2, 3, 4, 5], np.int32)
    got = run(m, {"x_in": x}, "cpu")["y"]
    want = [sum(2 * x[j] for j in range(i + 1, 5)) for i in range(5)]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -1, 2, 7])
def test_trilu(upper, k):
    node, inp = doubled("x", F, [2, 4, 5])
    inits = [] if k is None else [numpy_helper.from_array(np.array(k, np.int64), "k")]
    m = model([node, helper.make_node("Trilu", ["x"] + ([] if k is None else ["k"]), ["y"],
                                      upper=upper)],
              [inp], [("y", F, [2, 4, 5])], opset=14, inits=inits)
    ir = check(m, feed_of([inp]))
    assert "trilu" in optypes(ir)


def test_trilu_of_bools_against_numpy():
    node, inp = doubled("x", B, [3, 3])
    m = model([node, helper.make_node("Trilu", ["x"], ["y"], upper=0)], [inp],
              [("y", B, [3, 3])], opset=14)
    x = np.ones((3, 3), bool)
    np.testing.assert_array_equal(run(m, {"x_in": x}, "cpu")["y"], np.tril(x))


@pytest.mark.parametrize("elem", [F, TensorProto.INT32, B])
def test_expand_computed(elem):
    node, inp = doubled("x", elem, [3, 1])
    shape = numpy_helper.from_array(np.array([2, 1, 4], np.int64), "s")
    m = model([node, helper.make_node("Expand", ["x", "s"], ["y"])], [inp],
              [("y", elem, [2, 3, 4])], inits=[shape])
    feeds = feed_of([inp])
    if elem == B:  # ONNX Runtime has no bool Expand: numpy's broadcast
        got = run(m, feeds, "cpu")["y"]
        np.testing.assert_array_equal(got, np.broadcast_to(feeds["x_in"], (2, 3, 4)))
        return
    ir = check(m, feeds)
    assert optypes(ir) == {"elew", "expand"}


def test_expand_to_a_shape_that_does_not_broadcast():
    shape = numpy_helper.from_array(np.array([2, 4], np.int64), "s")
    m = model([helper.make_node("Expand", ["x", "s"], ["y"])], [("x", F, [3])],
              [("y", F, None)], inits=[shape])
    with pytest.raises(LightNetError, match=r"\(Expand\): shapes \[3\] and \[2, 4\] do not "
                       r"broadcast"):
        onnx2ln.convert(m)


def test_constant_folding_of_every_op():
    """With every input a constant, the ops fold at import: the IR holds their values."""
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    inits = [numpy_helper.from_array(a, n) for n, a in (
        ("d", data), ("gi", np.array([[2, 0, 1, -1]], np.int64)),
        ("si", np.array([[1]], np.int64)), ("su", np.full((1, 4), -1, np.float32)),
        ("ax", np.array(1, np.int64)))]
    nodes = [helper.make_node("GatherElements", ["d", "gi"], ["g"], axis=0),
             helper.make_node("ScatterND", ["d", "si", "su"], ["s"]),
             helper.make_node("CumSum", ["s", "ax"], ["c"], exclusive=1),
             helper.make_node("Trilu", ["c"], ["t"]),
             helper.make_node("IsInf", ["t"], ["inf"]),
             helper.make_node("Xor", ["inf", "inf"], ["x"]),
             helper.make_node("Not", ["x"], ["nx"]),
             helper.make_node("Cast", ["nx"], ["f"], to=F),
             helper.make_node("Mul", ["t", "f"], ["tf"]),
             helper.make_node("Add", ["tf", "y_in"], ["y"])]
    m = model(nodes, [("y_in", F, [3, 4])], [("y", F, [3, 4]), ("g", F, [1, 4])], opset=14,
              inits=inits)
    ir, _ = onnx2ln.convert(m)
    assert optypes(ir) == {"elew"}
    check(m, {"y_in": np.ones((3, 4), np.float32)})


def test_t5_relative_position_buckets_fold():
    """T5's bucket of a relative distance: log(|d| / 8) / log(16) * 8 truncated to an
    integer, on constants; folded at import (as ONNX Runtime folds it), not left to
    oneDNN's log, whose few ulp of error put the distances 16, 32 and 64, exact
    integers 2, 4 and 6 before truncation, into the bucket below."""
    distance = np.arange(-70, 71, dtype=np.int64)
    inits = [numpy_helper.from_array(a, n) for n, a in (
        ("rel", distance), ("exact", np.array(8, np.int64)),
        ("exact_f", np.array(8.0, np.float32)), ("log16", np.array(np.log(16), np.float32)),
        ("last", np.array(15, np.int64)),
        ("table", np.arange(16, dtype=np.float32) * 10))]
    nodes = [helper.make_node("Abs", ["rel"], ["a"]),
             helper.make_node("Less", ["a", "exact"], ["near"]),
             helper.make_node("Cast", ["a"], ["af"], to=F),
             helper.make_node("Div", ["af", "exact_f"], ["ratio"]),
             helper.make_node("Log", ["ratio"], ["log"]),
             helper.make_node("Div", ["log", "log16"], ["scaled"]),
             helper.make_node("Mul", ["scaled", "exact_f"], ["steps"]),
             helper.make_node("Cast", ["steps"], ["steps_i"], to=I64),
             helper.make_node("Add", ["steps_i", "exact"], ["far"]),
             helper.make_node("Min", ["far", "last"], ["far_c"]),
             helper.make_node("Where", ["near", "a", "far_c"], ["bucket"]),
             helper.make_node("Gather", ["table", "bucket"], ["bias"]),
             helper.make_node("Add", ["x", "bias"], ["y"])]
    m = model(nodes, [("x", F, [141])], [("y", F, [141])], inits=inits)
    ir = check(m, {"x": np.zeros(141, np.float32)})
    assert optypes(ir) == {"elew"}
    # The buckets by hand: 16 -> 10, 32 -> 12, 64 -> 14 (8 + 2, 4, 6).
    y = run(m, {"x": np.zeros(141, np.float32)}, "dnnl")["y"]
    assert [y[70 + d] / 10 for d in (7, 8, 15, 16, 31, 32, 63, 64)] == [7, 8, 9, 10, 11, 12,
                                                                       13, 14]


def test_eye_like_folds_from_its_input_shape():
    """EyeLike (XLNet's -eye(qlen) mask) depends on its input's shape alone: it folds
    for a computed input of known shape, on the k-th diagonal, in its input's dtype or
    `dtype`; a 3-D input is no matrix and refused."""
    node, inp = doubled("x", F, [3, 4])
    nodes = [node, helper.make_node("EyeLike", ["x"], ["above"], k=1),
             helper.make_node("EyeLike", ["x"], ["below"], k=-2, dtype=I64),
             helper.make_node("Add", ["x", "above"], ["y"])]
    m = model(nodes, [inp], [("y", F, [3, 4]), ("below", I64, [3, 4])], opset=9)
    m.ir_version = 4
    feeds = feed_of([inp])
    ir = check(m, feeds)
    assert optypes(ir) == {"elew"}
    got = run(m, feeds, "cpu")
    np.testing.assert_array_equal(got["y"] - feeds["x_in"] * 2, np.eye(3, 4, 1))
    assert got["below"].tolist() == [[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]]
    m = model([helper.make_node("EyeLike", ["x"], ["y"])], [("x", F, [2, 2, 2])],
              [("y", F, [2, 2, 2])])
    with pytest.raises(onnx2ln.UnsupportedModelError, match=r"EyeLike-9\): a 2-D input of "
                       r"known shape"):
        onnx2ln.convert(m, check=False)


def test_constant_of_shape_of_a_computed_shape_is_refused():
    m = model([helper.make_node("ConstantOfShape", ["s"], ["y"])], [("s", I64, [2])],
              [("y", F, None)])
    with pytest.raises(onnx2ln.UnsupportedModelError, match=r"ConstantOfShape-\d+\): shape "
                       r"'s' must be a constant"):
        onnx2ln.convert(m)
