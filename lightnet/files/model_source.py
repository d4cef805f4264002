"""A model as a user names it: a JSON IR (a path, `-` for standard input, or a
parsed dict), a lightnet.nn Model (which brings its constants as weights) or
an ONNX model (a path ending in `.onnx`), which is imported in memory by the
ONNX front-end, so `lightnet model.onnx` and `Session("model.onnx")` need no
`onnx2ln` step. The `onnx` package is needed only for ONNX models. A symbolic
dim of a JSON IR or an ONNX model stays symbolic until the model is
initialized with its value (lightnet/ir/symbolic.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from lightnet.errors import LightNetError
from lightnet.ir import json_ir, symbolic
from lightnet.ir.builder import Model
from lightnet.runtime.borders import signature


def is_onnx(model) -> bool:
    return isinstance(model, (str, os.PathLike)) and Path(model).suffix.lower() == ".onnx"


def read(model, datafile=None, fold_limit=None):
    """(IR document, label, weights) of a model: `datafile` for a JSON IR,
    `datafile` or else its constants for a lightnet.nn Model, the imported
    initializers (a name -> array dict) for an ONNX model, which takes no weight
    file (and whose constant folding `fold_limit` bounds)."""
    if isinstance(model, Model):
        return model.to_dict(), "<model>", datafile if datafile is not None else model.weights
    if not is_onnx(model):
        doc, label = json_ir.load(model)
        return doc, label, datafile
    if datafile is not None:
        raise LightNetError(f"{model}: an ONNX model brings its own weights; a weight file "
                            f"(-f, datafile) is only for a JSON IR (given {datafile})")
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise LightNetError(f"{model}: running an ONNX model needs the onnx package: "
                            "pip install 'lightnet[onnx]'") from None
    from lightnet.frontends.onnx import convert

    # Checked once, as the caller initializes it (convert's check would do it twice).
    doc, weights = convert(Path(model), check=False, fold_limit=fold_limit)
    return doc, str(model), weights


def input_names(doc) -> list[str]:
    """The names of the tensors of a model's `input` ops, in order (what is malformed
    is skipped: the model's check reports it)."""
    names = []
    for op in doc.get("ops", []) if isinstance(doc, dict) else []:
        if isinstance(op, dict) and op.get("optype") == "input":
            outs = op.get("tensors_out")
            if isinstance(outs, list) and outs and isinstance(outs[0], dict) \
                    and isinstance(outs[0].get("name"), str):
                names.append(outs[0]["name"])
    return names


def init(ctx, model, datafile=None, batch: int | None = None, shapes: dict | None = None):
    """ctx.init(model) with the dims the command line gives (command_dims), and
    the weights to compile it with (see read)."""
    doc, label, weights = read(model, datafile, ctx.fold_limit)
    ctx.init(doc, dims=command_dims(doc, label, batch, shapes), label=label)
    return weights


def command_dims(doc, label: str, batch: int | None = None, shapes: dict | None = None,
                 strict=()):
    """The values of a model's symbolic dims on the command line: `batch`
    (--batch) is the symbolic first dim of every input, `shapes` (the arrays of
    --input, or --shape: {name: shape}) give the dims they show, and any dim still
    without a value is 1. `strict`: the names of the shapes given by --shape, each
    an error here when it names no input or does not fit its input."""
    symbols = symbolic.names(doc)
    if not symbols and batch is None and not strict:
        return {}
    patterns = {n: own for n, (_, _, own) in signature(doc, label)[0].items()}
    dims: dict[str, int] = {}
    if batch is not None:
        if not patterns:
            raise LightNetError(f"{label}: batch {batch}: the model has no inputs, so no "
                                "batch dimension")
        for name, pattern in patterns.items():
            first = symbolic.parse(pattern[0]) if pattern else None
            if first is None and pattern and pattern[0] == batch:
                continue  # the model's own batch
            if first is None or first[0] != 1 or len(first[1]) != 1:
                raise LightNetError(
                    f"{label}: batch {batch}: input '{name}' has shape "
                    f"{symbolic.describe(pattern)}, its batch fixed at {pattern[0]}; only a "
                    "model whose inputs have a symbolic first dim (\"N\") takes another batch")
            dims[first[1][0]] = batch
        if len(dims) > 1:
            raise LightNetError(f"{label}: batch {batch}: the inputs' first dims are "
                                f"different symbolic dims ({', '.join(sorted(dims))}), so no "
                                "one batch dimension")
    for name, shape in (shapes or {}).items():
        if name in patterns:
            # What does not fit is reported when the arrays are read against the inputs.
            problem = symbolic.match(patterns[name], shape, dims,
                                     symbolic.upper_bounds(doc, label))
            if problem is not None and name in strict:
                raise LightNetError(f"{label}: --shape {name}={','.join(map(str, shape))}: "
                                    f"input '{name}': {problem}")
        elif name in strict:
            raise LightNetError(f"{label}: --shape {name}={','.join(map(str, shape))}: the "
                                f"model has no input '{name}' (inputs: "
                                f"{', '.join(patterns) or 'none'})")
    return {**{n: 1 for n in symbols}, **dims}
