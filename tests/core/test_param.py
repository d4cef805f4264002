"""lightnet.ir.param: type inference from JSON values and saturating number views."""

import json
import math
import random
import struct

import pytest

from lightnet.ir.param import (FLT_MAX, INT_MAX, INT_MIN, Param, ParamType, saturate_float,
                            saturate_int)

# The limits, written out rather than derived from the module under test.
I32_MAX = 2147483647
I32_MIN = -2147483648
F32_MAX = 3.4028234663852886e38


def test_limits():
    assert (INT_MAX, INT_MIN, FLT_MAX) == (I32_MAX, I32_MIN, F32_MAX)


# Type inference ---------------------------------------------------------------

@pytest.mark.parametrize(
    "value, ptype, stored",
    [
        (None, ParamType.NULL, None),
        ("abc", ParamType.STRING, "abc"),
        ("", ParamType.STRING, ""),
        (3, ParamType.NUMBER, 3.0),
        (-2.5, ParamType.NUMBER, -2.5),
        (True, ParamType.BOOL, True),
        (False, ParamType.BOOL, False),
        ([1, 2.5], ParamType.ARRAY_NUMBER, (1.0, 2.5)),
        ((4, 5), ParamType.ARRAY_NUMBER, (4.0, 5.0)),
        (["a", "b"], ParamType.ARRAY_STRING, ("a", "b")),
        ([True, False], ParamType.ARRAY_BOOL, (True, False)),
        ([], ParamType.ARRAY_NUMBER, ()),
    ],
)
def test_from_value_infers_type(value, ptype, stored):
    p = Param.from_value("x", value)
    assert p.arg_name == "x"
    assert p.ptype is ptype
    assert p.value == stored
    assert type(p.value) is type(stored)
    if ptype is ParamType.NUMBER:
        assert type(p.value) is float
    if ptype is ParamType.ARRAY_NUMBER:
        assert all(type(v) is float for v in p.value)


def test_bool_is_not_a_number():
    assert Param.from_value("x", True).ptype is ParamType.BOOL
    assert not Param.from_value("x", True).matches(ParamType.NUMBER)
    assert not Param.from_value("x", 1).matches(ParamType.BOOL)


@pytest.mark.parametrize("ptype", [t for t in ParamType if t.is_array])
def test_empty_array_matches_every_array_type(ptype):
    assert Param.from_value("x", []).matches(ptype)


@pytest.mark.parametrize("ptype", [t for t in ParamType if not t.is_array])
def test_empty_array_matches_no_scalar_type(ptype):
    assert not Param.from_value("x", []).matches(ptype)


def test_matches_exact_types():
    cases = [(None, ParamType.NULL), ("s", ParamType.STRING), (1, ParamType.NUMBER),
             (True, ParamType.BOOL)]
    for value, ptype in cases:
        p = Param.from_value("x", value)
        assert [t for t in ParamType if p.matches(t)] == [ptype]
    p = Param.from_value("x", [1])
    assert [t for t in ParamType if p.matches(t)] == [ParamType.ARRAY_NUMBER]
    p = Param.from_value("x", ["s"])
    assert [t for t in ParamType if p.matches(t)] == [ParamType.ARRAY_STRING]
    # An empty string is a string, not an empty array.
    assert not Param.from_value("x", "").matches(ParamType.ARRAY_STRING)


@pytest.mark.parametrize(
    "value, message",
    [
        ([1, "a"], "array elements must all have one type"),
        ([1, True], "array elements must all have one type"),
        (["a", False], "array elements must all have one type"),
        ([[1, 2]], "array elements must be strings, numbers or bools"),
        ([None], "array elements must be strings, numbers or bools"),
        ([{}], "array elements must be strings, numbers or bools"),
        ({"a": 1}, "a param value cannot be a dict"),
        (float("nan"), "numbers must be finite, found nan"),
        (float("inf"), "numbers must be finite, found inf"),
        (float("-inf"), "numbers must be finite, found -inf"),
        ([1, float("nan")], "numbers must be finite, found nan"),
        ([float("inf")], "numbers must be finite, found inf"),
        # A JSON integer beyond the double range is as infinite as 1e400.
        (10**400, "numbers must be finite"),
        ([1, -(10**400)], "numbers must be finite"),
    ],
)
def test_from_value_rejects(value, message):
    with pytest.raises(ValueError) as e:
        Param.from_value("x", value)
    assert str(e.value).startswith(message)


def test_param_is_frozen():
    p = Param.from_value("x", 1)
    with pytest.raises(AttributeError):
        p.value = 2.0


def test_paramtype():
    assert [str(t) for t in ParamType] == [
        "null", "string", "number", "bool", "string[]", "number[]", "bool[]"]
    assert [t.is_array for t in ParamType] == [False] * 4 + [True] * 3


# Saturation -------------------------------------------------------------------

@pytest.mark.parametrize(
    "value, expected",
    [
        (0, 0),
        (2.9, 2),
        (-2.9, -2),
        (0.5, 0),
        (-0.5, 0),
        (2147483646.5, 2147483646),
        (2147483647, 2147483647),
        (2147483647.5, 2147483647),
        (2147483648, 2147483647),
        (1e40, 2147483647),
        (1.7e308, 2147483647),
        (-2147483647.9, -2147483647),
        (-2147483648, -2147483648),
        (-2147483649, -2147483648),
        (-1e40, -2147483648),
        (-1.7e308, -2147483648),
    ],
)
def test_value_int_saturates(value, expected):
    p = Param.from_value("x", value)
    assert p.value_int == expected
    assert type(p.value_int) is int
    assert p.value_double == float(value)


@pytest.mark.parametrize(
    "value, expected",
    [
        (1e40, F32_MAX),
        (-1e40, -F32_MAX),
        (3.5e38, F32_MAX),
        (F32_MAX, F32_MAX),
        (1.7e308, F32_MAX),
        (0.1, 0.10000000149011612),
        (-2.9, -2.9000000953674316),
        (1.0, 1.0),
        (1e-50, 0.0),
    ],
)
def test_value_float_saturates(value, expected):
    assert Param.from_value("x", value).value_float == expected


def _ref_int(x):
    """A naive C (int) cast, saturated."""
    if math.isnan(x):
        return 0
    if x >= 2**31:
        return I32_MAX
    if x < -(2**31):
        return I32_MIN
    return math.trunc(x)


def _ref_float(x):
    """Round to float32 through struct; beyond its range, the largest float32."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(F32_MAX, x)


def test_saturation_against_naive_reference():
    rng = random.Random(1234)
    values = [2**31 - 1, 2**31, -(2**31), -(2**31) - 1, F32_MAX, -F32_MAX,
              3.4028235677973366e38, -3.4028235677973366e38, 5e-324, -0.0]
    for _ in range(3000):
        exp = rng.choice([0, 3, 9, 31, 32, 38, 39, 100, 300])
        values.append(rng.uniform(-1, 1) * 10.0 ** rng.uniform(0, exp))
        values.append(float(rng.randint(-(2**33), 2**33)) + rng.choice([0, 0.5, -0.5, 0.25]))
    for x in values:
        assert saturate_int(x) == _ref_int(x), x
        assert saturate_float(x) == _ref_float(x), x


def test_saturate_non_finite():
    assert saturate_int(float("nan")) == 0
    assert saturate_int(float("inf")) == I32_MAX
    assert saturate_int(float("-inf")) == I32_MIN
    assert math.isnan(saturate_float(float("nan")))
    assert saturate_float(float("inf")) == float("inf")


def test_array_views():
    p = Param.from_value("x", [1e40, -2.9, 0.1, -1e40, 7])
    assert p.array_double == (1e40, -2.9, 0.1, -1e40, 7.0)
    assert p.array_int == (I32_MAX, -2, 0, I32_MIN, 7)
    assert p.array_float == (F32_MAX, -2.9000000953674316, 0.10000000149011612, -F32_MAX, 7.0)
    assert all(type(v) is int for v in p.array_int)
    assert isinstance(p.array_double, tuple)


# typed() and to_json() -----------------------------------------------------------

def test_typed_numbers():
    p = Param.from_value("x", 1e40)
    assert p.typed("int") == I32_MAX
    assert p.typed("float") == F32_MAX
    assert p.typed("double") == 1e40
    assert p.typed(None) == 1e40
    p = Param.from_value("x", -2.9)
    assert p.typed("int") == -2
    assert type(p.typed("int")) is int


def test_typed_arrays_and_others():
    p = Param.from_value("x", [2.9, -1e40])
    assert p.typed("int") == (2, I32_MIN)
    assert p.typed("float") == (2.9000000953674316, -F32_MAX)
    assert p.typed("double") == (2.9, -1e40)
    assert isinstance(p.typed("double"), tuple)
    assert Param.from_value("x", []).typed("int") == ()
    assert Param.from_value("x", []).typed(None) == ()
    assert Param.from_value("x", ["a"]).typed(None) == ("a",)
    assert Param.from_value("x", [True]).typed(None) == (True,)
    assert Param.from_value("x", "s").typed(None) == "s"
    assert Param.from_value("x", False).typed(None) is False
    assert Param.from_value("x", None).typed(None) is None


@pytest.mark.parametrize(
    "value, expected, text",
    [
        (3, 3, "3"),
        (3.0, 3, "3"),
        (-0.0, 0, "0"),
        (2.5, 2.5, "2.5"),
        (1e40, 1e40, "1e+40"),
        (2**53, float(2**53), "9007199254740992.0"),
        (2**53 - 1, 2**53 - 1, "9007199254740991"),
        ([1, 2.5, -4], [1, 2.5, -4], "[1, 2.5, -4]"),
        ([], [], "[]"),
        (["a", "b"], ["a", "b"], '["a", "b"]'),
        ([True], [True], "[true]"),
        ("s", "s", '"s"'),
        (True, True, "true"),
        (None, None, "null"),
    ],
)
def test_to_json(value, expected, text):
    p = Param.from_value("x", value)
    out = p.to_json()
    assert out == expected
    assert type(out) is type(expected)
    if isinstance(expected, list):
        assert [type(v) for v in out] == [type(v) for v in expected]
    assert str(p) == text
    # What it writes reads back as the same param.
    assert Param.from_value("x", json.loads(str(p))) == p


def test_a_params_key_tells_apart_what_its_views_tell_apart():
    """Param.key (what lightnet.ir.op.CheckMemo keys checks by): equal for equal params,
    different for -0.0 and 0.0, an int and a float, a bool and a number, an array's type."""
    key = lambda v, arg="p": Param.from_value(arg, v).key  # noqa: E731
    assert key(1.5) == key(1.5) and key([1, 2]) == key([1.0, 2.0])
    assert key(0.0) != key(-0.0)
    assert key([0.0]) != key([-0.0])
    assert key(True) != key(1)
    assert key("1") != key(1)
    assert key(1, "a") != key(1, "b")
    assert Param("p", ParamType.NUMBER, 1).key != Param("p", ParamType.NUMBER, 1.0).key
    assert Param("p", ParamType.ARRAY_NUMBER, ()).key != Param("p", ParamType.ARRAY_BOOL, ()).key
    assert len({key([1, 2]), key([1.0, 2.0]), key([2, 1])}) == 2  # hashable
