"""ONNX op handlers, one module per op family; importing this package registers them all
(see dispatch.py for how a handler declares the attributes it accepts)."""

from . import (activations, control, conv, elements, elementwise, grid_sample,  # noqa: F401
               logic, math, matmul, normalization, quantize, recurrent, reduce, resize, shape,
               space_depth)
