"""`lightnet quantize` and lightnet.quantize: the int8 model ONNX Runtime's quantize_static
writes, run by LightNet and by ONNX Runtime (within one quantization step of each other
on the same QDQ file); the accuracy report against figures computed here with plain
loops; reduce_range as asked and as the machine's VNNI says; the calibration file's
and the missing package's errors, one line each."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import lightnet
from lightnet import LightNetError, Session, accuracy, quantization
from lightnet.cli import main
from tests.frontends import qdqmodels
from tests.helpers import assert_one_error_line
from tests.helpers import lightnet as lightnet_command

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

SAMPLES, CLASSES = 12, 10


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """(model path, calibration .npz): x[1, 3, 8, 8] -> Conv - Relu - Conv - Add (the
    residual) - Relu - GlobalAveragePool - Flatten - Gemm -> y[1, 10] (qdqmodels.classifier),
    and 12 samples."""
    tmp = tmp_path_factory.mktemp("cnn")
    rng = np.random.default_rng(0)
    model, _ = qdqmodels.classifier(rng)
    path = tmp / "cnn.onnx"
    onnx.save(model, str(path))
    calibration = tmp / "samples.npz"
    np.savez(calibration, x=rng.standard_normal((SAMPLES, 1, 3, 8, 8)).astype(np.float32))
    return path, calibration


def naive_report(got, want):
    """(max relative error, agreeing, counted, near-ties) of [samples, classes] scores,
    by loops over Python floats."""
    lo = min(float(v) for row in want for v in row)
    hi = max(float(v) for row in want for v in row)
    worst = max(abs(float(g) - float(w)) for gr, wr in zip(got, want) for g, w in zip(gr, wr))
    agree = counted = ties = 0
    for g, w in zip(got, want):
        w = [float(v) for v in w]
        ranked = sorted(range(len(w)), key=lambda i: w[i], reverse=True)
        if w[ranked[0]] - w[ranked[1]] <= 2e-2 * (max(w) - min(w)):
            ties += 1
            continue
        counted += 1
        agree += int(max(range(len(g)), key=lambda i: g[i]) == ranked[0])
    return worst / (hi - lo), agree, counted, ties


def test_round_trip_against_onnx_runtime_and_the_report(cnn, tmp_path):
    path, calibration = cnn
    out = tmp_path / "cnn.int8.onnx"
    report = lightnet.quantize(path, calibration, out, reduce_range="on", target="cpu")
    q = onnx.load(str(out))
    ops = [n.op_type for n in q.graph.node]
    assert ops.count("QuantizeLinear") >= 5 and ops.count("Conv") == 2
    inits = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
    w1 = inits["w1_quantized"]
    assert w1.dtype == np.int8 and inits["w1_scale"].shape == (8,)  # per channel
    assert not np.any(inits["w1_zero_point"])  # symmetric
    assert np.abs(w1.astype(int)).max() == 64  # reduce_range: 7 bits, symmetric [-64, 64]
    assert inits["x_zero_point"].dtype == np.uint8
    # The int8 model in LightNet and in ONNX Runtime: one quantization step of y apart.
    step = float(inits["y_scale"])
    samples = np.load(calibration)["x"]
    mine = Session(str(out), target="cpu")
    theirs = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = np.stack([mine.run({"x": x})["y"][0] for x in samples])
    ort_y = np.stack([theirs.run(None, {"x": x})[0][0] for x in samples])
    assert np.max(np.abs(got - ort_y)) <= step * 1.001
    # The report's figures, against loops over the float and int8 outputs.
    float_model = Session(str(path), target="cpu")
    want = np.stack([float_model.run({"x": x})["y"][0] for x in samples])
    rel, agree, counted, ties = naive_report(got, want)
    (y,) = report.outputs
    assert report.samples == SAMPLES and y.name == "y"
    assert y.max_rel_error == pytest.approx(rel, rel=1e-9)
    assert y.top1 == (agree, counted, ties) and counted + ties == SAMPLES
    assert 0 < y.max_rel_error <= accuracy.CONTRACT and report.within()


def test_the_contract_counts_near_ties_apart():
    want = [{"p": np.array([[1.0, 0.99, 0.0]])}, {"p": np.array([[0.0, 1.0, 0.5]])},
            {"p": np.array([[3.0, 1.0, 0.0]])}]
    got = [{"p": np.array([[0.99, 1.0, 0.0]])}, {"p": np.array([[0.0, 1.0, 0.5]])},
           {"p": np.array([[1.0, 3.0, 0.0]])}]
    (p,) = accuracy.compare(got, want).outputs
    # Sample 0 is a near-tie (0.01 <= 2e-2 x 1), 1 agrees, 2 does not; the error is 2 of
    # the range 3.
    assert p.top1 == (1, 2, 1) and p.max_rel_error == pytest.approx(2 / 3)
    assert not p.within()
    (p,) = accuracy.compare(got[:2], want[:2]).outputs
    assert p.top1 == (1, 1, 1) and p.max_rel_error == pytest.approx(0.01)
    assert p.within() and not p.within(1e-3)
    # Not scores: no top-1.
    (m,) = accuracy.compare([{"m": np.ones((2, 2))}], [{"m": np.zeros((2, 2))}]).outputs
    assert m.top1 is None and m.max_rel_error == float("inf")


def test_the_command_writes_the_model_and_prints_the_report(cnn, tmp_path):
    path, calibration = cnn
    out = tmp_path / "q.onnx"
    result = lightnet_command("quantize", path, "--calibrate", calibration, "-o", out,
                              "--reduce-range", "off", "-t", "cpu")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"wrote {out}"
    assert lines[1].startswith(f"accuracy on {SAMPLES} samples against float32 (within")
    assert lines[2].startswith("  y: max relative error ")
    assert f"top-1 " in lines[2] and "near-ties not counted" in lines[2]
    w1 = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer}[
        "w1_quantized"]
    assert max(-int(w1.min()), int(w1.max())) > 64  # all 8 bits without reduce_range


@pytest.mark.parametrize("exact", [True, False])
def test_reduce_range_auto_follows_the_machines_vnni(monkeypatch, exact):
    from lightnet.archs.dnnl import capi, ops

    if capi.unavailable_reason() is not None:
        assert quantization.reduce_range_here()
        return
    monkeypatch.setattr(ops, "int8_exact", lambda: exact)
    assert quantization.reduce_range_here() is not exact


def error_line(capsys, *argv) -> str:
    assert main(["quantize", *map(str, argv)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    return line


def test_calibration_errors(cnn, tmp_path, capsys):
    path, _ = cnn
    out = tmp_path / "q.onnx"
    cases = {"key.npz": {"image": np.zeros((2, 1, 3, 8, 8), np.float32)},
             "shape.npz": {"x": np.zeros((2, 3, 8, 8), np.float32)},
             "dims.npz": {"x": np.zeros((2, 1, 3, 8, 9), np.float32)},
             "dtype.npz": {"x": np.zeros((2, 1, 3, 8, 8), np.float64)}}
    for name, arrays in cases.items():
        np.savez(tmp_path / name, **arrays)
    npz = tmp_path / "key.npz"
    assert error_line(capsys, path, "--calibrate", npz, "-o", out) == (
        f"lightnet: error: {npz}: no array for input 'x' (the model's inputs: x; the "
        "file's arrays: image)")
    np.savez(npz, x=np.zeros((2, 1, 3, 8, 8), np.float32), y=np.zeros(1))
    with pytest.raises(LightNetError, match=r"^.*key\.npz: 'y' is not an input of the "
                                            r"model \(inputs: x\)$"):
        quantization.read_calibration(npz, Session(str(path)).inputs)
    assert error_line(capsys, path, "--calibrate", tmp_path / "shape.npz", "-o", out) == (
        f"lightnet: error: {tmp_path / 'shape.npz'}: input 'x': expected samples of shape "
        "[1, 3, 8, 8] along a leading sample axis ([S, 1, 3, 8, 8]), found [2, 3, 8, 8]")
    assert error_line(capsys, path, "--calibrate", tmp_path / "dims.npz", "-o", out) == (
        f"lightnet: error: {tmp_path / 'dims.npz'}: input 'x': its samples: expected shape "
        "[1, 3, 8, 8], found [1, 3, 8, 9]")
    assert error_line(capsys, path, "--calibrate", tmp_path / "dtype.npz", "-o", out) == (
        f"lightnet: error: {tmp_path / 'dtype.npz'}: input 'x': expected dtype float32, "
        "found float64")
    assert error_line(capsys, path, "--calibrate", tmp_path / "none.npz", "-o", out) == (
        f"lightnet: error: {tmp_path / 'none.npz'}: no such calibration file")
    assert not out.exists()


def two_inputs(tmp_path):
    """x [N, 4] + z [N, 4] -> y, symbolic N."""
    x, z, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 4]) for n in "xzy")
    graph = helper.make_graph([helper.make_node("Add", ["x", "z"], ["y"])], "g", [x, z], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    path = tmp_path / "add.onnx"
    onnx.save(model, str(path))
    return path


def test_a_missing_input_and_uneven_samples(tmp_path, capsys):
    path = two_inputs(tmp_path)
    npz = tmp_path / "s.npz"
    np.savez(npz, x=np.zeros((3, 2, 4), np.float32))
    assert error_line(capsys, path, "--calibrate", npz) == (
        f"lightnet: error: {npz}: no array for input 'z' (the model's inputs: x, z; the "
        "file's arrays: x)")
    np.savez(npz, x=np.zeros((3, 2, 4), np.float32), z=np.zeros((2, 2, 4), np.float32))
    assert error_line(capsys, path, "--calibrate", npz) == (
        f"lightnet: error: {npz}: the inputs have different numbers of samples ('x' 3, "
        "'z' 2); every input needs one array per sample")
    # A symbolic dim takes one value in all of an input's samples and the other's.
    np.savez(npz, x=np.zeros((3, 2, 4), np.float32), z=np.zeros((3, 5, 4), np.float32))
    assert error_line(capsys, path, "--calibrate", npz) == (
        f"lightnet: error: {npz}: input 'z': its samples: dim 0 is 'N' with N = 5, but "
        "N = 2 elsewhere in the same run")


def test_without_onnxruntime(cnn, tmp_path, capsys, monkeypatch):
    path, calibration = cnn
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime fails
    assert error_line(capsys, path, "--calibrate", calibration, "-o", tmp_path / "q.onnx") == (
        f"lightnet: error: {path}: quantizing needs the onnxruntime package: "
        "pip install 'lightnet[quantize]'")


def test_models_and_options_it_refuses(cnn, tmp_path, capsys):
    path, calibration = cnn
    assert error_line(capsys, tmp_path / "m.json", "--calibrate", calibration) == (
        f"lightnet: error: {tmp_path / 'm.json'}: quantizing takes an ONNX model (a path "
        "ending in .onnx)")
    assert error_line(capsys, path, "--calibrate", calibration, "-o", tmp_path / "q.json") == (
        f"lightnet: error: {tmp_path / 'q.json'}: the quantized model is an ONNX model: name "
        "it *.onnx")
    with pytest.raises(LightNetError, match=r"^reduce_range: expected one of auto, on, off, "
                                            r"found 'yes'$"):
        lightnet.quantize(path, calibration, tmp_path / "q.onnx", reduce_range="yes")
    usage = lightnet_command("quantize", path, "-o", tmp_path / "q.onnx")
    assert usage.returncode == 2
    assert usage.stderr.splitlines()[-1] == (
        "lightnet quantize: error: the following arguments are required: --calibrate")
    assert_one_error_line(lightnet_command("quantize", path, "--calibrate", calibration,
                                           "-o", tmp_path / "no" / "q.onnx"))
