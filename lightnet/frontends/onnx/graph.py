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
    # The values its subgraphs (an If's branches) read from the graph by name: inputs
    # of the node as much as `inputs` are.
    outer: tuple[str, ...] = ()

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


class TensorTypes:
    """ONNX name -> (elem type, shape or None) of the tensors the graph's inputs, the
    constants and ONNX shape inference describe. A round of inference runs when a type
    is next read or set, and what it says of a tensor is decoded when its name is first
    read: most tensors' types are never asked for (a unary op's output has its input's),
    and every read of a protobuf field makes a new Python object."""

    def __init__(self):
        self.known: dict[str, tuple[int, tuple | None]] = {}
        self.inferred: dict[str, object] = {}  # name -> its ValueInfoProto, not yet read
        self.inference = None  # the round of shape inference not yet run

    def infer_later(self, infer) -> None:
        """Take a round of shape inference, `infer()` giving its ValueInfoProtos, to be
        run when a type is next read or set (what it says adds to the rounds' before,
        and what is set after it replaces what it says, as if it ran now)."""
        self._run_inference()
        self.inference = infer

    def _run_inference(self) -> None:
        if self.inference is not None:
            infer, self.inference = self.inference, None
            self._add_inferred(infer())

    def _add_inferred(self, value_infos) -> None:
        """Take a round of shape inference's results: what it says of a tensor adds to
        what was known (its elem type and shape where it gives them)."""
        for vi in value_infos:
            name = vi.name
            if name in self.inferred:  # an earlier round's, merged first
                self._decode(name)
            self.inferred[name] = vi

    def _decode(self, name: str) -> None:
        typ = self.inferred.pop(name).type
        if not typ.HasField("tensor_type"):
            return
        t = typ.tensor_type
        shape = None
        if t.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
            shape = None if None in dims else tuple(dims)
        elem = t.elem_type
        old = self.known.get(name)
        if old is None or old[1] is None or elem:
            self.known[name] = (elem or (old[0] if old else 0),
                                shape if shape is not None else (old[1] if old else None))

    def _settle(self, name: str) -> None:
        """What inference says of `name` taken into `known`."""
        self._run_inference()
        if name in self.inferred:
            self._decode(name)

    def get(self, name: str, default=None):
        self._settle(name)
        return self.known.get(name, default)

    def __getitem__(self, name: str) -> tuple[int, tuple | None]:
        self._settle(name)
        return self.known[name]

    def __setitem__(self, name: str, value: tuple[int, tuple | None]) -> None:
        self._run_inference()
        self.inferred.pop(name, None)  # what is set replaces what inference said
        self.known[name] = value


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


def node_problem(onnx, schema: Schema, inputs: list[str], outputs: list[str],
                 attributes) -> str | None:
    """What makes an ONNX node (its input and output names, its AttributeProtos)
    break its op's schema (too few or too many inputs or outputs, an attribute
    missing or of another type), if anything."""
    (fewest_in, most_in), (fewest_out, most_out) = schema.inputs, schema.outputs
    if not (fewest_in <= len(inputs) <= most_in and fewest_out <= len(outputs) <= most_out):
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
    given = {a.name for a in attributes}
    for name, (_, required) in schema.attributes.items():
        if required and name not in given:
            return f"required attribute '{name}' is missing (an invalid ONNX model)"
    for a in attributes:
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
