"""Symbolic dims (docs/runtime.md, "Symbolic dims"): an ONNX model with a
symbolic batch stays symbolic through the importer, the IR and `lightnet -c`;
one Session runs any batch (checked against ONNX Runtime), planning per shape
with a bounded cache; `--shape` fixes dims at import; what cannot be said or
run is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lightnet import Context, LightNetError, Session  # noqa: E402
from lightnet.frontends import onnx as onnx2ln  # noqa: E402
from tests.frontends.onnxutil import run_ort  # noqa: E402
from tests.helpers import lightnet, python  # noqa: E402
from tests.irbuild import op  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def make_model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def small_cnn():
    """Conv, batchnorm, relu, max pool, flatten, Gemm on x float32[N, 3, 32, 32]."""
    rng = np.random.default_rng(3)
    inits = [("w", rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3),
             ("b", rng.standard_normal(8).astype(np.float32)),
             ("scale", rng.random(8).astype(np.float32) + 0.5),
             ("shift", rng.standard_normal(8).astype(np.float32)),
             ("mean", rng.standard_normal(8).astype(np.float32) * 0.1),
             ("var", rng.random(8).astype(np.float32) + 0.5),
             ("fw", rng.standard_normal((10, 8 * 16 * 16)).astype(np.float32) * 0.05),
             ("fb", rng.standard_normal(10).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"],
                              ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    return make_model(nodes, [("x", ["N", 3, 32, 32])], [("y", ["N", 10])], inits)


def batch(n, seed=0):
    return np.random.default_rng(seed + n).standard_normal((n, 3, 32, 32)).astype(np.float32)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    path = tmp_path_factory.mktemp("cnn") / "cnn.onnx"
    onnx.save(small_cnn(), str(path))
    return path


def test_the_imported_ir_keeps_the_batch_symbolic(cnn):
    ir, _ = onnx2ln.convert(cnn)
    dims = {op["name"]: next(p["value"] for p in op["params"] if p["arg_name"] == "dims")
            for op in ir["ops"] if op["optype"] in ("input", "reshape")}
    assert dims == {"x": ["N", 3, 32, 32], "f": ["N", 2048]}
    assert ir["interface"]["inputs"][0]["shape"] == ["N", 3, 32, 32]
    assert ir["interface"]["outputs"][0]["shape"] == ["N", 10]


def test_one_session_runs_batches_1_3_8_as_onnx_runtime(cnn):
    session = Session(cnn)
    assert [(i.name, i.shape) for i in session.inputs] == [("x", ("N", 3, 32, 32))]
    assert [(o.name, o.shape) for o in session.outputs] == [("y", ("N", 10))]
    assert session.ctx is None and session.planned == []  # planned by the first run
    for n in (1, 3, 8):
        x = batch(n)
        got = session.run({"x": x})["y"]
        assert got.shape == (n, 10)
        np.testing.assert_allclose(got, run_ort(small_cnn(), {"x": x})["y"],
                                   rtol=1e-4, atol=1e-4)
    assert session.planned == [{"N": 1}, {"N": 3}, {"N": 8}]


def test_plan_cache_hits_and_evicts_the_least_recently_used(cnn):
    session = Session(cnn, plans=2)
    session.run({"x": batch(1)})
    one = session.ctx
    session.run({"x": batch(3)})
    three = session.ctx
    assert one is not three and one.dims == {"N": 1} and three.dims == {"N": 3}
    session.run({"x": batch(1)})  # a hit: the same compiled model, now the most recent
    assert session.ctx is one and session.planned == [{"N": 3}, {"N": 1}]
    session.run({"x": batch(8)})  # evicts N=3, the least recently used
    assert session.planned == [{"N": 1}, {"N": 8}]
    assert three.arrays == {}  # its memory is released
    x = batch(3, seed=9)
    np.testing.assert_allclose(session.run({"x": x})["y"],  # planned again, still right
                               run_ort(small_cnn(), {"x": x})["y"], rtol=1e-4, atol=1e-4)
    assert session.ctx is not three and session.planned == [{"N": 8}, {"N": 3}]
    with pytest.raises(LightNetError, match=r"^plans: expected a whole number >= 1, found 0$"):
        Session(cnn, plans=0)


def test_products_and_multiples_of_dims():
    """Reshape [N, S, 4] -> [-1, 4] makes "N*S" rows, "3*N" with S fixed; MatMul
    over a symbolic sequence length S next to the batch."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["y"])]
    inits = [("w", w), ("shape", np.array([-1, 4], np.int64))]
    model = make_model(nodes, [("x", ["N", "S", 4])], [("y", None)], inits)
    for dims, rows in ((None, "N*S"), ({"S": 3}, "3*N")):
        ir, weights = onnx2ln.convert(model, dims)
        reshape = next(op for op in ir["ops"] if op["optype"] == "reshape")
        assert reshape["params"][0]["value"] == [rows, 4]
        session = Session(ir, datafile=weights)
        assert session.outputs[0].shape == (rows, 6)
        for n, s in ((2, 3), (5, 3)) if dims else ((2, 3), (1, 7)):
            x = rng.standard_normal((n, s, 4)).astype(np.float32)
            np.testing.assert_allclose(session.run({"x": x})["y"],
                                       run_ort(model, {"x": x})["y"], rtol=1e-5)
    with pytest.raises(LightNetError, match=r"^input 'x': expected shape \[N, 3, 4\], "
                                            r"found \[2, 4, 4\]$"):
        session.run({"x": np.zeros((2, 4, 4), np.float32)})
    # MatMul of [N, S, 4] by [4, 6] keeps both dims.
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    model = make_model(nodes, [("x", ["N", "S", 4])], [("y", ["N", "S", 6])], [("w", w)])
    session = Session(onnx2ln.convert(model)[0], datafile={"w": w})
    assert session.inputs[0].shape == ("N", "S", 4) and session.outputs[0].shape == ("N", "S", 6)
    for n, s in ((1, 7), (3, 2)):
        x = rng.standard_normal((n, s, 4)).astype(np.float32)
        np.testing.assert_allclose(session.run({"x": x})["y"], run_ort(model, {"x": x})["y"],
                                   rtol=1e-5)
    assert session.planned == [{"N": 1, "S": 7}, {"N": 3, "S": 2}]


def test_what_depends_on_a_dim_otherwise_is_refused_and_shape_fixes_it():
    """Concat of x [N, 4] with two constant rows, then flattened: 4 * (N + 2)
    elements, which no symbolic dim can say; --shape makes the model static."""
    nodes = [helper.make_node("Concat", ["x", "c"], ["j"], axis=0),
             helper.make_node("Reshape", ["j", "flat"], ["y"])]
    inits = [("c", np.ones((2, 4), np.float32)), ("flat", np.array([-1], np.int64))]
    model = make_model(nodes, [("x", ["N", 4])], [("y", None)], inits)
    with pytest.raises(LightNetError, match=r"^the imported model: op \d+ \('y'\): 28 changes "
                                            r"with N, not as a whole multiple of it; "):
        onnx2ln.convert(model)
    ir, weights = onnx2ln.convert(model, shapes={"x": (3, 4)})
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = Session(ir, datafile=weights).run({"x": x})["y"]
    np.testing.assert_array_equal(got, run_ort(model, {"x": x})["y"])


def test_shape_option_errors(cnn):
    for shapes, message in (
            ({"z": (1, 3, 32, 32)}, r"^--shape z=1,3,32,32: the model has no input 'z' "
                                    r"\(inputs: x\)$"),
            ({"x": (1, 3, 32)}, r"^--shape x=1,3,32: input 'x' has 4 dims, given 3$"),
            ({"x": (1, 4, 32, 32)}, r"^--shape x=1,4,32,32: dim 1 of input 'x' is 3, given 4$")):
        with pytest.raises(LightNetError, match=message):
            onnx2ln.convert(cnn, shapes=shapes)
    with pytest.raises(LightNetError, match=r"^--shape x=2,3,32,32: dim 0 of input 'x' is 'N', "
                                            r"which is 4 elsewhere$"):
        onnx2ln.convert(cnn, {"N": 4}, shapes={"x": (2, 3, 32, 32)})


def test_a_shape_that_breaks_an_op_check_is_refused():
    """x [N, L] sliced at [3, 5) on axis 1: L < 5 breaks the slice's check."""
    doc = {"ops": [op("in", "input", outs={"dst": "x"}, dims=["N", "L"]),
                   op("s", "slice", {"src": "x"}, {"dst": "y"}, axis=1, start=3, len=2)]}
    session = Session(doc)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(session.run({"x": x})["y"], x[:, 3:5])
    with pytest.raises(LightNetError, match=r"^<model>: op 's' \(slice\): param 'len': check: "
                                            r"expected start \+ len <= src.shape\[axis\]"):
        session.run({"x": np.zeros((2, 4), np.float32)})
    np.testing.assert_array_equal(session.run({"x": x})["y"], x[:, 3:5])  # still runs
    assert session.planned == [{"L": 6, "N": 2}]
    with pytest.raises(LightNetError, match=r"dim 'L' is symbolic and no value is given"):
        Context().init(doc, dims={"N": 2})
    ctx = Context()
    ctx.init(doc, dims={"N": 2, "L": 7})
    assert ctx.tensors["x"].shape == (2, 7) and ctx.dims == {"N": 2, "L": 7}


def test_inputs_that_must_agree_need_one_name():
    """x [N, 4] + y [M, 4]: the model is checked with N and M apart and refused."""
    doc = {"ops": [op("in", "input", outs={"dst": "x"}, dims=["N", 4]),
                   op("in2", "input", outs={"dst": "y"}, dims=["M", 4]),
                   op("add", "elew", {"src1": "x", "src2": "y"}, {"dst": "z"},
                      elew_op="TL_SUM")]}
    with pytest.raises(LightNetError, match=r"\(checked with M = 5, N = 7: a model with "
                                            r"symbolic dims must pass its checks"):
        Session(doc)
    doc["ops"][1]["params"][0]["value"] = ["N", 4]
    session = Session(doc)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(session.run({"x": x, "y": 2 * x})["z"], 3 * x)
    with pytest.raises(LightNetError, match=r"^input 'y': dim 0 is 'N' with N = 3, but N = 2 "
                                            r"elsewhere in the same run$"):
        session.run({"x": x, "y": np.ones((3, 4), np.float32)})


def test_an_ir_with_a_symbolic_batch_through_the_cli(cnn, tmp_path):
    run = python("-m", "lightnet.frontends.onnx", cnn, "-o", tmp_path / "cnn.json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    x3 = batch(3)
    np.save(tmp_path / "x3.npy", x3)
    run = lightnet("cnn.json", "-f", "cnn.npz", "--input", "x=x3.npy", "--save", "o.npz",
                   cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    expected = run_ort(small_cnn(), {"x": x3})["y"]
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["y"], expected, rtol=1e-4, atol=1e-4)
    # -c keeps the batch symbolic (the batchnorm folded into the conv's weights); -r runs it.
    run = lightnet("cnn.json", "-f", "cnn.npz", "-c", "-o", "c.json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    compiled = json.loads((tmp_path / "c.json").read_text())
    inputs = [op for op in compiled["ops"] if op["optype"] == "input_cpu"]
    assert [p["value"] for p in inputs[0]["params"] if p["arg_name"] == "dims"] == [
        ["N", 3, 32, 32]]
    assert not any(op["optype"].startswith("batchnorm") for op in compiled["ops"])
    x5 = batch(5)
    np.save(tmp_path / "x5.npy", x5)
    run = lightnet("c.json", "-r", "-f", "c.npz", "--input", "x=x5.npy", "--save", "o5.npz",
                   cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    np.testing.assert_allclose(np.load(tmp_path / "o5.npz")["y"],
                               run_ort(small_cnn(), {"x": x5})["y"], rtol=1e-4, atol=1e-4)
    # No --input: the batch is 1.
    run = lightnet("c.json", "-r", "-f", "c.npz", cwd=tmp_path)
    assert run.returncode == 0 and "y: float32[1, 10]" in run.stdout, run.stderr
    # bench --batch binds the symbolic batch.
    run = lightnet("bench", "cnn.json", "-f", "cnn.npz", "--batch", "4", "--warmup", "0",
                   "--runs", "2", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "inputs: x float32[4, 3, 32, 32] (random)" in run.stdout
    assert "(batch 4)" in run.stdout


def test_shape_option_makes_a_static_ir(cnn, tmp_path):
    run = python("-m", "lightnet.frontends.onnx", cnn, "-o", tmp_path / "s.json",
                 "--shape", "x=2,3,32,32", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["ops"][0]["params"][1]["value"] == [2, 3, 32, 32]
    assert doc["interface"]["outputs"][0]["shape"] == [2, 10]
    x = batch(2)
    got = Session(tmp_path / "s.json", datafile=tmp_path / "s.npz").run({"x": x})["y"]
    np.testing.assert_allclose(got, run_ort(small_cnn(), {"x": x})["y"], rtol=1e-4, atol=1e-4)
    run = lightnet("bench", "s.json", "-f", "s.npz", "--batch", "4", cwd=tmp_path)
    assert run.returncode == 1
    assert run.stderr == ("lightnet: error: s.json: batch 4: input 'x' has shape [2, 3, 32, 32], "
                          "its batch fixed at 2; only a model whose inputs have a symbolic first "
                          "dim (\"N\") takes another batch\n")
    run = python("-m", "lightnet.frontends.onnx", cnn, "--shape", "x=2,3,0,32", cwd=tmp_path)
    assert run.returncode == 2 and "expected NAME=D1,D2,... with every D >= 1" in run.stderr
