"""The loaded model: inheritance, default expanders, names in expressions.

These load descriptions with generator.model only (no rendering), except
where the generated code itself is the point.
"""

from __future__ import annotations

import pytest

from generator import model, schema
from generator.source import DescriptionError
from genutil import BASE_OPS, BASE_OPTIMIZERS, make_root


@pytest.fixture(scope="module")
def base_model(tmp_path_factory):
    root = make_root(tmp_path_factory.mktemp("model") / "root", BASE_OPS, BASE_OPTIMIZERS)
    return model.load(root)


@pytest.fixture
def ops(base_model):
    return {op.optype: op for op in base_model.ops()}


def _load(tmp_path, ops, optimizers=None):
    return model.load(make_root(tmp_path / "root", ops, optimizers))


# Inheritance -----------------------------------------------------------------------


def test_child_adds_a_check_to_an_inherited_param_and_keeps_the_rest(ops):
    parent, child = ops["scale"].params[0], ops["scale_cpu"].params[0]
    assert child.bounds == parent.bounds == (schema.Bound("ge", "0"), schema.Bound("le", "10"))
    assert child.checks == (schema.Check("alpha <= 5", "the cpu kernel scales by at most 5",
                                        ("alpha",)),)
    assert (child.type, child.ptype, child.realtype, child.default, child.doc) == (
        "float", "number", "float", 1.0, "Scale.")
    # untouched args are identical
    assert ops["scale_cpu"].params[1:4] == ops["scale"].params[1:4]
    assert ops["scale_cpu"].tensors_in == ops["scale"].tensors_in


def test_own_checks_of_a_variant_are_what_it_adds(ops):
    child = ops["scale_cpu"]
    assert child.base == "scale"
    assert [p.arg_name for p in child.own.params] == ["alpha", "axis", "mode", "pad", "bias"]
    assert [c.expr for p in child.own.params for c in p.checks] == ["alpha <= 5"]
    assert all(not p.bounds for p in child.own.params[:4])  # the parent's pre_run checks them
    assert child.own.checks == () and child.own.out_checks == ()
    assert ops["scale"].own.checks == ops["scale"].checks


@pytest.mark.parametrize("key, value", [("dtype", "TL_FLOAT"), ("ndim", 3), ("sametype", "x")])
def test_a_variant_cannot_change_an_inherited_input(tmp_path, key, value):
    with pytest.raises(DescriptionError, match=rf"a\.yaml:7: a_cpu\.tensors_in\.src\.{key}: "
                                               rf"'src' is its parent's: a variant adds checks "
                                               rf"to it, and cannot change its '{key}'"):
        _load(tmp_path, {"a.yaml": f"""\
            a:
              arch: none
              tensors_in: {{src: {{dtype: float}}, x: {{}}}}
            a_cpu:
              inherits: a
              arch: cpu
              tensors_in: {{src: {{{key}: {value}}}}}
            """})


def test_a_variant_drops_an_inherited_check_by_its_expression(tmp_path):
    d = _load(tmp_path, {"a.yaml": """\
        a:
          arch: none
          params: {n: {type: int, checks: [{expr: n > 0}, {expr: n < 9}]}}
          checks: [{expr: n != 5}]
        a_cpu:
          inherits: a
          arch: cpu
          drop_checks: [n > 0, n != 5]
        """})
    a, a_cpu = d.ops()
    assert [c.expr for c in a_cpu.params[0].checks] == ["n < 9"] and a_cpu.checks == ()
    assert [c.expr for c in a.params[0].checks] == ["n > 0", "n < 9"]  # the parent keeps them
    assert [c.expr for c in a.checks] == ["n != 5"]
    assert a_cpu.base is None  # its pre_run makes every check itself, not a's
    assert a_cpu.own.params == a_cpu.params
    with pytest.raises(DescriptionError, match=r"a\.yaml:8: a_cpu\.drop_checks\[0\]: "
                                               r"no inherited check is 'n > 1'"):
        _load(tmp_path / "2", {"a.yaml": """\
            a:
              arch: none
              params: {n: {type: int, checks: [{expr: n > 0}]}}
            a_cpu:
              inherits: a
              arch: cpu
              drop_checks:
                - n > 1
            """})


def test_a_variant_has_no_pre_run_when_its_parent_has_one(tmp_path):
    with pytest.raises(DescriptionError, match=r"a\.yaml:7: a_cpu\.pre_run: a variant's parent "
                                               r"has the pre_run"):
        _load(tmp_path, {"a.yaml": """\
            a:
              arch: none
              pre_run: x = 1
            a_cpu:
              inherits: a
              arch: cpu
              pre_run: y = 2
            """})


def test_child_args_are_appended_in_order(ops):
    assert [p.arg_name for p in ops["scale"].params] == ["alpha", "axis", "mode", "pad"]
    assert [p.arg_name for p in ops["scale_cpu"].params] == [
        "alpha", "axis", "mode", "pad", "bias"]
    bias = ops["scale_cpu"].params[-1]
    assert (bias.ptype, bias.realtype, bias.default, bias.required) == (
        "number", "double", 0, False)


def test_child_inherits_scalar_keys_and_op_checks(ops):
    child = ops["scale_cpu"]
    assert child.doc == ops["scale"].doc
    assert child.checks == ops["scale"].checks
    assert child.tensors_out == ops["scale"].tensors_out
    assert (child.arch, child.mtype, child.inherits) == ("cpu", "cpu", "scale")
    assert (ops["scale"].arch, ops["scale"].mtype, ops["scale"].inherits) == (
        "none", "none", None)
    assert child.run == "np.multiply(src, alpha, out=dst)\nnp.add(dst, bias, out=dst)\n"
    assert ops["scale"].run is None


def test_examples_are_not_inherited(ops):
    assert len(ops["scale"].examples) == 2
    assert ops["scale_cpu"].examples == ()
    assert ops["scale"].examples[1] == schema.Example(
        "", {"src": [[1, 2]]}, {"alpha": -1, "axis": 1}, {}, "param 'alpha': ge")


def test_child_examples_are_its_own(tmp_path):
    d = _load(tmp_path, {"a.yaml": """\
        a:
          arch: none
          tensors_in: [{arg_name: src}]
          examples:
            - {inputs: {src: [1]}, error: parent}
        a_cpu:
          inherits: a
          arch: cpu
          examples:
            - {inputs: {src: [2]}, error: child}
        """})
    a, a_cpu = d.families[0].ops
    assert [e.error for e in a.examples] == ["parent"]
    assert [e.error for e in a_cpu.examples] == ["child"]


def test_grandchild_merges_through_the_chain(tmp_path):
    d = _load(tmp_path, {"a.yaml": """\
        a:
          arch: none
          params:
            n: {type: int, ge: 0, doc: N.}
        b:
          inherits: a
          arch: none
          params:
            n: {checks: [{expr: n <= 9}]}
        c:
          inherits: b
          arch: cpu
          params:
            n: {checks: [{expr: n >= 1}]}
            m: {type: bool}
        """})
    c = {op.optype: op for op in d.ops()}["c"]
    assert (c.inherits, c.base) == ("b", "b")
    n, m = c.params
    assert n.bounds == (schema.Bound("ge", "0"),)
    assert [x.expr for x in n.checks] == ["n <= 9", "n >= 1"]
    assert [x.expr for x in c.own.params[0].checks] == ["n >= 1"]
    assert (n.realtype, n.doc, m.arg_name, m.type) == ("int", "N.", "m", "bool")


def test_child_may_come_before_its_parent_in_the_file(tmp_path):
    d = _load(tmp_path, {"a.yaml": """\
        a_cpu:
          inherits: a
          arch: cpu
        a:
          arch: none
          params: {n: {type: bool}}
        """})
    assert [op.optype for op in d.families[0].ops] == ["a_cpu", "a"]
    assert d.families[0].ops[0].params[0].arg_name == "n"


# Default expanders -------------------------------------------------------------------


def _rules(optimizer):
    return {e.optype: e.rules for e in optimizer.expanders}


def test_only_real_rules_are_expanders(base_model):
    """`shift` is lowered to `shift_cpu` by the expand pass itself: no rule."""
    (cpu,) = base_model.optimizers
    assert list(_rules(cpu)) == ["scale"]


def test_explicit_rule_wins_over_the_default(base_model):
    (cpu,) = base_model.optimizers
    explicit = _rules(cpu)["scale"]
    assert [r.when for r in explicit] == ["op.params.alpha == 0", None]
    assert cpu.source == "descriptions/optimizers/cpu.yaml"


def test_no_optimizer_module_without_an_optimizer_file(tmp_path):
    assert _load(tmp_path, BASE_OPS).optimizers == ()


def test_no_optimizer_when_nothing_is_runnable(tmp_path):
    d = _load(tmp_path, {"a.yaml": "a:\n  arch: none\n"}, {"cpu.yaml": "arch: cpu\n"})
    assert d.optimizers == ()


# Names in expressions and code ---------------------------------------------------------


def test_names_bound_inside_expressions_and_code_are_defined(tmp_path):
    """Comprehension variables, lambda and def args are not undefined names, and
    are not names pre_run keeps (they do not exist after it)."""
    d = _load(tmp_path, {"a.yaml": """\
        a:
          arch: cpu
          tensors_in: [{arg_name: src}]
          params:
            dims:
              type: int[]
              checks:
                - expr: all(d > 0 for d in dims)
          pre_run: |
            sizes = [d * 2 for d in src.shape]
            def twice(x):
                return 2 * x
            total = sum(map(lambda v: twice(v), sizes))
          tensors_out:
            - {arg_name: dst, dtype: src.dtype, shape: "tuple(s for s in sizes)"}
          run: |
            order = sorted(range(src.size), key=lambda i: src.flat[i])
            dst.flat[:] = [src.flat[i] for i in order][:dst.size]
        """})
    (a,) = d.ops()
    assert a.pre_run_names == ("sizes", "twice", "total")
    assert a.params[0].checks[0].names == ("dims",)


def test_pre_run_may_reassign_a_param_without_keeping_it_twice(tmp_path):
    d = _load(tmp_path, {"a.yaml": """\
        a:
          arch: none
          params: {pad: {type: "int[]", default: [0]}}
          pre_run: |
            pad = tuple(pad) * 2
            extra = 1
        """})
    assert d.ops()[0].pre_run_names == ("pad", "extra")
    from generator import render
    assert render._kept_names(d.ops()[0]) == ["pad", "extra"]


def test_param_named_like_a_builtin_hides_it_only_before_it_is_defined(tmp_path):
    # len(...) before the param `len` exists would be an unbound local in the
    # generated pre_run: an error at generation time.
    with pytest.raises(DescriptionError, match=r"a\.yaml:6: a\.params\.dims\.checks\[0\]\.expr: "
                                               r"unknown name 'len'.*hides the builtin"):
        _load(tmp_path / "1", {"a.yaml": """\
            a:
              arch: none
              params:
                dims:
                  type: int[]
                  checks: [{expr: len(dims) > 0}]
                len: {type: int}
            """})
    # after it, or in an op without such a param, the name is fine
    d = _load(tmp_path / "2", {"a.yaml": """\
        a:
          arch: none
          params:
            dims: {type: "int[]", checks: [{expr: len(dims) > 0}]}
            n: {type: int, checks: [{expr: "max(n, 1) > 0"}]}
        """})
    assert d.ops()[0].params[1].checks[0].names == ("n",)


def test_check_names_lists_only_arguments_read(ops):
    (check,) = ops["scale"].params[3].checks
    assert check == schema.Check("pad[0] <= pad[1]", "the pads are ordered", ("pad",))
    (op_check,) = ops["scale"].checks
    assert op_check.names == ("src", "axis")


# Folded constants in optimizer rules ------------------------------------------------------

CREATE = {"create.yaml": """\
    create:
      arch: none
      tensors_out:
        - {arg_name: dst, dtype: TL_FLOAT, shape: "(1,)", static: true}
    create_cpu:
      inherits: create
      arch: cpu
    """}

FOLDING = {"cpu.yaml": """\
    arch: cpu
    combiners:
      fold:
        window: [scale_cpu, shift_cpu]
        constants:
          w: ops[0].value("src") * ops[0].params.alpha
          lo, hi: (ops[1].value("src") - 1, ops[1].value("src") + 1)
        replace:
          - {like: "ops[1]", ins: {src: w}}
    """}


def test_rule_constants_load_and_render(tmp_path):
    from generator import render
    root = make_root(tmp_path / "root", {**BASE_OPS, **CREATE}, FOLDING)
    d = model.load(root)
    (cpu,) = d.optimizers
    (fold,) = cpu.combiners
    assert [c.names for c in fold.rule.constants] == [("w",), ("lo", "hi")]
    code = render.render_all(root, d)["lightnet/auto/optimizers/cpu.py"]
    assert 'w = b.constant(ops[0].name + "_w", ops[0].value("src") * ops[0].params.alpha)' in code
    assert 'lo, hi = b.constants(\n        ops[0].name, ("lo", "hi"), (ops[1].value("src") - 1' in code
    assert "return [*b.create_ops, b.op(like=ops[1]" in code


@pytest.mark.parametrize("names, message", [
    ("b", "'b' is reserved: the generated code uses that name"),
    ("w, w", "'w' is already a name of this rule"),
    ("1w", "expected names separated by commas, found '1w'"),
])
def test_rule_constants_names_are_checked(tmp_path, names, message):
    text = FOLDING["cpu.yaml"].replace("w: ops[0]", f"{names}: ops[0]")
    with pytest.raises(DescriptionError, match=message):
        _load(tmp_path, {**BASE_OPS, **CREATE}, {"cpu.yaml": text})


def test_rule_constants_need_a_create_op(tmp_path):
    with pytest.raises(DescriptionError, match="folded constants need the op create_cpu"):
        _load(tmp_path, BASE_OPS, FOLDING)


def test_ops_doc_lists_what_a_variant_adds(tmp_path):
    """docs/ops.md: an arch variant that takes more than its abstract op gets a
    section with the inputs and params it adds."""
    from generator import render
    root = make_root(tmp_path / "root", BASE_OPS)
    doc = render.render_all(root, model.load(root))["docs/ops.md"]
    section = doc[doc.index("### scale_cpu (cpu)"):]
    assert "| added param |" in section and "| `bias` | `double` | `0` |" in section
    assert "| `alpha` |" not in section.split("## ")[0]  # not repeated from scale
