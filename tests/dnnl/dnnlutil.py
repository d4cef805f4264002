"""Shared pieces of the oneDNN tests (import it once oneDNN is known to be available):
a primitive run on plain arrays."""

from __future__ import annotations

import numpy as np

from lightnet.archs.dnnl import primitives as P


def execute(kernel, inputs, out="dst", weights=(), prefill=None):
    """Run `kernel` with `inputs` (plain arrays by tensor name); weights go through
    load_weights, other inputs through a reorder into the kernel's layout; returns
    the output in the plain layout. `prefill`: dst's contents before the run."""
    buffers, keep = {}, []
    for name in kernel.args:
        buffers[name] = np.full(kernel.nbytes(name), 0xFF, np.uint8)  # NaN garbage
    for name, data in inputs.items():
        data = np.ascontiguousarray(data, np.float32)
        if name in weights:
            kernel.load_weights(name, data, buffers[name])
        else:
            P.reorder(kernel.plain[name], kernel.descs[name]).bind(
                {"src": data, "dst": buffers[name]})()
    if prefill is not None:
        P.reorder(kernel.plain[out], kernel.descs[out]).bind(
            {"src": np.ascontiguousarray(prefill, np.float32), "dst": buffers[out]})()
    scratch = np.full(kernel.scratchpad, 0xFF, np.uint8)
    keep.append(scratch)
    kernel.bind(buffers, scratch)()
    result = np.empty(kernel.plain[out].shape, np.float32)
    P.reorder(kernel.descs[out], kernel.plain[out]).bind({"src": buffers[out], "dst": result})()
    return result
