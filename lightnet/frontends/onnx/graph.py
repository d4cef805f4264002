"""The importer's view of an ONNX graph: nodes with decoded attributes, and the
LightNet tensors ONNX tensors become."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lightnet.errors import LightNetError

from .errors import Unsupported


def onnx_package():
    """The onnx package, imported only when a model is converted (LightNet needs numpy only)."""
    try:
        import onnx
        import onnx.numpy_helper  # noqa: F401
        import onnx.shape_inference  # noqa: F401
    except ImportError:
        raise LightNetError("importing ONNX models needs the onnx package: "
                            "pip install -e '.[onnx]'") from None
    return onnx


FLOAT_TL = ("TL_FLOAT", "TL_DOUBLE")


@dataclass
class Val:
    """An ONNX tensor as a LightNet tensor: its IR name, LightNet dtype and ONNX shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    def require_float(self, what: str):
        if self.dtype not in FLOAT_TL:
            raise Unsupported(f"{what} of dtype {self.dtype} (only float and double)")


@dataclass
class Node:
    """One ONNX node, with its attributes decoded and its op version resolved."""

    index: int
    name: str
    op_type: str
    version: int
    inputs: list[str]
    outputs: list[str]
    attrs: dict = field(default_factory=dict)

    def input(self, i: int) -> str:
        return self.inputs[i] if i < len(self.inputs) else ""

    def has_input(self, i: int) -> bool:
        return bool(self.input(i))

    @property
    def label(self) -> str:
        """How errors name the node: its name, else its index and first output."""
        if self.name:
            return f"'{self.name}'"
        return f"#{self.index} (output '{self.outputs[0] if self.outputs else ''}')"

    @property
    def as_output(self) -> dict:
        """Converter.emit's `out` and `hint` for an op whose output is the node's first."""
        return {"out": self.outputs[0], "hint": self.name or self.outputs[0]}


def attribute_value(onnx, attr, what: str):
    """An ONNX AttributeProto as a Python value (strings decoded, tensors as arrays)."""
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", "replace") for v in value]
    if isinstance(value, onnx.TensorProto):
        return tensor_array(onnx, value, f"{what}: attribute '{attr.name}'")
    return value


def tensor_array(onnx, t, what: str) -> np.ndarray:
    """The data of an ONNX TensorProto (an initializer, a Constant's value) as an
    array, once its data type and size are known to fit its dims."""
    if t.data_type == onnx.TensorProto.UNDEFINED or t.data_type not in (
            onnx.TensorProto.DataType.values()):
        raise LightNetError(f"{what}: data type {t.data_type} is not an ONNX tensor type "
                            "(an invalid ONNX model)")
    if t.data_location == onnx.TensorProto.EXTERNAL:
        raise LightNetError(f"{what}: its data is in an external file, which was not read")
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise LightNetError(f"{what}: dims {dims}: expected dims >= 0 (an invalid ONNX model)")
    try:
        return onnx.numpy_helper.to_array(t)
    except (ValueError, TypeError) as e:  # the data does not fit the dims and type
        name = onnx.TensorProto.DataType.Name(t.data_type).lower()
        raise LightNetError(f"{what}: its data is not {name} {dims}: {e} (an invalid ONNX "
                            "model)") from None


@dataclass(frozen=True)
class Schema:
    """What node_problem checks of an op's ONNX schema, read once per op type (the
    onnx package builds its schema's Python objects anew at every access)."""

    version: int
    inputs: tuple[int, int]  # the fewest and most inputs
    outputs: tuple[int, int]
    first_input: tuple[str, bool] | None  # the name of the first, whether required
    attributes: dict[str, tuple[int, bool]]  # name -> (AttributeProto type, required)

    @classmethod
    def of(cls, schema) -> "Schema":
        first = schema.inputs[0] if schema.inputs else None
        return cls(schema.since_version, (schema.min_input, schema.max_input),
                   (schema.min_output, schema.max_output),
                   None if first is None else (
                       first.name, first.option == type(first.option).Single),
                   {name: (int(a.type), a.required) for name, a in schema.attributes.items()})


def node_problem(onnx, schema: Schema, n) -> str | None:
    """What makes ONNX NodeProto `n` break its op's schema (too few or too many
    inputs or outputs, an attribute missing or of another type), if anything."""
    inputs, outputs = n.input, n.output
    for kind, given, (least, most) in (("inputs", len(inputs), schema.inputs),
                                       ("outputs", len(outputs), schema.outputs)):
        if not least <= given <= most:
            expected = f"{least}" if least == most else (
                f"at least {least}" if most >= 2**31 - 1 else f"{least} to {most}")
            return f"expected {expected} {kind}, found {given} (an invalid ONNX model)"
    # The first input is the data (exporters leave a later required one empty, as
    # Resize-11's roi, which ONNX Runtime takes).
    if schema.first_input is not None and inputs and not inputs[0] and (
            schema.first_input[1]):
        return (f"input 0 ('{schema.first_input[0]}') is required, and empty (an invalid "
                "ONNX model)")
    if not schema.attributes:
        return None  # (no attribute is declared: none is required, none has a type)
    given = {a.name for a in n.attribute}
    for name, (_, required) in schema.attributes.items():
        if required and name not in given:
            return f"required attribute '{name}' is missing (an invalid ONNX model)"
    for a in n.attribute:
        declared = schema.attributes.get(a.name)
        if declared is not None and a.type != declared[0]:
            names = onnx.AttributeProto.AttributeType
            found = names.Name(a.type) if a.type in names.values() else str(a.type)
            return (f"attribute '{a.name}' must be {names.Name(declared[0])}, found "
                    f"{found} (an invalid ONNX model)")
    return None


def lnshape(shape) -> tuple[int, ...]:
    """LightNet tensors have at least one dim: an ONNX scalar is [1]."""
    return tuple(int(d) for d in shape) or (1,)


def pyval(v):
    """A JSON-clean Python value of a param."""
    if isinstance(v, (list, tuple, np.ndarray)):
        return [pyval(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    return v
