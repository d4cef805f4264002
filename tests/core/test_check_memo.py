"""The memo of op checks by signature (lightnet.ir.op.CheckMemo): an op whose prototype,
args, params and input entries are those of an op checked before is not checked again,
and gets the entries, values and scratch a check would give it; anything that differs
(a param's sign, a layout, the same tensor read twice) is checked anew."""

import math

import numpy as np
import pytest

from lightnet import Context
from lightnet.errors import LightNetError
from lightnet.ir.op import Op
from lightnet.runtime import context as context_module
from tests.irbuild import op


@pytest.fixture
def checked(monkeypatch):
    """The names of the ops checked for real (Op.pre_run), in order."""
    names = []
    real = Op.pre_run

    def pre_run(self, tensors):
        names.append(self.name)
        real(self, tensors)
    monkeypatch.setattr(Op, "pre_run", pre_run)
    return names


def chain(n, shape=(2, 3), funcs=("relu", "sigmoid")):
    ops = [op("in", "input", outs={"dst": "t0"}, dtype="TL_FLOAT", dims=list(shape))]
    for i in range(n):
        ops.append(op(f"f{i}", funcs[i % len(funcs)], {"src": f"t{i}"}, {"dst": f"t{i + 1}"}))
    return {"ops": ops}


def entries(ctx):
    return [(n, tuple(e.__dict__.values())) for n, e in ctx.tensors.items()]


def without_memo(doc, target=None):
    saved = context_module.CheckMemo
    context_module.CheckMemo = lambda records=True: None
    try:
        ctx = Context()
        ctx.init(doc)
        if target:
            ctx.compile(target)
        return ctx
    finally:
        context_module.CheckMemo = saved


def test_ops_of_one_signature_are_checked_once(checked):
    ctx = Context()
    ctx.init(chain(50))
    # f0 reads the input (an entry marked `input`), f2 the first relu reading an op's output.
    assert checked == ["in", "f0", "f1", "f2"]
    # What the memo defined is what checking each op defines.
    plain = without_memo(chain(50))
    assert entries(ctx) == entries(plain)
    assert [(o.values, o.scratch) for o in ctx.ops] == [(o.values, o.scratch) for o in plain.ops]
    assert all(ctx.tensors[f"t{i}"].creator == f"f{i - 1}" for i in range(1, 51))
    # Each op's values are its own dict.
    assert len({id(o.values) for o in ctx.ops}) == len(ctx.ops)
    checked.clear()
    ctx.compile("cpu")
    assert checked == ["in", "f0", "f1", "f2"]
    assert entries(ctx) == entries(without_memo(chain(50), "cpu"))
    ctx.load()
    ctx.set_data("t0", [[-1, 0, 1], [2, -2, 3]])
    ctx.run()
    x = [[-1, 0, 1], [2, -2, 3]]
    for i in range(50):
        x = [[max(v, 0.0) if i % 2 == 0 else 1 / (1 + math.exp(-v)) for v in row]
             for row in x]
    np.testing.assert_allclose(ctx.get_data("t50"), x, rtol=1e-6)


def test_another_shape_dtype_or_param_is_checked_anew(checked):
    ops = [op("a", "input", outs={"dst": "a"}, dtype="TL_FLOAT", dims=[2, 3]),
           op("b", "input", outs={"dst": "b"}, dtype="TL_FLOAT", dims=[3, 2]),
           op("c", "input", outs={"dst": "c"}, dtype="TL_DOUBLE", dims=[2, 3]),
           op("l1", "lrelu", {"src": "a"}, {"dst": "l1"}, negslope=0.0),
           op("l2", "lrelu", {"src": "b"}, {"dst": "l2"}, negslope=0.0),
           op("l3", "lrelu", {"src": "c"}, {"dst": "l3"}, negslope=0.0),
           op("l4", "lrelu", {"src": "a"}, {"dst": "l4"}, negslope=-0.0),
           op("l5", "lrelu", {"src": "a"}, {"dst": "l5"}, negslope=0.0),
           op("s1", "elew", {"src1": "a", "src2": "a"}, {"dst": "s1"}, elew_op="TL_SUM"),
           op("s2", "elew", {"src1": "a", "src2": "l1"}, {"dst": "s2"}, elew_op="TL_SUM")]
    ctx = Context()
    ctx.init({"ops": ops})
    # l5 is l1 again; s2 reads two tensors where s1 reads one twice.
    assert checked == ["a", "b", "c", "l1", "l2", "l3", "l4", "s1", "s2"]
    assert ctx.tensors["l2"].shape == (3, 2)
    assert ctx.tensors["l3"].dtype.np.name == "float64"
    assert math.copysign(1, ctx.ops[6].values["negslope"]) == -1
    assert math.copysign(1, ctx.ops[7].values["negslope"]) == 1


def test_a_failing_check_fails_as_without_the_memo():
    ops = chain(3)["ops"] + [op("again", "relu", {"src": "t0"}, {"dst": "t2"})]
    with pytest.raises(LightNetError) as with_memo:
        Context().init({"ops": ops})
    with pytest.raises(LightNetError) as plain:
        without_memo({"ops": ops})
    assert str(with_memo.value) == str(plain.value)
    assert "already defined by op 'f1'" in str(with_memo.value)
