"""Params declared once: the groups of descriptions/params.yaml, the ops taking
them, and generated tables that refer to a group's or a parent's instead of
copying them. (Their located errors are cases of test_gen_schema.py.)"""

from __future__ import annotations

import pytest

from generator import model, schema
from genutil import REPO, load_module, make_root, run
from lightnet.errors import CheckError
from lightnet.ir.op import Op
from lightnet.ir.param import Param
from lightnet.ir.tensor import DType, MemType, TensorEntry, TensorTable

POOL = """\
pool:
  arch: none
  tensors_in:
    src: {dtype: float, ndim: 4}
  tensors_out:
    dst: {dtype: src.dtype, shape: src.shape}
  param_groups: [window2d]
  params:
    padding:
      doc: Padding, never a whole window.
      checks: [{expr: "max(padding) < min(size)", msg: every window overlaps the input}]
    ceil_mode: {type: bool, default: false}

pool_cpu:
  inherits: pool
  arch: cpu
  param_groups: [activation]
  params:
    clip_max:
      checks: [{expr: clip_max < 100, msg: a small clip}]
  run: np.copyto(dst, src)
"""


@pytest.fixture(scope="module")
def pool_root(tmp_path_factory):
    root = make_root(tmp_path_factory.mktemp("groups") / "root", {"pool.yaml": POOL})
    assert run(root).rc == 0
    return root


@pytest.fixture(scope="module")
def ops(pool_root):
    return {op.optype: op for op in model.load(pool_root).ops()}


def test_an_op_takes_a_groups_params_first(ops):
    pool = ops["pool"]
    assert [p.arg_name for p in pool.params] == [
        "size", "stride", "padding", "autopad", "ceil_mode"]
    assert pool.param_groups == ("window2d",)
    size, stride = pool.params[:2]
    assert (size.type, size.required, size.bounds) == ("int[2]", True, (schema.Bound("gt", "0"),))
    assert (stride.default, stride.doc, stride.group) == ([1, 1], "Stride [height, width].",
                                                          "window2d")


def test_naming_a_groups_param_adds_checks_and_its_own_doc(ops):
    padding, autopad = ops["pool"].params[2:4]
    assert padding.doc == "Padding, never a whole window."
    assert [c.expr for c in padding.checks] == ["max(padding) < min(size)"]
    assert (padding.group_checks, autopad.group_checks) == (0, 1)  # the group's: autopad's
    assert autopad.checks[0].msg == "explicit padding needs autopad NOTSET"


def test_a_variant_takes_a_group_after_its_parents_params(ops):
    cpu = ops["pool_cpu"]
    assert [p.arg_name for p in cpu.params][5:] == [
        "activation", "negslope", "clip_min", "clip_max"]
    assert cpu.param_groups == ("activation",)  # its own, not its parent's
    clip_max = cpu.own.params[-1]
    assert (clip_max.group, clip_max.group_checks) == ("activation", 1)
    assert [c.expr for c in clip_max.checks] == ["clip_min <= clip_max", "clip_max < 100"]
    assert all(p.group is None for p in cpu.own.params[:5])  # the parent's pre_run's


def test_a_group_extends_another_in_place(tmp_path):
    groups = {g.name: g for g in model.load(make_root(tmp_path / "root")).param_groups}
    dilated, dnnl = groups["dilated_window2d"], groups["activation_dnnl"]
    assert [p.arg_name for p in dilated.params] == [
        "size", "stride", "padding", "autopad", "dilation"]
    assert dilated.inherited == (0, 1, 2, 3, None)
    assert [p.arg_name for p in dnnl.params][:4] == [
        "activation", "negslope", "clip_min", "clip_max"]
    assert dnnl.inherited[:4] == (None, 1, 2, 3)  # activation given anew: more choices
    assert "gelu" in dnnl.params[0].choices and "gelu" not in groups["activation"].params[0].choices
    assert dnnl.origins[3] == "activation"  # clip_max's check is activation's


def test_generated_tables_refer_to_the_groups_and_the_parent(pool_root):
    text = (pool_root / "lightnet/auto/ops/pool.py").read_text()
    imported = text.split("from lightnet.auto.params import (")[1].split(")")[0].split()
    assert imported == ["ACTIVATION,", "WINDOW2D,", "activation_clip_max,", "window2d_autopad,"]
    assert 'params=(*WINDOW2D, ParamArg("ceil_mode", ParamType.BOOL, False)),' in text
    assert "POOL_CPU = replace(" in text and "params=(*POOL.params, *ACTIVATION)," in text
    assert "tensors_in" not in text.split("POOL_CPU = replace(")[1]  # the parent's
    assert text.count("ParamArg(") == 1  # ceil_mode: the others are the groups'
    params = (pool_root / "lightnet/auto/params.py").read_text()
    assert params == (REPO / "lightnet/auto/params.py").read_text()
    assert "DILATED_WINDOW2D = (\n    *WINDOW2D,\n    ParamArg(\n        \"dilation\"," in params
    assert "    *ACTIVATION[1:4],\n" in params


def _pre_run(proto, params):
    op = Op(proto, "p1", {"src": "x"}, {"dst": "y"},
            {k: Param.from_value(k, v) for k, v in params.items()})
    tensors = TensorTable({"x": TensorEntry("x", DType.TL_FLOAT, (1, 1, 4, 4), "c0",
                                            MemType.CPU)})
    op.pre_run(tensors)
    return op


@pytest.mark.parametrize("optype, params, message", [
    ("POOL", {"size": [2, 2], "padding": [1, 1, 1, 1], "autopad": "VALID"},
     "param 'autopad': check: expected autopad == \"NOTSET\" or not any(padding) (explicit "
     "padding needs autopad NOTSET), found padding=(1, 1, 1, 1), autopad='VALID'"),
    ("POOL", {"size": [2, 2], "padding": [2, 0, 0, 0]},
     "param 'padding': check: expected max(padding) < min(size) (every window overlaps the "
     "input), found size=(2, 2), padding=(2, 0, 0, 0)"),
    ("POOL_CPU", {"size": [2, 2], "clip_min": 1, "clip_max": 0},
     "param 'clip_max': check: expected clip_min <= clip_max (the clip range is [clip_min, "
     "clip_max]), found clip_min=1.0, clip_max=0.0"),
    ("POOL_CPU", {"size": [2, 2], "clip_max": 200},
     "param 'clip_max': check: expected clip_max < 100 (a small clip), found clip_max=200.0"),
    ("POOL_CPU", {"size": [2, 2], "activation": "gelu"},
     "param 'activation': choices: expected one of none, relu, lrelu, sigmoid, tanh, clip, "
     "found 'gelu'"),
])
def test_a_groups_checks_are_made_by_its_verifier(pool_root, optype, params, message):
    proto = getattr(load_module(pool_root, "lightnet/auto/ops/pool.py", "gen_pool"), optype)
    with pytest.raises(CheckError) as info:
        _pre_run(proto, params)
    assert str(info.value) == f"op 'p1' ({optype.lower()}): {message}"


def test_an_op_taking_a_group_runs(pool_root):
    module = load_module(pool_root, "lightnet/auto/ops/pool.py", "gen_pool")
    op = _pre_run(module.POOL_CPU, {"size": [3, 1], "activation": "relu"})
    assert list(op.values) == ["size", "stride", "padding", "autopad", "ceil_mode",
                               "activation", "negslope", "clip_min", "clip_max"]
    assert (op.values["size"], op.values["stride"], op.values["activation"]) == (
        (3, 1), (1, 1), "relu")


CONV = """\
conv:
  arch: none
  tensors_in:
    src: {dtype: float, ndim: 4}
    weight: {dtype: float, ndim: 4}
  tensors_out:
    dst: {dtype: src.dtype, shape: src.shape}
  param_groups: [conv_window2d]
  checks: [{expr: "src.shape[0] == 1", msg: one image}]

conv_cpu:
  inherits: conv
  arch: cpu
  tensors_in:
    weight:
      checks: [{expr: "weight.shape[0] < 8", msg: a few kernels}]
  checks: [{expr: "group == 1", msg: dense}]
  run: np.copyto(dst, src)
"""


@pytest.fixture(scope="module")
def conv_root(tmp_path_factory):
    root = make_root(tmp_path_factory.mktemp("groups") / "root", {"conv.yaml": CONV})
    assert run(root).rc == 0
    return root


def test_a_groups_checks_of_the_op_belong_to_every_op_taking_it(conv_root):
    ops = {op.optype: op for op in model.load(conv_root).ops()}
    conv, cpu = ops["conv"], ops["conv_cpu"]
    weight = conv.tensors_in[1]
    assert weight.group_checks == 3 and conv.group_checks == 1  # the group's, listed first
    assert [c.expr for c in conv.checks] == [
        'autopad in ("SAME_UPPER", "SAME_LOWER") or min(shapes.conv2d_output_hw('
        'src.shape[2:], size, stride, padding, dilation)) > 0', "src.shape[0] == 1"]
    assert conv.own.groups == ("conv_window2d",) and cpu.own.groups == ()  # made once
    assert [c.expr for c in cpu.own.tensors_in[1].checks] == ["weight.shape[0] < 8"]
    assert [c.expr for c in cpu.own.checks] == ["group == 1"]
    text = (conv_root / "lightnet/auto/ops/conv.py").read_text()
    assert text.count("conv_window2d_checks(ck)") == 1 and "weight.shape[1] * group" not in text


def _conv(proto, weight_shape, **params):
    op = Op(proto, "c1", {"src": "x", "weight": "w"}, {"dst": "y"},
            {k: Param.from_value(k, v) for k, v in {"size": [3, 3], **params}.items()})
    tensors = TensorTable({
        "x": TensorEntry("x", DType.TL_FLOAT, (1, 4, 5, 5), "c0", MemType.CPU),
        "w": TensorEntry("w", DType.TL_FLOAT, weight_shape, "c0", MemType.CPU)})
    op.pre_run(tensors)
    return op


@pytest.mark.parametrize("optype, weight, params, message", [
    ("CONV", (6, 2, 3, 3), {},
     "tensor_in 'weight': check: expected weight.shape[1] * group == src.shape[1] "
     "(weight.shape[1] is src's channels per group), found src=float32[1, 4, 5, 5], "
     "weight=float32[6, 2, 3, 3], group=1"),
    ("CONV", (3, 2, 3, 3), {"group": 2},
     "tensor_in 'weight': check: expected weight.shape[0] % group == 0 (the output channels "
     "split evenly into groups), found weight=float32[3, 2, 3, 3], group=2"),
    ("CONV_CPU", (6, 4, 3, 3), {"dilation": [3, 3]},
     "op: check: expected autopad in (\"SAME_UPPER\", \"SAME_LOWER\") or min(shapes."
     "conv2d_output_hw(src.shape[2:], size, stride, padding, dilation)) > 0 (the padded input "
     "holds at least one dilated kernel window), found src=float32[1, 4, 5, 5], size=(3, 3), "
     "stride=(1, 1), padding=(0, 0, 0, 0), autopad='NOTSET', dilation=(3, 3)"),
    ("CONV_CPU", (8, 4, 3, 3), {},
     "tensor_in 'weight': check: expected weight.shape[0] < 8 (a few kernels), "
     "found weight=float32[8, 4, 3, 3]"),
])
def test_a_groups_verifier_checks_the_inputs_it_reads(conv_root, optype, weight, params, message):
    proto = getattr(load_module(conv_root, "lightnet/auto/ops/conv.py", "gen_conv"), optype)
    with pytest.raises(CheckError) as info:
        _conv(proto, weight, **params)
    assert str(info.value) == f"op 'c1' ({optype.lower()}): {message}"
    _conv(proto, (6, 4, 3, 3))  # and passes what it should
