"""If through the ONNX importer: one whose condition is a constant (an initializer, or
folded from the input's shape) is replaced by the branch it takes, its names made
fresh, its reads of outer values kept; against ONNX Runtime on both targets. One
whose condition is computed at run time is refused, naming it."""

from __future__ import annotations

import numpy as np
import pytest

from lightnet import LightNetError
from lightnet.frontends import onnx as onnx2ln
from lightnet.frontends.onnx import UnsupportedModelError

from tests.frontends.onnxutil import init, run_lightnet, run_ort

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

FLOAT = TensorProto.FLOAT


def vi(name, shape=None, elem=FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def branch(name, nodes, outputs, inits=()):
    """A subgraph: no inputs, float `outputs` (names), its own initializers."""
    return helper.make_graph(nodes, name, [], [vi(o) for o in outputs], list(inits))


def if_node(cond, outputs, then, other, name="if"):
    return helper.make_node("If", [cond], outputs, then_branch=then, else_branch=other,
                            name=name)


def model(nodes, inputs, outputs, inits=()):
    """Opset 17; `inputs` (name, shape) float, `outputs` float names."""
    g = helper.make_graph(nodes, "g", [vi(n, s) for n, s in inputs], [vi(o) for o in outputs],
                          list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def check(m, feeds, tmp_path):
    """LightNet on cpu and dnnl gives ONNX Runtime's outputs; the cpu IR's op types."""
    want = run_ort(m, feeds)
    for target in ("cpu", "dnnl"):
        got, ir = run_lightnet(m, feeds, tmp_path, target=target)
        assert set(got) == set(want)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6,
                                       err_msg=f"{target} {name}")
    return {op["optype"] for op in onnx2ln.convert(m)[0]["ops"]}


def feed(shape, seed=0):
    return {"x": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("cond", [True, False])
def test_initializer_condition(cond, tmp_path):
    """The branch the initializer chooses: its own initializer and the graph's weight
    `w` (an outer value) read; the other branch's ops not imported."""
    then = branch("then", [helper.make_node("Add", ["x", "b"], ["t"]),
                           helper.make_node("Mul", ["t", "w"], ["y_then"])],
                  ["y_then"], [init("b", np.float32([1, 2, 3]))])
    other = branch("else", [helper.make_node("Sigmoid", ["x"], ["y_else"])], ["y_else"])
    m = model([if_node("c", ["y"], then, other), helper.make_node("Relu", ["y"], ["z"])],
              [("x", [2, 3])], ["z"], [init("c", np.array(cond)), init("w", np.float32(-2))])
    ops = check(m, feed([2, 3]), tmp_path)
    assert ("sigmoid" in ops) is not cond


@pytest.mark.parametrize("width", [14, 7])
def test_condition_folded_from_the_shape(width, tmp_path):
    """Equal(Shape(x)[2], 14): constant once the shape is folded, as ViTDet's test
    whether a table needs resizing."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "two"], ["w"], axis=0),
        helper.make_node("Equal", ["w", "fourteen"], ["c"]),
        if_node("c", ["y"],
                branch("then", [helper.make_node("Neg", ["x"], ["y_then"])], ["y_then"]),
                branch("else", [helper.make_node("Exp", ["x"], ["y_else"])], ["y_else"])),
    ]
    m = model(nodes, [("x", [1, 3, width, 5])], ["y"],
              [init("two", np.int64(2)), init("fourteen", np.int64(14))])
    check(m, feed([1, 3, width, 5]), tmp_path)


def test_branch_reads_computed_outer_values(tmp_path):
    """A branch reads a value computed in the graph before the If, a graph input and an
    initializer of its own, and gives two outputs, one a graph output."""
    then = branch("then", [helper.make_node("Mul", ["h", "scale"], ["p"]),
                           helper.make_node("Add", ["p", "x"], ["q"]),
                           helper.make_node("Identity", ["h"], ["h_out"])],
                  ["q", "h_out"], [init("scale", np.float32([[0.5], [-3.0]]))])
    other = branch("else", [helper.make_node("Identity", ["x"], ["r"]),
                            helper.make_node("Identity", ["x"], ["u"])], ["r", "u"])
    m = model([helper.make_node("Sigmoid", ["x"], ["h"]), if_node("c", ["y0", "y1"], then, other),
               helper.make_node("Sub", ["y0", "y1"], ["z"])],
              [("x", [2, 4])], ["z", "y1"], [init("c", np.array([True]))])
    check(m, feed([2, 4]), tmp_path)


def test_names_that_would_clash(tmp_path):
    """Two Ifs whose branches define the same names (each layer's copy of one scripted
    function): tensors, an initializer and nodes the outer graph names too (the
    initializer `k`, read after the Ifs, and `t` defined after them). Each copy gets
    names of its own."""
    def copy(i):
        then = branch("then", [
            helper.make_node("Mul", [f"x{i}", "k"], ["t"], name="n0"),
            helper.make_node("Add", ["t", "k"], ["z"], name="n1")], ["z"],
            [init("k", np.float32(i + 2))])
        other = branch("else", [helper.make_node("Neg", [f"x{i}"], ["z"], name="n0")], ["z"])
        return if_node("c", [f"y{i}"], then, other, name=f"n{2 + i}")

    nodes = [helper.make_node("Relu", ["x"], ["x0"], name="n0"),
             helper.make_node("Tanh", ["x"], ["x1"], name="n1"),
             copy(0), copy(1),
             helper.make_node("Add", ["y0", "y1"], ["t"], name="n4"),
             helper.make_node("Mul", ["t", "k"], ["z"], name="n5")]
    m = model(nodes, [("x", [3, 5])], ["z"], [init("c", np.array(True)),
                                              init("k", np.float32(10))])
    check(m, feed([3, 5]), tmp_path)
    ir, _ = onnx2ln.convert(m)
    names = [t["name"] for op in ir["ops"] for t in op["tensors_out"]]
    assert len(names) == len(set(names))


def test_nested_if(tmp_path):
    """The taken branch holds an If whose condition it computes from the shape of one of
    its own values; the inner branches read that value (renamed with it) and the
    graph's input."""
    inner_then = branch("inner_then", [helper.make_node("Mul", ["t", "x"], ["v"])], ["v"])
    inner_else = branch("inner_else", [helper.make_node("Sub", ["t", "x"], ["v"])], ["v"])
    then = branch("then", [
        helper.make_node("Add", ["x", "one"], ["t"]),
        helper.make_node("Size", ["t"], ["size"]),
        helper.make_node("Greater", ["size", "ten"], ["big"]),
        if_node("big", ["w"], inner_then, inner_else, name="inner"),
    ], ["w"], [init("one", np.float32(1)), init("ten", np.int64(10))])
    other = branch("else", [helper.make_node("Neg", ["x"], ["w"])], ["w"])
    for shape in ([2, 3], [4, 3]):  # 6 elements: the inner else, 12: the inner then
        m = model([if_node("c", ["y"], then, other, name="outer")], [("x", shape)], ["y"],
                  [init("c", np.array(True))])
        ops = check(m, feed(shape), tmp_path)
        assert "elew" in ops


def test_untaken_branch_is_not_imported(tmp_path):
    """The branch not taken holds NonZero, which LightNet refuses: the model imports."""
    other = branch("else", [helper.make_node("NonZero", ["x"], ["nz"]),
                            helper.make_node("Cast", ["nz"], ["y_else"], to=FLOAT),
                            helper.make_node("ReduceSum", ["y_else"], ["r"], keepdims=0)], ["r"])
    then = branch("then", [helper.make_node("ReduceMax", ["x"], ["r"], keepdims=0)], ["r"])
    m = model([if_node("c", ["y"], then, other)], [("x", [2, 3])], ["y"],
              [init("c", np.array(True))])
    check(m, feed([2, 3]), tmp_path)
    m.graph.initializer[0].CopyFrom(init("c", np.array(False)))
    with pytest.raises(UnsupportedModelError, match=r"NonZero"):
        onnx2ln.convert(m)


def test_runtime_condition_is_refused():
    """A condition computed from the input's values, or a graph input: refused, naming
    the If, its condition and where that comes from."""
    then = branch("then", [helper.make_node("Neg", ["x"], ["a"])], ["a"])
    other = branch("else", [helper.make_node("Relu", ["x"], ["a"])], ["a"])
    m = model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
               helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
               if_node("c", ["y"], then, other, name="choose")],
              [("x", [2, 3])], ["y"], [init("zero", np.float32(0))])
    with pytest.raises(UnsupportedModelError) as e:
        onnx2ln.convert(m)
    assert str(e.value) == (
        "unsupported ONNX model: 1 operator(s) cannot be imported: If (opset 17, If-16): "
        "node 'choose': condition 'c' is computed at run time (computed by node 'positive' "
        "(Greater)); expected a constant (an initializer, a Constant, or a value constant "
        "folding computes), whose branch the importer inlines")
    g = helper.make_graph([if_node("c", ["y"], then, other, name="choose")], "g",
                          [vi("c", [], TensorProto.BOOL), vi("x", [2, 3])], [vi("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedModelError, match=r"If-16\): node 'choose': condition 'c' "
                       r"is computed at run time \(a graph input\)"):
        onnx2ln.convert(m)


def test_symbolic_batch(tmp_path):
    """An inlined branch in a model of symbolic batch: one IR for every batch."""
    then = branch("then", [helper.make_node("Add", ["x", "b"], ["t"])], ["t"],
                  [init("b", np.float32([1, 2, 3]))])
    other = branch("else", [helper.make_node("Neg", ["x"], ["t"])], ["t"])
    m = model([if_node("c", ["y"], then, other)], [("x", ["N", 3])], ["y"],
              [init("c", np.array(True))])
    feeds = feed([5, 3])
    got, ir = run_lightnet(m, feeds, tmp_path, target="cpu")
    assert ir["interface"]["inputs"][0]["shape"] == ["N", 3]
    np.testing.assert_allclose(got["y"], run_ort(m, feeds)["y"], rtol=1e-6)


def test_invalid_ifs():
    """A condition that is not one bool, a branch whose outputs are not the If's."""
    then = branch("then", [helper.make_node("Neg", ["x"], ["a"])], ["a"])
    other = branch("else", [helper.make_node("Relu", ["x"], ["a"])], ["a"])
    m = model([if_node("c", ["y"], then, other)], [("x", [2])], ["y"],
              [init("c", np.array([1, 0], np.int64))])
    with pytest.raises(LightNetError, match=r"^node 'if' \(If-16\): condition 'c' must be one "
                       r"bool, found int64 \[2\] \(an invalid ONNX model\)$"):
        onnx2ln.convert(m)
    m = model([if_node("c", ["y", "y2"], then, other)], [("x", [2])], ["y", "y2"],
              [init("c", np.array(False))])
    with pytest.raises(LightNetError, match=r"^node 'if' \(If-16\): else_branch has 1 outputs, "
                       r"expected 2, the If's \(an invalid ONNX model\)$"):
        onnx2ln.convert(m)


def test_condition_folded_in_the_last_round(monkeypatch):
    """A condition folding computes only in its last round: no round is left to inline
    the branch, and the refusal says so (one round here; FOLD_ROUNDS in a model)."""
    monkeypatch.setattr("lightnet.frontends.onnx.converter.FOLD_ROUNDS", 1)
    monkeypatch.setattr("lightnet.frontends.onnx.handlers.control.FOLD_ROUNDS", 1)
    nodes = [helper.make_node("Size", ["x"], ["n"]),
             helper.make_node("Equal", ["n", "six"], ["c"]),
             if_node("c", ["y"],
                     branch("then", [helper.make_node("Neg", ["x"], ["a"])], ["a"]),
                     branch("else", [helper.make_node("Exp", ["x"], ["a"])], ["a"]))]
    m = model(nodes, [("x", [2, 3])], ["y"], [init("six", np.int64(6))])
    with pytest.raises(UnsupportedModelError, match=(
            r"If-16\): node 'if': condition 'c' became a constant in the last of constant "
            r"folding's 1 rounds, which left none to inline the branch it takes$")):
        onnx2ln.convert(m)
