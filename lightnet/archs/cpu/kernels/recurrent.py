"""Recurrent layers (ONNX LSTM, GRU, RNN), layout [seq, batch, features].

Each direction runs on its own: the input projection of every step is one matmul up
front (x @ w^T plus the biases that are not gated), then each step is one matmul of
the hidden state by r^T and element-wise gate arithmetic, in place in the scratch.
The hidden state of step t is written to y[t, direction] and read back from there by
step t + 1, so only the initial states, the gates and the cell state need a buffer.
"""

from typing import NamedTuple

import numpy as np

from lightnet.archs.cpu.kernels.scratch import carve, scratch_bytes

__all__ = ["Cell", "recurrent_scratch", "recurrent_bytes", "recurrent_workspace", "lstm",
           "gru", "rnn", "lstm_onednn_weights"]

GATES = {"lstm": 4, "gru": 3, "rnn": 1}


class Cell(NamedTuple):
    """A recurrent op's params: `direction` forward, reverse or bidirectional; the
    activation names (per direction, or for both); `clip` (0: none); LSTM's input_forget
    or GRU's linear_before_reset (`coupled`)."""

    direction: str
    activations: tuple
    clip: float
    coupled: bool = False


def recurrent_scratch(cell: str, x_shape, r_shape, dtype) -> tuple:
    """Scratch layout of a recurrent op (see kernels.scratch): the input projections of
    one direction, one step's gates, the initial hidden state, the cell state (LSTM) and
    one temporary."""
    seq, batch, _ = x_shape
    hidden = r_shape[2]
    width = GATES[cell] * hidden
    return (("xw", (seq, batch, width), dtype), ("gates", (batch, width), dtype),
            ("h", (batch, hidden), dtype), ("c", (batch, hidden), dtype),
            ("tmp", (batch, hidden), dtype))


def recurrent_bytes(cell: str, x_shape, r_shape, dtype) -> int:
    """The scratch bytes of recurrent_scratch."""
    return scratch_bytes(recurrent_scratch(cell, x_shape, r_shape, dtype))


def recurrent_workspace(scratch, cell: str, x_shape, r_shape, dtype) -> dict:
    """The arrays of recurrent_scratch, carved out of `scratch`."""
    return carve(scratch, recurrent_scratch(cell, x_shape, r_shape, dtype))


def _activate(name: str, a: np.ndarray, clip: float) -> None:
    """a = name(a) in place, its input bounded to [-clip, clip] when clip > 0. The
    sigmoid is 0.5 * (1 + tanh(a / 2)): no overflow for large |a|."""
    if clip > 0:
        np.clip(a, -clip, clip, out=a)
    if name == "Sigmoid":
        np.multiply(a, 0.5, out=a)
        np.tanh(a, out=a)
        np.add(a, 1, out=a)
        np.multiply(a, 0.5, out=a)
    elif name == "Tanh":
        np.tanh(a, out=a)
    elif name == "Relu":
        np.maximum(a, 0, out=a)
    else:
        raise ValueError(f"unknown activation {name!r} (expected Sigmoid, Tanh or Relu)")


def _directions(cell: Cell, per: int):
    """(direction index, reversed, its activations) of each direction run."""
    dirs = 2 if cell.direction == "bidirectional" else 1
    acts = list(cell.activations) * (dirs if len(cell.activations) == per else 1)
    return [(d, cell.direction == "reverse" or d == 1, acts[d * per:(d + 1) * per])
            for d in range(dirs)]


def _project(x, w, xw, *biases) -> None:
    """xw[t] = x[t] @ w^T + the biases for every step, as one matmul."""
    seq, batch, width = xw.shape
    np.matmul(x.reshape(seq * batch, -1), w.T, out=xw.reshape(seq * batch, width))
    for bias in biases:
        np.add(xw, bias, out=xw)


def _start(initial, d: int, h: np.ndarray) -> np.ndarray:
    """The state before the first step of direction d, copied into h."""
    if initial is None:
        h.fill(0)
    else:
        np.copyto(h, initial[d])
    return h


def lstm(x, w, r, b, initial_h, initial_c, p, y, y_c, ws, cell: Cell) -> None:
    """ONNX LSTM (gates i, o, f, c; cell.coupled: input_forget) into y [seq, dirs,
    batch, hidden] and, unless it is None, the last cell states y_c [dirs, batch,
    hidden]; ws: recurrent_workspace, None for arrays of its own."""
    hidden, clip = r.shape[2], cell.clip
    if ws is None:
        ws = recurrent_workspace(None, "lstm", x.shape, r.shape, y.dtype)
    xw, gates, c, tmp = ws["xw"], ws["gates"], ws["c"], ws["tmp"]
    i, o, f, g = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
    for d, backwards, (act_f, act_g, act_h) in _directions(cell, 3):
        _project(x, w[d], xw, *(() if b is None else (b[d, :4 * hidden], b[d, 4 * hidden:])))
        h = _start(initial_h, d, ws["h"])
        _start(initial_c, d, c)
        for t in (reversed(range(x.shape[0])) if backwards else range(x.shape[0])):
            np.matmul(h, r[d].T, out=gates)
            np.add(gates, xw[t], out=gates)
            if p is not None:
                i += np.multiply(c, p[d, :hidden], out=tmp)
                f += np.multiply(c, p[d, 2 * hidden:], out=tmp)
            _activate(act_f, i, clip)
            if cell.coupled:
                np.subtract(1, i, out=f)
            else:
                _activate(act_f, f, clip)
            _activate(act_g, g, clip)
            np.multiply(c, f, out=c)
            c += np.multiply(i, g, out=tmp)
            if p is not None:
                o += np.multiply(c, p[d, hidden:2 * hidden], out=tmp)
            _activate(act_f, o, clip)
            np.copyto(tmp, c)
            _activate(act_h, tmp, 0)
            h = y[t, d]
            np.multiply(o, tmp, out=h)
        if y_c is not None:
            np.copyto(y_c[d], c)


def gru(x, w, r, b, initial_h, y, ws, cell: Cell) -> None:
    """ONNX GRU (gates z, r, h; cell.coupled: linear_before_reset) into y [seq, dirs,
    batch, hidden]; ws: recurrent_workspace, None for arrays of its own."""
    hidden, clip = r.shape[2], cell.clip
    if ws is None:
        ws = recurrent_workspace(None, "gru", x.shape, r.shape, y.dtype)
    xw, gates, tmp = ws["xw"], ws["gates"], ws["tmp"]
    zr, z, reset, hh = gates[:, :2 * hidden], gates[:, :hidden], gates[:, hidden:2 * hidden], \
        gates[:, 2 * hidden:]
    for d, backwards, (act_f, act_g) in _directions(cell, 2):
        rz, rh = r[d, :2 * hidden], r[d, 2 * hidden:]
        _project(x, w[d], xw, *(() if b is None else (b[d, :3 * hidden],)))
        if b is not None:  # z's and r's recurrence biases join w's; h's is reset with h
            np.add(xw[:, :, :2 * hidden], b[d, 3 * hidden:5 * hidden], out=xw[:, :, :2 * hidden])
        h = _start(initial_h, d, ws["h"])
        for t in (reversed(range(x.shape[0])) if backwards else range(x.shape[0])):
            np.matmul(h, rz.T, out=zr)
            np.add(zr, xw[t, :, :2 * hidden], out=zr)
            _activate(act_f, z, clip)
            _activate(act_f, reset, clip)
            if cell.coupled:
                np.matmul(h, rh.T, out=hh)
                if b is not None:
                    np.add(hh, b[d, 5 * hidden:], out=hh)
                np.multiply(hh, reset, out=hh)
            else:
                np.matmul(np.multiply(reset, h, out=tmp), rh.T, out=hh)
                if b is not None:
                    np.add(hh, b[d, 5 * hidden:], out=hh)
            np.add(hh, xw[t, :, 2 * hidden:], out=hh)
            _activate(act_g, hh, clip)
            # h = (1 - z) * hh + z * h = hh + z * (h - hh)
            np.subtract(h, hh, out=tmp)
            np.multiply(tmp, z, out=tmp)
            h = y[t, d]
            np.add(hh, tmp, out=h)


def rnn(x, w, r, b, initial_h, y, ws, cell: Cell) -> None:
    """ONNX RNN into y [seq, dirs, batch, hidden]; ws: recurrent_workspace, None for
    arrays of its own."""
    hidden, clip = r.shape[2], cell.clip
    if ws is None:
        ws = recurrent_workspace(None, "rnn", x.shape, r.shape, y.dtype)
    xw, gates = ws["xw"], ws["gates"]
    for d, backwards, (act,) in _directions(cell, 1):
        _project(x, w[d], xw, *(() if b is None else (b[d, :hidden], b[d, hidden:])))
        h = _start(initial_h, d, ws["h"])
        for t in (reversed(range(x.shape[0])) if backwards else range(x.shape[0])):
            np.matmul(h, r[d].T, out=gates)
            np.add(gates, xw[t], out=gates)
            _activate(act, gates, clip)
            h = y[t, d]
            np.copyto(h, gates)


def lstm_onednn_weights(w, r, b, p, dtype) -> tuple:
    """oneDNN's LSTM weights of ONNX's of one direction (w [1, 4 * hidden, input], r, b,
    p; b and p may be None), its gates i, f, c~, o where ONNX's are i, o, f, c (its
    peepholes i, f, o where ONNX's are i, o, f): weights_layer [1, 1, input, 4, hidden]
    and weights_iter [1, 1, hidden, 4, hidden] (oneDNN's plain ldigo), bias [1, 1, 4,
    hidden] (ONNX's two summed), peephole [1, 1, 3, hidden] (zeros without p)."""
    hidden = r.shape[2]
    gates = [0, 2, 3, 1]

    def ldigo(m):  # [4 * hidden, k] -> [1, 1, k, 4, hidden]
        return m.reshape(4, hidden, -1)[gates].transpose(2, 0, 1)[None, None]

    bias = np.zeros((4, hidden)) if b is None else \
        (b[0, :4 * hidden] + b[0, 4 * hidden:]).reshape(4, hidden)[gates]
    peephole = np.zeros((3, hidden)) if p is None else p[0].reshape(3, hidden)[[0, 2, 1]]
    return tuple(np.ascontiguousarray(a, dtype)
                 for a in (ldigo(w[0]), ldigo(r[0]), bias[None, None], peephole[None, None]))
