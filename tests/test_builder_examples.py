"""Every op's builder function (lightnet.nn), exercised by the examples of
every abstract op's description: the model built in Python is the IR the
same example written as JSON is, op for op; it computes the example's
outputs; and an invalid example fails when built with the error loading the
JSON gives (or, for an error the target's op finds, when compiled)."""

import inspect
import re

import numpy as np
import pytest

from lightnet import Context, LightNetError, Session, nn
from lightnet.archs.registry import archs
from lightnet.ir.op import REQUIRED
from lightnet.ir.param import Param
from tests.irbuild import op
from tests.opexamples import create_params, example_array, numbered_examples

ABSTRACT = archs()["none"].ops


def _cases():
    for optype, i, example in numbered_examples():
        if optype in ABSTRACT:
            yield pytest.param(ABSTRACT[optype], example, id=f"{optype}-{i}")


def _params(proto, given: dict) -> dict:
    """Every param of `proto`, in its order, as JSON holds it: the given value, else the
    default."""
    return {p.arg_name: Param.from_value(p.arg_name, given.get(p.arg_name, p.default)).to_json()
            for p in proto.params if p.arg_name in given or p.default is not REQUIRED}


def as_json(proto, example) -> dict:
    """The example as a JSON IR, named as the builder names it: one `create`
    op `in_<arg>` per input, then the op `op`, every param given."""
    create = ABSTRACT["create"]
    ops = [op(f"in_{arg}", "create", {}, {"dst": f"in_{arg}"},
              **_params(create, create_params(value)))
           for arg, value in example["inputs"].items()]
    outs = [t.arg_name for t in proto.tensors_out]
    ops.append(op("op", proto.optype, {a: f"in_{a}" for a in example["inputs"]},
                  {a: "op" if len(outs) == 1 else f"op_{a}" for a in outs},
                  **_params(proto, example["params"])))
    return {"ops": ops}


def build(proto, example):
    """What the builder functions make of the example: the op's result."""
    made = {arg: nn.create(**create_params(value), name=f"in_{arg}")
            for arg, value in example["inputs"].items()}
    args = []
    for t in proto.tensors_in:
        if t.variadic:
            args.append([made[a] for a in sorted((a for a in made if a.startswith(t.arg_name)
                                                  and a[len(t.arg_name):].isdigit()),
                                                 key=lambda a: int(a[len(t.arg_name):]))])
        else:
            args.append(made.get(t.arg_name))
    if proto.optype == "input":
        params = example["params"]
        return nn.input("op", params.get("dims"), params.get("dtype", "TL_FLOAT"))
    return getattr(nn, proto.optype)(*args, **example["params"], name="op")


@pytest.mark.parametrize("proto, example", list(_cases()))
def test_example_through_the_builder(proto, example, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where fprint examples write
    expected = as_json(proto, example)
    missing = [p.arg_name for p in proto.params
               if p.default is REQUIRED and p.arg_name not in example["params"]]
    if example["error"] is not None and missing:
        # A builder function's params are Python's: one not given is Python's error.
        with pytest.raises(TypeError, match=f"missing 1 required keyword-only argument: "
                                            f"'{missing[0]}'"):
            build(proto, example)
        with pytest.raises(LightNetError, match=f"param '{missing[0]}': exists: "):
            Context().init(expected)
        return
    if example["error"] is not None:
        try:
            result = build(proto, example)
        except LightNetError as built:
            message = str(built)
            where = message.split(": ", 1)[0]  # the line calling the builder
            assert re.fullmatch(r".*test_builder_examples\.py:\d+", where), message
            with pytest.raises(LightNetError) as loaded:
                Context().init(expected)
            assert message.split(": ", 1)[1] == str(loaded.value).removeprefix("<model>: ")
            assert example["error"] in message
            return
        # Valid for the abstract op: the target's op refuses it, as it refuses the JSON.
        model = nn.Model(outputs=result if isinstance(result, tuple) else [result])
        messages = []
        for source in (model, expected):
            ctx = Context()
            ctx.init(source)
            with pytest.raises(LightNetError) as compiled:
                ctx.compile("cpu")
            messages.append(str(compiled.value))
        assert messages[0] == messages[1] and example["error"] in messages[0]
        return
    result = build(proto, example)
    model = nn.Model(outputs=result if isinstance(result, tuple) else [result])
    assert model.to_dict() == expected
    session = Session(model, target="cpu")
    outputs = session.run({i.name: np.zeros(i.shape, i.dtype) for i in session.inputs})
    for arg, value in example["outputs"].items():
        name = "op" if len(proto.tensors_out) == 1 else f"op_{arg}"
        _, want = example_array(value)
        np.testing.assert_allclose(outputs[name], want.astype(outputs[name].dtype), rtol=1e-5,
                                   atol=1e-6)


def test_every_abstract_op_has_a_builder_with_its_params_keyword_only():
    for optype, proto in ABSTRACT.items():
        if optype == "input":
            continue
        signature = inspect.signature(getattr(nn, optype))
        kinds = {n: p.kind for n, p in signature.parameters.items()}
        assert [n for n, k in kinds.items() if k is inspect.Parameter.KEYWORD_ONLY] == [
            *(p.arg_name for p in proto.params), "name"], optype
        assert [n for n, k in kinds.items() if k is not inspect.Parameter.KEYWORD_ONLY] == [
            t.arg_name for t in proto.tensors_in], optype
        for p in proto.params:
            default = signature.parameters[p.arg_name].default
            assert (default is inspect.Parameter.empty) == (p.default is REQUIRED), optype
            if p.default is not REQUIRED:
                assert default == p.default, (optype, p.arg_name)
