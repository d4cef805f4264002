"""Which convolutions of a dnnl model run channels-last: a choice of the layout pass.

On AVX2 (no AVX-512), oneDNN 3.2 runs a dense convolution on channels in blocks of 8
(nChw8c, its `any` choice) with its direct kernel (`jit:avx2`), and on channels-last
(acdb) with its brgemm kernel (`brgconv:avx2`). Measured at 2 threads (AMD EPYC Zen 3,
random data), channels-last over blocked time: a 3x3 convolution of at least 64 output
channels 0.65-0.8 where its output is at most 16x16 (resnet18's 512-channel 3x3 at
7x7: 2.0 against 2.6 ms), 0.78-0.95 up to 32x32, 1.02-1.07 larger (0.87 from 256
input channels); one of 32 output channels (DenseNet's) 0.86 at 7x7, 1.19 at 56x56;
a 1x1 one 1.1-1.25 (0.95-0.98 at 7x7 or strided); a depthwise one 1.1-1.3. A reorder
between the two layouts costs about 0.05 ms per MB, and so does a concat
channels-last (blocked, the convolutions write its parts in place).

A convolution's source and output are in one layout (each kernel reads and writes
one), and the ops between convolutions (activations, pools, batchnorms, concats,
slices, binaries, resizes) keep their source's layout, so the tensors they join form
groups that are laid out as one. Each group is blocked or channels-last, whichever
costs less by a model of the time of the convolutions writing it (their multiply-adds
at a rate per kind, times the factor above) and of the reorders where a convolution
reads a group laid out otherwise than its own output: starting from all blocked,
each group in turn takes the cheaper layout given the others, until none changes.
A convolution writing a blocked group from a channels-last one runs blocked (its
source reordered); the others of blocked groups keep oneDNN's choice (`any`). The
model is a pure function of the shapes, so every compile of a model chooses alike.
"""

from __future__ import annotations

import math

from lightnet.archs.dnnl import capi

CONV = "conv2d_dnnl"
# dnnl ops whose outputs keep their sources' layout (their groups are laid out as one).
FOLLOWERS = frozenset({
    "relu_dnnl", "lrelu_dnnl", "clip_dnnl", "sigmoid_dnnl", "tanh_dnnl", "gelu_dnnl",
    "swish_dnnl", "hard_swish_dnnl", "hard_sigmoid_dnnl", "unary_dnnl", "elew_dnnl",
    "batchnorm_dnnl", "lrn_dnnl", "maxpool2d_dnnl", "avgpool2d_dnnl",
    "global_avgpool2d_dnnl", "concat_dnnl", "slice_dnnl", "resize_dnnl", "upsample_dnnl",
    "channel_shuffle_dnnl"})
# The instruction sets the time model was measured on.
ISAS = ("avx2", "avx2_vnni", "avx2_vnni_2")

RATE_1X1 = 75e6  # multiply-adds per ms of a blocked 1x1 convolution
RATE = 65e6  # ... of a blocked dense one of a larger kernel
RATE_GROUPED = 20e6  # ... of a grouped or depthwise one
REORDER = 0.05e-6  # ms per byte reordered between the two layouts
MARGIN = 0.97  # a group goes channels-last where it saves at least 3 % of its time


def channels_last_factor(src_shape, weight_shape, dst_shape, group: int,
                         stride=(1, 1)) -> float:
    """The time of a convolution channels-last over its time blocked (measured, see
    the module docstring)."""
    o, cg, kh, kw = weight_shape
    if group > 1:
        return 1.25 if cg == 1 else 1.0
    area = dst_shape[2] * dst_shape[3]
    if kh == kw == 1:
        return 0.95 if max(stride) > 1 else 0.97 if area <= 64 else 1.15
    if src_shape[1] <= 4:  # a stem on the image's channels
        return 1.0 if kh * kw <= 49 else 1.4
    if (kh, kw) != (3, 3):
        return 0.95 if area <= 1024 else 1.0
    if o < 64:  # DenseNet's 32 new channels
        return 0.9 if area <= 256 else 1.0 if area <= 1024 else 1.15
    if area <= 256:
        return 0.8
    if area <= 1024:
        return 0.9
    return 0.9 if src_shape[1] >= 256 else 1.05


def _blocked_ms(src_shape, weight_shape, dst_shape, group: int) -> float:
    o, cg, kh, kw = weight_shape
    macs = math.prod(dst_shape) * cg * kh * kw
    rate = RATE_GROUPED if group > 1 else RATE_1X1 if kh == kw == 1 else RATE
    return macs / rate


def choose(ops, tensors) -> dict[str, str]:
    """The layout ("channels_last" or "blocked") the convolutions of `ops` (in run
    order; `tensors`: the model's entries by name) run in, by name: those of
    channels-last groups, and those writing a blocked group from a channels-last one;
    the others keep "any" (their source's layout or oneDNN's choice). Empty on other
    instruction sets than the model was measured on."""
    if capi.library().cpu_isa not in ISAS or not any(op.proto.optype == CONV for op in ops):
        return {}
    parent: dict[str, str] = {}

    def find(name: str) -> str:
        root = name
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(name, name) != root:
            parent[name], name = root, parent[name]
        return root

    def join(a: str, b: str) -> None:
        a, b = find(a), find(b)
        if a != b:
            parent[max(a, b)] = min(a, b)

    def activation(name: str) -> bool:
        entry = tensors.get(name)
        return entry is not None and not entry.static and entry.ndim == 4

    convs = []
    for op in ops:
        if op.optype in FOLLOWERS:
            names = [n for n in (*op.tensors_in.values(), *op.tensors_out.values())
                     if activation(n)]
            for n in names[1:]:
                join(names[0], n)
        elif op.optype == CONV:
            if op.tensors_in.get("residual") is not None:
                join(op.tensors_out["dst"], op.tensors_in["residual"])
            convs.append(op)
    if not convs:
        return {}
    # Per group: [(blocked ms, channels-last factor)] of what writes it, and the
    # groups its convolutions read or its readers write, with the ms of a reorder.
    writers: dict[str, list[tuple[float, float]]] = {}
    borders: dict[str, list[tuple[str, float]]] = {}
    for op in convs:
        src, dst = op.tensors_in["src"], op.tensors_out["dst"]
        shapes = (tensors[src].shape, tensors[op.tensors_in["weight"]].shape,
                  tensors[dst].shape, op.values.get("group", 1))
        factor = channels_last_factor(*shapes, stride=op.values.get("stride", (1, 1)))
        writers.setdefault(find(dst), []).append((_blocked_ms(*shapes), factor))
        if find(src) != find(dst):
            ms = tensors[src].nbytes * REORDER
            borders.setdefault(find(src), []).append((find(dst), ms))
            borders.setdefault(find(dst), []).append((find(src), ms))
    for op in ops:  # channels-last, a concat copies its parts (twice its blocked 0 ms)
        if op.optype == "concat_dnnl" and find(op.tensors_out["dst"]) in writers:
            writers[find(op.tensors_out["dst"])].append(
                (tensors[op.tensors_out["dst"]].nbytes * REORDER, 2.0))
    groups = sorted(writers)
    last = dict.fromkeys(groups, False)  # group -> channels-last

    def cost(group: str, channels_last: bool) -> float:
        total = sum(t * (f if channels_last else 1.0) for t, f in writers[group])
        return total + sum(ms for other, ms in borders.get(group, ())
                           if last.get(other, channels_last) != channels_last)

    for _ in range(10):
        changed = False
        for group in groups:
            better = cost(group, True) < MARGIN * cost(group, False)
            if better != last[group]:
                last[group], changed = better, True
        if not changed:
            break
    chosen = {}
    for op in convs:
        src, dst = find(op.tensors_in["src"]), find(op.tensors_out["dst"])
        if last[dst]:
            chosen[op.name] = "channels_last"
        elif last.get(src, False):
            chosen[op.name] = "blocked"
    return chosen
