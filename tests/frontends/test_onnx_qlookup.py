"""A QDQ model's element-wise float chains of one 8-bit activation become one table
lookup (`qlookup`, lightnet/frontends/onnx/qlookup.py) that gives what the float nodes
compute: checked on every one of the 256 input codes against ONNX's reference evaluator
and ONNX Runtime running the nodes as written."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from tests.frontends.onnxutil import init, model, run_lightnet, run_ort  # noqa: E402

ELEM = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def _every_code(dtype, shape=(2, 128)) -> np.ndarray:
    """All 256 values of `dtype`, in a shuffled order, as `shape`."""
    info = np.iinfo(dtype)
    codes = np.arange(info.min, info.max + 1).astype(dtype)
    return np.random.default_rng(3).permutation(codes).reshape(shape)


def _gelu_model(x_dtype, y_dtype):
    """A Gelu as quantize_static writes it: DequantizeLinear - Div sqrt 2 - Erf -
    QuantizeLinear, DequantizeLinear - Add (the quantized 1) - QuantizeLinear, the Mul by x
    and the Mul by (the quantized) 0.5, each quantized; then a Mul by a float constant."""
    xz = np.array(-3 if x_dtype == np.int8 else 131, x_dtype)
    yz = np.array(-100 if y_dtype == np.int8 else 20, y_dtype)

    def qdq(name, src, scale, zero):
        return [helper.make_node("QuantizeLinear", [src, f"{name}s", f"{name}z"], [f"{name}q"]),
                helper.make_node("DequantizeLinear", [f"{name}q", f"{name}s", f"{name}z"],
                                 [f"{name}d"])], [init(f"{name}s", np.float32(scale)),
                                                  init(f"{name}z", zero)]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node("Div", ["xd", "sqrt2"], ["div"]),
             helper.make_node("Erf", ["div"], ["erf"])]
    inits = [init("xs", np.float32(0.037)), init("xz", xz), init("sqrt2", np.float32(1.4142135))]
    for name, src, scale in (("e", "erf", 0.0078), ("one", "onef", 0.0039),
                             ("half", "halff", 0.002)):
        more, more_inits = qdq(name, src, scale, np.array(0, np.uint8))
        nodes += more
        inits += more_inits
    inits += [init("onef", np.float32(1.0)), init("halff", np.float32(0.5))]
    nodes.append(helper.make_node("Add", ["ed", "oned"], ["plus"]))
    more, more_inits = qdq("p", "plus", 0.0079, np.array(0, np.uint8))
    nodes += more + [helper.make_node("Mul", ["xd", "pd"], ["xp"])]
    inits += more_inits
    more, more_inits = qdq("m", "xp", 0.041, xz)
    nodes += more + [helper.make_node("Mul", ["md", "halfd"], ["g"]),
                     helper.make_node("Mul", ["g", "three"], ["g3"]),
                     helper.make_node("QuantizeLinear", ["g3", "ys", "yz"], ["y"])]
    inits += more_inits + [init("three", np.float32(3.0)), init("ys", np.float32(0.05)),
                           init("yz", yz)]
    return model(nodes, [("x", [2, 128], ELEM[x_dtype])], [("y", None, ELEM[y_dtype])], inits,
                 opset=19)


@pytest.mark.parametrize("target", ["cpu", "dnnl"])
@pytest.mark.parametrize("x_dtype,y_dtype", [(np.uint8, np.uint8), (np.int8, np.int8),
                                             (np.int8, np.uint8)])
def test_a_quantized_gelu_is_one_lookup_of_the_float_paths_values(x_dtype, y_dtype, target,
                                                                  tmp_path):
    m = _gelu_model(x_dtype, y_dtype)
    x = _every_code(x_dtype)
    got, ir = run_lightnet(m, {"x": x}, tmp_path, target=target)
    assert [op["optype"] for op in ir["ops"] if op["optype"] != "create"] == [
        "input", "qlookup"]
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    assert got["y"].dtype == want.dtype
    np.testing.assert_array_equal(got["y"], want)
    ort = run_ort(m, {"x": x})["y"]  # its own Erf: a half step may round the other way
    assert np.abs(got["y"].astype(int) - ort.astype(int)).max() <= 1


def _chain_model(ops, x_dtype=np.uint8, const_shape=()):
    """DequantizeLinear(x), then the element-wise `ops` (an op type, or (op type, a float
    constant) for a binary one with the constant second), then QuantizeLinear to uint8."""
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["t0"])]
    inits = [init("xs", np.float32(0.031)), init("xz", np.array(9, x_dtype)),
             init("ys", np.float32(0.0123)), init("yz", np.uint8(128))]
    for k, op in enumerate(ops):
        if isinstance(op, tuple):
            op, value = op
            inits.append(init(f"c{k}", np.full(const_shape, value, np.float32)))
            nodes.append(helper.make_node(op, [f"t{k}", f"c{k}"], [f"t{k + 1}"]))
        else:
            nodes.append(helper.make_node(op, [f"t{k}"], [f"t{k + 1}"]))
    nodes.append(helper.make_node("QuantizeLinear", [f"t{len(ops)}", "ys", "yz"], ["y"]))
    return model(nodes, [("x", [2, 128], ELEM[x_dtype])], [("y", None, TensorProto.UINT8)],
                 inits, opset=19)


@pytest.mark.parametrize("ops", [
    [("Sub", 3.0), "Tanh", ("Mul", 1.5)],
    [("Add", -2.0), "Sigmoid", ("Sub", 0.25)],
    ["Neg", "Relu", ("Div", 0.7)],
    [("Sub", 4.0), "Abs", "Erf"]])
def test_element_wise_chains_are_one_lookup(ops, tmp_path):
    m = _chain_model(ops)
    x = _every_code(np.uint8)
    got, ir = run_lightnet(m, {"x": x}, tmp_path, target="cpu")
    assert [op["optype"] for op in ir["ops"] if op["optype"] != "create"] == [
        "input", "qlookup"]
    np.testing.assert_array_equal(got["y"], ReferenceEvaluator(m).run(None, {"x": x})[0])
    ort = run_ort(m, {"x": x})["y"]
    assert np.abs(got["y"].astype(int) - ort.astype(int)).max() <= 1


def test_a_constant_of_higher_rank_reshapes_the_lookup(tmp_path):
    """A constant of one value and shape [1, 1, 1] broadcasts x [2, 128] to [1, 2, 128]."""
    m = _chain_model([("Mul", 2.0), "Tanh"], x_dtype=np.int8, const_shape=(1, 1, 1))
    x = _every_code(np.int8)
    got, ir = run_lightnet(m, {"x": x}, tmp_path, target="cpu")
    assert "qlookup" in [op["optype"] for op in ir["ops"]]
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    assert got["y"].shape == want.shape == (1, 2, 128)
    np.testing.assert_array_equal(got["y"], want)


def test_what_is_no_function_of_one_code_runs_as_written(tmp_path):
    """A product of two activations, a constant of several values, and an intermediate
    result another node reads: the float nodes stay (the last, besides its lookup)."""
    two = _chain_model([("Mul", 2.0), "Tanh"])
    two.graph.node[1].input[1] = "x2d"  # x * (a second activation)
    two.graph.node.insert(0, helper.make_node("DequantizeLinear", ["x2", "xs", "xz"], ["x2d"]))
    two.graph.input.append(helper.make_tensor_value_info("x2", TensorProto.UINT8, [2, 128]))
    wide = _chain_model([("Mul", 2.0), "Tanh"], const_shape=(128,))
    wide.graph.initializer[-1].CopyFrom(init("c0", np.linspace(1, 2, 128).astype(np.float32)))
    shared = _chain_model([("Mul", 2.0), "Tanh"])
    shared.graph.output.append(helper.make_tensor_value_info("t1", TensorProto.FLOAT, None))
    x = _every_code(np.uint8)
    for m, feeds, fused in ((two, {"x": x, "x2": x[::-1].copy()}, False),
                            (wide, {"x": x}, False), (shared, {"x": x}, True)):
        got, ir = run_lightnet(m, feeds, tmp_path, target="cpu")
        optypes = [op["optype"] for op in ir["ops"]]
        assert ("qlookup" in optypes) == fused, optypes
        assert "tanh" in optypes or fused
        want = ReferenceEvaluator(m).run(None, feeds)
        for name, value in zip([o.name for o in m.graph.output], want):
            np.testing.assert_allclose(got[name], value, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("y_scale,identity", [(0.031 / 8, True), (0.032 / 8, False)])
def test_a_table_of_every_code_to_itself_is_no_op(y_scale, identity, tmp_path):
    """A Mul by 1/8 quantized with an eighth of the input's scale and its zero point (as
    quantize_static calibrates BERT's attention scale) gives every code back: the output
    is the input, with no lookup (here a forward, the input being the graph's output);
    another scale is a lookup."""
    m = _chain_model([("Mul", 0.125)])
    m.graph.initializer[2].CopyFrom(init("ys", np.float32(y_scale)))
    m.graph.initializer[3].CopyFrom(init("yz", np.uint8(9)))
    x = _every_code(np.uint8)
    got, ir = run_lightnet(m, {"x": x}, tmp_path, target="cpu")
    optypes = [op["optype"] for op in ir["ops"] if op["optype"] != "create"]
    assert ("qlookup" in optypes) != identity and len(optypes) == 2, optypes
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got["y"], want)
    assert np.array_equal(want, x) == identity
