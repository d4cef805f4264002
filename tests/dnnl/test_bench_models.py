"""The benchmark's networks (bench/models.py) on the dnnl target against ONNX Runtime:
each compiled with its weights (batchnorms folded, activations and residual adds fused,
reorders at the borders), the output within 1e-4 of ORT's (relative to its largest).
SqueezeNet runs with the fast tests; the others are slow."""

import numpy as np
import pytest

from lightnet import Context
from lightnet.archs.dnnl import capi
from tests.helpers import BENCH_NETWORKS, bench_models

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.skipif(capi.unavailable_reason() is not None,
                                reason=f"oneDNN is unavailable: {capi.unavailable_reason()}")

@pytest.mark.parametrize("name", BENCH_NETWORKS)
def test_bench_model_on_dnnl_matches_onnx_runtime(name):
    from lightnet.frontends.onnx import convert

    model = bench_models().MODELS[name](np.random.default_rng(7))
    ir, weights = convert(model)
    ctx = Context()
    ctx.init(ir)
    ctx.compile("dnnl", weights=weights)
    optypes = [op.optype for op in ctx.ops]
    assert "conv2d_dnnl" in optypes
    assert not any(t.startswith("batchnorm") for t in optypes)  # folded
    ctx.load()
    x = np.random.default_rng(8).standard_normal((1, 3, 224, 224)).astype(np.float32)
    (data,) = ctx.inputs
    ctx.set_data(data, x)
    ctx.run()
    ours = ctx.get_data(ctx.outputs[0])
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    ref = session.run(None, {session.get_inputs()[0].name: x})[0]
    err = np.max(np.abs(ours.reshape(ref.shape) - ref)) / np.max(np.abs(ref))
    assert err <= 1e-4, err
