"""lightnet.ir.checks: every check's message, through real models and a hand-made op."""

import pytest

from lightnet import Context
from lightnet.errors import CheckError, LightNetError
from lightnet.ir.checks import Checker, found
from lightnet.ir.op import Op, OpProto, ParamArg, TensorArg
from lightnet.ir.param import REQUIRED
from lightnet.ir.param import Param, ParamType
from lightnet.ir.tensor import DType, MemType, TensorEntry, TensorTable
from tests.irbuild import create, slice_

# Through real models -----------------------------------------------------------


def init_error(*ops) -> str:
    ctx = Context()
    with pytest.raises(LightNetError) as e:
        ctx.init({"ops": list(ops)})
    message = str(e.value)
    assert message.startswith("<model>: ")
    # The check's own error is kept as the cause, with its parts.
    assert isinstance(e.value.__cause__, CheckError)
    assert message == "<model>: " + str(e.value.__cause__)
    return message[len("<model>: "):]


def test_valid_model_passes():
    ctx = Context()
    ctx.init({"ops": [create(), slice_()]})
    assert ctx.tensors["tensor2"].shape == (2, 3)


def test_slice_axis_lt_ndim():
    assert init_error(create(), slice_(axis=2)) == (
        "op 'slice1' (slice): param 'axis': lt: expected axis < src.ndim (2), found 2")


def test_check_error_fields():
    ctx = Context()
    with pytest.raises(LightNetError) as e:
        ctx.init({"ops": [create(), slice_(axis=2)]})
    cause = e.value.__cause__
    assert (cause.op_name, cause.optype, cause.arg, cause.rule, cause.expected, cause.found) == (
        "slice1", "slice", "param 'axis'", "lt", "axis < src.ndim (2)", 2)


@pytest.mark.parametrize(
    "ops, message",
    [
        # ge with a literal bound shows no value in parentheses.
        ([create(), slice_(axis=-1)], "op 'slice1' (slice): param 'axis': ge: expected axis >= 0, found -1"),
        ([create(), slice_(start=4)],
         "op 'slice1' (slice): param 'start': lt: expected start < src.shape[axis] (4), found 4"),
        ([create(), slice_(len=0)], "op 'slice1' (slice): param 'len': gt: expected len > 0, found 0"),
        # Saturated values are what the checks see.
        ([create(), slice_(axis=-1e40)],
         "op 'slice1' (slice): param 'axis': ge: expected axis >= 0, found -2147483648"),
        ([create(), slice_(len=2.9, start=2)], None),  # 2 + 2 <= 4: int(2.9) is 2
        # satisfy: the expression, its message, and every value it read.
        ([create(), slice_(start=2, len=3)],
         "op 'slice1' (slice): param 'len': check: expected start + len <= src.shape[axis] "
         "(the slice ends inside the axis), found src=float32[2, 4], axis=1, start=2, len=3"),
        ([create(dims=[2, 0])],
         "op 'create1' (create): param 'dims': gt: expected every dims[i] > 0, found dims[1] = 0"),
        ([create(dims=[])],
         "op 'create1' (create): param 'dims': check: expected len(dims) >= 1 "
         "(a tensor has at least one dimension), found dims=()"),
        ([create(dims=[2, 2], data=[1, 2, 3, 4, 5])],
         "op 'create1' (create): param 'data': check: expected len(data) <= math.prod(dims) "
         "(data gives at most every element), found dims=(2, 2), data=(1.0, 2.0, 3.0, 4.0, 5.0)"),
        ([create(ran=[0])],
         "op 'create1' (create): param 'ran': len: expected 2 elements, found 1 ([0.0])"),
        ([create(ran=[3, 1])],
         "op 'create1' (create): param 'ran': check: expected ran[0] <= ran[1] "
         "(the range is [low, high]), found ran=(3.0, 1.0)"),
        ([create(dtype="TL_HALF")],
         "op 'create1' (create): param 'dtype': choices: expected one of TL_DOUBLE, TL_FLOAT, "
         "TL_INT32, TL_INT16, TL_INT8, TL_UINT32, TL_UINT16, TL_UINT8, TL_BOOL, found 'TL_HALF'"),
        # exists: a missing param, a missing input.
        ([create(), slice_(len=...)],
         "op 'slice1' (slice): param 'len': exists: expected a number param, found none given"),
        ([create(), {"name": "print1", "optype": "print",
                     "tensors_in": [{"arg_name": "src", "name": "tensor1"}]}],
         "op 'print1' (print): param 'msg': exists: expected a string param, found none given"),
        ([create(), slice_(tensors_in=[])],
         "op 'slice1' (slice): tensor_in 'src': exists: expected the input to be given, "
         "found no such input"),
        # type: a string given to a number param, an array to a string, a number to a bool.
        ([create(), slice_(axis="1")],
         "op 'slice1' (slice): param 'axis': type: expected a number, found a string \"1\""),
        ([create(dtype=["TL_FLOAT"])],
         "op 'create1' (create): param 'dtype': type: expected a string, found a string[] [\"TL_FLOAT\"]"),
        ([create(from_file=1)],
         "op 'create1' (create): param 'from_file': type: expected a bool, found a number 1"),
        ([create(dims=None)],
         "op 'create1' (create): param 'dims': type: expected a number[], found a null null"),
        # unknown args.
        ([create(), slice_(step=1)],
         "op 'slice1' (slice): param 'step': known: expected one of axis, start, len, "
         "found an unknown param"),
        ([create(), slice_(tensors_in=[{"arg_name": "src", "name": "tensor1"},
                                       {"arg_name": "idx", "name": "tensor1"}])],
         "op 'slice1' (slice): tensor_in 'idx': known: expected one of src, found an unknown input"),
        ([{**create(), "tensors_in": [{"arg_name": "src", "name": "x"}]}],
         "op 'create1' (create): tensor_in 'src': known: expected none, found an unknown input"),
        ([create(), {**slice_(), "tensors_out": [{"arg_name": "dst", "name": "t2"},
                                                 {"arg_name": "aux", "name": "t3"}]}],
         "op 'slice1' (slice): tensor_out 'aux': known: expected one of dst, "
         "found an unknown output"),
        # defined / not_defined.
        ([create(), slice_(src="tensor9")],
         "op 'slice1' (slice): tensor_in 'src': defined: expected tensor 'tensor9' defined by "
         "an earlier op, found no such tensor"),
        ([create(), slice_(dst="tensor1")],
         "op 'slice1' (slice): tensor_out 'dst': not_defined: expected tensor 'tensor1' to be "
         "new, found it is already defined by op 'create1'"),
        ([create(), create(name="create2")],
         "op 'create2' (create): tensor_out 'dst': not_defined: expected tensor 'tensor1' to be "
         "new, found it is already defined by op 'create1'"),
        ([{**create(), "tensors_out": []}],
         "op 'create1' (create): tensor_out 'dst': exists: expected the output to be given, "
         "found no such output"),
    ],
)
def test_model_check_messages(ops, message):
    if message is None:
        Context().init({"ops": ops})
    else:
        assert init_error(*ops) == message


def test_input_read_before_creation_is_not_defined():
    # The slice comes first: its input is created only later.
    assert init_error(slice_(), create()) == (
        "op 'slice1' (slice): tensor_in 'src': defined: expected tensor 'tensor1' defined by "
        "an earlier op, found no such tensor")


# Checker on a hand-made op ------------------------------------------------------------


def _noop(op, tensors):
    pass


PROTO = OpProto(
    optype="myop", arch="cpu", mtype=MemType.CPU, source="test",
    tensors_in=(TensorArg("src"), TensorArg("opt", optional=True),
                TensorArg("in", variadic=True, min=2)),
    tensors_out=(TensorArg("dst"), TensorArg("aux", optional=True)),
    params=(ParamArg("axis", ParamType.NUMBER), ParamArg("mode", ParamType.STRING, "a"),
            ParamArg("dims", ParamType.ARRAY_NUMBER)),
    pre_run=_noop,
)


def make(tensors_in=None, tensors_out=None, params=None, table=None):
    op = Op(PROTO, "o1", tensors_in or {}, tensors_out or {},
            {k: Param.from_value(k, v) for k, v in (params or {}).items()})
    tensors = TensorTable(table or {})
    return Checker(op, tensors), tensors


def entry(name, shape=(2, 3), dtype=DType.TL_FLOAT, **kw):
    return TensorEntry(name, dtype, shape, kw.pop("creator", "c1"), **kw)


def fails(call, message):
    with pytest.raises(CheckError) as e:
        call()
    assert str(e.value) == "op 'o1' (myop): " + message
    return e.value


def test_tensor_in():
    t1 = entry("t1")
    ck, _ = make({"src": "t1", "opt": "t9"}, table={"t1": t1})
    assert ck.tensor_in("src") is t1
    fails(lambda: ck.tensor_in("opt", optional=True),
          "tensor_in 'opt': defined: expected tensor 't9' defined by an earlier op, "
          "found no such tensor")
    ck, _ = make({"src": "t1"}, table={"t1": t1})
    assert ck.tensor_in("opt", optional=True) is None
    fails(lambda: ck.tensor_in("opt"),
          "tensor_in 'opt': exists: expected the input to be given, found no such input")


def test_tensors_in_variadic():
    table = {n: entry(n) for n in ("a", "b", "c")}
    ck, _ = make({"in1": "a", "in2": "b", "in3": "c", "in5": "a"}, table=table)
    assert ck.tensors_in_variadic("in", 2) == [table["a"], table["b"], table["c"]]
    fails(lambda: ck.tensors_in_variadic("in", 4),
          "tensor_in 'in1..': len_ge: expected at least 4 inputs, found 3")
    ck, _ = make({"in1": "a", "in2": "zz"}, table=table)
    fails(lambda: ck.tensors_in_variadic("in", 1),
          "tensor_in 'in2': defined: expected tensor 'zz' defined by an earlier op, "
          "found no such tensor")
    ck, _ = make({"in2": "a"}, table=table)  # numbering starts at 1
    fails(lambda: ck.tensors_in_variadic("in", 1),
          "tensor_in 'in1..': len_ge: expected at least 1 inputs, found 0")


def test_tensor_out():
    ck, _ = make(tensors_out={"dst": "t2"}, table={"t1": entry("t1")})
    assert ck.tensor_out("dst") == "t2"
    assert ck.tensor_out("aux", optional=True) is None
    fails(lambda: ck.tensor_out("aux"),
          "tensor_out 'aux': exists: expected the output to be given, found no such output")
    ck, _ = make(tensors_out={"dst": "t1"}, table={"t1": entry("t1", creator="maker")})
    fails(lambda: ck.tensor_out("dst"),
          "tensor_out 'dst': not_defined: expected tensor 't1' to be new, "
          "found it is already defined by op 'maker'")


def test_no_unknown_args():
    ck, _ = make({"src": "a", "opt": "b", "in1": "c", "in2": "d"}, {"dst": "e", "aux": "f"},
                 {"axis": 1, "mode": "b", "dims": [1]})
    ck.no_unknown_args()
    expected_ins = "one of src, opt, in1..inN"
    for ins, bad in [({"src": "a", "x": "b"}, "x"), ({"in1": "a", "in3": "b"}, "in3"),
                     ({"in": "a"}, "in"), ({"in0": "a"}, "in0")]:
        ck, _ = make(ins)
        fails(ck.no_unknown_args,
              f"tensor_in '{bad}': known: expected {expected_ins}, found an unknown input")
    ck, _ = make({"src": "a"}, {"dst": "b", "out2": "c"})
    fails(ck.no_unknown_args,
          "tensor_out 'out2': known: expected one of dst, aux, found an unknown output")
    ck, _ = make({"src": "a"}, params={"axis": 1, "zz": 2})
    fails(ck.no_unknown_args,
          "param 'zz': known: expected one of axis, mode, dims, found an unknown param")


def test_param():
    ck, _ = make(params={"axis": 2.9, "dims": [1e40, -2.5]})
    assert ck.param("axis", ParamType.NUMBER, "int") == 2
    assert ck.param("axis", ParamType.NUMBER, "double") == 2.9
    assert ck.param("dims", ParamType.ARRAY_NUMBER, "int") == (2147483647, -2)
    assert ck.param("mode", ParamType.STRING, default="a") == "a"
    assert ck.param("mode", ParamType.STRING, default=None) is None
    fails(lambda: ck.param("mode", ParamType.STRING),
          "param 'mode': exists: expected a string param, found none given")
    fails(lambda: ck.param("mode", ParamType.ARRAY_BOOL, default=REQUIRED),
          "param 'mode': exists: expected a bool[] param, found none given")
    fails(lambda: ck.param("axis", ParamType.STRING),
          "param 'axis': type: expected a string, found a number 2.9")
    ck, _ = make(params={"axis": "x", "dims": []})
    fails(lambda: ck.param("axis", ParamType.NUMBER, "int"),
          "param 'axis': type: expected a number, found a string \"x\"")
    assert ck.param("dims", ParamType.ARRAY_STRING) == ()
    fails(lambda: ck.param("dims", ParamType.NUMBER),
          "param 'dims': type: expected a number, found a number[] []")


@pytest.mark.parametrize(
    "value, rule, bound, text, message",
    [
        (-1, "ge", 0, "0", "ge: expected axis >= 0, found -1"),
        (0, "gt", 0, "0", "gt: expected axis > 0, found 0"),
        (3, "lt", 3, "src.ndim", "lt: expected axis < src.ndim (3), found 3"),
        (4, "le", 3, "n", "le: expected axis <= n (3), found 4"),
        (1, "eq", 2, "2", "eq: expected axis == 2, found 1"),
        (2, "ne", 2, "k", "ne: expected axis != k (2), found 2"),
        (0.5, "ge", 1.0, "1.0", "ge: expected axis >= 1.0, found 0.5"),
    ],
)
def test_compare(value, rule, bound, text, message):
    ck, _ = make()
    fails(lambda: ck.compare("axis", value, rule, bound, text), "param 'axis': " + message)


@pytest.mark.parametrize(
    "value, rule, bound",
    [(0, "ge", 0), (1, "gt", 0), (2, "lt", 3), (3, "le", 3), (2, "eq", 2), (1, "ne", 2)],
)
def test_compare_passes(value, rule, bound):
    ck, _ = make()
    ck.compare("axis", value, rule, bound, str(bound))
    ck.compare_each("axis", (value, value), rule, bound, str(bound))


def test_compare_each_names_first_bad_element():
    ck, _ = make()
    fails(lambda: ck.compare_each("dims", (3, 1, 0, -1), "gt", 1, "1"),
          "param 'dims': gt: expected every dims[i] > 1, found dims[1] = 1")
    fails(lambda: ck.compare_each("dims", (3, 9), "le", 4, "src.ndim"),
          "param 'dims': le: expected every dims[i] <= src.ndim (4), found dims[1] = 9")
    ck.compare_each("dims", (), "gt", 0, "0")


def test_array_len():
    ck, _ = make()
    ck.array_len("dims", (1, 2), 2, "2")
    fails(lambda: ck.array_len("dims", (1.0,), 2, "2"),
          "param 'dims': len: expected 2 elements, found 1 ([1.0])")
    fails(lambda: ck.array_len("dims", (4, 5, 6), 2, "src.ndim"),
          "param 'dims': len: expected src.ndim (2) elements, found 3 ([4, 5, 6])")


def test_one_of():
    ck, _ = make()
    ck.one_of("mode", "b", ("a", "b"))
    fails(lambda: ck.one_of("mode", "c", ("a", "b")),
          "param 'mode': choices: expected one of a, b, found 'c'")
    ck.each_one_of("mode", ("a", "a", "b"), ("a", "b"))
    fails(lambda: ck.each_one_of("mode", ("a", "c", "d"), ("a", "b")),
          "param 'mode': choices: expected every element one of a, b, found mode[1] = 'c'")


def test_satisfy():
    ck, _ = make()
    src = entry("s", (1, 4))
    ck.satisfy("param 'len'", True, "x", None, lambda: pytest.fail("found is rendered lazily"))
    fails(lambda: ck.satisfy("param 'len'", False, "start + len <= src.shape[axis]",
                             "the slice ends inside the axis",
                             lambda: found(src=src, start=2, len=3)),
          "param 'len': check: expected start + len <= src.shape[axis] (the slice ends inside "
          "the axis), found src=float32[1, 4], start=2, len=3")
    fails(lambda: ck.satisfy("op", False, "a < b", None, "a=1, b=0"),
          "op: check: expected a < b, found a=1, b=0")


def test_found_rendering():
    a, b = entry("a", (2,)), entry("b", (3,), DType.TL_INT8)
    assert found(xs=[a, b], mode="m", k=2, t=(1, 2), n=None) == (
        "xs=[float32[2], int8[3]], mode='m', k=2, t=(1, 2), n=None")
    assert found() == ""


def test_tensor_property_checks():
    ck, _ = make()
    e = entry("t1", (1, 2, 3))
    ck.ndim("src", e, 3)
    ck.ndim("src", None, 7)  # an absent optional input: nothing to check
    fails(lambda: ck.ndim("src", e, 2),
          "tensor_in 'src': ndim: expected 2 dimensions, found 3 (float32[1, 2, 3])")
    ck.len("src", e, 6, "6")
    fails(lambda: ck.len("src", e, 8, "n"),
          "tensor_in 'src': len: expected n (8) elements, found 6 (float32[1, 2, 3])")
    fails(lambda: ck.len("src", e, 8, "8"),
          "tensor_in 'src': len: expected 8 elements, found 6 (float32[1, 2, 3])")
    ck.dtype("src", e, (DType.TL_DOUBLE, DType.TL_FLOAT))
    i8 = entry("t2", (3,), DType.TL_INT8)
    fails(lambda: ck.dtype("src", i8, (DType.TL_FLOAT, DType.TL_DOUBLE)),
          "tensor_in 'src': dtype: expected TL_FLOAT or TL_DOUBLE, found TL_INT8 (int8[3])")
    ck.mtype("src", e, MemType.CPU)
    fails(lambda: ck.mtype("src", entry("t3", mtype=MemType.NONE), MemType.CPU),
          "tensor_in 'src': mtype: expected memory type cpu, found none")
    other = entry("b", (2, 3))
    ck.same_shape("src", entry("x", (2, 3)), "b", other)
    ck.same_shape("src", e, "b", None)
    fails(lambda: ck.same_shape("src", entry("x", (3, 2)), "b", other),
          "tensor_in 'src': sameshape: expected the shape of 'b' (2, 3), found (3, 2)")
    ck.same_type("src", e, "b", other)
    fails(lambda: ck.same_type("src", i8, "b", other),
          "tensor_in 'src': sametype: expected the dtype of 'b' (TL_FLOAT), found TL_INT8")
    st = entry("w", static=True)
    ck.static("src", st, True)
    ck.static("src", e, False)
    fails(lambda: ck.static("src", e, True),
          "tensor_in 'src': static: expected a static tensor (weights or a constant), "
          "found 't1' is not static")
    fails(lambda: ck.static("src", st, False),
          "tensor_in 'src': static: expected a non-static tensor, found 'w' is static")


def test_variadic_property_checks_name_each_input():
    ck, _ = make()
    entries = [entry("a", (2,)), entry("b", (2,)), entry("c", (2, 1))]
    ck.ndim("in", entries[:2], 1)
    fails(lambda: ck.ndim("in", entries, 1),
          "tensor_in 'in3': ndim: expected 1 dimensions, found 2 (float32[2, 1])")
    fails(lambda: ck.dtype("in", [entries[0], entry("d", (2,), DType.TL_UINT8)], (DType.TL_FLOAT,)),
          "tensor_in 'in2': dtype: expected TL_FLOAT, found TL_UINT8 (uint8[2])")
    fails(lambda: ck.same_shape("in", entries, "a", entries[0]),
          "tensor_in 'in3': sameshape: expected the shape of 'a' (2,), found (2, 1)")


def test_define():
    ck, tensors = make({"src": "t1"}, {"dst": "t2", "aux": "t3"}, table={"t1": entry("t1")})
    e = ck.define("dst", "TL_INT16", [2.0, 3], static=True, from_file=True)
    assert tensors["t2"] is e
    assert (e.name, e.dtype, e.shape, e.creator, e.mtype, e.static, e.owner, e.from_file) == (
        "t2", DType.TL_INT16, (2, 3), "o1", MemType.CPU, True, None, True)
    assert all(type(d) is int for d in e.shape)
    e = ck.define("aux", DType.TL_FLOAT, (6,), owner="src")
    assert (e.owner, e.static, e.from_file) == ("t1", False, False)


def test_define_errors():
    ck, tensors = make(tensors_out={"dst": "t2"})
    fails(lambda: ck.define("dst", 3, (2,)), "tensor_out 'dst': dtype: expected a dtype, found 3")
    fails(lambda: ck.define("dst", DType.TL_FLOAT, None),
          "tensor_out 'dst': shape: expected a sequence of integers, found None")
    fails(lambda: ck.define("dst", DType.TL_FLOAT, ("a",)),
          "tensor_out 'dst': shape: expected a sequence of integers, found ('a',)")
    fails(lambda: ck.define("dst", DType.TL_FLOAT, (2, -1)),
          "tensor_out 'dst': shape: expected dimensions >= 0, found (2, -1)")
    with pytest.raises(LightNetError, match="unknown dtype 'TL_HALF'"):
        ck.define("dst", "TL_HALF", (2,))
    assert "t2" not in tensors
