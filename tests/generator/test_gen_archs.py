"""Architectures described once: descriptions/archs/*.yaml, what the generator
derives from them (the dtype check of each op of an arch, the guard of each of
its expanders, its default lowering), their templates and lightnet/auto/archs.py.
(Their located errors are cases of test_gen_schema.py.)"""

from __future__ import annotations

import pytest

from generator import model, render
from genutil import BASE_ARCHS, BASE_OPS, load_module, make_root, run
from lightnet.errors import CheckError
from lightnet.ir.op import Op
from lightnet.ir.tensor import DType, MemType, TensorEntry, TensorTable

# The scale family of the base tree with a dnnl variant, and an op of dnnl's own
# whose input is TL_FLOAT already.
DNNL_OPS = {**BASE_OPS, "scale.yaml": BASE_OPS["scale.yaml"] + """
scale_dnnl:
  inherits: scale
  arch: dnnl
  run: np.multiply(src, alpha, out=dst)

copy_dnnl:
  arch: dnnl
  tensors_in:
    src: {dtype: TL_FLOAT}
  tensors_out:
    dst: {dtype: src.dtype, shape: src.shape}
  run: np.copyto(dst, src)
""", "join.yaml": """\
join:
  arch: none
  tensors_in:
    src: {variadic: true}
  tensors_out:
    dst: {dtype: "src[0].dtype", shape: "src[0].shape"}

join_dnnl: {inherits: join, arch: dnnl, run: "np.copyto(dst, src[0])"}
"""}


def _load(tmp_path, ops, optimizers=None, archs=None):
    return model.load(make_root(tmp_path / "root", ops, optimizers, archs))


def _ops(d):
    return {op.optype: op for op in d.ops()}


def test_the_archs_are_those_described(tmp_path):
    d = _load(tmp_path, BASE_OPS)
    cpu, dnnl = d.archs
    assert (cpu.name, cpu.mtype, cpu.dtype_set, cpu.fallback) == ("cpu", "cpu", "any", None)
    assert (dnnl.name, dnnl.library, dnnl.dtypes, dnnl.fallback) == (
        "dnnl", "oneDNN", ("TL_FLOAT",), "cpu")
    assert dnnl.source == "descriptions/archs/dnnl.yaml"


def test_an_op_has_the_memory_type_of_its_arch(tmp_path):
    archs = {**BASE_ARCHS, "dnnl.yaml": BASE_ARCHS["dnnl.yaml"].replace("mtype: cpu", "mtype: none")}
    with pytest.raises(Exception, match=r"dnnl\.yaml:3: mtype: expected a memory type \(cpu\), "
                                        r"found 'none'"):
        _load(tmp_path, BASE_OPS, archs=archs)
    ops = _ops(_load(tmp_path / "ok", DNNL_OPS))
    assert (ops["scale"].mtype, ops["scale_cpu"].mtype, ops["scale_dnnl"].mtype) == (
        "none", "cpu", "cpu")


def test_an_op_of_an_arch_checks_its_first_input_has_a_dtype_of_the_arch(tmp_path):
    ops = _ops(_load(tmp_path, DNNL_OPS))
    assert ops["scale_dnnl"].dtype_checked == "src" and ops["scale_dnnl"].own.dtype_checked
    assert ops["join_dnnl"].dtype_checked == "src"
    assert ops["copy_dnnl"].dtype_checked is None  # its src is TL_FLOAT already
    assert ops["scale_cpu"].dtype_checked is None  # the cpu computes in every dtype


def _entry(dtype, name="x"):
    return TensorEntry(name, dtype, (2, 3), "c0", MemType.CPU)


@pytest.mark.parametrize("family, optype, ins, expected", [
    ("scale", "SCALE_DNNL", {"src": "x"}, "src.dtype == DType.TL_FLOAT"),
    ("join", "JOIN_DNNL", {"src1": "x", "src2": "x2"}, "src[0].dtype == DType.TL_FLOAT"),
])
def test_the_dtype_check_is_the_archs_verifier(tmp_path, family, optype, ins, expected):
    root = make_root(tmp_path / "root", DNNL_OPS)
    assert run(root).rc == 0
    text = (root / f"lightnet/auto/ops/{family}.py").read_text()
    assert "from lightnet.auto.archs import dnnl_dtype" in text
    assert 'dnnl_dtype(ck, "src")' in text
    proto = getattr(load_module(root, f"lightnet/auto/ops/{family}.py", f"gen_{family}"), optype)
    op = Op(proto, "s1", ins, {"dst": "y"}, {})
    tensors = TensorTable({n: _entry(DType.TL_DOUBLE, n) for n in ins.values()})
    with pytest.raises(CheckError) as info:
        op.pre_run(tensors)
    shown = "float64[2, 3]" if family == "scale" else "[float64[2, 3], float64[2, 3]]"
    assert str(info.value) == (f"op 's1' ({optype.lower()}): op: check: expected {expected} "
                               f"(oneDNN runs TL_FLOAT), found src={shown}")


DNNL_RULES = """\
arch: dnnl
expanders:
  scale:
    - when: op.params.alpha < 5
      replace: scale_dnnl
"""


def test_every_expander_of_an_arch_is_guarded_by_its_dtypes(tmp_path):
    d = _load(tmp_path, DNNL_OPS, {"dnnl.yaml": DNNL_RULES})
    (dnnl,) = d.optimizers
    scale, join = dnnl.expanders  # join's default lowering, guarded too
    assert (scale.optype, scale.guard, scale.rules[0].when) == (
        "scale", "op.ins.src.dtype == DType.TL_FLOAT", "op.params.alpha < 5")
    assert (join.optype, join.guard, join.rules[0].when) == (
        "join", "op.ins.src1.dtype == DType.TL_FLOAT", None)
    code = render.render_all(make_root(tmp_path / "r", DNNL_OPS, {"dnnl.yaml": DNNL_RULES}), d)
    text = code["lightnet/auto/optimizers/dnnl.py"]
    assert "    if not (op.ins.src.dtype == DType.TL_FLOAT):\n        return None\n" in text
    assert 'return [op.as_optype("join_dnnl")]' in text  # a plain lowering: no Builder


def test_an_arch_without_rules_gets_its_guarded_lowering(tmp_path):
    (dnnl,) = _load(tmp_path, DNNL_OPS).optimizers
    assert (dnnl.arch.name, dnnl.source) == ("dnnl", "descriptions/archs/dnnl.yaml")
    assert [e.optype for e in dnnl.expanders] == ["join", "scale"]
    # An arch computing in every dtype lowers X to X_<arch> in the expand pass itself.
    assert _load(tmp_path / "cpu", BASE_OPS).optimizers == ()


def test_the_generated_archs_module(base_tree):
    archs = load_module(base_tree, "lightnet/auto/archs.py", "gen_archs").ARCHS
    assert list(archs) == ["cpu", "dnnl"]
    assert (archs["dnnl"].mtype, archs["dnnl"].dtypes, archs["dnnl"].fallback) == (
        MemType.CPU, (DType.TL_FLOAT,), "cpu")
    assert archs["cpu"].fallback is None and len(archs["cpu"].dtypes) == len(DType)
    assert archs["cpu"].float32_ops == archs["cpu"].elementwise_ops == frozenset()
    assert archs["cpu"].package is archs["dnnl"].package is None


def test_an_archs_package_is_in_the_generated_archs_module(tmp_path):
    archs = {**BASE_ARCHS, "toy.yaml": "arch: toy\nmtype: cpu\ndtypes: any\n"
                                       "fallback: cpu\npackage: tests.toyarch\n"}
    root = make_root(tmp_path / "root", BASE_OPS, archs=archs)
    assert run(root).rc == 0
    generated = load_module(root, "lightnet/auto/archs.py", "gen_archs_toy").ARCHS
    assert (generated["toy"].package, generated["toy"].fallback) == ("tests.toyarch", "cpu")


@pytest.mark.parametrize("key", ["float32_ops", "elementwise_ops"])
def test_op_lists_are_ops_of_the_arch(tmp_path, key):
    archs = {**BASE_ARCHS, "cpu.yaml": BASE_ARCHS["cpu.yaml"] + f"{key}: [scale_cpu]\n"}
    d = _load(tmp_path, BASE_OPS, archs=archs)
    assert getattr(d.archs[0], key) == ("scale_cpu",)
    archs["cpu.yaml"] = archs["cpu.yaml"].replace("[scale_cpu]", "[scale]")
    with pytest.raises(Exception, match=rf"archs/cpu\.yaml:4: {key}: expected a list of "
                                        r"ops of arch 'cpu', found \['scale'\]"):
        _load(tmp_path / "bad", BASE_OPS, archs=archs)


def test_a_rules_condition_reads_its_archs_op_lists(tmp_path):
    """`when` may read FLOAT32_OPS and ELEMENTWISE_OPS, the op lists of the
    optimizer's arch; they are no names for a rule's tensors."""
    archs = {**BASE_ARCHS, "cpu.yaml": BASE_ARCHS["cpu.yaml"] + "elementwise_ops: [scale_cpu]\n"}
    text = ("arch: cpu\ncombiners:\n  c:\n"
            "    window: [scale_cpu, shift_cpu]\n"
            "    when: ops[0].optype in ELEMENTWISE_OPS and ops[1].optype not in FLOAT32_OPS\n"
            "    replace: []\n")
    root = make_root(tmp_path / "root", BASE_OPS, {"cpu.yaml": text}, archs)
    code = render.render_all(root, model.load(root))["lightnet/auto/optimizers/cpu.py"]
    assert "ops[0].optype in ELEMENTWISE_OPS" in code
    assert 'ELEMENTWISE_OPS = ARCHS["cpu"].elementwise_ops' in code
    bad = text.replace("    replace: []", "    tensors: [ELEMENTWISE_OPS]\n    replace: []")
    with pytest.raises(Exception, match="'ELEMENTWISE_OPS' is reserved"):
        _load(tmp_path / "bad", BASE_OPS, {"cpu.yaml": bad}, archs)


TEMPLATED = {**BASE_ARCHS, "cpu.yaml": BASE_ARCHS["cpu.yaml"] + """\
templates:
  scaling:
    doc: Scales through numpy.
    static_run: factor = alpha
    run: np.multiply(src, factor, out=dst)
"""}


def test_a_template_gives_an_op_the_code_it_does_not_give(tmp_path):
    ops = {"scale.yaml": BASE_OPS["scale.yaml"].split("scale_cpu:")[0] + """\
scale_cpu: {inherits: scale, arch: cpu, template: scaling}

scale_twice_cpu: {inherits: scale, arch: cpu, template: scaling, run: "np.multiply(src, 2 * factor, out=dst)"}

scale_again_cpu: {inherits: scale_cpu, arch: cpu}
"""}
    d = _ops(_load(tmp_path, ops, archs=TEMPLATED))
    assert (d["scale_cpu"].doc, d["scale_cpu"].static_run, d["scale_cpu"].run) == (
        "Scales through numpy.", "factor = alpha\n", "np.multiply(src, factor, out=dst)\n")
    assert d["scale_twice_cpu"].run == "np.multiply(src, 2 * factor, out=dst)\n"
    assert d["scale_twice_cpu"].static_run == "factor = alpha\n"
    # Not inherited as a template: the variant of a variant has its parent's code.
    assert d["scale_again_cpu"].run == d["scale_cpu"].run


def test_a_templates_code_is_checked_where_an_op_takes_it(tmp_path):
    ops = {"shift.yaml": BASE_OPS["shift.yaml"].replace(
        'shift_cpu: {inherits: shift, arch: cpu, run: "np.add(src, by, out=dst)"}',
        "shift_cpu: {inherits: shift, arch: cpu, template: scaling}")}
    result = run(make_root(tmp_path / "root", ops, archs=TEMPLATED))
    assert result.rc == 1
    assert result.err.startswith("error: descriptions/ops/shift.yaml:14: shift_cpu.static_run: "
                                 "unknown name 'alpha'")


def test_ops_running_a_template_as_given_share_its_hooks_written_once(tmp_path):
    """An op whose hooks are all its template's runs the template's, generated once in
    lightnet/auto/templates.py; one giving any of its own has its own functions."""
    ops = {"scale.yaml": BASE_OPS["scale.yaml"].split("scale_cpu:")[0] + """\
scale_cpu: {inherits: scale, arch: cpu, template: scaling}

scale_twice_cpu: {inherits: scale, arch: cpu, template: scaling, run: "np.multiply(src, 2 * factor, out=dst)"}
"""}
    root = make_root(tmp_path / "root", ops, archs=TEMPLATED)
    files = render.render_all(root, model.load(root))
    shared, scale = files["lightnet/auto/templates.py"], files["lightnet/auto/ops/scale.py"]
    assert shared.count("def cpu_scaling_load(op, arrays):") == 1
    assert "from lightnet.auto.templates import cpu_scaling_load" in scale
    assert "def scale_cpu_load" not in scale and "load=cpu_scaling_load" in scale
    assert "def scale_twice_cpu_load(op, arrays):" in scale
    # Another family's op binding the template's names otherwise (alpha an input there).
    ops["weigh.yaml"] = """\
weigh:
  arch: none
  tensors_in: {src: {}, alpha: {sametype: src}}
  tensors_out: {dst: {dtype: src.dtype, shape: src.shape}}

weigh_cpu: {inherits: weigh, arch: cpu, template: scaling}
"""
    root = make_root(tmp_path / "bad", ops, archs=TEMPLATED)
    with pytest.raises(render.RenderError, match="descriptions/ops/weigh.yaml: weigh_cpu and "
                                                 "scale_cpu bind the names of arch template "
                                                 "'scaling' differently"):
        render.render_all(root, model.load(root))
