"""ONNX importer: turn an ONNX model into LightNet's JSON IR and an .npz of weights.

    ir, weights = convert("model.onnx")          # or a ModelProto
    import_model("model.onnx", "model.json")     # writes model.json and model.npz
    onnx2ln model.onnx -o model.json             # the same from the shell

How a model is imported:

1. Graph inputs get fixed dims: a symbolic or unknown dim takes the value given
   by `dims` (``--dim NAME=VALUE``, NAME the dim's symbolic name); an unnamed
   or ungiven batch dim (axis 0) becomes 1; any other unknown dim is an error.
2. Constants are folded: initializers, Constant nodes, and every node of a
   small set of shape-computing ops (Shape, Gather, Concat, Unsqueeze, Squeeze,
   Cast, Slice, Reshape, arithmetic, ...) whose inputs are all constant (Shape:
   whose input shape is known) are evaluated with numpy, alternating with
   ONNX shape inference until nothing more folds. That resolves the
   Shape -> Gather -> Concat -> Reshape chains exporters write. An If whose
   condition is (or folds to) a constant is replaced by the branch it takes,
   whose nodes then fold and map like the others.
3. The subgraphs exporters write for GELU, SiLU, hard swish and layer
   normalization become the one node they compute (fusion.py).
4. Every remaining node (only those the graph outputs depend on) is mapped to
   LightNet ops; a constant one of them reads becomes a `create` op (with
   `from_file: true` and its data in the weights, or small ones with `data`).
   Ops a node cannot be mapped to are collected, and one error lists them all.
5. The result is checked by LightNet (every op's pre_run), and every tensor's
   shape is compared with the shape ONNX infers.

The package: graph.py (nodes, tensors), dtypes.py, folding.py (step 2),
inlining.py (step 2's Ifs), dispatch.py (the handler registry: a handler's keyword
parameters are the attributes it accepts), fusion.py (step 3), converter.py (steps
1-5), handlers/ (one module per op family), api.py (convert, import_model,
save_weights), cli.py (onnx2ln).

Only numpy is needed at import time of this package; the `onnx` package is
imported when a model is converted (``pip install -e '.[onnx]'``).
"""

from .api import convert, import_model, save_weights
from .cli import main
from .dispatch import HANDLERS
from .errors import UnsupportedModelError

__all__ = ["SUPPORTED_OPS", "UnsupportedModelError", "convert", "import_model", "main",
           "save_weights"]

SUPPORTED_OPS = sorted(HANDLERS)
