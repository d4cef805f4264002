"""What the dnnl ops' descriptions call: one function per op makes its Call.

A dnnl op's pre_run makes its Call from the tensor entries of its inputs (their
layouts included), its scratch is `call.lay_out(dst=dst)` (which records the layout
oneDNN chose on the output entry and returns the scratchpad's bytes), and its
static_run binds the call to the arena (`call.bind(scratch, src=src, ...)`).

An entry's `layout` says how the op finds a tensor: None is LightNet's plain C
order; PENDING is a tensor the layout pass made for dnnl ops whose layout the first
dnnl op reading it chooses (a convolution's preferred source or weights layout),
recorded on the entry by that op; any other value is the oneDNN format a producer
chose, its descriptor in `entry.desc`.
"""

from __future__ import annotations

from lightnet.dnnl import primitives
from lightnet.dnnl.primitives import Unsupported, eltwise_post_op, sum_post_op

PENDING = "any"

__all__ = ["PENDING", "Call", "Unsupported", "conv2d", "pool2d", "eltwise", "binary", "concat",
           "reorder"]


def _dtype(entry) -> str:
    return entry.dtype.np.name


def _layout(entry, chooses: bool = False):
    """How a primitive is to read `entry`: "plain", "any" (it chooses) or a descriptor."""
    if entry.layout is None:
        return "plain"
    if entry.layout == PENDING:
        return "any" if chooses else "plain"
    return entry.desc


def record(entry, desc, source=None) -> None:
    """Give `entry` the layout `desc` (oneDNN's descriptor); `source` is the plain
    layout a weight is reordered from, when that is not its C order."""
    entry.layout = desc.format
    entry.storage = desc.nbytes
    entry.desc = desc
    entry.source = source


class Call:
    """A primitive and the op args its tensors are: `args` maps the kernel's tensor
    names to the op's arg names. `plain_args` are the args the op hands over in
    LightNet's plain layout (where the kernel must read them so)."""

    def __init__(self, kernel: primitives.Kernel, args: dict[str, str], entries: dict):
        self.kernel = kernel
        self.args = args
        self.impl_info = kernel.impl_info
        # Settle what the kernel chose for inputs whose layout was left to it.
        for name, arg in args.items():
            entry = entries.get(arg)
            if entry is not None and entry.layout == PENDING:
                record(entry, kernel.descs[name], kernel.plain[name])
        # A tensor the op holds plain that the kernel reads otherwise cannot be bound
        # (the layout pass gives it a reorder): refused at bind, not computed wrongly.
        self.misread = [arg for name, arg in args.items() if arg in entries
                        and entries[arg] is not None and entries[arg].layout is None
                        and kernel.descs[name] != kernel.plain[name]]

    def lay_out(self, **outputs) -> int:
        """Record the layout of each output entry (by arg name); the scratchpad's bytes."""
        for name, arg in self.args.items():
            if arg in outputs:
                record(outputs[arg], self.kernel.descs[name])
        return self.kernel.scratchpad

    def bind(self, scratch, **arrays):
        """The run call over the op's bound arrays (by arg name) and its scratch."""
        if self.misread:
            raise ValueError(f"oneDNN {self.kernel.what} reads {self.misread} in its own "
                             "layout, but they are plain: the dnnl layout pass reorders them")
        buffers = {}
        for name, arg in self.args.items():
            array = arrays[arg]
            if array is not None:
                buffers[name] = array.reshape(-1).view("uint8") if array.ndim else array
        return self.kernel.bind(buffers, scratch if self.kernel.scratchpad else None)


def _post_ops(residual, activation: str, negslope: float, clip_min: float, clip_max: float):
    post = [sum_post_op()] if residual is not None else []
    if activation == "relu":
        post.append(eltwise_post_op("relu"))
    elif activation == "lrelu":
        post.append(eltwise_post_op("lrelu", negslope))
    elif activation == "clip":
        post.append(eltwise_post_op("clip", clip_min, clip_max))
    elif activation in ("sigmoid", "tanh"):
        post.append(eltwise_post_op(activation))
    elif activation != "none":
        raise ValueError(f"oneDNN: no fused activation {activation!r}")
    return post


def conv2d(src, weight, bias, residual=None, *, group, stride, padding, dilation,
           activation="none", negslope=0.01, clip_min=0.0, clip_max=0.0) -> Call:
    """A convolution with its fused residual (a sum post-op: dst is the residual's
    buffer, so it takes its layout) and activation; bias may be None."""
    kernel = primitives.conv2d(
        src.shape, weight.shape, bias=bias is not None, group=group, stride=stride,
        padding=padding, dilation=dilation, dtype=_dtype(src), src=_layout(src, chooses=True),
        dst="any" if residual is None else _layout(residual),
        post_ops=_post_ops(residual, activation, negslope, clip_min, clip_max))
    return Call(kernel, {"src": "src", "weights": "weight", "bias": "bias", "dst": "dst"},
                {"src": src, "weight": weight, "bias": bias})


def pool2d(src, *, kind, size, stride, padding, dilation=(1, 1), ceil_mode=False,
           count_include_pad=False) -> Call:
    """Max or average pooling, reading its source in the producer's layout."""
    kernel = primitives.pool2d(src.shape, kind=kind, size=size, stride=stride, padding=padding,
                               dilation=dilation, ceil_mode=ceil_mode,
                               count_include_pad=count_include_pad, dtype=_dtype(src),
                               src=_layout(src))
    return Call(kernel, {"src": "src", "dst": "dst"}, {"src": src})


def eltwise(src, name: str, alpha: float = 0.0, beta: float = 0.0) -> Call:
    """dst = f(src) in src's layout (relu, lrelu, clip, sigmoid, tanh, ...)."""
    kernel = primitives.eltwise(src.shape, name, alpha, beta, dtype=_dtype(src),
                                src=_layout(src))
    return Call(kernel, {"src": "src", "dst": "dst"}, {"src": src})


def binary(src1, src2, name: str) -> Call:
    """dst = src1 <name> src2 of one shape, dst in src1's layout."""
    kernel = primitives.binary(src1.shape, src2.shape, name, dtype=_dtype(src1),
                               src0=_layout(src1), src1=_layout(src2))
    return Call(kernel, {"src0": "src1", "src1": "src2", "dst": "dst"},
                {"src1": src1, "src2": src2})


def concat(srcs, axis: int) -> Call:
    """The sources (src1, src2, ...) joined along `axis`."""
    kernel = primitives.concat([s.shape for s in srcs], axis, dtype=_dtype(srcs[0]),
                               srcs=[_layout(s) for s in srcs])
    args = {f"src{i}": f"src{i + 1}" for i in range(len(srcs))}
    args["dst"] = "dst"
    return Call(kernel, args, {f"src{i + 1}": s for i, s in enumerate(srcs)})


class Reorder:
    """A reorder op's call: to oneDNN's layout (the dst entry is PENDING until its
    first dnnl reader chooses) or back to plain. The primitive is made at load, when
    both layouts are settled."""

    def __init__(self, src, to: str):
        self.src = src
        self.to = to
        self.dst = None

    def lay_out(self, dst) -> int:
        """Mark the output: PENDING (to dnnl) or plain; a reorder needs no scratchpad."""
        self.dst = dst
        if self.to == "dnnl":
            dst.layout, dst.storage, dst.desc, dst.source = PENDING, None, None, None
        return 0

    def bind(self, scratch, src, dst):
        if self.dst.layout == PENDING:
            raise ValueError("no dnnl op reads the reordered tensor")
        source = (self.dst.source if self.to == "dnnl" and self.dst.source is not None
                  else self._desc(self.src))
        target = self._desc(self.dst) if self.to == "dnnl" else primitives.plain_desc(
            self.dst.shape, _dtype(self.dst))
        kernel = primitives.reorder(source, target)
        self.impl_info = kernel.impl_info
        flat = {"src": src.reshape(-1).view("uint8"), "dst": dst.reshape(-1).view("uint8")}
        return kernel.bind(flat)

    @staticmethod
    def _desc(entry):
        if entry.layout is None:
            return primitives.plain_desc(entry.shape, _dtype(entry))
        return entry.desc


def reorder(src, to: str) -> Reorder:
    """The call of a reorder op copying `src` to oneDNN's layout (`to` "dnnl") or plain."""
    return Reorder(src, to)


def describe_kernels(ops) -> str:
    """oneDNN's implementations (impl_info) the loaded dnnl ops run, with counts, in
    order of first use: what `lightnet bench` and bench/run.py print."""
    counts: dict[str, int] = {}
    for op in ops:
        call = op.values.get("call")
        info = getattr(call, "impl_info", None)
        if info is not None:
            counts[info] = counts.get(info, 0) + 1
    if not counts:
        return "oneDNN: none (no op runs on dnnl)"
    return "oneDNN: " + ", ".join(f"{k} x{n}" for k, n in counts.items())
