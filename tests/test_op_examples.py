"""Every `examples` entry of every op description, run through the full runtime.

Each example becomes a model: one `create` op per input, then the op under
test; it is compiled for cpu, loaded and run, and each output is compared
with the example's expected values (or the expected error is matched).
"""

import numpy as np
import pytest

from lightnet import Context, LightNetError
from lightnet.archs.registry import get_proto
from tests.irbuild import op
from tests.opexamples import create_params, example_array, numbered_examples, op_examples


def _cases():
    for optype, i, example in numbered_examples():
        yield pytest.param(get_proto(optype), example, id=f"{optype}-{i}")


def _model(proto, example):
    ops = [op(f"create_{arg}", "create", outs={"dst": f"in_{arg}"}, **create_params(value))
           for arg, value in example["inputs"].items()]
    outs = [t.arg_name for t in proto.tensors_out]
    ops.append(op("op", proto.optype, {arg: f"in_{arg}" for arg in example["inputs"]},
                  {a: f"out_{a}" for a in outs}, **example["params"]))
    return {"ops": ops}


@pytest.mark.parametrize("proto, example", list(_cases()))
def test_example(proto, example):
    ctx = Context()
    model = _model(proto, example)
    if example["error"] is not None:
        with pytest.raises(LightNetError) as info:
            ctx.init(model)
            ctx.compile("cpu")
        assert example["error"] in str(info.value)
        return
    ctx.init(model)
    ctx.compile("cpu")
    ctx.load()
    ctx.run()
    for arg, expected in example["outputs"].items():
        _, expected = example_array(expected)
        got = ctx.get_data(f"out_{arg}")
        assert got.shape == expected.shape, f"output '{arg}' shape"
        np.testing.assert_allclose(got, expected.astype(got.dtype), rtol=1e-5, atol=1e-6)


def test_every_abstract_op_has_examples_and_a_cpu_variant():
    from lightnet.archs.registry import archs

    cpu = archs()["cpu"]
    for optype in archs()["none"].ops:
        examples = [e for o, e in op_examples() if o == optype]
        assert examples, f"{optype} has no examples"
        assert any(e["error"] for e in examples), f"{optype} has no invalid example"
        assert optype in cpu.expanders or f"{optype}_cpu" in cpu.ops, (
            f"{optype} cannot be lowered to cpu")
