"""A model as a user names it: a JSON IR (a path, `-` for standard input, or a
parsed dict), a lightnet.nn Model (which brings its constants as weights) or
an ONNX model (a path ending in `.onnx`), which is imported in memory by the
ONNX front-end, so `lightnet model.onnx` and `Session("model.onnx")` need no
`onnx2ln` step. The `onnx` package is needed only for ONNX models.
"""

from __future__ import annotations

import os
from pathlib import Path

from lightnet.errors import LightNetError


def is_onnx(model) -> bool:
    return isinstance(model, (str, os.PathLike)) and Path(model).suffix.lower() == ".onnx"


def init(ctx, model, datafile=None, batch: int | None = None):
    """ctx.init(model), and the weights to compile it with: `datafile` for a
    JSON IR, `datafile` or else its constants for a lightnet.nn Model, the
    imported initializers (a name -> array dict) for an ONNX model, which
    takes no weight file. `batch` (None: the model's) is the
    batch, the first dim of every input: an ONNX input whose first dim is
    symbolic gets it when imported; any other model must already have it."""
    if not is_onnx(model):
        ctx.init(model)
        if batch is not None:
            _check_batch(ctx, batch)
        return datafile if datafile is not None else ctx.model_weights
    if datafile is not None:
        raise LightNetError(f"{model}: an ONNX model brings its own weights; a weight file "
                            f"(-f, datafile) is only for a JSON IR (given {datafile})")
    ir, weights = _import_onnx(Path(model), batch)
    ctx.init(ir)
    ctx.label = str(model)  # messages name the file, not the in-memory document
    if batch is not None:
        _check_batch(ctx, batch)
    return weights


def _import_onnx(path: Path, batch: int | None):
    try:
        import onnx
    except ImportError:
        raise LightNetError(f"{path}: running an ONNX model needs the onnx package: "
                            "pip install 'lightnet[onnx]'") from None
    from lightnet.frontends.onnx import convert

    if batch is None:
        return convert(path)
    if not path.is_file():
        return convert(path)  # the importer's own error for a missing file
    try:
        proto = onnx.load(str(path))
    except Exception:  # noqa: BLE001 - protobuf raises several types
        return convert(path)  # the importer says what is wrong with the file
    initializers = {t.name for t in proto.graph.initializer}
    for value in proto.graph.input:
        dims = value.type.tensor_type.shape.dim
        if value.name not in initializers and len(dims) > 0 and dims[0].dim_value <= 0:
            dims[0].dim_value = batch  # a symbolic or unknown batch dim takes the batch
    return convert(proto)


def _check_batch(ctx, batch: int) -> None:
    entries = [ctx.tensors[n] for n in ctx.inputs]
    if not entries:
        raise LightNetError(f"{ctx.label}: batch {batch}: the model has no inputs, so no "
                            "batch dimension")
    for entry in entries:
        if entry.shape[0] != batch:
            raise LightNetError(
                f"{ctx.label}: batch {batch}: input '{entry.name}' is {entry.describe()}, its "
                f"batch fixed at {entry.shape[0]}; only an ONNX model whose inputs have a "
                "symbolic first dim takes another batch")
