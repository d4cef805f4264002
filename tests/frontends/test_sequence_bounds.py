"""A symbolic dim sliced out of a fixed table (a sequence length by its position
table) has an upper bound: the importer writes it in the IR's interface, and
Session, Context.init and `lightnet bench --shape` refuse a longer sequence with
one line naming the input, the axis, the bound and the value, before anything
binds; within the bound the model agrees with ONNX Runtime."""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lightnet import Context, LightNetError, Session  # noqa: E402
from lightnet.frontends.onnx import convert  # noqa: E402
from tests.frontends.onnxutil import run_ort  # noqa: E402
from tests.helpers import assert_one_error_line, lightnet  # noqa: E402

ROWS, WIDTH = 32, 4


def _const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def sliced_positions(start: int = 3):
    """x float32[batch, seq, WIDTH] plus rows start .. start + seq of a [ROWS, WIDTH]
    position table, sliced to the sequence length read from x's shape."""
    table = np.random.default_rng(0).standard_normal((ROWS, WIDTH)).astype(np.float32)
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["seq"]),
             helper.make_node("Unsqueeze", ["seq", "axes0"], ["seq1"]),
             helper.make_node("Add", ["seq1", "start"], ["end"]),
             helper.make_node("Slice", ["table", "start", "end", "axes0"], ["positions"]),
             helper.make_node("Add", ["x", "positions"], ["y"])]
    inits = [_const("table", table), _const("one", np.int64(1)),
             _const("axes0", np.array([0], np.int64)), _const("start", np.array([start],
                                                                                np.int64))]
    graph = helper.make_graph(
        nodes, "positions",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def ranged_positions():
    """GPT-2's position embeddings: token ids int64[batch, seq] gather rows of a word
    table, plus the rows Range(0, seq) gathers from a [ROWS, WIDTH] position table."""
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Shape", ["ids"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["seq"]),
             helper.make_node("Range", ["zero", "seq", "one"], ["range"]),
             helper.make_node("Unsqueeze", ["range", "axes0"], ["position_ids"]),
             helper.make_node("Gather", ["positions", "position_ids"], ["p"]),
             helper.make_node("Gather", ["words", "ids"], ["w"]),
             helper.make_node("Add", ["w", "p"], ["y"])]
    inits = [_const("positions", rng.standard_normal((ROWS, WIDTH)).astype(np.float32)),
             _const("words", rng.standard_normal((10, WIDTH)).astype(np.float32)),
             _const("one", np.int64(1)), _const("zero", np.int64(0)),
             _const("axes0", np.array([0], np.int64))]
    graph = helper.make_graph(
        nodes, "gpt2_positions",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


@pytest.fixture
def sliced_file(tmp_path):
    path = tmp_path / "sliced.onnx"
    path.write_bytes(sliced_positions().SerializeToString())
    return path


def test_the_importer_bounds_a_dim_sliced_out_of_a_table():
    ir, _ = convert(sliced_positions(start=3))
    assert ir["interface"]["dims"] == [{"name": "seq", "max": ROWS - 3}]
    ir, _ = convert(sliced_positions(start=0))
    assert ir["interface"]["dims"] == [{"name": "seq", "max": ROWS}]
    ir, _ = convert(ranged_positions())
    assert ir["interface"]["dims"] == [{"name": "seq", "max": ROWS}]
    # A fixed sequence leaves nothing to bound.
    ir, _ = convert(sliced_positions(), dims={"seq": 8})
    assert "dims" not in ir["interface"]


@pytest.mark.parametrize("target", ["cpu", "dnnl"])
def test_within_the_bound_as_onnx_runtime_beyond_it_one_line(sliced_file, target):
    session = Session(sliced_file, target=target)
    rng = np.random.default_rng(2)
    for seq in (1, 17, ROWS - 3):
        x = rng.standard_normal((2, seq, WIDTH)).astype(np.float32)
        want = run_ort(sliced_positions(), {"x": x})["y"]
        np.testing.assert_allclose(session.run({"x": x})["y"], want, rtol=1e-6, atol=1e-6)
    planned = session.planned
    with pytest.raises(LightNetError) as e:
        session.run({"x": np.zeros((2, ROWS - 2, WIDTH), np.float32)})
    assert str(e.value) == ("input 'x': dim 1 is 'seq' with seq = 30, more than the model "
                            "allows: at most 29")
    assert session.planned == planned  # refused before any plan is made


def test_gathered_positions_within_and_beyond_the_bound(tmp_path):
    path = tmp_path / "ranged.onnx"
    path.write_bytes(ranged_positions().SerializeToString())
    session = Session(path, target="cpu")
    ids = np.random.default_rng(3).integers(0, 10, (2, ROWS), dtype=np.int64)
    want = run_ort(ranged_positions(), {"ids": ids})["y"]
    np.testing.assert_allclose(session.run({"ids": ids})["y"], want, rtol=1e-6, atol=1e-6)
    with pytest.raises(LightNetError, match=r"^input 'ids': dim 1 is 'seq' with seq = 33, more "
                                            r"than the model allows: at most 32$"):
        session.run({"ids": np.zeros((1, ROWS + 1), np.int64)})


def test_context_and_bench_refuse_a_dim_above_its_bound(sliced_file, tmp_path):
    ir, _ = convert(sliced_positions())
    with pytest.raises(LightNetError, match=r"^<model>: dims: 'seq' is 30, more than the model "
                                            r"allows: at most 29$"):
        Context().init(ir, dims={"batch": 1, "seq": 30})
    assert_one_error_line(
        lightnet("bench", sliced_file, "--shape", "x=1,40,4", cwd=tmp_path),
        f"{sliced_file}: --shape x=1,40,4: input 'x': dim 1 is 'seq' with seq = 40, more than "
        "the model allows: at most 29")


def test_compiled_ir_keeps_the_bound(sliced_file, tmp_path):
    run = lightnet(sliced_file, "-c", "-o", "c.json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    compiled = json.loads((tmp_path / "c.json").read_text())
    assert compiled["interface"]["dims"] == [{"name": "seq", "max": ROWS - 3}]
    session = Session(tmp_path / "c.json", datafile=tmp_path / "c.npz")
    with pytest.raises(LightNetError, match="seq = 30, more than the model allows: at most 29"):
        session.run({"x": np.zeros((1, 30, WIDTH), np.float32)})


@pytest.mark.parametrize("dims, message", [
    ({"max": 4}, "'interface' dims: expected an array, found dict"),
    ([{"name": "seq"}], "'interface' dims[0]: expected an object {\"name\": ..., \"max\": ...}, "
                        "found {'name': 'seq'}"),
    ([{"name": "S", "max": 4}], "'interface' dims[0]: 'S' is not a symbolic dim of the model "
                                "(symbolic dims: batch, seq)"),
    ([{"name": "seq", "max": 4}, {"name": "seq", "max": 5}],
     "'interface' dims[1]: 'seq' is bounded twice"),
    ([{"name": "seq", "max": 0}], "'interface' dims[0] field 'max': expected a whole number >= 1, "
                                  "found 0"),
])
def test_bounds_are_validated_at_load(dims, message):
    ir, _ = convert(sliced_positions())
    ir["interface"]["dims"] = dims
    with pytest.raises(LightNetError) as e:
        Session(ir)
    assert str(e.value) == f"<model>: {message}"
