"""Precision: the dnnl ops computing in bfloat16 (Context.compile(precision=),
Session(precision=), lightnet --precision). The accuracy contract against float32
on seeded inputs, lightnet.accuracy's (which `lightnet quantize` reports for int8):
max |bf16 - f32| <= 2e-2 of the float32 output's range, and of its largest magnitude
too; the classifiers' top-1 class the same on every input that is not a near-tie, and
on at least 99 of 100 random inputs; float32 unchanged bit for bit;
the layout pass's conversions only at region borders; the refusals."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lightnet import Context, LightNetError, Session, accuracy
from lightnet.archs import registry
from lightnet.archs.dnnl import capi, layout_pass
from lightnet.auto.archs import ARCHS
from lightnet.compiler import targets
from tests.helpers import BENCH_NETWORKS, bench_models, rel_error
from tests.irbuild import ModelBuilder, squeezenet

pytestmark = pytest.mark.skipif(capi.unavailable_reason() is not None,
                                reason=f"oneDNN is unavailable: {capi.unavailable_reason()}")
needs_bf16 = pytest.mark.skipif(capi.unavailable_reason() is not None
                                or capi.library().bf16 is None,
                                reason="oneDNN has no bfloat16 on this CPU")

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = accuracy.CONTRACT


def bf16_error(got, want) -> float:
    """The error the contract bounds: lightnet.accuracy's max relative error (of the
    float32 output's range), or the error relative to its largest magnitude where that
    is larger."""
    return max(accuracy.max_rel_error(got, want), rel_error(got, want))


def compiled(doc, precision, weights=None):
    ctx = Context()
    ctx.init(doc)
    ctx.compile("dnnl", weights=weights if weights is not None else {}, precision=precision)
    ctx.load()
    return ctx


def run(ctx, x):
    ctx.set_data(ctx.inputs[0], x)
    ctx.run()
    return ctx.get_data(ctx.outputs[0]).copy()


def reorder_dtypes(ctx):
    return [op.values.get("dtype") for op in ctx.ops if op.optype == "reorder_dnnl"
            and op.values["to"] == "dnnl"]


def small_squeezenet():
    m = ModelBuilder()
    squeezenet(m, m.input("data", [1, 3, 64, 64]), classes=100, width=0.5)
    return m.to_dict()


@needs_bf16
def test_squeezenet_in_bf16_keeps_the_contract_and_converts_only_at_borders():
    doc = small_squeezenet()
    f32, bf16 = compiled(doc, "f32"), compiled(doc, "bf16")
    # Conversions only where the model's input enters and its output leaves.
    assert reorder_dtypes(f32) == ["float32"]
    assert reorder_dtypes(bf16) == ["bfloat16"]
    assert [op.optype for op in f32.ops] == [op.optype for op in bf16.ops]
    for op in bf16.ops:
        call = op.values.get("call")
        if op.arch == "dnnl" and op.optype not in ("reorder_dnnl", "weights_dnnl"):
            assert call.kernel.descs["dst"].dtype == "bfloat16", op.name
            if op.optype == "conv2d_dnnl":
                assert call.kernel.descs["weights"].dtype == "bfloat16"
                assert "bf16" in call.impl_info, call.impl_info
    # Activations and reordered weights in bfloat16 take half the bytes (the plain
    # float32 weights they are converted from stay).
    (f32_mem,), (bf16_mem,) = f32.mem.values(), bf16.mem.values()
    assert bf16_mem.arena < 0.8 * f32_mem.arena
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.standard_normal((1, 3, 64, 64)).astype(np.float32)
        want, got = run(f32, x), run(bf16, x)
        assert got.dtype == np.float32
        assert 0 < bf16_error(got, want) <= CONTRACT


def test_f32_is_unchanged_bit_for_bit():
    doc = small_squeezenet()
    x = np.random.default_rng(4).standard_normal((1, 3, 64, 64)).astype(np.float32)
    default = Context()
    default.init(doc)
    default.compile("dnnl", weights={})
    default.load()
    f32 = compiled(doc, "f32")
    assert default.print() == f32.print()
    assert "bfloat16" not in f32.print()
    assert np.array_equal(run(default, x), run(f32, x))
    # The same float32 result the cpu target computes, to float32's rounding.
    cpu = Context()
    cpu.init(doc)
    cpu.compile("cpu", weights={})
    cpu.load()
    assert rel_error(run(f32, x), run(cpu, x)) <= 1e-4


@needs_bf16
def test_an_op_reading_a_weight_first_computes_in_what_it_reads_at_run_time():
    # ViT's class token: concat(weight, patches), then the position embedding added.
    m = ModelBuilder()
    x = m.relu(m.conv(m.input("data", [1, 8, 6, 6]), 8, 16, 3, pad=1))
    y = m.concat([m.weight("token", [1, 4, 6, 6]), x])
    m.op("elew", {"src1": y, "src2": m.weight("pos", [1, 20, 6, 6])}, elew_op="TL_SUM")
    doc = m.to_dict()
    f32, bf16 = compiled(doc, "f32"), compiled(doc, "bf16")
    for op in bf16.ops:
        if op.optype in ("concat_dnnl", "elew_dnnl"):
            assert op.values["call"].kernel.descs["dst"].dtype == "bfloat16", op.name
    x = np.random.default_rng(10).standard_normal((1, 8, 6, 6)).astype(np.float32)
    assert 0 < bf16_error(run(bf16, x), run(f32, x)) <= CONTRACT


@needs_bf16
@pytest.mark.parametrize("optype,params", [("gelu", {}), ("hard_swish", {}),
                                           ("swish", {"alpha": 1.5}), ("relu", {})])
def test_an_elementwise_op_computes_in_what_it_reads(optype, params):
    """After a cpu op, in float32 (no conversion at its borders); after a convolution
    computing in bfloat16, in bfloat16."""
    m = ModelBuilder()
    x = m.op("transpose", {"src": m.input("data", [1, 8, 6, 6])}, axes=[0, 1, 3, 2])
    a = m.op(optype, {"src": x}, **params)
    y = m.conv(m.op("transpose", {"src": a}, axes=[0, 1, 3, 2]), 8, 16, 3, pad=1)
    m.op("sigmoid", {"src": m.op("concat", {"src1": y, "src2": y}, axis=1)})
    doc = m.to_dict()
    f32, bf16 = compiled(doc, "f32"), compiled(doc, "bf16")
    dtypes = {op.optype: op.values["call"].kernel.descs["dst"].dtype for op in bf16.ops
              if op.optype in (f"{optype}_dnnl", "sigmoid_dnnl")}
    assert dtypes == {f"{optype}_dnnl": "float32", "sigmoid_dnnl": "bfloat16"}
    assert reorder_dtypes(bf16) == ["bfloat16"]  # into the convolution only
    x = np.random.default_rng(11).standard_normal((1, 8, 6, 6)).astype(np.float32)
    assert 0 < bf16_error(run(bf16, x), run(f32, x)) <= CONTRACT


def softmax_model():
    m = ModelBuilder()
    x = m.input("data", [1, 64, 4, 4])
    y = m.relu(m.conv(x, 64, 128, 3, pad=1))
    m.op("softmax", {"src": m.conv(y, 128, 300, 4, scale=0.02)}, axis=1)
    return m.to_dict()


@needs_bf16
def test_softmax_and_its_source_compute_in_float32(monkeypatch):
    doc = softmax_model()
    inputs = [np.random.default_rng(s).standard_normal((1, 64, 4, 4)).astype(np.float32)
              for s in range(10)]
    f32 = compiled(doc, "f32")
    want = [run(f32, x) for x in inputs]
    bf16 = compiled(doc, "bf16")
    # The first conv in bf16; a reorder converts its output for the second conv,
    # which computes the scores the softmax reads in float32 (the softmax writes
    # the plain float32 output itself: no reorder after it).
    dnnl = [(op.optype, op.values.get("dtype")) for op in bf16.ops
            if op.arch == "dnnl" and op.optype != "weights_dnnl"]
    assert dnnl == [("reorder_dnnl", "bfloat16"), ("conv2d_dnnl", None),
                    ("reorder_dnnl", "float32"), ("conv2d_dnnl", None),
                    ("softmax_dnnl", None)]
    kept = max(rel_error(run(bf16, x), w) for x, w in zip(inputs, want))
    monkeypatch.setitem(ARCHS, "dnnl",
                        dataclasses.replace(ARCHS["dnnl"], float32_ops=frozenset()))
    registry.archs.cache_clear()
    try:
        rounded = compiled(doc, "bf16")
    finally:
        monkeypatch.undo()
        registry.archs.cache_clear()
    assert reorder_dtypes(rounded) == ["bfloat16"]
    without = max(rel_error(run(rounded, x), w) for x, w in zip(inputs, want))
    assert kept <= CONTRACT and kept < 0.7 * without


@needs_bf16
def test_a_compiled_bf16_ir_runs_as_compiled(tmp_path):
    doc = small_squeezenet()
    bf16 = compiled(doc, "bf16")
    ir = json.loads(bf16.print())
    again = Context()
    again.init(ir)
    again.plan()
    again.load()
    x = np.random.default_rng(5).standard_normal((1, 3, 64, 64)).astype(np.float32)
    assert np.array_equal(run(again, x), run(bf16, x))


@needs_bf16
def test_session_and_the_command_take_a_precision(tmp_path):
    doc = small_squeezenet()
    path = tmp_path / "sq.json"
    path.write_text(json.dumps(doc))
    x = np.random.default_rng(6).standard_normal((1, 3, 64, 64)).astype(np.float32)
    name = Session(str(path)).inputs[0].name
    f32 = Session(str(path), target="dnnl")
    bf16 = Session(str(path), target="dnnl", precision="bf16")
    (want,) = f32.run({name: x}).values()
    (got,) = bf16.run({name: x}).values()
    assert 0 < bf16_error(got, want) <= CONTRACT
    np.save(tmp_path / "x.npy", x)
    outputs = {}
    for precision in ("f32", "bf16"):
        result = subprocess.run(
            [sys.executable, "-m", "lightnet", "-t", "dnnl", "--precision", precision,
             "--input", f"{name}={tmp_path / 'x.npy'}", "--save", tmp_path / f"{precision}.npz",
             path], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert result.returncode == 0, result.stderr
        outputs[precision] = next(iter(np.load(tmp_path / f"{precision}.npz").values()))
    assert np.array_equal(outputs["f32"], want) and np.array_equal(outputs["bf16"], got)


def test_refusals():
    doc = small_squeezenet()
    ctx = Context()
    ctx.init(doc)
    with pytest.raises(LightNetError, match=r"^precision 'bf16': target 'cpu' computes in "
                                            r"float32 only; use -t dnnl \(or auto\), or "
                                            r"--precision f32$"):
        ctx.compile("cpu", precision="bf16")
    with pytest.raises(LightNetError, match=r"^unknown precision 'f16' \(known: f32, bf16, "
                                            r"auto\)$"):
        ctx.compile("dnnl", precision="f16")
    # auto never fails: float32 on the cpu target.
    assert targets.resolve_precision("auto", "cpu") == "float32"
    result = subprocess.run([sys.executable, "-m", "lightnet", "-r", "--precision", "bf16",
                             "examples/example.json"], capture_output=True, text=True,
                            cwd=ROOT, timeout=60)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == ("lightnet: error: examples/example.json: -r runs the IR as "
                             "compiled, in the precision given to -c (drop --precision)\n")


@pytest.mark.parametrize("bf16,auto,refused", [("native", "bfloat16", False),
                                               ("emulated", "float32", False),
                                               (None, "float32", True)])
def test_precision_follows_onednns_bf16_support(monkeypatch, bf16, auto, refused):
    monkeypatch.setattr(capi.library(), "bf16", bf16)
    assert targets.resolve_precision("auto", "dnnl") == auto
    assert targets.resolve_precision("f32", "dnnl") == "float32"
    if refused:
        with pytest.raises(LightNetError, match=r"^precision 'bf16': oneDNN has no bfloat16 "
                                                r"on this CPU \(ISA \w+; it needs AVX-512\); "
                                                r"use --precision f32 \(or auto\)$"):
            targets.resolve_precision("bf16", "dnnl")
    else:
        assert targets.resolve_precision("bf16", "dnnl") == "bfloat16"


@needs_bf16
@pytest.mark.parametrize("name", BENCH_NETWORKS)
def test_bench_model_in_bf16_keeps_the_contract(name):
    from lightnet.frontends.onnx import convert

    ir, weights = convert(bench_models().MODELS[name](np.random.default_rng(7)))
    f32, bf16 = compiled(ir, "f32", weights), compiled(ir, "bf16", weights)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    assert 0 < bf16_error(run(bf16, x), run(f32, x)) <= CONTRACT


@needs_bf16
@pytest.mark.slow
@pytest.mark.parametrize("name", ["squeezenet1.1", "resnet50", "mobilenetv2", "shufflenet",
                                  "vgg11", "mobilenetv3", "vit_s16"])
def test_bench_classifier_top1_agrees_on_99_of_100_inputs(name):
    from lightnet.frontends.onnx import convert

    ir, weights = convert(bench_models().MODELS[name](np.random.default_rng(7)))
    f32, bf16 = compiled(ir, "f32", weights), compiled(ir, "bf16", weights)
    rng = np.random.default_rng(9)
    same, worst, wants, gots = 0, 0.0, [], []
    for _ in range(100):
        x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
        want, got = run(f32, x), run(bf16, x)
        same += int(want.argmax() == got.argmax())
        worst = max(worst, bf16_error(got, want))
        wants.append(want.reshape(-1))
        gots.append(got.reshape(-1))
    agree, counted, ties = accuracy.top1(np.stack(gots), np.stack(wants))
    assert agree == counted and same >= 99 and worst <= CONTRACT, (same, agree, counted,
                                                                    ties, worst)


# The onnx package's small networks (tests/frontends/test_onnx.py) fill their weights with
# constants, which drives activations to ~1e10 and sums the same rounding in every channel:
# three of them exceed the contract in bfloat16 as OpenVINO's CPU plugin does (measured on
# the same input: light_resnet50 5.8e-2, light_inception_v1 2.3e-2, light_vgg19 1.7e-2).
# Their bounds are what they measure here, with a margin; the rest keep the contract.
LIGHT_BOUNDS = {"light_resnet50": 1e-1, "light_inception_v1": 3e-2, "light_vgg19": 3e-2}
LIGHT_SLOW = {"light_bvlc_alexnet", "light_vgg19", "light_zfnet512", "light_densenet121"}


def light_models():
    import onnx

    root = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return [pytest.param(p, id=p.stem, marks=[pytest.mark.slow] if p.stem in LIGHT_SLOW else [])
            for p in sorted(root.glob("light_*.onnx"))]


@needs_bf16
@pytest.mark.parametrize("path", light_models())
def test_the_onnx_packages_networks_run_in_bf16(path, tmp_path):
    """End to end in bfloat16 through Session, against float32: their logits (a final
    softmax of logits ~1e10 apart is left out, as in tests/frontends/test_onnx.py)."""
    import onnx
    from onnx import TensorProto, helper

    from lightnet.frontends.onnx import convert, save_weights

    m = onnx.load(str(path))
    if m.graph.node[-1].op_type == "Softmax":
        logits = m.graph.node.pop().input[0]
        del m.graph.output[:]
        m.graph.output.append(helper.make_tensor_value_info(logits, TensorProto.FLOAT, None))
    inits = {t.name for t in m.graph.initializer}
    (x,) = [i for i in m.graph.input if i.name not in inits]
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
    feeds = {x.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    ir, weights = convert(m)
    save_weights(tmp_path / "w.npz", weights)
    f32 = Session(ir, datafile=tmp_path / "w.npz").run(feeds)
    bf16 = Session(ir, datafile=tmp_path / "w.npz", precision="bf16").run(feeds)
    for name, want in f32.items():
        assert 0 < rel_error(bf16[name].astype(np.float64), want.astype(np.float64)) <= \
            LIGHT_BOUNDS.get(path.stem, CONTRACT), name


def test_the_ops_after_a_float32_region_compute_in_bfloat16_again(monkeypatch):
    """The layout pass's choice of data types in bfloat16 (what it inserts; decided on
    any CPU): a softmax and the convolution making its scores compute in float32, the
    convolution after it in bfloat16 again (a reorder converts the softmax's output),
    as does the concat after that and the sigmoid reading the concat; the sigmoid
    reading the model's input computes in float32."""
    m = ModelBuilder()
    x = m.op("sigmoid", {"src": m.input("data", [1, 8, 6, 6])})
    y = m.conv(m.conv(x, 8, 16, 3, pad=1), 16, 8, 3, pad=1)
    y = m.conv(m.op("softmax", {"src": y}, axis=1), 8, 8, 3, pad=1)
    m.op("sigmoid", {"src": m.concat([y, y])})
    laid_out = []  # the model before the layout pass, then the ops it makes
    real = layout_pass.lay_out
    monkeypatch.setattr(layout_pass, "lay_out", lambda ctx, dtype: laid_out.append(ctx))
    ctx = Context()
    ctx.init(m.to_dict())
    ctx.compile("dnnl")
    monkeypatch.setattr(ctx, "rewrite", lambda ops, changed: laid_out.append(ops))
    real(ctx, "bfloat16")
    ops = laid_out[1]
    made = {n: op for op in ops for n in op.tensors_out.values()}

    def source(op, arg="src"):  # the op making what `op` reads, and a reorder's dtype
        maker = made[op.tensors_in[arg]]
        dtype = maker.params.get("dtype")
        return maker.optype, None if dtype is None else dtype.value

    convs = [op for op in ops if op.optype == "conv2d_dnnl"]
    sigmoids = [op for op in ops if op.optype == "sigmoid_dnnl"]
    (softmax,) = [op for op in ops if op.optype == "softmax_dnnl"]
    (concat,) = [op for op in ops if op.optype == "concat_dnnl"]
    assert source(sigmoids[0]) == ("reorder_dnnl", None)  # float32, from the input
    assert source(convs[0]) == ("reorder_dnnl", "bfloat16")
    assert source(convs[1]) == ("reorder_dnnl", "float32")
    assert source(softmax) == ("conv2d_dnnl", None)
    assert source(convs[2]) == ("reorder_dnnl", "bfloat16")
    assert made[convs[2].tensors_in["src"]].tensors_in["src"] == softmax.tensors_out["dst"]
    assert source(concat, "src1") == source(concat, "src2") == ("conv2d_dnnl", None)
    assert source(sigmoids[1]) == ("concat_dnnl", None)
    assert layout_pass._other_data_types(laid_out[0].ops, "bfloat16", lambda n: made.get(n)) \
        == {sigmoids[0].name: "float32", convs[1].name: "float32", softmax.name: "float32"}
