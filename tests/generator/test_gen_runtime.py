"""Generated code at work: pre_run checks raise the documented CheckErrors,
and `new-op` writes a skeleton that validates, generates and runs.

Generated modules are imported from the tmp root by file path; they import
lightnet.* from the repository.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from generator import model
from genutil import REPO, load_module, make_root, run, snapshot
from lightnet.errors import CheckError
from lightnet.ir.op import Op
from lightnet.ir.param import Param
from lightnet.ir.tensor import DType, MemType, TensorEntry, TensorTable


@pytest.fixture(scope="module")
def scale_module(base_tree):
    return load_module(base_tree, "lightnet/auto/ops/scale.py", "gen_test_scale")


def _op(proto, params=None, ins=None, outs=None):
    ins = {"src": "x"} if ins is None else ins
    outs = {"dst": "y"} if outs is None else outs
    params = {k: Param.from_value(k, v) for k, v in (params or {}).items()}
    return Op(proto, "s1", ins, outs, params)


def _table(*entries):
    return TensorTable({e.name: e for e in entries})


def _x(dtype=DType.TL_FLOAT, shape=(2, 3), mtype=MemType.CPU, name="x"):
    return TensorEntry(name, dtype, shape, "c0", mtype)


def _error(proto, params=None, entries=None, ins=None, outs=None) -> str:
    op = _op(proto, params, ins, outs)
    with pytest.raises(CheckError) as info:
        op.pre_run(_table(*(entries if entries is not None else [_x()])))
    return str(info.value)


# The abstract op ----------------------------------------------------------------------

ABSTRACT_ERRORS = [
    ({}, [_x(DType.TL_INT32)],
     "tensor_in 'src': dtype: expected TL_FLOAT or TL_DOUBLE, found TL_INT32 (int32[2, 3])"),
    ({}, [_x(shape=(6,))], "tensor_in 'src': ndim: expected 2 dimensions, found 1 (float32[6])"),
    ({}, [], "tensor_in 'src': defined: expected tensor 'x' defined by an earlier op, "
             "found no such tensor"),
    ({"alpha": -1}, None, "param 'alpha': ge: expected alpha >= 0, found -1.0"),
    ({"alpha": 11}, None, "param 'alpha': le: expected alpha <= 10, found 11.0"),
    ({"alpha": "x"}, None, "param 'alpha': type: expected a number, found a string \"x\""),
    ({"axis": 2}, None, "param 'axis': lt: expected axis < src.ndim (2), found 2"),
    ({"axis": -1}, None, "param 'axis': ge: expected axis >= 0, found -1"),
    ({"mode": "slow"}, None, "param 'mode': choices: expected one of fast, exact, found 'slow'"),
    ({"pad": [0, 0, 0]}, None, "param 'pad': len: expected 2 elements, found 3 ([0, 0, 0])"),
    ({"pad": [0, -1]}, None, "param 'pad': ge: expected every pad[i] >= 0, found pad[1] = -1"),
    ({"pad": [3, 1]}, None, "param 'pad': check: expected pad[0] <= pad[1] "
                            "(the pads are ordered), found pad=(3, 1)"),
    ({"axis": 1}, [_x(shape=(2, 1))], "op: check: expected src.shape[axis] >= 2 "
                                      "(the axis holds two entries), found src=float32[2, 1], "
                                      "axis=1"),
    ({"beta": 1}, None, "param 'beta': known: expected one of alpha, axis, mode, pad, "
                        "found an unknown param"),
]


@pytest.mark.parametrize("params, entries, message", ABSTRACT_ERRORS,
                         ids=[m.split(":")[0] + ":" + m.split(":")[1].strip()
                              for _, _, m in ABSTRACT_ERRORS])
def test_abstract_pre_run_errors(scale_module, params, entries, message):
    assert _error(scale_module.SCALE, params, entries) == f"op 's1' (scale): {message}"


def test_missing_input_and_unknown_input(scale_module):
    assert _error(scale_module.SCALE, ins={}) == (
        "op 's1' (scale): tensor_in 'src': exists: expected the input to be given, "
        "found no such input")
    assert _error(scale_module.SCALE, ins={"src": "x", "source": "x"}) == (
        "op 's1' (scale): tensor_in 'source': known: expected one of src, other, "
        "found an unknown input")


def test_optional_input_sametype_and_sameshape(scale_module):
    ins = {"src": "x", "other": "o"}
    assert _error(scale_module.SCALE, ins=ins, entries=[_x(), _x(DType.TL_DOUBLE, name="o")]) == (
        "op 's1' (scale): tensor_in 'other': sametype: expected the dtype of 'src' (TL_FLOAT), "
        "found TL_DOUBLE")
    assert _error(scale_module.SCALE, ins=ins, entries=[_x(), _x(shape=(3, 2), name="o")]) == (
        "op 's1' (scale): tensor_in 'other': sameshape: expected the shape of 'src' (2, 3), "
        "found (3, 2)")


def test_output_already_defined(scale_module):
    message = _error(scale_module.SCALE, entries=[_x(), _x(name="y")])
    assert message.startswith("op 's1' (scale): tensor_out 'dst': not_defined:")


def test_abstract_pre_run_defines_the_output_and_keeps_typed_values(scale_module):
    op = _op(scale_module.SCALE, {"alpha": 2, "axis": 1, "pad": [1, 2]})
    tensors = _table(_x(DType.TL_DOUBLE))
    op.pre_run(tensors)
    dst = tensors["y"]
    assert (dst.dtype, dst.shape, dst.creator, dst.mtype) == (
        DType.TL_DOUBLE, (2, 3), "s1", MemType.NONE)
    assert op.values == {"alpha": 2.0, "axis": 1, "mode": "fast", "pad": (1, 2)}
    assert isinstance(op.values["alpha"], float) and isinstance(op.values["axis"], int)


# The cpu variant: inherited checks and its own ---------------------------------------------


def test_child_keeps_the_declared_dtypes(scale_module):
    entries = [_x(DType.TL_INT32)]
    assert _error(scale_module.SCALE_CPU, entries=entries) == (
        "op 's1' (scale_cpu): tensor_in 'src': dtype: expected TL_FLOAT or TL_DOUBLE, "
        "found TL_INT32 (int32[2, 3])")


def test_child_adds_a_check_and_keeps_the_bounds(scale_module):
    assert _error(scale_module.SCALE_CPU, {"alpha": 7}) == (
        "op 's1' (scale_cpu): param 'alpha': check: expected alpha <= 5 (the cpu kernel "
        "scales by at most 5), found alpha=7.0")
    assert _error(scale_module.SCALE_CPU, {"alpha": -1}) == (
        "op 's1' (scale_cpu): param 'alpha': ge: expected alpha >= 0, found -1.0")
    # 7 is fine for the abstract op
    _op(scale_module.SCALE, {"alpha": 7}).pre_run(_table(_x()))


def test_child_pre_run_calls_the_parents_then_adds(base_tree):
    text = (base_tree / "lightnet/auto/ops/scale.py").read_text()
    body = text[text.index("def scale_cpu_pre_run"):text.index("SCALE_CPU = ")]
    assert "    scale_pre_run(op, tensors)\n" in body
    assert body.count("ck.satisfy(") == 1 and "ck.define" not in body


def test_child_inherits_the_parent_checks(scale_module):
    assert _error(scale_module.SCALE_CPU, {"pad": [3, 1]}).endswith(
        "param 'pad': check: expected pad[0] <= pad[1] (the pads are ordered), found pad=(3, 1)")


def test_child_checks_the_memory_type(scale_module):
    assert _error(scale_module.SCALE_CPU, entries=[_x(mtype=MemType.NONE)]) == (
        "op 's1' (scale_cpu): tensor_in 'src': mtype: expected memory type cpu, found none")


def test_child_runs(scale_module):
    op = _op(scale_module.SCALE_CPU, {"alpha": 2, "bias": 0.5})
    tensors = _table(_x())
    op.pre_run(tensors)
    assert op.values["bias"] == 0.5
    arrays = {"x": np.arange(6, dtype=np.float32).reshape(2, 3),
              "y": np.zeros((2, 3), np.float32)}
    run_fn = scale_module.SCALE_CPU.load(op, arrays)
    run_fn()
    np.testing.assert_array_equal(arrays["y"], np.arange(6).reshape(2, 3) * 2 + 0.5)


def test_protos_carry_declared_constraints_and_no_examples(scale_module):
    assert [p.optype for p in scale_module.PROTOS] == ["scale", "scale_cpu"]
    assert [p.arg_name for p in scale_module.SCALE_CPU.params] == [
        "alpha", "axis", "mode", "pad", "bias"]
    alpha, axis, mode, pad, _ = scale_module.SCALE_CPU.params
    assert (alpha.realtype, alpha.bounds) == ("float", (("ge", 0), ("le", 10)))
    assert axis.bounds == (("ge", 0),)  # `lt: src.ndim` is an expression: pre_run checks it
    assert (mode.choices, pad.length) == (("fast", "exact"), 2)
    assert not hasattr(scale_module.SCALE, "examples")
    assert scale_module.SCALE.load is None and scale_module.SCALE_CPU.load is not None


# new-op ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def new_op_tree(tmp_path_factory):
    root = make_root(tmp_path_factory.mktemp("newop") / "root")
    result = run(root, "new-op", "blend")
    assert result.rc == 0, result.err
    assert result.out == ("wrote descriptions/ops/blend.yaml; edit it, "
                          "then run `python -m generator`\n")
    gen = run(root)
    assert gen.rc == 0, gen.err
    return root


def test_new_op_skeleton_generates_valid_python(new_op_tree):
    text = (new_op_tree / "lightnet/auto/ops/blend.py").read_text()
    compile(text, "blend.py", "exec")
    assert "def blend_pre_run" in text and "def blend_cpu_load" in text
    assert run(new_op_tree, "--check").rc == 0


def test_new_op_skeleton_examples_hold(new_op_tree):
    module = load_module(new_op_tree, "lightnet/auto/ops/blend.py", "gen_test_blend")
    (blend, _) = model.load(new_op_tree).ops()
    (good, bad) = (vars(e) for e in blend.examples)
    # the valid example through the cpu variant
    src = np.asarray(good["inputs"]["src"], np.float32)
    op = _op(module.BLEND_CPU, good["params"])
    tensors = _table(_x(shape=src.shape))
    op.pre_run(tensors)
    arrays = {"x": src, "y": np.zeros(tensors["y"].shape, tensors["y"].dtype.np)}
    module.BLEND_CPU.load(op, arrays)()
    np.testing.assert_allclose(arrays["y"], good["outputs"]["dst"])
    # the invalid one fails as it says
    src = np.asarray(bad["inputs"]["src"], np.float32)
    message = _error(module.BLEND, bad["params"], [_x(shape=src.shape)])
    assert bad["error"] in message


def test_new_op_refuses_an_existing_name(new_op_tree):
    before = (new_op_tree / "descriptions/ops/blend.yaml").read_bytes()
    result = run(new_op_tree, "new-op", "blend")
    assert (result.rc, result.out) == (1, "")
    assert result.err == "error: descriptions/ops/blend.yaml already exists\n"
    assert (new_op_tree / "descriptions/ops/blend.yaml").read_bytes() == before


def test_new_op_refuses_an_optype_described_in_another_file(tmp_path):
    root = make_root(tmp_path / "r", {"pair.yaml": "mix:\n  arch: none\nmix_cpu:\n  arch: cpu\n"})
    for name, optype in (("mix", "mix"), ("mix_cpu", "mix_cpu")):
        result = run(root, "new-op", name)
        assert result.rc == 1
        assert result.err == (f"error: optype '{optype}' is already described in "
                              "descriptions/ops/pair.yaml\n")
    assert not (root / "descriptions/ops/mix.yaml").exists()


@pytest.mark.parametrize("name", ["Blend", "BLEND", "class", "None", "2d", "my-op", "a b", ""])
def test_new_op_refuses_invalid_names(tmp_path, name):
    root = make_root(tmp_path / "r")
    before = snapshot(root, skip=())
    result = run(root, "new-op", name)
    assert (result.rc, result.out) == (1, "")
    assert result.err == (f"error: '{name}' is not a valid optype "
                          "(lower-case Python identifier)\n")
    assert snapshot(root, skip=()) == before


def test_new_op_through_the_cli_exits_1_on_a_bad_name(tmp_path):
    root = make_root(tmp_path / "r")
    done = subprocess.run([sys.executable, "-m", "generator", "--root", str(root), "new-op", "Mix"],
                          cwd=REPO, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "error: 'Mix' is not a valid optype (lower-case Python identifier)\n"
    assert list((root / "descriptions/ops").iterdir()) == []


# The worked example of docs/op-description.md -------------------------------------------------


def test_the_documented_elementwise_op_is_one_entry_and_one_kernel(tmp_path, monkeypatch):
    """The YAML entry and kernel of "Adding an elementwise op" generate, and
    its examples hold through the generated module."""
    import re

    from lightnet.archs.cpu import kernels

    doc = (REPO / "docs" / "op-description.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Adding an elementwise op"):]
    yaml_text, python_text = re.findall(r"```(?:yaml|python)\n(.*?)```", section, re.S)[:2]
    namespace = {"np": np}
    exec(python_text, namespace)  # the documented kernel, as written
    monkeypatch.setattr(kernels, "softsign", namespace["softsign"], raising=False)
    root = make_root(tmp_path / "root", {"softsign.yaml": yaml_text})
    assert run(root).rc == 0
    module = load_module(root, "lightnet/auto/ops/softsign.py", "gen_test_softsign")
    (op_desc, _) = model.load(root).ops()
    good, bad = (vars(e) for e in op_desc.examples)
    src = np.asarray(good["inputs"]["src"], np.float32)
    op = _op(module.SOFTSIGN_CPU)
    tensors = _table(_x(shape=src.shape))
    op.pre_run(tensors)
    arrays = {"x": src, "y": np.zeros(src.shape, np.float32)}
    module.SOFTSIGN_CPU.load(op, arrays)()
    np.testing.assert_allclose(arrays["y"], good["outputs"]["dst"])
    assert bad["error"] in _error(module.SOFTSIGN, entries=[_x(DType.TL_INT32, shape=(1,))])
