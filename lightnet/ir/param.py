"""Operator params: their types and LightNet's saturating number semantics.

A number param keeps its double value and derives float and int views from it,
each saturated to its type's range (1e40 as an int is 2147483647, not garbage).
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from lightnet.ir import limits

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
FLT_MAX = float(np.finfo(np.float32).max)
REQUIRED = object()  # the default of a param that has none


class ParamType(enum.Enum):
    NULL = "null"
    STRING = "string"
    NUMBER = "number"
    BOOL = "bool"
    ARRAY_STRING = "string[]"
    ARRAY_NUMBER = "number[]"
    ARRAY_BOOL = "bool[]"

    @property
    def is_array(self) -> bool:
        return self.value.endswith("[]")

    def __str__(self) -> str:
        return self.value


def saturate_int(x: float) -> int:
    """C's (int) cast, saturated at the int32 range instead of overflowing."""
    if math.isnan(x):
        return 0
    if x >= INT_MAX:
        return INT_MAX
    if x <= INT_MIN:
        return INT_MIN
    return int(x)


def saturate_float(x: float) -> float:
    """The float32 nearest to `x`, clamped to the largest finite float32."""
    if math.isnan(x) or math.isinf(x):
        return x
    return float(np.float32(min(max(x, -FLT_MAX), FLT_MAX)))


_SCALAR_TYPES = ((bool, ParamType.BOOL), (str, ParamType.STRING), ((int, float), ParamType.NUMBER))
_ARRAY_OF = {
    ParamType.BOOL: ParamType.ARRAY_BOOL,
    ParamType.STRING: ParamType.ARRAY_STRING,
    ParamType.NUMBER: ParamType.ARRAY_NUMBER,
}


def _scalar_type(value) -> ParamType | None:
    for python_type, ptype in _SCALAR_TYPES:
        if isinstance(value, python_type):
            return ptype
    return None


@dataclass(frozen=True)
class Param:
    """One param of an op: its arg name, type and value.

    Numbers are stored as Python floats (the double value); arrays as tuples.
    An empty array matches every array type, since JSON cannot say which.
    """

    arg_name: str
    ptype: ParamType
    value: object

    @classmethod
    def from_value(cls, arg_name: str, value) -> "Param":
        """The param a JSON value describes; ValueError saying why not."""
        if value is None:
            return cls(arg_name, ParamType.NULL, None)
        if isinstance(value, (list, tuple)):
            types = {_scalar_type(v) for v in value}
            if None in types:
                raise ValueError("array elements must be strings, numbers or bools")
            if len(types) > 1:
                raise ValueError("array elements must all have one type")
            ptype = _ARRAY_OF[types.pop()] if types else ParamType.ARRAY_NUMBER
            if ptype is ParamType.ARRAY_NUMBER:
                value = [cls._number(v) for v in value]
            elif ptype is ParamType.ARRAY_STRING:
                for v in value:
                    cls._text(v)
            return cls(arg_name, ptype, tuple(value))
        ptype = _scalar_type(value)
        if ptype is None:
            raise ValueError(f"a param value cannot be a {type(value).__name__}")
        if ptype is ParamType.NUMBER:
            value = cls._number(value)
        elif ptype is ParamType.STRING:
            cls._text(value)
        return cls(arg_name, ptype, value)

    @staticmethod
    def _text(v: str) -> None:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("strings must be Unicode text, found a lone surrogate") from None
        problem = limits.string_problem(v)
        if problem:
            raise ValueError(problem)

    @staticmethod
    def _number(v) -> float:
        try:
            v = float(v)
        except OverflowError:  # an integer beyond the double range, e.g. 10**400
            raise ValueError("numbers must be finite, found an integer beyond the "
                             "double range") from None
        if not math.isfinite(v):
            raise ValueError(f"numbers must be finite, found {v}")
        return v

    def matches(self, ptype: ParamType) -> bool:
        return self.ptype is ptype or (ptype.is_array and self.value == ())

    # Number views (LightNet's value_double / value_float / value_int). A param never
    # changes: the saturated views are computed once (every check of an op reads them).
    @property
    def value_double(self) -> float:
        return self.value

    @cached_property
    def value_float(self) -> float:
        return saturate_float(self.value)

    @cached_property
    def value_int(self) -> int:
        return saturate_int(self.value)

    @property
    def array_double(self) -> tuple[float, ...]:
        return tuple(self.value)

    @cached_property
    def array_float(self) -> tuple[float, ...]:
        return tuple(saturate_float(v) for v in self.value)

    @cached_property
    def array_int(self) -> tuple[int, ...]:
        return tuple(saturate_int(v) for v in self.value)

    @property
    def key(self) -> tuple:
        """The param by type and value, hashable, as equal as two params that every
        view sees alike: a number by its exact value (-0.0 is not 0.0, 1 not 1.0).
        Computed once (not a cached_property, which takes a lock)."""
        key = self.__dict__.get("_key")
        if key is None:
            value = self.value
            if self.ptype is ParamType.NUMBER:
                value = _number_key(value)
            elif self.ptype is ParamType.ARRAY_NUMBER:
                value = tuple(map(_number_key, value))
            key = self.__dict__["_key"] = (self.arg_name, self.ptype.value, value)
        return key

    def typed(self, realtype: str | None):
        """The value as descriptions see it: numbers (and number arrays) as
        `realtype` int, float or double; arrays as tuples."""
        if self.ptype is ParamType.NUMBER:
            return {"int": self.value_int, "float": self.value_float}.get(realtype, self.value)
        if self.ptype is ParamType.ARRAY_NUMBER or (self.value == () and realtype):
            return {"int": self.array_int, "float": self.array_float}.get(realtype, self.value)
        return self.value

    def to_json(self):
        """The JSON value; integral numbers are written without a fraction."""
        if self.ptype is ParamType.NUMBER:
            return _json_number(self.value)
        if self.ptype is ParamType.ARRAY_NUMBER:
            return [_json_number(v) for v in self.value]
        if self.ptype.is_array:
            return list(self.value)
        return self.value

    def __str__(self) -> str:
        return json.dumps(self.to_json())


def _number_key(v) -> tuple:
    return (type(v), v.hex() if type(v) is float else v)


def _json_number(v: float):
    return int(v) if v.is_integer() and abs(v) < 2**53 else v
