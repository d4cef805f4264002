"""bench/worker.py, the process bench/run.py times each engine in: set up on a small
convolutional model, it runs and saves the outputs, and ours agree with ONNX
Runtime's (the plumbing the benchmark's figures rest on)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lightnet.archs.dnnl import capi

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parent.parent


def small_model(d: Path) -> None:
    """model.onnx (conv, relu, global average pool), its IR and weights, inputs.npz."""
    from onnx import TensorProto, helper, numpy_helper

    from lightnet.frontends.onnx import import_model

    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((5, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["y"])]
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 9, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 1, 1])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              d / "model.onnx")
    import_model(d / "model.onnx", d / "model.json")
    np.savez(d / "inputs.npz", x=rng.standard_normal((1, 3, 9, 7)).astype(np.float32))


def serve(engine: str, d: Path) -> dict:
    """Start a worker, run it twice, save its output, quit; its setup info."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "worker.py"), engine, str(d), "1"],
        input="run 2\nsave\nquit\n", capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    info, times, saved = proc.stdout.strip().splitlines()
    assert len(json.loads(times)) == 2 and json.loads(saved) == {}
    return json.loads(info)


@pytest.mark.parametrize("target", [
    "cpu", pytest.param("dnnl", marks=pytest.mark.skipif(
        capi.unavailable_reason() is not None, reason="oneDNN is unavailable"))])
def test_the_bench_worker_runs_ours_as_onnx_runtime_does(target, tmp_path):
    small_model(tmp_path)
    info = serve(f"ours:{target}", tmp_path)
    assert info["setup"] > 0
    serve("ort", tmp_path)
    ours = np.load(tmp_path / f"out_ours-{target}.npy")
    ref = np.load(tmp_path / "out_ort.npy")
    np.testing.assert_allclose(ours.reshape(ref.shape), ref, rtol=1e-5, atol=1e-5)


def test_the_products_a_model_is_counted_by_include_3d_convolutions():
    """bench/models.ir_gemms: a 3-D convolution is [O, I * kd * kh * kw] @ [.., D*H*W]
    like a 2-D one with one more axis, a matmul its own product (the GFLOP column)."""
    from onnx import TensorProto, helper, numpy_helper

    from lightnet import Context
    from lightnet.frontends.onnx import convert

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from models import gflops, ir_gemms
    finally:
        sys.path.remove(str(ROOT / "bench"))
    w = numpy_helper.from_array(np.ones((6, 2, 3, 3, 3), np.float32), "w")
    m = numpy_helper.from_array(np.ones((8, 5), np.float32), "m")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 6, group=2),
             helper.make_node("Reshape", ["c", "s"], ["r"]),
             helper.make_node("MatMul", ["r", "m"], ["y"])]
    s = numpy_helper.from_array(np.array([-1, 8], np.int64), "s")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, 4, 4, 4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], [w, m, s])
    ir, _ = convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    ctx = Context()
    ctx.init(ir)
    # groups 2: each [3, 2 * 27] @ [54, 64]; then [48, 8] @ [8, 5].
    assert sorted(ir_gemms(ctx)) == [(1, 48, 8, 5), (2, 3, 54, 64)]
    assert gflops(ir_gemms(ctx)) == 2 * (2 * 3 * 54 * 64 + 48 * 8 * 5) / 1e9
