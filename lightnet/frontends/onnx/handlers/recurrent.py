"""Recurrent layers: LSTM, GRU, RNN -> `lstm` (`lstm_state` when Y_c is read), `gru`,
`rnn`; Y_h is sliced out of Y (its last step of each direction), so that an output the
graph leaves out is no LightNet tensor nobody reads (which would be a model output).
Layout 1 through transposes to and from LightNet's [seq, batch, features]."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..dispatch import handler
from ..errors import Unsupported
from ..graph import Node

if TYPE_CHECKING:
    from ..converter import Converter

ACTIVATIONS = ("Sigmoid", "Tanh", "Relu")
# The ONNX inputs after X, W, R, B and sequence_lens (index 4) that each op reads.
STATES = {"lstm": ("initial_h", "initial_c", "p"), "gru": ("initial_h",), "rnn": ("initial_h",)}
DEFAULTS = {"lstm": ["Sigmoid", "Tanh", "Tanh"], "gru": ["Sigmoid", "Tanh"], "rnn": ["Tanh"]}


@handler("LSTM", 1, 7, 14, 22)
def lstm(c: Converter, n: Node, *, hidden_size=None, direction="forward", activations=None,
         activation_alpha=None, activation_beta=None, clip=None, input_forget=0, layout=0,
         output_sequence=0):
    _recurrent(c, n, "lstm", hidden_size, direction, activations, clip, layout,
               {"input_forget": bool(input_forget)})


@handler("GRU", 1, 3, 7, 14, 22)
def gru(c: Converter, n: Node, *, hidden_size=None, direction="forward", activations=None,
        activation_alpha=None, activation_beta=None, clip=None, linear_before_reset=0,
        layout=0, output_sequence=0):
    _recurrent(c, n, "gru", hidden_size, direction, activations, clip, layout,
               {"linear_before_reset": bool(linear_before_reset)})


@handler("RNN", 1, 7, 14, 22)
def rnn(c: Converter, n: Node, *, hidden_size=None, direction="forward", activations=None,
        activation_alpha=None, activation_beta=None, clip=None, layout=0, output_sequence=0):
    _recurrent(c, n, "rnn", hidden_size, direction, activations, clip, layout, {})


def _recurrent(c: Converter, n: Node, cell: str, hidden_size, direction: str, activations,
               clip, layout: int, extra: dict):
    """One LightNet op. activation_alpha / activation_beta concern only activations other
    than Sigmoid, Tanh and Relu, which are refused; output_sequence (version 1) only
    says whether Y may be left out, and Y is computed anyway."""
    x = c.val(n.input(0))
    x.require_float(f"{n.op_type} input X")
    if x.rank != 3:
        raise Unsupported(f"X of rank {x.rank} (expected 3)")
    w, r = c.val(n.input(1)), c.val(n.input(2))
    hidden = r.shape[-1]
    if hidden_size is not None and hidden_size != hidden:
        raise Unsupported(f"hidden_size {hidden_size} for R of shape {list(r.shape)}")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise Unsupported(f"direction '{direction}' (expected forward, reverse or "
                          "bidirectional)")
    acts = DEFAULTS[cell] if activations is None else list(activations)
    if any(a not in ACTIVATIONS for a in acts):
        raise Unsupported(f"activations {acts} (LightNet takes Sigmoid, Tanh and Relu)")
    if clip is not None and not clip > 0:
        raise Unsupported(f"clip {clip} (expected a positive bound)")
    if layout not in (0, 1):
        raise Unsupported(f"layout {layout} (expected 0 or 1)")
    seq = x.shape[1] if layout else x.shape[0]
    if n.has_input(4):
        lens = np.asarray(c.const(n.input(4), "sequence_lens")).reshape(-1)
        if np.any(lens != seq):
            raise Unsupported(f"sequence_lens {lens.tolist()}: LightNet runs every sequence "
                              f"of the batch for all {seq} steps")
    hint = n.name or n.outputs[0]
    if layout:
        x = _transpose(c, x, (1, 0, 2), f"{hint}_x")
    ins = {"x": x, "w": w, "r": r, "b": c.val(n.input(3)) if n.has_input(3) else None}
    for k, arg in enumerate(STATES[cell]):
        v = c.val(n.input(5 + k)) if n.has_input(5 + k) else None
        if v is not None and layout and arg != "p":  # [batch, directions, hidden]
            v = _transpose(c, v, (1, 0, 2), f"{hint}_{arg}")
        ins[arg] = v
    dirs, batch = w.shape[0], x.shape[1]
    state = (dirs, batch, hidden)
    # Y's own name when it is read and needs no transpose (a fresh one otherwise).
    y_name = n.outputs[0] if c.used(n, 0) and not layout else ""
    outs = {"y": (x.dtype, (seq, dirs, batch, hidden), y_name)}
    if cell == "lstm" and c.used(n, 2):
        cell = "lstm_state"
        outs["y_c"] = (x.dtype, state, "" if layout else n.outputs[2])
    vals = c.emit_outputs(cell, ins, {"direction": direction, "activations": acts,
                                      "clip": clip or 0.0, **extra}, outs, hint=hint)
    if c.used(n, 1):  # each direction's last step: forward's at seq - 1, reverse's at 0
        y = vals["y"]
        lasts = [c.slice(c.slice(y, 0, 0 if direction == "reverse" or d else seq - 1, 1,
                                 f"{hint}_last"), 1, d, 1, f"{hint}_last")
                 for d in range(dirs)]
        last = lasts[0] if dirs == 1 else c.emit(
            "concat", {"src": lasts}, {"axis": 1}, y.dtype, (1, dirs, batch, hidden),
            hint=f"{hint}_last")
        if layout:
            last = c.reshape(last, state)
        else:
            c.reshape(last, state, out=n.outputs[1], hint=f"{hint}_y_h")
        vals["y_h"] = last
    if layout:  # Y [batch, seq, directions, hidden], the states [batch, directions, hidden]
        for i, arg in enumerate(("y", "y_h", "y_c")):
            if c.used(n, i):
                perm = (2, 0, 1, 3) if arg == "y" else (1, 0, 2)
                _transpose(c, vals[arg], perm, hint, out=n.outputs[i])


def _transpose(c: Converter, v, perm, hint: str, out: str | None = None):
    shape = tuple(v.shape[a] for a in perm)
    return c.emit("transpose", {"src": v}, {"axes": list(perm)}, v.dtype, shape, out=out,
                  hint=hint)
