"""LSTM, GRU and RNN (the `lstm`, `gru` and `rnn` ops) against ONNX Runtime: every
direction, with and without biases and initial states, both layouts, batch 2, on cpu
and dnnl (oneDNN's LSTM where it computes what ONNX does, else the cpu kernel);
peepholes, clip, input_forget, activations, sequence_lens; and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from lightnet import Session  # noqa: E402
from lightnet.archs.dnnl import capi  # noqa: E402
from lightnet.errors import LightNetError  # noqa: E402
from lightnet.frontends import onnx as onnx2ln  # noqa: E402
from tests.frontends.onnxutil import init, run_lightnet, run_ort  # noqa: E402

SEQ, BATCH, INPUT, HIDDEN = 5, 2, 3, 4
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
CELLS = [("LSTM", {}), ("GRU", {}), ("GRU", {"linear_before_reset": 1}), ("RNN", {})]


def targets():
    """cpu, and dnnl where oneDNN loads."""
    reason = capi.unavailable_reason()
    return ["cpu", pytest.param("dnnl", marks=pytest.mark.skipif(reason is not None,
                                                                  reason=reason or ""))]


def recurrent_model(op, *, direction="forward", layout=0, bias=True, states=True,
                    peepholes=False, seq_lens=None, outputs=None, opset=22, seed=0, **attrs):
    """One `op` node of random weights (initializers) reading graph input X; its outputs
    Y, Y_h (and Y_c) unless `outputs` names them ("" leaves one out). Layout 1 takes the
    values of layout 0 transposed (X and the initial states batch first)."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]

    def rand(*shape):
        return rng.uniform(-1, 1, shape).astype(np.float32)

    def batch_first(a):
        return a.transpose(1, 0, 2) if layout else a

    inits = [init("W", rand(dirs, g * HIDDEN, INPUT)), init("R", rand(dirs, g * HIDDEN, HIDDEN))]
    names = ["X", "W", "R", "", "", "", "", ""]
    if bias:
        inits.append(init("B", rand(dirs, 2 * g * HIDDEN)))
        names[3] = "B"
    if seq_lens is not None:
        inits.append(init("L", np.asarray(seq_lens, np.int32)))
        names[4] = "L"
    if states:
        inits.append(init("H0", batch_first(rand(dirs, BATCH, HIDDEN))))
        names[5] = "H0"
        if op == "LSTM":
            inits.append(init("C0", batch_first(rand(dirs, BATCH, HIDDEN))))
            names[6] = "C0"
    if peepholes:
        inits.append(init("P", rand(dirs, 3 * HIDDEN)))
        names[7] = "P"
    while not names[-1]:
        names.pop()
    if outputs is None:
        outputs = ["Y", "Y_h", "Y_c"] if op == "LSTM" else ["Y", "Y_h"]
    if opset >= 14:
        attrs["layout"] = layout
    node = helper.make_node(op, names, outputs, hidden_size=HIDDEN, direction=direction,
                            **attrs)
    x = batch_first(np.random.default_rng(seed + 1).standard_normal(
        (SEQ, BATCH, INPUT)).astype(np.float32))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m, {"X": x}


def reference(op, layout=0, **kwargs):
    """ONNX Runtime's outputs of recurrent_model(op, layout=layout, **kwargs), by name.
    It runs layout 0 only: for layout 1, those of the layout-0 model of the same values,
    transposed batch first (Y [batch, seq, directions, hidden], the states [batch,
    directions, hidden])."""
    m, feeds = recurrent_model(op, **kwargs)
    want = run_ort(m, feeds)
    if layout:
        want = {k: v.transpose((2, 0, 1, 3) if v.ndim == 4 else (1, 0, 2))
                for k, v in want.items()}
    return want


def check(op, tmp_path, target="cpu", extra=0, **kwargs):
    """LightNet's outputs of recurrent_model(op, **kwargs) are ONNX Runtime's (and
    `extra` more: a Y the graph leaves out but the op computes); the IR."""
    m, feeds = recurrent_model(op, **kwargs)
    got, ir = run_lightnet(m, feeds, tmp_path, target=target)
    want = reference(op, **kwargs)
    assert set(want) <= set(got) and len(got) == len(want) + extra
    for name, value in want.items():
        assert got[name].shape == value.shape, name
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    return ir


@pytest.mark.parametrize("target", targets())
@pytest.mark.parametrize("layout,bias,states", [(0, False, False), (0, True, True),
                                                (1, True, True)])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op,attrs", CELLS)
def test_matches_onnxruntime(op, attrs, direction, layout, bias, states, target, tmp_path):
    ir = check(op, tmp_path, target, direction=direction, layout=layout, bias=bias,
               states=states, **attrs)
    # Y_c read: LSTM is lstm_state.
    assert {"LSTM": "lstm_state", "GRU": "gru", "RNN": "rnn"}[op] in [o["optype"]
                                                                     for o in ir["ops"]]


@pytest.mark.skipif(capi.unavailable_reason() is not None, reason="oneDNN does not load")
@pytest.mark.parametrize("kwargs,optype", [
    ({}, "lstm_dnnl"),
    ({"direction": "reverse", "peepholes": True, "layout": 1}, "lstm_dnnl"),
    ({"states": False, "bias": False}, "lstm_dnnl"),
    ({"direction": "bidirectional"}, "lstm_cpu"),
    ({"clip": 0.5}, "lstm_cpu"),
    ({"input_forget": 1}, "lstm_cpu"),
    ({"activations": ["Sigmoid", "Tanh", "Relu"]}, "lstm_cpu"),
    ({"outputs": ["Y", "", "Y_c"]}, "lstm_state_cpu"),
])
def test_dnnl_runs_onednn_lstm_where_it_computes_the_same(kwargs, optype, tmp_path):
    """One direction with the default activations, no clip, no input_forget and no
    Y_c: oneDNN's LSTM (its weights made oneDNN's at compile); the others the cpu
    kernel."""
    kwargs = {"outputs": ["Y", "Y_h"], **kwargs}
    m, feeds = recurrent_model("LSTM", **kwargs)
    ir, weights = onnx2ln.convert(m)
    onnx2ln.save_weights(tmp_path / "w.npz", weights)
    session = Session(ir, target="dnnl", datafile=tmp_path / "w.npz")
    got = session.run(feeds)
    for name, value in reference("LSTM", **kwargs).items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert optype in [op.optype for op in session.ctx.ops]


@pytest.mark.parametrize("target", targets())
@pytest.mark.parametrize("direction,layout", [("forward", 0), ("bidirectional", 1)])
def test_lstm_peepholes_and_clip(direction, layout, target, tmp_path):
    check("LSTM", tmp_path, target, direction=direction, layout=layout, peepholes=True,
          clip=0.5)


@pytest.mark.parametrize("op,attrs", CELLS)
def test_clip(op, attrs, tmp_path):
    check(op, tmp_path, direction="bidirectional", clip=0.3, **attrs)


def test_lstm_input_forget(tmp_path):
    check("LSTM", tmp_path, input_forget=1, peepholes=True)


@pytest.mark.parametrize("op,activations", [
    ("LSTM", ["Tanh", "Relu", "Sigmoid", "Sigmoid", "Tanh", "Relu"]),
    ("GRU", ["Relu", "Sigmoid", "Sigmoid", "Relu"]),
    ("RNN", ["Relu", "Sigmoid"]),
])
def test_activations(op, activations, tmp_path):
    check(op, tmp_path, direction="bidirectional", activations=activations)


@pytest.mark.parametrize("outputs,extra", [(["Y"], 0), (["", "Y_h"], 0), (["", "", "Y_c"], 1),
                                           (["Y", "", "Y_c"], 0), (["", "Y_h", "Y_c"], 0)])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_output_subsets(outputs, extra, direction, layout, tmp_path):
    """Y_h is Y's last step of each direction; Y_c alone leaves Y an output nobody
    reads."""
    check("LSTM", tmp_path, extra=extra, direction=direction, layout=layout, outputs=outputs)


@pytest.mark.parametrize("opset", [7, 14])
@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_older_opsets(op, opset, tmp_path):
    check(op, tmp_path, direction="reverse", opset=opset)


def test_computed_weights(tmp_path):
    """W and R graph inputs (not constants) are read as they come."""
    m, feeds = recurrent_model("GRU", direction="bidirectional")
    for name in ("W", "R"):
        t = next(t for t in m.graph.initializer if t.name == name)
        feeds[name] = onnx.numpy_helper.to_array(t)
        m.graph.initializer.remove(t)
        m.graph.input.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                           feeds[name].shape))
    got, _ = run_lightnet(m, feeds, tmp_path)
    for name, value in run_ort(m, feeds).items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_sequence_lens_of_the_whole_sequence(tmp_path):
    check("GRU", tmp_path, seq_lens=[SEQ] * BATCH)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_double(op, tmp_path):
    """float64 X and weights: the op computes in TL_DOUBLE (against ONNX's reference
    evaluator: ONNX Runtime's LSTM takes no double)."""
    from onnx.reference import ReferenceEvaluator

    m, feeds = recurrent_model(op, direction="bidirectional", peepholes=op == "LSTM")
    for t in m.graph.initializer:
        t.CopyFrom(init(t.name, onnx.numpy_helper.to_array(t).astype(
            np.float64 if t.data_type == TensorProto.FLOAT else np.int32)))
    for v in [*m.graph.input, *m.graph.output]:
        v.type.tensor_type.elem_type = TensorProto.DOUBLE
    feeds = {"X": feeds["X"].astype(np.float64)}
    got, _ = run_lightnet(m, feeds, tmp_path)
    want = dict(zip([o.name for o in m.graph.output], ReferenceEvaluator(m).run(None, feeds)))
    for name, value in want.items():
        assert got[name].dtype == np.float64
        np.testing.assert_allclose(got[name], value, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kwargs,message", [
    ({"op": "LSTM", "activations": ["Sigmoid", "Tanh", "LeakyRelu"]},
     "activations ['Sigmoid', 'Tanh', 'LeakyRelu'] (LightNet takes Sigmoid, Tanh and Relu)"),
    ({"op": "GRU", "seq_lens": [SEQ, SEQ - 1]},
     f"sequence_lens [{SEQ}, {SEQ - 1}]: LightNet runs every sequence of the batch for all "
     f"{SEQ} steps"),
    ({"op": "RNN", "clip": 0.0}, "clip 0.0 (expected a positive bound)"),
])
def test_refusals(kwargs, message, tmp_path):
    m, feeds = recurrent_model(**kwargs)
    with pytest.raises(LightNetError) as e:
        run_lightnet(m, feeds, tmp_path)
    assert message in str(e.value)
    assert f"{kwargs['op']} (opset 22, {kwargs['op']}-22)" in str(e.value)


def test_computed_sequence_lens_refused(tmp_path):
    m, feeds = recurrent_model("RNN")
    m.graph.node[0].input[4:] = ["L"]
    m.graph.input.append(helper.make_tensor_value_info("L", TensorProto.INT32, [BATCH]))
    with pytest.raises(LightNetError, match="RNN-22\\): sequence_lens 'L' must be a constant"):
        run_lightnet(m, {**feeds, "L": np.full(BATCH, SEQ, np.int32)}, tmp_path)


def test_hidden_size_mismatch_refused(tmp_path):
    m, feeds = recurrent_model("RNN")
    next(a for a in m.graph.node[0].attribute if a.name == "hidden_size").i = HIDDEN + 1
    with pytest.raises(LightNetError, match=r"hidden_size 5 for R of shape \[1, 4, 4\]"):
        onnx2ln.convert(m, check=False)
