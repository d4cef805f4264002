"""The importer's Python API: convert a model, write its IR and weights."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lightnet.errors import LightNetError
from lightnet.files.weight_file import write_npz
from lightnet.ir import symbolic
from lightnet.ir.limits import parse_fold_limit
from lightnet.runtime.gc_pause import while_building

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


@while_building
def convert(model, dims: dict | None = None, check: bool = True, shapes: dict | None = None,
            fold_limit=None):
    """Convert an ONNX model (a path or a ModelProto) to (IR dict, weights dict).

    A symbolic input dim (a `dim_param`) stays symbolic in the IR, under its
    name, unless `dims` gives it a value by name or `shapes` ({input name:
    shape}) fixes the whole shape of an input; the interface bounds one that
    is sliced out of a fixed table (a sequence length by its position table). The weights map the name of
    every `create` op with `from_file: true` to its array. Raises
    UnsupportedModelError listing every operator that cannot be mapped.
    `fold_limit` bounds the elements constant folding touches (an int or a
    string like `64M`; lightnet.ir.limits.DEFAULT_FOLD_LIMIT): nodes past it are
    mapped to ops computed when the model runs.
    """
    fold_limit = parse_fold_limit(fold_limit)
    proto = _load(model)
    dims = {**dims_of_shapes(proto, shapes or {}, dims or {}), **(dims or {})}
    free = sorted({d.dim_param for i in proto.graph.input if i.type.HasField("tensor_type")
                   for d in i.type.tensor_type.shape.dim
                   if d.dim_param and not d.HasField("dim_value")} - set(dims)
                  - {t.name for t in proto.graph.initializer})

    unfolded = dim_dependent(proto, free, dims, shapes, fold_limit) if free else frozenset()

    limits = []  # each build's slice lengths and rooms, in generalize's order

    def build(values):
        c = Converter(proto, values, shapes, fold_limit, unfolded)
        ir, weights = c.run()
        if check:
            c.check(ir)
        limits.append(c.limits)
        return ir, weights

    if not free:
        return build(dims)
    ir, weights = symbolic.generalize(build, free, dims, "the imported model")
    bounds = symbolic.implied_bounds(limits, free, dims)
    if bounds:
        ir["interface"]["dims"] = bounds
    return ir, weights


def dim_dependent(proto, free: list[str], dims: dict, shapes, fold_limit) -> frozenset[int]:
    """The nodes constant folding computes whose outputs change shape with the
    symbolic dims `free` (a Range to the sequence length, the slice of a position
    table): folded, each would be a weight of another size for each value of the
    dims; mapped to ops, their sizes are params that follow the dims."""
    probes = symbolic.probe_dims(free)
    base = Converter(proto, {**dims, **probes[0]}, shapes, fold_limit).folded_shapes()
    changed = set()
    for values in probes[1:]:
        other = Converter(proto, {**dims, **values}, shapes, fold_limit).folded_shapes()
        changed.update(i for i, s in base.items() if other.get(i, s) != s)
    return frozenset(changed)


def dims_of_shapes(proto, shapes: dict, dims: dict) -> dict:
    """The values `shapes` ({input name: shape}) give the inputs' symbolic dims;
    every shape must fit its input (rank, fixed dims) and agree with `dims`."""
    initializers = {t.name for t in proto.graph.initializer}  # (once, not per input)
    inputs = {i.name: i for i in proto.graph.input if i.name not in initializers}
    found: dict = {}
    for name, shape in shapes.items():
        where = f"--shape {name}={','.join(map(str, shape))}"
        if name not in inputs:
            raise LightNetError(f"{where}: the model has no input '{name}' (inputs: "
                                f"{', '.join(inputs) or 'none'})")
        t = inputs[name].type.tensor_type
        model_dims = list(t.shape.dim) if t.HasField("shape") else []
        if len(shape) != len(model_dims):
            raise LightNetError(f"{where}: input '{name}' has {len(model_dims)} dims, "
                                f"given {len(shape)}")
        for axis, (d, value) in enumerate(zip(model_dims, shape)):
            if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != value:
                raise LightNetError(f"{where}: dim {axis} of input '{name}' is "
                                    f"{d.dim_value}, given {value}")
            if d.dim_param and not d.HasField("dim_value"):
                before = dims.get(d.dim_param, found.get(d.dim_param))
                if before is not None and before != value:
                    raise LightNetError(f"{where}: dim {axis} of input '{name}' is "
                                        f"'{d.dim_param}', which is {before} elsewhere")
                found[d.dim_param] = value
    return found


def save_weights(path, weights: dict[str, np.ndarray]) -> None:
    """Write `weights` as an .npz LightNet reads (`lightnet.files.weight_file.write_npz`)."""
    write_npz(path, weights)


def import_model(path, out_json, dims: dict | None = None, shapes: dict | None = None,
                 fold_limit=None):
    """Convert the ONNX model at `path`; write the IR to `out_json` and the weights to
    the .npz beside it with the same stem. Returns (IR path, weights path)."""
    ir, weights = convert(path, dims, shapes=shapes, fold_limit=fold_limit)
    out_json = Path(out_json)
    out_npz = out_json.with_suffix(".npz")
    try:
        out_json.write_text(json.dumps(ir, indent=1) + "\n", encoding="utf-8")
        save_weights(out_npz, weights)
    except OSError as e:
        raise LightNetError(f"cannot write {e.filename}: {e.strerror}") from None
    return out_json, out_npz
