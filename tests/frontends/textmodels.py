"""Small transformer encoders built with onnx.helper, written as `transformers`
exports them (TorchScript exporter, opset 17, dynamic batch and sequence axes):
embeddings gathered by int64 token ids, position ids from a Range over the
sequence length, token types sliced from a buffer; the attention mask made
additive (1 - mask) * -10000; shapes computed by Shape -> Gather -> Unsqueeze
-> Concat -> Reshape chains that depend on the batch and the sequence."""

from __future__ import annotations

import numpy as np

VOCAB, HIDDEN, HEADS, FF, MAX_POSITIONS = 100, 32, 2, 64, 512


class _Graph:
    def __init__(self, rng):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.rng = rng
        self.nodes, self.inits = [], []
        self.count = 0

    def name(self, hint):
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, hint, array):
        name = self.name(hint)
        self.inits.append(self.numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, hint, *shape, scale=0.2):
        return self.const(hint, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def node(self, op, ins, outs=1, **attrs):
        names = [self.name(op.lower()) for _ in range(outs)]
        self.nodes.append(self.helper.make_node(op, list(ins), names, **attrs))
        return names[0] if outs == 1 else names

    def dim(self, x, axis):
        """Unsqueeze(Gather(Shape(x), axis)): dim `axis` of x as a [1] int64 tensor."""
        d = self.node("Gather", [self.node("Shape", [x]), self.const("axis", np.int64(axis))])
        return self.node("Unsqueeze", [d, self.const("axes", np.array([0], np.int64))])

    def reshape(self, x, parts):
        """Reshape x to the Concat of `parts` (dims of [1] or constants)."""
        shape = self.node("Concat", [p if isinstance(p, str) else
                                     self.const("d", np.array([p], np.int64)) for p in parts],
                          axis=0)
        return self.node("Reshape", [x, shape])

    def linear(self, x, n_in, n_out):
        y = self.node("MatMul", [x, self.weight("w", n_in, n_out)])
        return self.node("Add", [y, self.weight("b", n_out, scale=0.1)])

    def layernorm(self, x):
        scale = self.const("gamma", (1 + self.rng.standard_normal(HIDDEN) * 0.1)
                           .astype(np.float32))
        return self.node("LayerNormalization", [x, scale, self.weight("beta", HIDDEN)],
                         axis=-1, epsilon=1e-12)

    def gelu(self, x):
        """The exported erf GELU: x * 0.5 * (1 + erf(x / sqrt(2)))."""
        e = self.node("Erf", [self.node("Div", [x, self.const("c", np.float32(1.4142135))])])
        e = self.node("Add", [e, self.const("one", np.float32(1))])
        return self.node("Mul", [self.node("Mul", [x, e]), self.const("half", np.float32(0.5))])


def _attention(g, x, mask, causal):
    n, s = g.dim(x, 0), g.dim(x, 1)
    d = HIDDEN // HEADS

    def heads(t, perm):
        return g.node("Transpose", [g.reshape(t, [n, s, HEADS, d])], perm=perm)

    q = heads(g.linear(x, HIDDEN, HIDDEN), [0, 2, 1, 3])
    k = heads(g.linear(x, HIDDEN, HIDDEN), [0, 2, 3, 1])
    v = heads(g.linear(x, HIDDEN, HIDDEN), [0, 2, 1, 3])
    scores = g.node("Div", [g.node("MatMul", [q, k]), g.const("sqrt_d", np.float32(d ** 0.5))])
    if causal is not None:  # GPT-2: w * b - 1e4 * (1 - b), b the [S, S] corner of a tril
        keep = g.node("Mul", [scores, causal])
        off = g.node("Sub", [g.const("one", np.float32(1)), causal])
        scores = g.node("Sub", [keep, g.node("Mul", [g.const("big", np.float32(1e4)), off])])
    probs = g.node("Softmax", [g.node("Add", [scores, mask])], axis=-1)
    ctx = g.node("Transpose", [g.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    return g.linear(g.reshape(ctx, [n, s, HIDDEN]), HIDDEN, HIDDEN)


def encoder(layers: int = 2, seed: int = 0, causal: bool = False):
    """A BERT encoder (`causal`: GPT-2's causal mask too) as an ONNX ModelProto:
    inputs input_ids and attention_mask, int64 [batch, sequence]; output
    last_hidden_state, float32 [batch, sequence, HIDDEN]."""
    from onnx import TensorProto, helper

    g = _Graph(np.random.default_rng(seed))
    ids, mask = "input_ids", "attention_mask"
    s = g.node("Gather", [g.node("Shape", [ids]), g.const("axis", np.int64(1))])
    positions = g.node("Unsqueeze", [
        g.node("Range", [g.const("zero", np.int64(0)), s, g.const("step", np.int64(1))]),
        g.const("axes", np.array([0], np.int64))])
    s1 = g.node("Unsqueeze", [s, g.const("axes", np.array([0], np.int64))])
    zero1 = g.const("start", np.array([0], np.int64))
    one1 = g.const("axis", np.array([1], np.int64))
    types = g.node("Slice", [g.const("token_type_ids", np.zeros((1, MAX_POSITIONS), np.int64)),
                             zero1, s1, one1])
    x = g.node("Add", [g.node("Gather", [g.weight("word_embeddings", VOCAB, HIDDEN), ids]),
                       g.node("Gather", [g.weight("token_type_embeddings", 2, HIDDEN), types])])
    x = g.node("Add", [x, g.node("Gather", [g.weight("position_embeddings", MAX_POSITIONS,
                                                     HIDDEN), positions])])
    x = g.layernorm(x)
    additive = g.node("Cast", [g.node("Unsqueeze", [mask, g.const(
        "axes", np.array([1, 2], np.int64))])], to=TensorProto.FLOAT)
    additive = g.node("Mul", [g.node("Sub", [g.const("one", np.float32(1)), additive]),
                              g.const("min", np.float32(-10000.0))])
    tril = None
    if causal:
        buffer = np.tril(np.ones((MAX_POSITIONS, MAX_POSITIONS), np.float32))[None, None]
        axes = g.const("axes", np.array([2, 3], np.int64))
        ends = g.node("Concat", [s1, s1], axis=0)
        tril = g.node("Slice", [g.const("bias", buffer), g.const("starts", np.zeros(2, np.int64)),
                                ends, axes])
    for _ in range(layers):
        x = g.layernorm(g.node("Add", [_attention(g, x, additive, tril), x]))
        ff = g.linear(g.gelu(g.linear(x, HIDDEN, FF)), FF, HIDDEN)
        x = g.layernorm(g.node("Add", [ff, x]))
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes, "bert" if not causal else "gpt2",
        [helper.make_tensor_value_info(ids, TensorProto.INT64, dims),
         helper.make_tensor_value_info(mask, TensorProto.INT64, dims)],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       dims + [HIDDEN])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def feeds(batch: int, sequence: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Token ids in the vocabulary and a mask whose last quarter of each row but the
    first is padding (0)."""
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, sequence), np.int64)
    mask[1:, sequence - sequence // 4:] = 0
    return {"input_ids": rng.integers(0, VOCAB, (batch, sequence), dtype=np.int64),
            "attention_mask": mask}
