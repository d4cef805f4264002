"""The `examples` of every op description, read from descriptions/ops/ (the
runtime modules carry no test data): (optype, example) pairs, each example a
dict with doc, inputs, params, outputs and error."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from generator import model

ROOT = Path(__file__).resolve().parent.parent


@cache
def op_examples() -> tuple[tuple[str, dict], ...]:
    descriptions = model.load(ROOT)
    return tuple((op.optype, dict(vars(example)))
                 for op in descriptions.ops() for example in op.examples)
