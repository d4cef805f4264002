"""ONNX op handlers, one module per op family; importing this package registers them all
(see dispatch.py for how a handler declares the attributes it accepts)."""

from . import (activations, conv, elements, elementwise, logic, math, matmul,  # noqa: F401
               normalization, quantize, recurrent, reduce, resize, shape,
               space_depth)
