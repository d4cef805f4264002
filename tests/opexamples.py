"""The `examples` of every op description, read from descriptions/ops/ (the
runtime modules carry no test data): (optype, example) pairs, each example a
dict with doc, inputs, params, outputs and error; and the arrays its inputs and
outputs are written as."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from generator import model
from lightnet import DType

ROOT = Path(__file__).resolve().parent.parent


@cache
def op_examples() -> tuple[tuple[str, dict], ...]:
    descriptions = model.load(ROOT)
    return tuple((op.optype, dict(vars(example)))
                 for op in descriptions.ops() for example in op.examples)


def numbered_examples():
    """(optype, i, example) of each of op_examples(), i counting the examples of each
    optype from 0 (a test's id: optype-i)."""
    counts: dict[str, int] = {}
    for optype, example in op_examples():
        counts[optype] = counts.get(optype, -1) + 1
        yield optype, counts[optype], example


def example_array(value) -> tuple[str, np.ndarray]:
    """(dtype name, array) of an example's input or output, written as a nested list
    (TL_FLOAT) or as {dtype, data}."""
    if isinstance(value, dict):
        dtype = value.get("dtype", "TL_FLOAT")
        return dtype, np.asarray(value["data"], dtype=DType.from_name(dtype).np)
    return "TL_FLOAT", np.asarray(value, dtype=np.float32)


def create_params(value) -> dict:
    """The params of a create op holding the example input `value` (a scalar as [1])."""
    dtype, array = example_array(value)
    return {"dtype": dtype, "dims": list(array.shape) or [1],
            "data": array.reshape(-1).astype(np.float64).tolist()}
