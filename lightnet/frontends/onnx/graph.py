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


def attribute_value(onnx, attr):
    """An ONNX AttributeProto as a Python value (strings decoded, tensors as arrays)."""
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", "replace") for v in value]
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return value


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
