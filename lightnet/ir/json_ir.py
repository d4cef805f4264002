"""The JSON IR: read a model document, validate its structure, write it back.

Validation here is about the document's shape (fields, JSON types, unique
names); what an optype accepts is checked by the op's pre_run. Every error
names the source, the op index (and name, when known) and the field.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from lightnet.errors import LightNetError
from lightnet.ir import limits
from lightnet.ir.param import Param


class OpSpec(NamedTuple):
    """One op as the IR states it, before any check of its optype (a tuple: a
    model's ops are made by the thousand, and a frozen dataclass is slower to make)."""

    name: str
    optype: str
    tensors_in: dict
    tensors_out: dict
    params: dict


def _reject_constant(name):
    raise ValueError(f"{name} is not a valid JSON number")


def _no_duplicate_keys(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"duplicate key '{key}'")
        obj[key] = value
    return obj


def parse_json(text: str, label: str):
    """Strict JSON: no NaN/Infinity, no duplicate keys; errors give line and column."""
    limits.check_json_depth(text, label)
    try:
        return json.loads(text, parse_constant=_reject_constant,
                          object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as e:
        raise LightNetError(f"{label}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    except ValueError as e:
        raise LightNetError(f"{label}: invalid JSON: {e}") from None


def read(source) -> tuple[list[OpSpec], str]:
    """The ops of a model given as a path, `-` (stdin) or an already parsed dict.

    Returns the ops and a label naming the source for messages.
    """
    doc, label = load(source)
    return parse(doc, label), label


def load(source) -> tuple[object, str]:
    """The document of a model given as a path, `-` (stdin) or an already parsed dict
    (not yet validated), and a label naming the source for messages."""
    if isinstance(source, dict) or not isinstance(source, (str, os.PathLike)):
        return source, "<model>"  # parse() refuses anything but a dict
    label = "<stdin>" if str(source) == "-" else str(source)
    if label == "<stdin>":
        text = sys.stdin.read()
    else:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as e:
            raise LightNetError(f"{label}: cannot read the model: {e.strerror}") from None
        except UnicodeDecodeError:
            raise LightNetError(f"{label}: the model is not UTF-8 text") from None
    return parse_json(text, label), label


def is_text(value: str) -> bool:
    """Whether a string is Unicode text: JSON's \\ud800 escapes can make lone
    surrogates, which no file or terminal can take."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def name_problem(value, given: bool = True) -> str | None:
    """What is wrong with a name field (op, optype, arg or tensor name), if anything."""
    if not given:
        return "expected a non-empty string, found nothing"
    if not isinstance(value, str) or not value:
        return f"expected a non-empty string, found {_type_name(value)}"
    if not is_text(value):
        return "expected a non-empty string, found a string with a lone surrogate"
    return limits.name_problem(value)


def _type_name(value) -> str:
    if value is None:
        return "null"
    if value == "":
        return "an empty string"
    return {bool: "a bool", str: "a string", int: "a number", float: "a number",
            list: "an array", dict: "an object"}.get(type(value), type(value).__name__)


def parse(doc, label: str, make=OpSpec) -> list:
    """Validate an IR document and return its ops, each `make(name, optype, tensors_in,
    tensors_out, params)`: an OpSpec, or what the caller makes of one in the same walk
    (Context.init makes its Op)."""
    if not isinstance(doc, dict):
        raise LightNetError(f"{label}: the model must be a JSON object, found {_type_name(doc)}")
    if "ops" not in doc:
        raise LightNetError(f"{label}: the model has no 'ops' field")
    if not isinstance(doc["ops"], list):
        raise LightNetError(f"{label}: 'ops' must be an array, found {_type_name(doc['ops'])}")
    limits.check_op_count(len(doc["ops"]), label)
    ops = []
    names = set()
    valid = set()  # the strings found to be names (see _well_formed_op)
    for index, op in enumerate(doc["ops"]):
        fields = _well_formed_op(op, valid)
        if fields is None:  # checked field by field, for the message
            fields = _parse_op(op, f"{label}: op {index}")
        name = fields[0]
        if name in names:
            raise LightNetError(f"{label}: op {index}: name '{name}' is used by an earlier op")
        names.add(name)
        ops.append(make(*fields))
    return ops


_OP_FIELDS = frozenset({"name", "optype", "tensors_in", "tensors_out", "params"})
_ITEM_FIELDS = {"name": frozenset({"arg_name", "name", "offset"}),
                "value": frozenset({"arg_name", "value", "offset"})}


def _is_name(value) -> bool:
    """Whether `value` is a name name_problem finds nothing wrong with."""
    return (type(value) is str and 0 < len(value) <= limits.MAX_NAME_LENGTH
            and (value.isascii() or is_text(value)))


def _well_formed_op(op, valid: set) -> tuple | None:
    """The fields _parse_op returns for an op it accepts, found without building a
    message for every field (most ops of a model are well formed); None for anything
    else, which _parse_op then reports. `valid` holds the strings found to be names
    before: a model repeats most of its names (optypes, arg names, each tensor's as an
    output and then as an input), and looking one up costs less than checking it."""
    if type(op) is not dict or not op.keys() <= _OP_FIELDS:
        return None
    name, optype = op.get("name"), op.get("optype")
    if not _is_name(name):  # (an op's name is its own: no other op's is valid)
        return None
    try:
        if optype not in valid:
            if not _is_name(optype):
                return None
            valid.add(optype)
        lists = []
        for field, value_key in _LISTS:
            items = op.get(field, [])
            if items == []:  # (left out or empty: no items)
                lists.append({})
                continue
            items = _well_formed_list(items, value_key, valid)
            if items is None:
                return None
            lists.append(items)
    except TypeError:  # an array or an object where a name belongs (a set cannot hold it)
        return None
    tensors_in, tensors_out, values = lists
    params = {}
    for arg, value in values.items():
        try:
            params[arg] = Param.from_value(arg, value)
        except ValueError:
            return None
    return name, optype, tensors_in, tensors_out, params


_LISTS = (("tensors_in", "name"), ("tensors_out", "name"), ("params", "value"))


def _well_formed_list(items, value_key: str, valid: set) -> dict | None:
    """What _parse_list returns for a list it accepts; None for anything else (see
    _well_formed_op for `valid`)."""
    if type(items) is not list:
        return None
    known = _ITEM_FIELDS[value_key]
    result = {}
    for item in items:
        if type(item) is not dict or not item.keys() <= known or value_key not in item:
            return None
        arg = item.get("arg_name")
        if arg not in valid:
            if not _is_name(arg):
                return None
            valid.add(arg)
        if arg in result:
            return None
        value = item[value_key]
        if value_key == "name" and value not in valid:
            if not _is_name(value):
                return None
            valid.add(value)
        result[arg] = value
    return result


def _parse_op(op, where: str) -> OpSpec:
    if not isinstance(op, dict):
        raise LightNetError(f"{where}: expected an object, found {_type_name(op)}")
    name = op.get("name")
    if isinstance(name, str) and name and limits.name_problem(name) is None:
        where = f"{where} ('{name}')"
    for key in ("name", "optype"):
        problem = name_problem(op.get(key), key in op)
        if problem:
            raise LightNetError(f"{where}: field '{key}': {problem}")
    unknown = sorted(set(op) - {"name", "optype", "tensors_in", "tensors_out", "params"})
    if unknown:
        raise LightNetError(f"{where}: unknown field '{unknown[0]}'")
    tensors_in = _parse_list(op, "tensors_in", "name", where)
    tensors_out = _parse_list(op, "tensors_out", "name", where)
    params = {}
    for arg, value in _parse_list(op, "params", "value", where).items():
        try:
            params[arg] = Param.from_value(arg, value)
        except ValueError as e:
            raise LightNetError(f"{where}: param '{arg}': {e}") from None
    return OpSpec(op["name"], op["optype"], tensors_in, tensors_out, params)


def _parse_list(op, field: str, value_key: str, where: str) -> dict:
    """A list of {arg_name, <value_key>} objects as an ordered dict."""
    items = op.get(field, [])
    if not isinstance(items, list):
        raise LightNetError(f"{where}: field '{field}': expected an array, found {_type_name(items)}")
    result = {}
    known = {"arg_name", value_key, "offset"}
    for i, item in enumerate(items):
        def at():  # where messages say the item is (built only for one)
            return f"{where}: {field}[{i}]"
        if not isinstance(item, dict):
            raise LightNetError(f"{at()}: expected an object, found {_type_name(item)}")
        if not known.issuperset(item):
            raise LightNetError(f"{at()}: unknown field '{sorted(set(item) - known)[0]}'")
        arg = item.get("arg_name")
        problem = name_problem(arg, "arg_name" in item)
        if problem:
            raise LightNetError(f"{at()}: field 'arg_name': {problem}")
        if arg in result:
            raise LightNetError(f"{at()}: arg_name '{arg}' is given twice")
        if value_key not in item:
            raise LightNetError(f"{at()} ('{arg}'): field '{value_key}' is missing")
        value = item[value_key]
        problem = name_problem(value) if value_key == "name" else None
        if problem:
            raise LightNetError(f"{at()} ('{arg}'): field 'name': {problem}")
        result[arg] = value
    return result


def dump(ops, interface: Interface | None = None) -> str:
    """The IR document of `ops` (and `interface`), as stable, indented JSON text."""
    doc = {"ops": [op.to_json() for op in ops]}
    if interface is not None:
        doc["interface"] = interface.to_json()
    return json.dumps(doc, indent=4) + "\n"


# The dtypes an interface may declare: numpy's names of the dtypes LightNet holds
# (float16 in float32 tensors, 64-bit integers in 32-bit ones).
INTERFACE_DTYPES = ("bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
                    "uint8", "uint16", "uint32", "uint64")


@dataclass(frozen=True)
class Port:
    """A model input or output as the model's producer declares it."""

    name: str
    dtype: str  # one of INTERFACE_DTYPES
    shape: tuple[int, ...]

    def to_json(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}


@dataclass(frozen=True)
class Interface:
    """The dtypes and shapes a model's producer (an ONNX model, say) declares for its
    inputs and outputs where LightNet's tensors may differ: int64 held as TL_INT32,
    float16 as TL_FLOAT, a scalar as [1]. Session converts at its borders."""

    inputs: tuple[Port, ...] = ()
    outputs: tuple[Port, ...] = ()

    def to_json(self) -> dict:
        return {"inputs": [p.to_json() for p in self.inputs],
                "outputs": [p.to_json() for p in self.outputs]}


def parse_interface(doc, label: str) -> Interface | None:
    """The document's optional `interface` field, validated."""
    if not isinstance(doc, dict) or "interface" not in doc:
        return None
    value = doc["interface"]

    def fail(where, problem):
        raise LightNetError(f"{label}: 'interface'{where}: {problem}")

    if not isinstance(value, dict):
        fail("", f"expected an object, found {_type_name(value)}")
    for key in sorted(set(value) - {"inputs", "outputs"}):
        fail("", f"unknown field '{key}'")
    lists = []
    for key in ("inputs", "outputs"):
        entries = value.get(key, [])
        if not isinstance(entries, list):
            fail(f" {key}", f"expected an array, found {_type_name(entries)}")
        ports = []
        for index, entry in enumerate(entries):
            where = f" {key}[{index}]"
            if not isinstance(entry, dict):
                fail(where, f"expected an object, found {_type_name(entry)}")
            for field in sorted(set(entry) ^ {"name", "dtype", "shape"}):
                fail(where, f"{'unknown' if field in entry else 'missing'} field '{field}'")
            problem = name_problem(entry["name"])
            if problem:
                fail(f"{where} field 'name'", problem)
            if entry["dtype"] not in INTERFACE_DTYPES:
                fail(f"{where} field 'dtype'", f"expected one of {', '.join(INTERFACE_DTYPES)}, "
                                               f"found {json.dumps(entry['dtype'])}")
            shape = entry["shape"]
            if not isinstance(shape, list) or not all(
                    isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
                fail(f"{where} field 'shape'", f"expected an array of dims >= 0, found "
                                               f"{json.dumps(shape)}")
            ports.append(Port(entry["name"], entry["dtype"], tuple(shape)))
        lists.append(tuple(ports))
    return Interface(*lists)
