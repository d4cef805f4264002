"""The compile pipeline's passes, driven by hand-made architectures: what
generated optimizer functions do (Builder, OpView), and how passes fail."""

import numpy as np
import pytest

from lightnet import Context, LightNetError
from lightnet.archs.registry import Arch, archs
from lightnet.compiler.rewrites import combine, expand
from lightnet.compiler.rules import Builder, Combiner, OpView
from tests.irbuild import ModelBuilder


def model():
    m = ModelBuilder()
    x = m.input("x", (2, 3))
    m.op("relu", {"src": x}, name="r")
    return m.to_dict()


def cpu_with(expanders=None, combiners=()):
    cpu = archs()["cpu"]
    return Arch("cpu", cpu.ops, {**cpu.expanders, **(expanders or {})}, tuple(combiners))


def test_an_op_no_rule_matches_is_an_error_naming_op_and_target():
    ctx = Context()
    ctx.init(model())
    with pytest.raises(LightNetError, match=r"op 'r' \(relu\) cannot be compiled for target "
                                            r"'cpu': no expander rule matches it"):
        expand(ctx, cpu_with({"relu": lambda ctx, op: None}))


def test_an_op_without_a_rule_is_lowered_to_the_arch_variant():
    ctx = Context()
    ctx.init(model())
    expand(ctx, cpu_with())
    assert [(o.name, o.optype) for o in ctx.ops] == [("x", "input_cpu"), ("r", "relu_cpu")]


def test_what_an_arch_does_not_take_falls_back_to_its_fallback_arch():
    cpu = archs()["cpu"]
    relu_only = Arch("mini", {"relu_mini": cpu.ops["relu_cpu"]}, fallback="cpu")
    ctx = Context()
    ctx.init(model())
    expand(ctx, relu_only)  # relu_mini is relu_cpu's prototype under another name
    assert [(o.name, o.optype) for o in ctx.ops] == [("x", "input_cpu"), ("r", "relu_cpu")]
    # without a fallback, the input has nowhere to go
    ctx = Context()
    ctx.init(model())
    with pytest.raises(LightNetError, match=r"op 'x' \(input\) cannot be compiled for target "
                                            r"'mini'"):
        expand(ctx, Arch("mini", relu_only.ops))


def test_an_expander_may_emit_several_ops_with_new_tensors():
    def relu_twice(ctx, target):
        op, b = OpView(ctx, target), Builder(ctx, "cpu")
        tmp = b.tensor("tmp")
        return [b.op("relu_cpu", like=op, outs={"dst": tmp}),
                b.op("relu_cpu", like=op, ins={"src": tmp})]

    ctx = Context()
    ctx.init(model())
    expand(ctx, cpu_with({"relu": relu_twice}))
    assert [(o.name, o.tensors_in["src"] if o.tensors_in else None) for o in ctx.ops] == [
        ("x", None), ("r", "x"), ("relu_cpu1", "tmp1")]
    ctx.check()
    ctx.load()
    ctx.set_data("x", [[-1, 2, -3], [4, -5, 6]])
    ctx.run()
    np.testing.assert_array_equal(ctx.get_data("r"), [[0, 2, 0], [4, 0, 6]])


def test_a_plain_lowering_is_the_op_a_builder_makes_like_it():
    ctx = Context()
    ctx.init(model())
    op = ctx.ops[1]
    plain = OpView(ctx, op).as_optype("relu_cpu")
    built = Builder(ctx, "cpu").op("relu_cpu", like=OpView(ctx, op))
    for new in (plain, built):
        assert (new.proto, new.name, new.tensors_in, new.tensors_out, new.params) == (
            archs()["cpu"].ops["relu_cpu"], "r", {"src": "x"}, {"dst": "r"}, {})
        # its own dicts: a pass changing the new op leaves the old one as it was
        assert new.tensors_in is not op.tensors_in and new.params is not op.params


def test_a_rule_removing_an_op_whose_output_is_read_fails_clearly():
    m = ModelBuilder()
    x = m.input("x", (2,))
    y = m.op("forward", {"src": x}, name="f")
    m.op("relu", {"src": y}, name="r")
    ctx = Context()
    ctx.init(m.to_dict())
    with pytest.raises(LightNetError, match="a pass removed tensor 'f', which op 'r' still reads"):
        expand(ctx, cpu_with({"forward": lambda ctx, op: []}))


def test_combiners_that_undo_each_other_are_stopped():
    def flip(optype):
        return lambda ctx, window: [Builder(ctx, "cpu").op(optype, like=window[0])]

    ctx = Context()
    ctx.init(model())
    arch = cpu_with(combiners=[Combiner("a", ("relu_cpu",), flip("sigmoid_cpu")),
                               Combiner("b", ("sigmoid_cpu",), flip("relu_cpu"))])
    expand(ctx, arch)
    with pytest.raises(LightNetError, match="did not settle after 100 rounds"):
        combine(ctx, arch)


def test_a_pass_may_not_change_a_tensor_later_ops_read():
    m = ModelBuilder()
    x = m.input("x", (2, 3))
    y = m.op("relu", {"src": x}, name="r")
    m.op("relu", {"src": y}, name="s")
    ctx = Context()
    ctx.init(m.to_dict())

    def transposed(ctx, target):
        b = Builder(ctx, "cpu")
        return [b.op("transpose_cpu", like=target, params={"axes": [1, 0]})]

    with pytest.raises(LightNetError, match=r"changed tensor 'r' from float32\[2, 3\] "
                                            r"to float32\[3, 2\]"):
        expand(ctx, cpu_with({"relu": transposed}))


def test_dead_constants_go_in_chains_but_former_outputs_stay():
    """Weights nobody reads any more are removed, and then what made them from
    other weights (bn2scale_wts), and then those; a weight that was a model
    output before compiling stays."""
    from lightnet.compiler.rewrites import remove_dead_constants

    m = ModelBuilder()
    ins = {f"src_{k}": m.weight(k, [3], 0.5, 1.5) for k in ("mean", "var", "scale", "offset")}
    outs = m.op("bn2scale_wts", ins, outs=("dst_scale", "dst_shift", "dst_power"))
    for name in outs:
        m.op("print", {"src": name}, outs=(), msg=name)
    unread = m.weight("unread", [2])
    ctx = Context()
    ctx.init(m.to_dict())
    ctx.compile("cpu")
    before = ctx.outputs
    assert before == [unread]
    prints = [i for i, op in enumerate(ctx.ops) if op.optype == "print_cpu"]
    ctx.remove_ops(prints[0], len(prints))  # as if a rule had folded what they read
    remove_dead_constants(ctx, before)
    assert [op.optype for op in ctx.ops] == ["create_cpu"]
    assert list(ctx.tensors) == [unread]


@pytest.mark.parametrize("view", ["read before", "read after", "a model output"])
def test_an_op_may_overwrite_a_tensor_only_when_no_view_of_it_is_read_later(view):
    m = ModelBuilder()
    x = m.input("x", (2, 3))
    a = m.op("relu", {"src": x}, name="a")
    v = m.op("reshape", {"src": a}, name="v", dims=[3, 2])  # a view of a
    if view == "read before":
        m.op("relu", {"src": v}, name="r")
    c = m.op("relu", {"src": x}, name="c")
    m.op("elew", {"src1": c, "src2": a}, name="s", elew_op="TL_SUM")
    if view == "read after":
        m.op("relu", {"src": v}, name="r")
    ctx = Context()
    ctx.init(m.to_dict())
    c_op = next(op for op in ctx.ops if op.name == "c")
    # c adding a in place (writing a's memory) would change what r reads through v, or
    # the model's output v.
    assert OpView(ctx, c_op).may_overwrite("a") is (view == "read before")


def test_a_rule_sees_the_op_making_an_input_with_its_params():
    """OpView.made_by: the producer of an input as a rule sees it (its optype, params and
    tensors), chained one op back at a time."""
    m = ModelBuilder()
    x = m.input("x", (2, 6))
    s = m.op("slice", {"src": x}, name="s", axis=1, start=2, len=3)
    m.op("reshape", {"src": s}, name="v", dims=[3, 2])
    ctx = Context()
    ctx.init(m.to_dict())
    v_op = next(op for op in ctx.ops if op.name == "v")
    made = OpView(ctx, v_op).made_by("src")
    assert (made.name, made.optype) == ("s", "slice")
    assert (made.params.axis, made.params.start, made.params.len) == (1, 2, 3)
    assert made.ins.src.shape == (2, 6) and made.outs.dst.shape == (2, 3)
    assert made.made_by("src").optype == "input"
