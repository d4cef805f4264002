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
