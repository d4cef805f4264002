"""The importer's Python API: convert a model, write its IR and weights."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lightnet.errors import LightNetError
from lightnet.weights import write_npz

from .converter import Converter
from .graph import onnx_package


def _load(model):
    onnx = onnx_package()
    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(model)
    if not path.is_file():
        raise LightNetError(f"{path}: no such ONNX model")
    try:
        return onnx.load(str(path))
    except Exception as e:  # noqa: BLE001 - protobuf raises several types
        raise LightNetError(f"{path}: not a valid ONNX model: {type(e).__name__}: {e}") from None


def convert(model, dims: dict | None = None, check: bool = True):
    """Convert an ONNX model (a path or a ModelProto) to (IR dict, weights dict).

    `dims` gives values to symbolic input dims by name. The weights map the
    name of every `create` op with `from_file: true` to its array. Raises
    UnsupportedModelError listing every operator that cannot be mapped.
    """
    proto = _load(model)
    c = Converter(proto, dims)
    ir, weights = c.run()
    if check:
        c.check(ir)
    return ir, weights


def save_weights(path, weights: dict[str, np.ndarray]) -> None:
    """Write `weights` as an .npz LightNet reads (`lightnet.weights.write_npz`)."""
    write_npz(path, weights)


def import_model(path, out_json, dims: dict | None = None):
    """Convert the ONNX model at `path`; write the IR to `out_json` and the weights to
    the .npz beside it with the same stem. Returns (IR path, weights path)."""
    ir, weights = convert(path, dims)
    out_json = Path(out_json)
    out_npz = out_json.with_suffix(".npz")
    try:
        out_json.write_text(json.dumps(ir, indent=1) + "\n", encoding="utf-8")
        save_weights(out_npz, weights)
    except OSError as e:
        raise LightNetError(f"cannot write {e.filename}: {e.strerror}") from None
    return out_json, out_npz
