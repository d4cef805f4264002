"""The command line a model user meets, run as separate processes: inputs and
outputs (`--input`, `--save`, the printed summary), ONNX models run directly,
`lightnet info` and `lightnet bench`, on an ONNX model and on a LightNet IR.

Outputs are checked against Session.run and ONNX Runtime; `info` numbers
against values computed here from the models' dims; `bench` for its figures'
presence and order (never their size).
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

from lightnet import Session
from lightnet.archs.dnnl import capi
from tests.helpers import assert_one_error_line, bench_models, lightnet
from tests.irbuild import op

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# The ONNX model: x[N, C, H, W] -> Conv (group G, stride 2, pad 1) -> Relu ->
# GlobalAveragePool -> Flatten -> Gemm (transB) -> y[N, K]; N symbolic.
C, H, W, O, G, KH, KW, K = 4, 9, 9, 6, 2, 3, 3, 10
OH, OW = (H + 2 - KH) // 2 + 1, (W + 2 - KW) // 2 + 1
# The IR model: x[1, CI, HI, WI] -> conv2d (weights from the file, no padding) -> relu -> y
CI, HI, WI, OI, KI = 2, 5, 5, 3, 3


def ok(result) -> str:
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


@pytest.fixture
def onnx_model(tmp_path) -> Path:
    rng = np.random.default_rng(1)
    arrays = {"w": rng.standard_normal((O, C // G, KH, KW)), "b": rng.standard_normal(O),
              "w2": rng.standard_normal((K, O)), "b2": rng.standard_normal(K)}
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in arrays.items()]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=G, strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", C, H, W])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", K])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


@pytest.fixture
def ir_model(tmp_path) -> tuple[Path, Path]:
    """(the IR, its weight file)."""
    doc = {"ops": [
        op("in", "input", outs={"dst": "x"}, dims=[1, CI, HI, WI]),
        op("w", "create", outs={"dst": "w"}, dtype="TL_FLOAT", dims=[OI, CI, KI, KI],
           from_file=True),
        op("b", "create", outs={"dst": "b"}, dtype="TL_FLOAT", dims=[OI], from_file=True),
        op("conv", "conv2d", {"src": "x", "weight": "w", "bias": "b"}, {"dst": "c"},
           size=[KI, KI]),
        op("relu", "relu", {"src": "c"}, {"dst": "y"}),
    ]}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    rng = np.random.default_rng(2)
    weights = tmp_path / "w.npz"
    np.savez(weights, w=rng.standard_normal((OI, CI, KI, KI)).astype(np.float32),
             b=rng.standard_normal(OI).astype(np.float32))
    return path, weights


def test_onnx_model_runs_directly_with_input_and_save(onnx_model, tmp_path):
    import onnxruntime

    x = np.random.default_rng(3).random((1, C, H, W), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    out = ok(lightnet(onnx_model, "--input", "x=x.npy", "--save", "y.npz", cwd=tmp_path))
    assert re.fullmatch(r"info: run time: \d+\.\d{6}s\ninfo: outputs y written to y\.npz\n",
                        out)
    with np.load(tmp_path / "y.npz") as saved:
        assert saved.files == ["y"]
        y = saved["y"]
    assert np.array_equal(y, Session(str(onnx_model)).run({"x": x})["y"])
    ort = onnxruntime.InferenceSession(str(onnx_model), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(y, ort.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_ir_inputs_from_npz_round_trip(ir_model, tmp_path):
    model, weights = ir_model
    x = np.random.default_rng(4).standard_normal((1, CI, HI, WI)).astype(np.float32)
    np.savez(tmp_path / "feeds.npz", x=x)
    ok(lightnet(model, "-f", weights, "--input", "feeds.npz", "--save", "y.npz", cwd=tmp_path))
    with np.load(tmp_path / "y.npz") as saved:
        y = saved["y"]
    assert np.array_equal(y, Session(str(model), datafile=str(weights)).run({"x": x})["y"])
    # The conv by its definition, independently of LightNet.
    with np.load(weights) as w:
        kernel, bias = w["w"], w["b"]
    ref = np.zeros((1, OI, HI - KI + 1, WI - KI + 1))
    for o in range(OI):
        for i in range(ref.shape[2]):
            for j in range(ref.shape[3]):
                ref[0, o, i, j] = bias[o] + np.sum(x[0, :, i:i + KI, j:j + KI] * kernel[o])
    np.testing.assert_allclose(y, np.maximum(ref, 0), rtol=1e-5, atol=1e-5)


def test_summary_without_save_and_zeros_without_input(onnx_model, tmp_path):
    x = np.random.default_rng(5).random((1, C, H, W), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    out = ok(lightnet(onnx_model, "--input", "x=x.npy", cwd=tmp_path)).splitlines()
    y = Session(str(onnx_model)).run({"x": x})["y"]
    best = np.argsort(-y[0], kind="stable")[:5]
    assert out[1:] == [
        f"y: float32[1, {K}]  min {y.min():.6g}  max {y.max():.6g}  mean {y.mean():.6g}",
        "  top 5: " + ", ".join(f"{i} ({y[0, i]:.6g})" for i in best)]
    # No --input: zeros, said in one line, the same outputs as zeros through Session.
    out = ok(lightnet(onnx_model, "--save", "z.npz", cwd=tmp_path)).splitlines()
    assert out[0] == "info: no --input for x: running on zeros"
    with np.load(tmp_path / "z.npz") as saved:
        zeros = Session(str(onnx_model)).run({"x": np.zeros((1, C, H, W), np.float32)})
        assert np.array_equal(saved["y"], zeros["y"])


def test_summary_of_a_4d_classifier_and_other_shapes():
    from lightnet.cli.arrays import summary

    scores = np.float32([3, 1, 4, 1, 5, 9, 2, 6]).reshape(1, 8, 1, 1)
    assert summary("s", scores) == ("s: float32[1, 8, 1, 1]  min 1  max 9  mean 3.875\n"
                                    "  top 5: 5 (9), 7 (6), 4 (5), 2 (4), 0 (3)")
    assert summary("m", np.int32([[1, 2], [3, 4]])) == "m: int32[2, 2]  min 1  max 4  mean 2.5"
    assert summary("k", np.uint8([[7, 200, 3]])) == ("k: uint8[1, 3]  min 3  max 200  "
                                                     "mean 70\n  top 3: 1 (200), 0 (7), 2 (3)")


def test_wrong_inputs_are_one_line_exit_1(onnx_model, tmp_path):
    np.save(tmp_path / "shape.npy", np.zeros((C, H, W), np.float32))
    np.save(tmp_path / "dtype.npy", np.zeros((1, C, H, W), np.float64))
    np.savez(tmp_path / "name.npz", image=np.zeros((1, C, H, W), np.float32))
    assert_one_error_line(
        lightnet(onnx_model, "--input", "x=shape.npy", cwd=tmp_path),
        f"shape.npy: input 'x': expected shape (1, {C}, {H}, {W}), found ({C}, {H}, {W})")
    assert_one_error_line(
        lightnet(onnx_model, "--input", "x=dtype.npy", cwd=tmp_path),
        "dtype.npy: input 'x': expected dtype float32, found float64")
    assert_one_error_line(
        lightnet(onnx_model, "--input", "image=shape.npy", cwd=tmp_path),
        "shape.npy: 'image' is not an input of the model (inputs: x)")
    assert_one_error_line(
        lightnet(onnx_model, "--input", "name.npz", cwd=tmp_path),
        "name.npz: 'image' is not an input of the model (inputs: x)")
    assert_one_error_line(
        lightnet(onnx_model, "--input", "x=nope.npy", cwd=tmp_path),
        "nope.npy: no such input file")
    usage = lightnet(onnx_model, "--input", "x.txt", cwd=tmp_path)
    assert usage.returncode == 2 and usage.stderr.splitlines()[-1] == (
        "lightnet: error: argument --input: expected NAME=FILE.npy, FILE.npy (a model's one "
        "input) or FILE.npz (arrays by input name), found 'x.txt'")


def test_one_input_without_a_name(onnx_model, tmp_path):
    x = np.random.default_rng(3).random((2, C, H, W), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    ok(lightnet(onnx_model, "--input", "x.npy", "--save", "y.npz", cwd=tmp_path))
    with np.load(tmp_path / "y.npz") as saved:  # its batch 2 from the array
        assert np.array_equal(saved["y"], Session(str(onnx_model)).run({"x": x})["y"])


@pytest.fixture(scope="module")
def text_model(tmp_path_factory):
    pytest.importorskip("onnx")
    from tests.frontends import textmodels

    path = tmp_path_factory.mktemp("text") / "bert.onnx"
    path.write_bytes(textmodels.encoder(layers=1).SerializeToString())
    return path


def test_text_model_inputs_on_the_command_line(text_model, tmp_path):
    from tests.frontends import textmodels

    feeds = textmodels.feeds(1, 24)
    np.save(tmp_path / "ids.npy", feeds["input_ids"])  # int64, as a tokenizer gives them
    np.save(tmp_path / "mask.npy", feeds["attention_mask"])
    ok(lightnet(text_model, "--input", "input_ids=ids.npy", "--input", "attention_mask=mask.npy",
                "--save", "y.npz", "-t", "cpu", cwd=tmp_path))
    want = Session(str(text_model), target="cpu").run(feeds)["last_hidden_state"]
    with np.load(tmp_path / "y.npz") as saved:
        assert np.array_equal(saved["last_hidden_state"], want)
    assert_one_error_line(
        lightnet(text_model, "--input", "ids.npy", cwd=tmp_path),
        "ids.npy: the model has 2 inputs (input_ids, attention_mask): a .npy file without a "
        "name is for a model of one input; give NAME=FILE.npy or an .npz of arrays by name")
    np.save(tmp_path / "big.npy", np.full((1, 24), 2**40, np.int64))
    assert_one_error_line(
        lightnet(text_model, "--input", "input_ids=big.npy", cwd=tmp_path),
        "input 'input_ids': int64 value 1099511627776 does not fit in the model's int32 "
        "tensor [-2147483648, 2147483647]")


def test_bench_a_text_model_at_a_shape(text_model, tmp_path):
    out = ok(lightnet("bench", text_model, "--shape", "input_ids=2,40", "--warmup", "2",
                      "--runs", "2", "--threads", "1", "-t", "cpu", cwd=tmp_path))
    lines = bench_figures(out, 2)["lines"]
    assert lines[2] == ("inputs: input_ids int32[2, 40] (zeros), attention_mask int32[2, 40] "
                        "(zeros)")
    np.save(tmp_path / "ids.npy", np.ones((1, 7), np.int64))
    out = ok(lightnet("bench", text_model, "--input", "input_ids=ids.npy", "--warmup", "2",
                      "--runs", "2", "--threads", "1", "-t", "cpu", cwd=tmp_path))
    assert bench_figures(out, 2)["lines"][2] == (
        "inputs: input_ids int32[1, 7] (given), attention_mask int32[1, 7] (zeros)")
    assert_one_error_line(
        lightnet("bench", text_model, "--shape", "ids=1,384", cwd=tmp_path),
        f"{text_model}: --shape ids=1,384: the model has no input 'ids' (inputs: input_ids, "
        "attention_mask)")
    assert_one_error_line(
        lightnet("bench", text_model, "--shape", "input_ids=384", cwd=tmp_path),
        f"{text_model}: --shape input_ids=384: input 'input_ids': expected 2 dims "
        "[batch, sequence], found [384]")


def test_onnx_options_and_compiled_round_trip(onnx_model, ir_model, tmp_path):
    _, weights = ir_model
    assert_one_error_line(
        lightnet(onnx_model, "-f", weights, cwd=tmp_path),
        f"{onnx_model}: an ONNX model brings its own weights; a weight file (-f, "
        f"datafile) is only for a JSON IR (given {weights})")
    assert_one_error_line(
        lightnet("-r", onnx_model, cwd=tmp_path),
        f"{onnx_model}: -r runs a compiled LightNet IR; an ONNX model is compiled as "
        "it is read (drop -r)")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(bytes(range(256)))
    result = lightnet(garbage, cwd=tmp_path)  # the importer's error, as onnx2ln gives it
    assert result.returncode == 1
    assert result.stderr.startswith(f"lightnet: error: {garbage}: not a valid ONNX model: ")
    assert len(result.stderr.splitlines()) == 1
    # -c writes the compiled IR and the (folded) weights; -r runs them the same.
    assert ok(lightnet(onnx_model, "-c", "-o", "c.json", cwd=tmp_path)) == ""
    x = np.random.default_rng(6).random((1, C, H, W), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    ok(lightnet("-r", "c.json", "-f", "c.npz", "--input", "x=x.npy", "--save", "y.npz",
                cwd=tmp_path))
    with np.load(tmp_path / "y.npz") as saved:
        assert np.array_equal(saved["y"], Session(str(onnx_model)).run({"x": x})["y"])


def test_onnx_without_the_onnx_package(onnx_model, tmp_path):
    blocker = tmp_path / "blocked" / "onnx"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('onnx is not installed')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(blocker.parent), str(ROOT)])}
    assert_one_error_line(
        lightnet(onnx_model, cwd=tmp_path, env=env),
        f"{onnx_model}: running an ONNX model needs the onnx package: "
        "pip install 'lightnet[onnx]'")


def conv_macs(n, o, oh, ow, c, group, kh, kw) -> int:
    return n * o * oh * ow * c // group * kh * kw


def test_info_of_an_onnx_model(onnx_model, tmp_path):
    doc = json.loads(ok(lightnet("info", onnx_model, "--json", "-t", "cpu", cwd=tmp_path)))
    assert doc["inputs"] == [{"name": "x", "dtype": "float32", "shape": [1, C, H, W]}]
    assert doc["outputs"] == [{"name": "y", "dtype": "float32", "shape": [1, K]}]
    # Parameters: every initializer's elements, float32.
    count = sum(math.prod(t.dims) for t in onnx.load(str(onnx_model)).graph.initializer)
    assert count == O * (C // G) * KH * KW + O + K * O + K
    assert doc["parameters"] == {"count": count, "bytes": 4 * count}
    # MACs: the conv's, and the Gemm's [1, O] x [O, K].
    assert doc["macs"] == conv_macs(1, O, OH, OW, C, G, KH, KW) + O * K
    assert doc["ops"]["given"]["conv2d"] == 1 and doc["ops"]["given"]["matmul"] == 1
    assert doc["ops"]["compiled"]["conv2d_cpu"] == 1
    assert not any(t.endswith("_cpu") for t in doc["ops"]["given"])
    assert all(t.endswith("_cpu") for t in doc["ops"]["compiled"])
    assert doc["memory"]["cpu"]["weights"] == 4 * count  # nothing to fold here

    text = ok(lightnet("info", onnx_model, cwd=tmp_path))
    assert f"\nparameters: {count}, {4 * count} bytes\n" in text
    assert f"\nMACs: {doc['macs']} ({doc['macs'] / 1e3:.3g} K)\n" in text
    assert text.startswith(f"model: {onnx_model}\ninputs:\n  x: float32[1, {C}, {H}, {W}]\n"
                           f"outputs:\n  y: float32[1, {K}]\n")


def test_info_of_an_ir_and_of_its_compiled_form(ir_model, tmp_path):
    model, weights = ir_model
    # no weights needed
    doc = json.loads(ok(lightnet("info", model, "--json", "-t", "cpu", cwd=tmp_path)))
    assert doc["parameters"] == {"count": OI * CI * KI * KI + OI,
                                 "bytes": 4 * (OI * CI * KI * KI + OI)}
    oh, ow = HI - KI + 1, WI - KI + 1
    assert doc["macs"] == conv_macs(1, OI, oh, ow, CI, 1, KI, KI)
    assert doc["ops"]["given"] == {"create": 2, "conv2d": 1, "input": 1, "relu": 1}
    assert doc["ops"]["compiled"] == {"create_cpu": 2, "conv2d_cpu": 1, "input_cpu": 1}
    assert doc["kernels"] == {}  # no oneDNN kernel on the cpu target

    ok(lightnet(model, "-f", weights, "-t", "cpu", "-c", "-o", "c.json", cwd=tmp_path))
    compiled = json.loads(ok(lightnet("info", "c.json", "-f", "c.npz", "--json",
                                      cwd=tmp_path)))
    assert compiled["ops"]["given"] == compiled["ops"]["compiled"] == doc["ops"]["compiled"]
    assert (compiled["macs"], compiled["parameters"]) == (doc["macs"], doc["parameters"])


NEEDS_ONEDNN = pytest.mark.skipif(capi.unavailable_reason() is not None,
                                  reason=f"oneDNN is unavailable: {capi.unavailable_reason()}")


@NEEDS_ONEDNN
def test_info_of_an_ir_compiled_for_dnnl(ir_model, tmp_path):
    """The relu fuses into the convolution; reorders bring the input in and the output
    out, a weights op reorders the weight; the compiled IR gives the same figures."""
    model, weights = ir_model
    doc = json.loads(ok(lightnet("info", model, "--json", "-t", "dnnl", cwd=tmp_path)))
    assert doc["target"] == "dnnl"
    # A reorder in; one out unless the convolution writes the plain layout.
    assert 1 <= doc["ops"]["compiled"]["reorder_dnnl"] <= 2
    assert {t: n for t, n in doc["ops"]["compiled"].items() if t != "reorder_dnnl"} == {
        "create_cpu": 2, "input_cpu": 1, "weights_dnnl": 1, "conv2d_dnnl": 1}
    # The convolution's kernel (the reorders' are chosen at load), never a reference one.
    assert sum(doc["kernels"].values()) == 1
    assert not any(k.startswith("ref") for k in doc["kernels"]), doc["kernels"]
    ok(lightnet(model, "-f", weights, "-t", "dnnl", "-c", "-o", "d.json", cwd=tmp_path))
    compiled = json.loads(ok(lightnet("info", "d.json", "-f", "d.npz", "--json",
                                      cwd=tmp_path)))
    assert compiled["ops"]["given"] == compiled["ops"]["compiled"] == doc["ops"]["compiled"]
    assert (compiled["macs"], compiled["parameters"]) == (doc["macs"], doc["parameters"])
    assert compiled["memory"] == doc["memory"]


def test_info_memory_plan(tmp_path):
    """x -> relu -> t1 -> relu -> t2 -> relu -> y, each float32[1, 16] (64 bytes,
    one 64-byte aligned slot): x and y are kept (input, output); at most three
    tensors live at once, and y can take t1's slot, so the arena is three slots
    of the four tensors'."""
    chain = [op("in", "input", outs={"dst": "x"}, dims=[1, 16])]
    for i, (src, dst) in enumerate([("x", "t1"), ("t1", "t2"), ("t2", "y")]):
        chain.append(op(f"r{i}", "relu", {"src": src}, {"dst": dst}))
    (tmp_path / "chain.json").write_text(json.dumps({"ops": chain}))
    doc = json.loads(ok(lightnet("info", "chain.json", "--json", "-t", "cpu", cwd=tmp_path)))
    slot = 16 * 4
    assert doc["memory"] == {"cpu": {"arena": 3 * slot, "lower_bound": 3 * slot,
                                     "all_tensors": 4 * slot, "weights": 0}}
    assert (doc["macs"], doc["parameters"]) == (0, {"count": 0, "bytes": 0})
    text = ok(lightnet("info", "chain.json", "-t", "cpu", cwd=tmp_path))
    assert text.endswith(f"memory cpu: arena {3 * slot} bytes, all tensors {4 * slot} bytes, "
                         f"lower bound {3 * slot} bytes (arena / lower bound = 1.000); "
                         "weights 0 bytes\n")


LATENCY = re.compile(r"latency: min (\S+) ms, median (\S+) ms, p90 (\S+) ms, p99 (\S+) ms, "
                     r"mean (\S+) ms")


def bench_figures(out: str, runs: int, kernel_lines: int = 1) -> dict:
    lines = out.splitlines()
    at = 4 + kernel_lines
    assert re.fullmatch(rf"runs: 2 warm-up, {runs} timed \(\d+\.\d{{3}} s in all\)", lines[at])
    m = LATENCY.fullmatch(lines[at + 1])
    assert m, lines[at + 1]
    low, median, p90, p99, mean = map(float, m.groups())
    assert 0 < low <= median <= p90 <= p99 and low <= mean
    return {"lines": lines, "median": median}


def test_bench_an_onnx_model_with_a_batch(onnx_model, tmp_path):
    out = ok(lightnet("bench", onnx_model, "--warmup", "2", "--runs", "4", "--batch", "3",
                      "--threads", "1", "-t", "cpu", cwd=tmp_path))
    lines = bench_figures(out, 4)["lines"]
    assert lines[:4] == [f"model: {onnx_model}", "target: cpu",
                         f"inputs: x float32[3, {C}, {H}, {W}] (random)", "threads: 1"]
    assert lines[4].startswith("kernels: BLAS: ")
    m = re.fullmatch(r"throughput: (\S+) runs/s, (\S+) samples/s \(batch 3\)", lines[7])
    assert m and float(m.group(2)) == pytest.approx(3 * float(m.group(1)), rel=1e-3)
    assert len(lines) == 8


def test_bench_an_ir(ir_model, tmp_path):
    model, weights = ir_model
    out = ok(lightnet("bench", model, "-f", weights, "--warmup", "2", "--runs", "3",
                      "-t", "cpu", cwd=tmp_path))
    lines = bench_figures(out, 3)["lines"]
    assert re.fullmatch(r"throughput: \S+ runs/s", lines[7])  # batch 1: no samples/s
    assert_one_error_line(
        lightnet("bench", model, "-f", weights, "--batch", "2", cwd=tmp_path),
        f"{model}: batch 2: input 'x' has shape [1, {CI}, {HI}, {WI}], its batch fixed "
        "at 1; only a model whose inputs have a symbolic first dim (\"N\") takes "
        "another batch")
    # The model's own batch is accepted; a time budget instead of a count.
    out = ok(lightnet("bench", model, "-f", weights, "--batch", "1", "--warmup", "0",
                      "--duration", "0.05", cwd=tmp_path))
    assert re.search(r"^runs: 0 warm-up, [1-9]\d* timed", out, re.M)


@NEEDS_ONEDNN
def test_bench_on_dnnl_names_onednn_s_kernels(ir_model, tmp_path):
    model, weights = ir_model
    out = ok(lightnet("bench", model, "-f", weights, "--warmup", "2", "--runs", "3",
                      "-t", "dnnl", cwd=tmp_path))
    lines = bench_figures(out, 3, kernel_lines=2)["lines"]
    assert lines[1] == "target: dnnl"
    assert lines[4].startswith("kernels: BLAS: ")
    # oneDNN's implementations of the dnnl ops (reorders, the weights', the
    # convolution's), each with its count.
    assert lines[5].startswith("kernels: oneDNN: "), lines[5]
    kernels = re.findall(r"(\S+) x(\d+)(?:, |$)", lines[5].removeprefix("kernels: oneDNN: "))
    compiled = json.loads(ok(lightnet("info", model, "--json", "-t", "dnnl", cwd=tmp_path)))
    dnnl_ops = sum(n for t, n in compiled["ops"]["compiled"].items() if t.endswith("_dnnl"))
    assert sum(int(n) for _, n in kernels) == dnnl_ops, lines[5]


def test_help_lists_every_command(tmp_path):
    text = ok(lightnet("--help", cwd=tmp_path))
    assert "lightnet info MODEL" in text and "lightnet bench MODEL" in text
    for option in ("--input", "--save", ".onnx"):
        assert option in text
    assert "--json" in ok(lightnet("info", "--help", cwd=tmp_path))
    bench = ok(lightnet("bench", "--help", cwd=tmp_path))
    for option in ("--runs", "--duration", "--warmup", "--batch", "--threads"):
        assert option in bench
    assert "lightnet quantize MODEL.onnx --calibrate SAMPLES.npz" in text
    quantize = ok(lightnet("quantize", "--help", cwd=tmp_path))
    for option in ("--calibrate", "--reduce-range {auto,on,off}", "-o", "--target"):
        assert option in quantize


def test_session_runs_an_onnx_model(onnx_model):
    import onnxruntime

    x = np.random.default_rng(7).random((1, C, H, W), dtype=np.float32)
    ort = onnxruntime.InferenceSession(str(onnx_model), providers=["CPUExecutionProvider"])
    session = Session(onnx_model)
    assert [(i.name, i.shape) for i in session.inputs] == [("x", ("N", C, H, W))]
    np.testing.assert_allclose(session.run({"x": x})["y"], ort.run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-5)


def test_info_macs_agree_with_the_benchmark_models(tmp_path):
    """MACs of real networks (grouped, depthwise and 1x1 convolutions, Gemm, batched
    MatMul) against bench/models.py's count of their matrix products, made from
    the ONNX graph with ONNX shape inference."""
    from lightnet.cli.info import collect

    models = bench_models()
    builds = {"squeezenet11": models.squeezenet11, "mobilenetv2": models.mobilenetv2,
              "shufflenet": models.shufflenet, "mobilenetv3": models.mobilenetv3,
              "vit_one_block": lambda rng: models.vit_s16(rng, depth=1)}
    for name, build in builds.items():
        model = build(np.random.default_rng(0))
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, str(path))
        assert collect(path)["macs"] == sum(math.prod(p) for p in models.gemms(model))
