"""lightnet.Session: compile and load once, run many times with checked inputs."""

import numpy as np
import pytest

from lightnet import LightNetError, Session, TensorInfo
from tests.irbuild import ModelBuilder


def model():
    m = ModelBuilder()
    x = m.input("x", (2, 3))
    y = m.input("y", (2, 3))
    m.op("elew", {"src1": x, "src2": y}, name="sum", elew_op="TL_SUM")
    m.op("relu", {"src": "x"}, name="pos")
    return m.to_dict()


def test_inputs_outputs_and_repeated_runs():
    s = Session(model())
    assert s.inputs == [TensorInfo("x", np.dtype("float32"), (2, 3)),
                        TensorInfo("y", np.dtype("float32"), (2, 3))]
    assert [o.name for o in s.outputs] == ["sum", "pos"]
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.standard_normal((2, 3)).astype(np.float32)
        y = rng.standard_normal((2, 3)).astype(np.float32)
        out = s.run({"x": x, "y": y})
        np.testing.assert_array_equal(out["sum"], x + y)
        np.testing.assert_array_equal(out["pos"], np.maximum(x, 0))
    out["sum"][...] = 99  # results are copies
    assert not (s.run({"x": x, "y": y})["sum"] == 99).any()


def test_lists_are_converted():
    out = Session(model()).run({"x": [[1, -2, 3]] * 2, "y": [[1, 1, 1]] * 2})
    np.testing.assert_array_equal(out["sum"], [[2, -1, 4]] * 2)


@pytest.mark.parametrize("feeds, message", [
    ({"x": np.zeros((2, 3), np.float32)}, "inputs ['y'] are not given"),
    ({"x": np.zeros((2, 3), np.float32), "y": np.zeros((3, 2), np.float32)},
     "input 'y': expected shape (2, 3), found (3, 2)"),
    ({"x": np.zeros((2, 3), np.float64), "y": np.zeros((2, 3), np.float32)},
     "input 'x': expected dtype float32, found float64"),
    ({"x": np.zeros((2, 3), np.float32), "y": np.zeros((2, 3), np.float32), "z": 1},
     "'z' is not an input of the model (inputs: x, y)"),
])
def test_bad_inputs_are_clear_errors(feeds, message):
    with pytest.raises(LightNetError) as info:
        Session(model()).run(feeds)
    assert str(info.value) == message


def test_weights_from_a_file(tmp_path):
    m = ModelBuilder()
    x = m.input("x", (1, 4))
    w = m.weight("w", [4, 2], from_file=True)
    m.op("matmul", {"src1": x, "src2": w}, name="y")
    weights = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.savez(tmp_path / "w.npz", w1=weights)
    s = Session(m.to_dict(), datafile=tmp_path / "w.npz")
    out = s.run({"x": np.ones((1, 4), np.float32)})
    np.testing.assert_array_equal(out["y"], np.ones((1, 4)) @ weights)
    with pytest.raises(LightNetError, match=r"tensors \['w1'\] are created from a file"):
        Session(m.to_dict())


def declared_model(interface=None):
    """ids: int32 [1] (declared int64 scalar) -> forward; x: float32 [2, 3] (declared
    float16 [6]) -> relu."""
    m = ModelBuilder()
    ids = m.input("ids", (1,), dtype="TL_INT32")
    x = m.input("x", (2, 3))
    m.op("forward", {"src": ids}, name="same_ids")
    m.op("relu", {"src": x}, name="pos")
    doc = m.to_dict()
    doc["interface"] = interface or {
        "inputs": [{"name": "ids", "dtype": "int64", "shape": []},
                   {"name": "x", "dtype": "float16", "shape": [6]}],
        "outputs": [{"name": "same_ids", "dtype": "int64", "shape": []},
                    {"name": "pos", "dtype": "float16", "shape": [6]}]}
    return doc


def test_the_declared_dtypes_and_shapes_are_taken_and_returned():
    s = Session(declared_model())
    assert s.inputs == [TensorInfo("ids", np.dtype("int64"), ()),
                        TensorInfo("x", np.dtype("float16"), (6,))]
    assert s.outputs == [TensorInfo("same_ids", np.dtype("int64"), ()),
                         TensorInfo("pos", np.dtype("float16"), (6,))]
    x = np.array([-1.5, 2.25, 0, 3, -4, 65504], np.float16)
    out = s.run({"ids": np.array(-2147483648, np.int64), "x": x})
    assert out["same_ids"].dtype == np.int64 and out["same_ids"].shape == ()
    assert out["same_ids"] == -2147483648
    assert out["pos"].dtype == np.float16 and out["pos"].shape == (6,)
    np.testing.assert_array_equal(out["pos"], np.maximum(x, 0))
    # The tensors' own dtypes and shapes are still taken.
    out = s.run({"ids": np.array([7], np.int32), "x": np.ones((2, 3), np.float32)})
    assert out["same_ids"] == 7 and out["pos"].tolist() == [1] * 6


@pytest.mark.parametrize("feeds, message", [
    ({"ids": np.array(2**31, np.int64)},
     "input 'ids': int64 value 2147483648 does not fit in the model's int32 tensor "
     "[-2147483648, 2147483647]"),
    ({"ids": np.array(-2**31 - 1, np.int64)},
     "input 'ids': int64 value -2147483649 does not fit in the model's int32 tensor "
     "[-2147483648, 2147483647]"),
    ({"ids": np.array(1, np.int16)}, "input 'ids': expected dtype int64, found int16"),
    ({"ids": np.array([1, 2], np.int64)}, "input 'ids': expected shape (), found (2,)"),
])
def test_declared_feeds_are_checked(feeds, message):
    s = Session(declared_model())
    with pytest.raises(LightNetError) as info:
        s.run({"x": np.zeros(6, np.float16), **feeds})
    assert str(info.value) == message


@pytest.mark.parametrize("interface, message", [
    ({"inputs": [{"name": "y", "dtype": "int64", "shape": [1]}]},
     "interface: 'y' is not an input of the model (inputs: ids, x)"),
    ({"outputs": [{"name": "pos", "dtype": "float16", "shape": [7]}]},
     "interface: output 'pos': declared shape [7] has 7 elements, the tensor has 6"),
    ({"inputs": [{"name": "x", "dtype": "complex64", "shape": [6]}]},
     "<model>: 'interface' inputs[0] field 'dtype': expected one of bool, float16, float32, "
     "float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64, found \"complex64\""),
    ({"inputs": [{"name": "x", "dtype": "float16", "shape": [-6]}]},
     "<model>: 'interface' inputs[0] field 'shape': expected an array of dims >= 0, "
     "found [-6]"),
    ({"inputs": [{"name": "x", "shape": [6]}]},
     "<model>: 'interface' inputs[0]: missing field 'dtype'"),
    ({"outputs": {}}, "<model>: 'interface' outputs: expected an array, found an object"),
    ({"ports": []}, "<model>: 'interface': unknown field 'ports'"),
])
def test_a_bad_interface_is_a_clear_error(interface, message):
    with pytest.raises(LightNetError) as info:
        Session(declared_model(interface))
    assert str(info.value) == message


def test_the_printed_ir_keeps_the_interface():
    from lightnet import Context
    import json

    ctx = Context()
    ctx.init(declared_model())
    ctx.compile("cpu")
    assert json.loads(ctx.print())["interface"] == declared_model()["interface"]
