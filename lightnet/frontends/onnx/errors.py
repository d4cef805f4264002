"""What the importer reports: a model it cannot map, and the internal signals behind that."""

from __future__ import annotations

from lightnet.errors import LightNetError

GRAPH_INPUT = "graph input"

# The reasons the message gives for one op type: a model refused at hundreds of nodes
# of one kind (one per attention block) would otherwise make a message of pages.
DETAILS_SHOWN = 3


class UnsupportedModelError(LightNetError):
    """The model uses ONNX operators (or attribute values) the importer cannot map.

    `problems` lists every one, as (op_type, op version, detail), detail '' when
    the op type itself is unsupported (op_type 'graph input' for an input whose
    element type LightNet lacks). The message gives the first DETAILS_SHOWN distinct
    reasons of each op type and counts the rest; `problems` holds them all.
    """

    def __init__(self, problems, opset):
        self.problems = list(problems)
        self.opset = opset
        grouped: dict[tuple[str, int], list[str]] = {}
        inputs = []
        for op_type, version, detail in self.problems:
            if op_type == GRAPH_INPUT:
                inputs.append(detail)
                continue
            details = grouped.setdefault((op_type, version), [])
            if detail and detail not in details:
                details.append(detail)
        parts = []
        for (op_type, version), details in sorted(grouped.items()):
            text = f"{op_type} (opset {opset}" + (f", {op_type}-{version})" if version else ")")
            if details:
                text += ": " + "; ".join(details[:DETAILS_SHOWN])
            if len(details) > DETAILS_SHOWN:
                text += f"; and {len(details) - DETAILS_SHOWN} more like these"
            parts.append(text)
        message = "unsupported ONNX model: "
        if grouped:
            message += f"{len(grouped)} operator(s) cannot be imported: " + " | ".join(parts)
        if inputs:
            message += ("; " if grouped else "") + "graph inputs: " + "; ".join(inputs)
        super().__init__(message)


class Unsupported(Exception):
    """A node cannot be mapped; the message says why (an attribute value, a rank...)."""


class NotKnown(Unsupported):
    """A shape or value a node needs before the run is not known: a computed tensor
    where a constant is needed, a shape ONNX's inference did not give. The fold
    limit may have left it so (Converter.explain)."""


class Poisoned(Exception):
    """A node reads the output of a node that could not be mapped."""
