"""Booleans and masks through the ONNX importer: Cast, the comparisons, And / Or / Xor /
Not, Where, IsNaN and IsInf, on computed tensors, against ONNX Runtime and numpy, on
both targets; and the errors of operands that do not fit."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from lightnet import LightNetError, Session
from lightnet.frontends import onnx as onnx2ln
from lightnet.frontends.onnx import UnsupportedModelError
from lightnet.frontends.onnx.dtypes import TL_OF

from tests.frontends.onnxutil import run_ort

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

NP = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64,
      TensorProto.INT32: np.int32, TensorProto.INT64: np.int64, TensorProto.INT8: np.int8,
      TensorProto.UINT8: np.uint8, TensorProto.INT16: np.int16, TensorProto.UINT16: np.uint16,
      TensorProto.UINT32: np.uint32, TensorProto.BOOL: np.bool_}


def model(nodes, inputs, outputs, opset=17, inits=()):
    """A graph of `nodes` with inputs and outputs given as (name, elem type, shape)."""
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "g", [vi(*i) for i in inputs], [vi(*o) for o in outputs],
                          list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def feed_of(inputs, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, elem, shape in inputs:
        dtype = NP[elem]
        if dtype is np.bool_:
            feeds[name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.floating):
            feeds[name] = (rng.standard_normal(shape) * 3).astype(dtype)
        else:
            lo = 0 if np.issubdtype(dtype, np.unsignedinteger) else -5
            feeds[name] = rng.integers(lo, 5, shape).astype(dtype)
    return feeds


def run(m, feeds, target):
    """The outputs of ONNX model `m` imported and run by a Session on `target`."""
    ir, weights = onnx2ln.convert(m)
    with tempfile.TemporaryDirectory() as d:
        npz = Path(d) / "w.npz"
        onnx2ln.save_weights(npz, weights)
        return Session(ir, target=target, datafile=npz).run(feeds)


def check(m, feeds, targets=("cpu", "dnnl"), rtol=0.0):
    """LightNet on every target gives ONNX Runtime's outputs, dtypes and shapes (exactly,
    by default: these ops have one right answer); the IR."""
    expected = run_ort(m, feeds)
    for target in targets:
        got = run(m, feeds, target)
        for name, want in expected.items():
            assert got[name].dtype == want.dtype, (target, name)
            assert got[name].shape == want.shape, (target, name)
            np.testing.assert_allclose(got[name], want, rtol=rtol, atol=rtol,
                                       err_msg=f"{target} {name}")
    return onnx2ln.convert(m)[0]


def optypes(ir):
    return {op["optype"] for op in ir["ops"]} - {"input", "create", "forward"}


@pytest.mark.parametrize("op_type", ["Equal", "Less", "LessOrEqual", "Greater",
                                     "GreaterOrEqual"])
@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.INT64, TensorProto.UINT8])
def test_comparisons_broadcast(op_type, elem):
    ins = [("a", elem, [2, 1, 4]), ("b", elem, [3, 1])]
    m = model([helper.make_node(op_type, ["a", "b"], ["y"])], ins,
              [("y", TensorProto.BOOL, [2, 3, 4])])
    feeds = feed_of(ins)
    feeds["b"][0, 0] = feeds["a"][0, 0, 0]  # an equal pair
    ir = check(m, feeds)
    assert optypes(ir) == {"compare"}


def test_equal_of_bools_and_nan():
    ins = [("a", TensorProto.FLOAT, [4]), ("p", TensorProto.BOOL, [4]),
           ("q", TensorProto.BOOL, [1])]
    m = model([helper.make_node("Equal", ["a", "a"], ["y"]),
               helper.make_node("Equal", ["p", "q"], ["z"])], ins,
              [("y", TensorProto.BOOL, [4]), ("z", TensorProto.BOOL, [4])])
    feeds = {"a": np.array([1, np.nan, np.inf, -0.0], np.float32),
             "p": np.array([True, False, True, False]), "q": np.array([False])}
    check(m, feeds)
    out = Session(onnx2ln.convert(m)[0], target="cpu").run(feeds)
    np.testing.assert_array_equal(out["y"], [True, False, True, True])
    np.testing.assert_array_equal(out["z"], [False, True, False, True])


@pytest.mark.parametrize("op_type", ["And", "Or", "Xor"])
def test_logic_broadcast(op_type):
    ins = [("a", TensorProto.BOOL, [3, 1]), ("b", TensorProto.BOOL, [1, 5])]
    m = model([helper.make_node(op_type, ["a", "b"], ["y"])], ins,
              [("y", TensorProto.BOOL, [3, 5])])
    feeds = feed_of(ins)
    ir = check(m, feeds)
    ref = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}[op_type]
    got = Session(ir, target="cpu").run(feeds)["y"]
    np.testing.assert_array_equal(got, ref(feeds["a"], feeds["b"]))


def test_not_and_legacy_broadcast():
    """Not, and And-1's broadcast attribute aligning B at `axis`."""
    ins = [("a", TensorProto.BOOL, [2, 3, 4]), ("b", TensorProto.BOOL, [3])]
    m = model([helper.make_node("And", ["a", "b"], ["t"], broadcast=1, axis=1),
               helper.make_node("Not", ["t"], ["y"])], ins,
              [("y", TensorProto.BOOL, [2, 3, 4])], opset=6)
    feeds = feed_of(ins)
    ir, _ = onnx2ln.convert(m)
    got = Session(ir, target="cpu").run(feeds)["y"]
    np.testing.assert_array_equal(got, ~(feeds["a"] & feeds["b"][:, None]))


@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.INT64, TensorProto.UINT8])
def test_where_broadcasts_three(elem):
    ins = [("c", TensorProto.BOOL, [2, 1, 4]), ("x", elem, [3, 4]), ("y", elem, [1])]
    m = model([helper.make_node("Where", ["c", "x", "y"], ["z"])], ins,
              [("z", elem, [2, 3, 4])])
    ir = check(m, feed_of(ins))
    assert optypes(ir) == {"where"}


def test_attention_mask_chain():
    """The mask arithmetic of an exported transformer: an int64 mask cast to bool, And
    with a causal mask, Where picking the scores or the float minimum, then Softmax."""
    ins = [("scores", TensorProto.FLOAT, [1, 2, 5, 5]), ("mask", TensorProto.INT64, [1, 5])]
    causal = np.tril(np.ones((5, 5), bool)).reshape(1, 1, 5, 5)
    init = [onnx.numpy_helper.from_array(causal, "causal"),
            onnx.numpy_helper.from_array(np.array(np.finfo(np.float32).min, np.float32),
                                         "neg")]
    nodes = [helper.make_node("Unsqueeze", ["mask", "axes"], ["m4"]),
             helper.make_node("Constant", [], ["axes"],
                              value=onnx.numpy_helper.from_array(np.array([1, 2], np.int64))),
             helper.make_node("Cast", ["m4"], ["mb"], to=TensorProto.BOOL),
             helper.make_node("And", ["mb", "causal"], ["keep"]),
             helper.make_node("Where", ["keep", "scores", "neg"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["p"], axis=-1)]
    nodes.insert(0, nodes.pop(1))
    m = model(nodes, ins, [("p", TensorProto.FLOAT, [1, 2, 5, 5])], inits=init)
    feeds = feed_of(ins)
    feeds["mask"] = np.array([[1, 1, 1, 0, 1]], np.int64)
    check(m, feeds, rtol=1e-6)


CAST_TYPES = [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT64,
              TensorProto.INT16, TensorProto.INT8, TensorProto.UINT8, TensorProto.UINT16,
              TensorProto.UINT32, TensorProto.BOOL]


@pytest.mark.parametrize("src", CAST_TYPES)
@pytest.mark.parametrize("dst", CAST_TYPES)
def test_cast_every_pair(src, dst):
    """Cast between every numeric type and bool on a computed tensor (the input plus
    itself, so the cast reads what an op made); values every pair converts alike."""
    if NP[src] is np.bool_:
        m = model([helper.make_node("Or", ["x", "x"], ["t"]),
                   helper.make_node("Cast", ["t"], ["y"], to=dst)],
                  [("x", src, [2, 6])], [("y", dst, [2, 6])])
        feeds = {"x": np.array([[True, False] * 3] * 2)}
    else:
        m = model([helper.make_node("Add", ["x", "x"], ["t"]),
                   helper.make_node("Cast", ["t"], ["y"], to=dst)],
                  [("x", src, [2, 6])], [("y", dst, [2, 6])])
        values = [0, 1, 3, 7, 20, 63] if np.issubdtype(NP[src], np.unsignedinteger) or (
            np.issubdtype(NP[dst], np.unsignedinteger)) else [0, 1, -3, 7, -20, 63]
        x = np.array([values, values[::-1]], NP[src])
        if np.issubdtype(NP[src], np.floating):
            x = x + np.array(0.25, NP[src])  # fractions truncate toward zero
        feeds = {"x": x}
    ir = check(m, feeds)
    assert ("cast" in optypes(ir)) == (TL_OF[src] != TL_OF[dst])


def test_cast_narrowing_wraps():
    m = model([helper.make_node("Add", ["x", "x"], ["t"]),
               helper.make_node("Cast", ["t"], ["y"], to=TensorProto.INT8)],
              [("x", TensorProto.INT32, [3])], [("y", TensorProto.INT8, [3])])
    check(m, {"x": np.array([150, -100, 64], np.int32)})


def test_isnan_isinf():
    ins = [("x", TensorProto.FLOAT, [6])]
    m = model([helper.make_node("IsNaN", ["x"], ["n"]),
               helper.make_node("IsInf", ["x"], ["i"]),
               helper.make_node("IsInf", ["x"], ["p"], detect_negative=0),
               helper.make_node("IsInf", ["x"], ["q"], detect_positive=0)], ins,
              [(o, TensorProto.BOOL, [6]) for o in "nipq"])
    x = np.array([1, np.nan, np.inf, -np.inf, 0, -2], np.float32)
    check(m, {"x": x})
    got = Session(onnx2ln.convert(m)[0], target="cpu").run({"x": x})
    np.testing.assert_array_equal(got["n"], [0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(got["p"], [0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(got["q"], [0, 0, 0, 1, 0, 0])


def test_errors():
    """Operands that do not fit: clear errors naming the node and what is wrong."""
    m = model([helper.make_node("Equal", ["a", "b"], ["y"])],
              [("a", TensorProto.FLOAT, [2, 3]), ("b", TensorProto.FLOAT, [4])],
              [("y", TensorProto.BOOL, None)])
    with pytest.raises(LightNetError, match=r"node #0 \(output 'y'\) \(Equal\): shapes "
                       r"\[2, 3\] and \[4\] do not broadcast"):
        onnx2ln.convert(m)
    m = model([helper.make_node("And", ["a", "b"], ["y"])],
              [("a", TensorProto.INT32, [2]), ("b", TensorProto.INT32, [2])],
              [("y", TensorProto.BOOL, [2])], opset=6)
    with pytest.raises(UnsupportedModelError, match=r"And-1\): operands of dtype TL_INT32 "
                       r"\(only bool\)"):
        onnx2ln.convert(m)
    m = model([helper.make_node("Where", ["c", "x", "y"], ["z"])],
              [("c", TensorProto.BOOL, [2]), ("x", TensorProto.FLOAT, [2]),
               ("y", TensorProto.INT32, [2])], [("z", TensorProto.FLOAT, [2])])
    with pytest.raises(UnsupportedModelError, match=r"X and Y of dtypes TL_FLOAT and TL_INT32"):
        onnx2ln.convert(m, check=False)
    m = model([helper.make_node("IsNaN", ["x"], ["y"])], [("x", TensorProto.INT32, [2])],
              [("y", TensorProto.BOOL, [2])])
    with pytest.raises(UnsupportedModelError, match=r"IsNaN input of dtype TL_INT32"):
        onnx2ln.convert(m, check=False)


def test_session_takes_and_gives_numpy_bool():
    m = model([helper.make_node("Not", ["x"], ["y"])], [("x", TensorProto.BOOL, [3])],
              [("y", TensorProto.BOOL, [3])])
    s = Session(onnx2ln.convert(m)[0], target="cpu")
    y = s.run({"x": np.array([True, False, True])})["y"]
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y, [False, True, False])
    with pytest.raises(LightNetError, match="x"):
        s.run({"x": np.array([1.0, 0.0, 1.0], np.float32)})


def test_cast_like_and_half_precision():
    """CastLike casts to its second input's type; a cast of computed float32 to float16
    is refused (LightNet holds float16 as float32 and would not round), one from float16
    is nothing."""
    ins = [("x", TensorProto.FLOAT, [4]), ("like", TensorProto.INT32, [1])]
    m = model([helper.make_node("Add", ["x", "x"], ["t"]),
               helper.make_node("CastLike", ["t", "like"], ["y"])], ins,
              [("y", TensorProto.INT32, [4])])
    feeds = {"x": np.array([1.3, -2.6, 0.2, 7.5], np.float32), "like": np.zeros(1, np.int32)}
    ir = check(m, feeds)
    assert "cast" in optypes(ir)
    m = model([helper.make_node("Add", ["x", "x"], ["t"]),
               helper.make_node("Cast", ["t"], ["y"], to=TensorProto.FLOAT16)],
              [("x", TensorProto.FLOAT, [4])], [("y", TensorProto.FLOAT16, [4])])
    with pytest.raises(UnsupportedModelError, match=r"Cast-13\): a Cast from float to float16 "
                       r"of a computed tensor \(LightNet holds float16 as float32, unrounded\)"):
        onnx2ln.convert(m)
    m = model([helper.make_node("Add", ["x", "x"], ["t"]),
               helper.make_node("Cast", ["t"], ["y"], to=TensorProto.FLOAT)],
              [("x", TensorProto.FLOAT16, [4])], [("y", TensorProto.FLOAT, [4])])
    ir = check(m, {"x": np.array([1, 2.5, -3, 0.125], np.float16)})
    assert optypes(ir) == {"elew"}


def test_empty_input_is_refused():
    m = model([helper.make_node("Not", ["x"], ["y"])], [("x", TensorProto.BOOL, [0])],
              [("y", TensorProto.BOOL, [0])])
    with pytest.raises(LightNetError, match=r"input 'x' dim 0 is 0 \(empty tensors are not "
                       r"supported\)"):
        onnx2ln.convert(m)


@pytest.mark.parametrize("src, dst, on_dnnl", [
    (TensorProto.INT64, TensorProto.FLOAT, True), (TensorProto.INT8, TensorProto.FLOAT, True),
    (TensorProto.UINT8, TensorProto.INT32, True), (TensorProto.FLOAT, TensorProto.INT32, False),
    (TensorProto.INT32, TensorProto.INT8, False), (TensorProto.BOOL, TensorProto.FLOAT, False)])
def test_cast_on_onednn_where_it_converts_as_c(src, dst, on_dnnl):
    """cast_dnnl (one oneDNN reorder, not a reference kernel) for an integer to float and
    an 8-bit integer to int32; a float to an integer (oneDNN rounds) and a narrowing
    (oneDNN saturates) stay on the cpu. The values match ONNX Runtime's either way."""
    from lightnet import Context
    from lightnet.archs.dnnl.ops import kernel_counts

    op = "Or" if src == TensorProto.BOOL else "Add"
    m = model([helper.make_node(op, ["x", "x"], ["t"]),
               helper.make_node("Cast", ["t"], ["y"], to=dst)],
              [("x", src, [3, 17])], [("y", dst, [3, 17])])
    feeds = feed_of([("x", src, [3, 17])], seed=3)
    if src == TensorProto.INT32:
        feeds["x"] = feeds["x"] * 40  # beyond int8: wraps around
    if src == TensorProto.FLOAT:
        feeds["x"] = feeds["x"] + 0.5  # halves: truncated, not rounded
    check(m, feeds)
    ctx = Context()
    ctx.init(onnx2ln.convert(m)[0])
    ctx.compile("dnnl")
    ctx.load()
    optypes_run = [o.optype for o in ctx.ops]
    assert ("cast_dnnl" in optypes_run) == on_dnnl
    assert not any(k.startswith("ref") for k in kernel_counts(ctx.ops))
