"""The importer's table of tensor types (graph.TensorTypes): a round of shape inference
runs when a type is next read or set, and what it says merges as if it ran at once."""

import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from lightnet.frontends.onnx.graph import TensorTypes  # noqa: E402

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


def info(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def test_inference_runs_only_when_a_type_is_read():
    runs = []
    types = TensorTypes()
    types["x"] = (FLOAT, (2, 3))
    types.infer_later(lambda: runs.append(1) or [info("y", FLOAT, [2, 3])])
    assert runs == []
    assert types.get("y") == (FLOAT, (2, 3))
    assert types["x"] == (FLOAT, (2, 3))
    assert runs == [1]


def test_what_inference_says_adds_to_what_was_known():
    types = TensorTypes()
    types["a"] = (FLOAT, None)  # a type, no shape
    types["b"] = (INT64, (4,))
    types.infer_later(lambda: [info("a", 0, [5]),  # a shape, no elem type
                               info("b", 0, None),  # nothing new: kept
                               info("c", FLOAT, ["N"]),  # a symbolic dim: no shape
                               helper.make_value_info("s", helper.make_sequence_type_proto(
                                   helper.make_tensor_type_proto(FLOAT, [1])))])
    assert types.get("a") == (FLOAT, (5,))
    assert types.get("b") == (INT64, (4,))
    assert types.get("c") == (FLOAT, None)
    assert types.get("s") is None  # not a tensor
    assert types.get("d", (0, None)) == (0, None)


def test_rounds_merge_in_order_and_a_set_type_replaces_the_rounds_before():
    types = TensorTypes()
    types.infer_later(lambda: [info("t", FLOAT, [1]), info("u", FLOAT, [2])])
    types.infer_later(lambda: [info("t", FLOAT, [7])])  # the first round runs before
    types["u"] = (INT64, (9,))  # after both rounds: it is what stays
    assert types["t"] == (FLOAT, (7,))
    assert types["u"] == (INT64, (9,))
    types.infer_later(lambda: [info("u", FLOAT, [3])])  # a later round adds to it
    assert types["u"] == (FLOAT, (3,))
    with pytest.raises(KeyError):
        types["v"]
