"""Shared pieces of the ONNX tests: an initializer, a model of nodes, a one-Relu model
file, and a model run by ONNX Runtime and by LightNet (imported, its weights saved and read back), to
compare."""

from __future__ import annotations

import numpy as np
import pytest

from lightnet import Session
from lightnet.frontends import onnx as onnx2ln


def init(name, array):
    """The ONNX initializer (a TensorProto) `name` holding `array`."""
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(array), name)


def model(nodes, inputs, outputs, inits=(), opset=13):
    """A model from nodes; `inputs` / `outputs` are (name, shape) pairs (float) or
    (name, shape, elem_type) triples, shape None for outputs left to inference."""
    from onnx import TensorProto, helper

    def vi(spec):
        name, shape, *elem = spec
        return helper.make_tensor_value_info(name, elem[0] if elem else TensorProto.FLOAT,
                                             shape)

    graph = helper.make_graph(nodes, "test", [vi(i) for i in inputs], [vi(o) for o in outputs],
                              list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7 if opset < 15 else 8
    return m


def relu_model_file(tmp, shape):
    """tmp/m.onnx: x -> Relu -> y, both float32 of `shape` (opset 13)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    path = tmp / "m.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def run_ort(m, feeds) -> dict[str, np.ndarray]:
    """The outputs of the ONNX model `m` on `feeds` by ONNX Runtime, by name."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def run_lightnet(m, feeds, tmp_path, dims=None, target="auto"):
    """(outputs by name, IR): the ONNX model `m` imported (with `dims`), its weights
    written to a file in `tmp_path`, and run by a Session (for `target`) on `feeds`."""
    ir, weights = onnx2ln.convert(m, dims)
    npz = tmp_path / "weights.npz"
    onnx2ln.save_weights(npz, weights)
    session = Session(ir, target=target, datafile=npz)
    return session.run(feeds), ir
