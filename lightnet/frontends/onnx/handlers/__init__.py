"""ONNX op handlers, one module per op family; importing this package registers them all
(see dispatch.py for how a handler declares the attributes it accepts)."""

from . import (activations, conv, elementwise, math, matmul, normalization,  # noqa: F401
               reduce, resize, shape)
