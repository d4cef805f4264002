"""lightnet.ir.json_ir: reading, validating and writing the JSON IR."""

import copy
import io
import json

import pytest

from lightnet import Context
from lightnet.errors import LightNetError
from lightnet.ir import json_ir
from lightnet.ir.param import Param, ParamType
from tests.helpers import EXAMPLE, example_doc

def error(doc, label="m.json") -> str:
    with pytest.raises(LightNetError) as e:
        json_ir.parse(doc, label)
    return str(e.value)


def text_error(text, label="m.json") -> str:
    with pytest.raises(LightNetError) as e:
        json_ir.parse(json_ir.parse_json(text, label), label)
    return str(e.value)


def test_example_parses():
    specs, label = json_ir.read(str(EXAMPLE))
    assert label == str(EXAMPLE)
    assert [(s.name, s.optype) for s in specs] == [
        ("create1", "create"), ("slice1", "slice"), ("print1", "print")]
    create, slice_, print_ = specs
    assert create.tensors_in == {} and create.tensors_out == {"dst": "tensor1"}
    assert list(create.params) == ["dtype", "dims", "data", "ran", "from_file"]
    assert create.params["dims"] == Param("dims", ParamType.ARRAY_NUMBER, (2.0, 4.0))
    assert create.params["from_file"] == Param("from_file", ParamType.BOOL, False)
    assert create.params["dtype"] == Param("dtype", ParamType.STRING, "TL_FLOAT")
    assert slice_.tensors_in == {"src": "tensor1"}
    assert slice_.tensors_out == {"dst": "tensor2"}
    assert {a: p.value for a, p in slice_.params.items()} == {"axis": 1.0, "start": 1.0,
                                                             "len": 3.0}
    assert print_.tensors_out == {} and print_.params["msg"].value == "tensor2:"


def test_read_dict_and_stdin(monkeypatch):
    specs, label = json_ir.read(example_doc())
    assert label == "<model>" and len(specs) == 3
    monkeypatch.setattr("sys.stdin", io.StringIO(EXAMPLE.read_text()))
    specs2, label = json_ir.read("-")
    assert label == "<stdin>" and specs2 == specs
    monkeypatch.setattr("sys.stdin", io.StringIO("{"))
    with pytest.raises(LightNetError, match=r"^<stdin>:1:2: invalid JSON: "):
        json_ir.read("-")


def test_optional_lists_and_offset():
    specs = json_ir.parse({"ops": [{"name": "a", "optype": "x"}]}, "m")
    assert specs[0].tensors_in == {} and specs[0].tensors_out == {} and specs[0].params == {}
    # An "offset" in a tensor item (LightNet's compiled IR) is accepted and ignored.
    specs = json_ir.parse({"ops": [{"name": "a", "optype": "x", "tensors_out": [
        {"arg_name": "dst", "name": "t", "offset": 64}]}]}, "m")
    assert specs[0].tensors_out == {"dst": "t"}
    assert json_ir.parse({"ops": []}, "m") == []


@pytest.mark.parametrize(
    "text, message",
    [
        ('{\n  "ops": [\n    ,\n  ]\n}', "m.json:3:5: invalid JSON: Expecting value"),
        ("", "m.json:1:1: invalid JSON: Expecting value"),
        ('{"ops": []', "m.json:1:11: invalid JSON: Expecting ',' delimiter"),
        ('{"ops": [NaN]}', "m.json: invalid JSON: NaN is not a valid JSON number"),
        ('{"ops": [-Infinity]}', "m.json: invalid JSON: -Infinity is not a valid JSON number"),
        ('{"ops": [], "ops": []}', "m.json: invalid JSON: duplicate key 'ops'"),
        ('{"ops": [{"name": "a", "optype": "x", "name": "b"}]}',
         "m.json: invalid JSON: duplicate key 'name'"),
        # 1e400 is valid JSON but no finite number: the param says so.
        ('{"ops": [{"name": "a", "optype": "x", "params": [{"arg_name": "v", "value": 1e400}]}]}',
         "m.json: op 0 ('a'): param 'v': numbers must be finite, found inf"),
        ('{"ops": [{"name": "a", "optype": "x", "params": [{"arg_name": "v", "value": 1' + "0" * 400
         + '}]}]}',
         "m.json: op 0 ('a'): param 'v': numbers must be finite, found an integer beyond the "
         "double range"),
    ],
)
def test_bad_json(text, message):
    assert text_error(text) == message


def op(**fields):
    return {"name": "a", "optype": "x", **fields}


@pytest.mark.parametrize(
    "doc, message",
    [
        ([], "m.json: the model must be a JSON object, found an array"),
        ("x", "m.json: the model must be a JSON object, found a string"),
        (None, "m.json: the model must be a JSON object, found null"),
        ({}, "m.json: the model has no 'ops' field"),
        ({"op": []}, "m.json: the model has no 'ops' field"),
        ({"ops": {}}, "m.json: 'ops' must be an array, found an object"),
        ({"ops": 3}, "m.json: 'ops' must be an array, found a number"),
        ({"ops": [op(), 7]}, "m.json: op 1: expected an object, found a number"),
        ({"ops": [[]]}, "m.json: op 0: expected an object, found an array"),
        ({"ops": [{"optype": "x"}]},
         "m.json: op 0: field 'name': expected a non-empty string, found nothing"),
        ({"ops": [op(name="")]},
         "m.json: op 0: field 'name': expected a non-empty string, found an empty string"),
        ({"ops": [op(name=5)]}, "m.json: op 0: field 'name': expected a non-empty string, "
                                "found a number"),
        ({"ops": [op(), {"name": "b"}]},
         "m.json: op 1 ('b'): field 'optype': expected a non-empty string, found nothing"),
        ({"ops": [op(optype="")]},
         "m.json: op 0 ('a'): field 'optype': expected a non-empty string, found an empty string"),
        ({"ops": [op(optype=None)]},
         "m.json: op 0 ('a'): field 'optype': expected a non-empty string, found null"),
        ({"ops": [op(param=[])]}, "m.json: op 0 ('a'): unknown field 'param'"),
        ({"ops": [op(), op(name="b"), op()]},
         "m.json: op 2: name 'a' is used by an earlier op"),
        ({"ops": [op(tensors_in={})]},
         "m.json: op 0 ('a'): field 'tensors_in': expected an array, found an object"),
        ({"ops": [op(params="x")]},
         "m.json: op 0 ('a'): field 'params': expected an array, found a string"),
        ({"ops": [op(tensors_out=["t"])]},
         "m.json: op 0 ('a'): tensors_out[0]: expected an object, found a string"),
        ({"ops": [op(tensors_in=[{"arg_name": "src", "name": "t", "dtype": "f"}])]},
         "m.json: op 0 ('a'): tensors_in[0]: unknown field 'dtype'"),
        ({"ops": [op(tensors_in=[{"name": "t"}])]},
         "m.json: op 0 ('a'): tensors_in[0]: field 'arg_name': expected a non-empty string, "
         "found nothing"),
        ({"ops": [op(tensors_in=[{"arg_name": 1, "name": "t"}])]},
         "m.json: op 0 ('a'): tensors_in[0]: field 'arg_name': expected a non-empty string, "
         "found a number"),
        ({"ops": [op(tensors_in=[{"arg_name": "src", "name": "t"},
                                 {"arg_name": "src", "name": "u"}])]},
         "m.json: op 0 ('a'): tensors_in[1]: arg_name 'src' is given twice"),
        ({"ops": [op(params=[{"arg_name": "v", "value": 1}, {"arg_name": "v", "value": 2}])]},
         "m.json: op 0 ('a'): params[1]: arg_name 'v' is given twice"),
        ({"ops": [op(tensors_out=[{"arg_name": "dst"}])]},
         "m.json: op 0 ('a'): tensors_out[0] ('dst'): field 'name' is missing"),
        ({"ops": [op(tensors_out=[{"arg_name": "dst", "name": ""}])]},
         "m.json: op 0 ('a'): tensors_out[0] ('dst'): field 'name': expected a non-empty "
         "string, found an empty string"),
        ({"ops": [op(tensors_in=[{"arg_name": "src", "name": ["t"]}])]},
         "m.json: op 0 ('a'): tensors_in[0] ('src'): field 'name': expected a non-empty "
         "string, found an array"),
        ({"ops": [op(params=[{"arg_name": "v"}])]},
         "m.json: op 0 ('a'): params[0] ('v'): field 'value' is missing"),
        ({"ops": [op(params=[{"arg_name": "v", "name": 1}])]},
         "m.json: op 0 ('a'): params[0]: unknown field 'name'"),
        ({"ops": [op(params=[{"arg_name": "v", "value": [1, "a"]}])]},
         "m.json: op 0 ('a'): param 'v': array elements must all have one type"),
        ({"ops": [op(params=[{"arg_name": "v", "value": {"k": 1}}])]},
         "m.json: op 0 ('a'): param 'v': a param value cannot be a dict"),
        ({"ops": [op(params=[{"arg_name": "v", "value": float("nan")}])]},
         "m.json: op 0 ('a'): param 'v': numbers must be finite, found nan"),
    ],
)
def test_bad_document(doc, message):
    assert error(doc) == message


def test_errors_name_the_op_in_a_real_file(tmp_path):
    doc = example_doc()
    doc["ops"][1]["tensors_in"][0].pop("name")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc, indent=4))
    with pytest.raises(LightNetError) as e:
        json_ir.read(str(path))
    assert str(e.value) == f"{path}: op 1 ('slice1'): tensors_in[0] ('src'): field 'name' is missing"


def test_unreadable_files(tmp_path):
    with pytest.raises(LightNetError) as e:
        json_ir.read(str(tmp_path / "nope.json"))
    assert str(e.value) == f"{tmp_path / 'nope.json'}: cannot read the model: No such file or directory"
    with pytest.raises(LightNetError, match="cannot read the model"):
        json_ir.read(str(tmp_path))  # a directory
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"ops": [{"name": "caf\xe9", "optype": "x"}]}')
    with pytest.raises(LightNetError) as e:
        json_ir.read(str(latin))
    assert str(e.value) == f"{latin}: the model is not UTF-8 text"
    bad = tmp_path / "bad.json"
    bad.write_text('{"ops": [\n{"name": "a", "optype": "x"},\n{"name": "b" "optype": "x"}]}')
    with pytest.raises(LightNetError) as e:
        json_ir.read(str(bad))
    assert str(e.value) == f"{bad}:3:14: invalid JSON: Expecting ',' delimiter"


def test_dump_round_trips():
    ctx = Context()
    ctx.init(str(EXAMPLE))
    text = ctx.print()
    assert text.endswith("}\n")
    doc = json.loads(text)
    assert doc == example_doc()  # the example is written the way dump writes it
    specs, _ = json_ir.read(str(EXAMPLE))
    assert json_ir.parse(doc, "x") == specs
    # Integral numbers come back without a fraction; dumping again is stable.
    assert '"value": [\n                        2,\n                        4\n' in text
    ctx2 = Context()
    ctx2.init(doc)
    assert ctx2.print() == text


def test_dump_round_trips_every_param_type():
    values = [None, "s", "", 2.5, -3, 1e40, True, [1, 2.5], ["a"], [False, True], []]
    doc = {"ops": [{"name": "a", "optype": "x", "tensors_in": [{"arg_name": "src", "name": "t"}],
                    "tensors_out": [{"arg_name": "dst", "name": "u"}],
                    "params": [{"arg_name": f"p{i}", "value": v} for i, v in enumerate(values)]}]}
    specs = json_ir.parse(copy.deepcopy(doc), "m")

    class Proto:
        optype = "x"

    from lightnet.ir.op import Op
    ops = [Op(Proto, s.name, s.tensors_in, s.tensors_out, s.params) for s in specs]
    text = json_ir.dump(ops)
    assert json.loads(text) == doc
    assert json_ir.parse(json.loads(text), "m") == specs
