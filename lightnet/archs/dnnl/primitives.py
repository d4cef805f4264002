"""oneDNN primitives for fixed shapes: what a dnnl op creates at load and calls per run.

Each constructor (conv2d, deconv2d, matmul, linear, qconv2d, qmatmul, pool, eltwise,
binary, concat, batchnorm, layernorm, lrn, softmax, reduction, shuffle, resample,
reorder) takes logical shapes in LightNet's conventions (NCHW, weights as the cpu
kernels take them, padding as (top, left, bottom, right), dilation 1 for none), the
data type it computes in and a layout for each activation, and returns a Kernel: the
primitive, created once, with the layout oneDNN chose for every tensor (`descs`), the
bytes each takes there, blocked padding included (`nbytes`), its scratchpad size, and
its implementation name.

A layout is "plain" (LightNet's own C-order layout), a 4-D tag of TAGS_4D
("acdb" = "channels_last", channels in blocks "aBcd8b", "aBcd16b"), "any" (the
primitive chooses: blocked or channels-last, whichever its fastest implementation
wants; convolutions, deconvolutions and destinations only, a destination "any" of
a source's shape taking the source's layout) or a MemoryDesc (a producer's
chosen layout, so that a tensor passes between two primitives without a reorder). Weights are
always "any": `Kernel.load_weights` reorders them once, at load, from their
plain layout into the buffer the primitive reads.

`Kernel.bind(buffers)` wraps caller-owned buffers (arena views) in oneDNN memories
and returns the run call (capi.Execute): one ctypes call per run.

The data type is float32 or bfloat16. In bfloat16, sources, weights and
destinations are bfloat16 and oneDNN accumulates in float32; biases, batch
normalization's statistics and binary post-op operands stay float32. The plain
layouts (`Kernel.plain`) are float32 whatever the data type, as LightNet holds
tensors: a reorder from plain converts, and `load_weights` converts the weights
to bfloat16 once, at load.

qconv2d and qmatmul compute on 8-bit integers (uint8 or int8 sources, int8 weights, int32
accumulation) with the scales and zero points of a Quantization, given at run time.

Post-ops fuse into conv2d, deconv2d, matmul and binary: `eltwise(name, alpha,
beta)`, `sum(scale)` (dst += scale * what dst holds before the run: a residual
add written in place) and `binary(name, shape)` (a second operand, bound as
"post_op_<index>").

Where oneDNN cannot compute exactly what the cpu kernel computes, a constructor
raises Unsupported, and the op stays on the cpu architecture. Arguments that do
not fit raise ValueError (a bug of the calling op, which Context.load reports
naming the op); a call oneDNN refuses raises LightNetError (see capi).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import math
from dataclasses import dataclass

import numpy as np

from lightnet.archs.dnnl import capi
from lightnet.archs.dnnl.capi import MemoryDesc
from lightnet.ir.shapes import (broadcast_shape, conv2d_output_hw, deconv2d_output_hw,
                                pool2d_output_hw)

__all__ = ["Kernel", "Unsupported", "ELTWISE", "BINARY", "eltwise_post_op", "sum_post_op",
           "binary_post_op", "conv2d", "deconv2d", "matmul", "Linear", "linear", "pool",
           "eltwise", "binary", "concat", "batchnorm", "layernorm", "lrn", "softmax",
           "resample", "reorder", "plain_desc", "strided_desc", "REDUCTION", "reduction",
           "shuffle", "Quantization", "qconv2d", "qmatmul", "lstm"]


class Unsupported(Exception):
    """oneDNN cannot compute this exactly as the cpu kernel does: the op stays on cpu."""


# Element-wise functions by name: oneDNN's own, and LightNet's names for some of them.
# alpha and beta are oneDNN's (clip: min, max; lrelu: the negative slope; linear:
# alpha * x + beta).
ELTWISE = {
    "relu": capi.dnnl_eltwise_relu, "lrelu": capi.dnnl_eltwise_relu,
    "tanh": capi.dnnl_eltwise_tanh, "elu": capi.dnnl_eltwise_elu,
    "square": capi.dnnl_eltwise_square, "abs": capi.dnnl_eltwise_abs,
    "sqrt": capi.dnnl_eltwise_sqrt, "linear": capi.dnnl_eltwise_linear,
    "soft_relu": capi.dnnl_eltwise_soft_relu, "hardsigmoid": capi.dnnl_eltwise_hardsigmoid,
    "sigmoid": capi.dnnl_eltwise_logistic, "exp": capi.dnnl_eltwise_exp,
    "gelu_tanh": capi.dnnl_eltwise_gelu_tanh, "swish": capi.dnnl_eltwise_swish,
    "log": capi.dnnl_eltwise_log, "clip": capi.dnnl_eltwise_clip_v2,
    "pow": capi.dnnl_eltwise_pow, "gelu_erf": capi.dnnl_eltwise_gelu_erf,
    "round": capi.dnnl_eltwise_round, "mish": capi.dnnl_eltwise_mish,
    "hardswish": capi.dnnl_eltwise_hardswish,
}
BINARY = {"add": capi.dnnl_binary_add, "mul": capi.dnnl_binary_mul,
          "sub": capi.dnnl_binary_sub, "div": capi.dnnl_binary_div,
          "max": capi.dnnl_binary_max, "min": capi.dnnl_binary_min}


def _lookup(table: dict, name: str, what: str):
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"oneDNN: unknown {what} '{name}' (known: {', '.join(table)})") \
            from None


# Post-ops ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PostOp:
    kind: str  # eltwise, sum, binary
    name: str = ""
    alpha: float = 0.0
    beta: float = 0.0
    shape: tuple[int, ...] = ()
    layout: MemoryDesc | None = None  # a binary operand's (None: plain)
    zero: int = 0  # a sum's: the zero point taken off what dst holds
    dtype: str = ""  # a sum's: the data type dst holds before the run ("": dst's)


def eltwise_post_op(name: str, alpha: float = 0.0, beta: float = 0.0) -> PostOp:
    _lookup(ELTWISE, name, "element-wise function")
    return PostOp("eltwise", name, alpha, beta)


def sum_post_op(scale: float = 1.0, zero: int = 0, dtype: str = "") -> PostOp:
    """dst += scale * (what dst holds before the run - zero), that held as `dtype` (of
    dst's size; "": dst's own)."""
    return PostOp("sum", alpha=scale, zero=zero, dtype=dtype)


def binary_post_op(name: str, shape, layout: MemoryDesc | None = None) -> PostOp:
    """dst = dst <name> operand, the operand of `shape` broadcasting, in `layout` (of
    its full shape; None: plain)."""
    _lookup(BINARY, name, "binary function")
    return PostOp("binary", name, shape=tuple(shape), layout=layout)


def _attr(post_ops, dst_shape, dtype,
          scales=None) -> tuple[capi.Attr, dict[str, tuple[int, MemoryDesc]]]:
    """The attributes (with `scales`: see capi.Attr), and the extra arguments binary
    post-ops take: name -> (arg, desc)."""
    ops, extra = [], {}
    for i, p in enumerate(post_ops):
        if p.kind == "eltwise":
            ops.append(("eltwise", ELTWISE[p.name], p.alpha, p.beta))
        elif p.kind == "sum":
            ops.append(_sum(p))
        else:
            shape = (1,) * (len(dst_shape) - len(p.shape)) + p.shape
            broadcast_shape(dst_shape, shape)
            desc = p.layout or plain_desc(shape, held(dtype))
            ops.append(("binary", BINARY[p.name], desc))
            extra[f"post_op_{i}"] = (capi.DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | capi.DNNL_ARG_SRC_1,
                                     desc)
    return capi.Attr(ops, scales), extra


def _sum(p: PostOp) -> tuple:
    return ("sum", p.alpha, p.zero,
            capi.data_type(p.dtype) if p.dtype else capi.dnnl_data_type_undef)


@dataclass(frozen=True)
class Quantization:
    """The scales and zero points an int8 convolution or product takes at run time:
    `weight_scales` 0 (none: the output is the int32 accumulator), 1, or one per output
    channel (then `src` has a scale too); whether dst has a scale, src and dst a zero
    point (one value each)."""

    weight_scales: int = 0
    dst_scale: bool = False
    src_zero: bool = False
    dst_zero: bool = False


def _quantized_attr(q: Quantization, channel_mask: int, post_ops):
    """The attributes of an int8 primitive (a weight scale per output channel: the
    dims of `channel_mask`), and the run-time arguments its scales and zero points are:
    name -> (arg, desc)."""
    scales, zeros, extra = {}, {}, {}

    def scalar(name, kind, arg, count, dtype, table, mask):
        table[arg] = mask if count > 1 else 0
        extra[name] = (kind | arg, plain_desc((count,), dtype))

    if q.weight_scales:
        scalar("src_scale", capi.DNNL_ARG_ATTR_SCALES, capi.DNNL_ARG_SRC, 1, "float32",
               scales, 0)
        scalar("weight_scale", capi.DNNL_ARG_ATTR_SCALES, capi.DNNL_ARG_WEIGHTS,
               q.weight_scales, "float32", scales, channel_mask)
    if q.dst_scale:
        scalar("dst_scale", capi.DNNL_ARG_ATTR_SCALES, capi.DNNL_ARG_DST, 1, "float32",
               scales, 0)
    if q.src_zero:
        scalar("src_zero", capi.DNNL_ARG_ATTR_ZERO_POINTS, capi.DNNL_ARG_SRC, 1, "int32",
               zeros, 0)
    if q.dst_zero:
        scalar("dst_zero", capi.DNNL_ARG_ATTR_ZERO_POINTS, capi.DNNL_ARG_DST, 1, "int32",
               zeros, 0)
    ops = []
    for p in post_ops:
        if p.kind == "eltwise":
            ops.append(("eltwise", ELTWISE[p.name], p.alpha, p.beta))
        elif p.kind == "sum":
            ops.append(_sum(p))
        else:
            raise ValueError(f"oneDNN: an int8 primitive takes eltwise and sum post-ops, "
                             f"not {p.kind}")
    return capi.Attr(ops, scales, zeros), extra


# Layouts ------------------------------------------------------------------------------------

def strided_desc(shape, dtype: str, order) -> MemoryDesc:
    """A dense layout of `shape` whose dimensions, outermost first, are `order`."""
    strides = [0] * len(shape)
    step = 1
    for axis in reversed(order):
        strides[axis] = step
        step *= max(shape[axis], 1)
    return MemoryDesc.with_strides(shape, dtype, strides)


def held(dtype: str) -> str:
    """The data type LightNet holds a tensor computed in `dtype` in: float32 for
    bfloat16 (numpy has no bfloat16), else `dtype` itself."""
    return "float32" if dtype == "bfloat16" else dtype


def plain_desc(shape, dtype: str = "float32") -> MemoryDesc:
    """LightNet's own layout of `shape`: dense, C order (what a numpy array has)."""
    return strided_desc(shape, dtype, range(len(shape)))


# 4-D layouts by oneDNN's tag: channels last, channels in blocks of 8 or 16.
TAGS_4D = {"acdb": capi.dnnl_acdb, "aBcd8b": capi.dnnl_aBcd8b, "aBcd16b": capi.dnnl_aBcd16b}
# Their 5-D counterparts (NCDHW: channels-last, channel blocks), what 3-D pooling reads.
TAGS_5D = {"acdeb": capi.dnnl_acdeb, "aBcde8b": capi.dnnl_aBcde8b,
           "aBcde16b": capi.dnnl_aBcde16b}


def _desc(shape, dtype: str, layout, what: str = "", chooses: bool = True) -> MemoryDesc:
    """The descriptor of a tensor of `shape` in `layout`; `chooses`: whether the
    primitive may choose it ("any": only convolutions, deconvolutions, matmul's
    weights and destinations may)."""
    shape = tuple(int(d) for d in shape)
    if isinstance(layout, MemoryDesc):
        if layout.shape != shape:
            raise ValueError(f"oneDNN: a layout of shape {list(layout.shape)} given for a "
                                f"tensor of shape {list(shape)}")
        return layout
    if layout == "plain":
        return plain_desc(shape, dtype)
    if layout == "any":
        if not chooses:
            raise ValueError(f"oneDNN {what}: cannot choose its source's layout (give "
                                "the producer's)")
        return MemoryDesc.with_tag(shape, dtype, capi.dnnl_format_tag_any)
    if layout == "channels_last":
        layout = "acdeb" if len(shape) == 5 else "acdb"
    if layout in TAGS_4D and len(shape) == 4:
        return MemoryDesc.with_tag(shape, dtype, TAGS_4D[layout])
    if layout in TAGS_5D and len(shape) == 5:
        return MemoryDesc.with_tag(shape, dtype, TAGS_5D[layout])
    raise ValueError(f"oneDNN: unknown layout {layout!r} for a {len(shape)}-D tensor "
                        f"(expected plain, any, channels_last, {', '.join(TAGS_4D)} "
                        f"(4-D), {', '.join(TAGS_5D)} (5-D) or a MemoryDesc)")


# Kernels ------------------------------------------------------------------------------------

class Kernel:
    """One primitive for fixed shapes. `args`: tensor name -> DNNL_ARG_*; `descs`:
    the layout of each tensor (oneDNN's choice where it was "any"); `plain`: each
    tensor's layout as the cpu kernels hold it (what load_weights reorders from, and
    what a layout pass compares with); `scratchpad`: bytes of scratch per run."""

    def __init__(self, what: str, pd: capi.PrimitiveDesc, args: dict[str, int],
                 plain: dict[str, MemoryDesc], extra=None):
        self.what = what
        self.pd = pd
        self.primitive = capi.Primitive(pd)
        self.args = dict(args)
        self.descs: dict[str, MemoryDesc] = {}
        for name, arg in args.items():
            desc = pd.arg_desc(arg)
            if desc is None:
                raise ValueError(f"oneDNN: {what} takes no argument {name}")
            self.descs[name] = desc
        for name, (arg, desc) in (extra or {}).items():
            self.args[name] = arg
            self.descs[name] = desc
            plain[name] = desc
        self.plain = plain
        scratch = pd.arg_desc(capi.DNNL_ARG_SCRATCHPAD)
        self.scratchpad_desc = scratch
        self.scratchpad = scratch.nbytes if scratch is not None else 0
        self.impl_info = pd.impl_info
        # The layouts the primitive takes for tensors `descs` describes otherwise, byte
        # for byte (qmatmul as a 1x1 convolution: A [M, K] is its [M, K, 1, 1] source).
        self.views: dict[str, MemoryDesc] = {}
        # Tensors the kernel holds itself (a matmul's alpha), bound with the others.
        self.constants: dict[str, np.ndarray] = {}

    @functools.cached_property
    def bindings(self) -> tuple[tuple[str, int, MemoryDesc], ...]:
        """(tensor name, DNNL_ARG_*, the layout its memory has) of each argument bound,
        found once (the constructors set `views` before a kernel is first bound; ops
        sharing the kernel each bind it)."""
        return tuple((name, arg, self.views.get(name, self.descs[name]))
                     for name, arg in self.args.items())

    def nbytes(self, name: str) -> int:
        """Bytes tensor `name` takes in the primitive's layout (blocked padding included)."""
        return self.descs[name].nbytes

    def format(self, name: str) -> str:
        return self.descs[name].format

    def bind(self, buffers: dict[str, np.ndarray], scratchpad: np.ndarray | None = None,
             share: bool = True) -> capi.Execute:
        """The run call over `buffers` (one per tensor, by name: arena views of at least
        nbytes(name) bytes, C-contiguous) and `scratchpad` (at least `scratchpad` bytes).
        Within a memory_cache, ops binding the kernel to the same memories share one
        run call. `share=False`: memories and a call of their own, not from the
        memory_cache (buffers that live no longer than the call)."""
        if self.constants:
            buffers = {**{n: c.view(np.uint8) for n, c in self.constants.items()}, **buffers}
        cache = _memories.get() if share else None
        memories = {}
        for name, arg, desc in self.bindings:
            try:
                buffer = buffers[name]
            except KeyError:
                missing = [n for n in self.args if n not in buffers]
                raise ValueError(f"oneDNN {self.what}: no buffer for {missing}") from None
            memories[arg] = _memory(desc, buffer, self.what, name, cache)
        if self.scratchpad:
            if scratchpad is None:
                raise ValueError(f"oneDNN {self.what}: needs a scratchpad of "
                                    f"{self.scratchpad} bytes")
            memories[capi.DNNL_ARG_SCRATCHPAD] = _memory(self.scratchpad_desc, scratchpad,
                                                         self.what, "scratchpad", cache)
        if cache is None:
            return capi.Execute(self.primitive, memories, self.what)
        key = (self, *memories.values())  # the same arguments in the same order
        execute = cache.calls.get(key)
        if execute is None:
            execute = cache.calls[key] = capi.Execute(self.primitive, memories, self.what)
        return execute

    def load_weights(self, name: str, data: np.ndarray, buffer: np.ndarray) -> None:
        """Reorder `data` (tensor `name` in its plain layout) into `buffer` in the
        primitive's layout: done once, at load."""
        data = np.ascontiguousarray(data)
        if data.nbytes != self.plain[name].nbytes:
            raise ValueError(f"oneDNN {self.what}: {name} has {data.nbytes} bytes, "
                                f"expected {self.plain[name].nbytes}")
        reorder(self.plain[name], self.descs[name]).bind({"src": data, "dst": buffer},
                                                         share=False)()

    def __repr__(self) -> str:
        layouts = ", ".join(f"{n}: {d.format}" for n, d in self.descs.items())
        return f"<{self.what} [{self.impl_info}] {layouts}; scratchpad {self.scratchpad}>"


class _LoadCache:
    """What a load makes once (memory_cache): memories by layout (its layout_id) and address,
    and by buffer object and layout (the buffer held with it, so that no other object
    takes its id); run calls by kernel and memories."""

    def __init__(self):
        self.memories: dict[tuple, capi.Memory] = {}
        self.bound: dict[tuple, tuple[np.ndarray, capi.Memory]] = {}
        self.calls: dict[tuple, capi.Execute] = {}


# The memory_cache's: None outside a load.
_memories: contextvars.ContextVar[_LoadCache | None] = contextvars.ContextVar(
    "dnnl_memories", default=None)


@contextlib.contextmanager
def memory_cache():
    """Within the block, one memory object per layout (by its content) and address: a
    tensor's producer and its readers bind the same one (the memories of a chain of N
    ops are N + 1, not 2N), and the readers find it by the array the producer bound,
    whose address is not worked out again; and one run call per kernel and memories
    (ops of one primitive over the same arena places, such as the repeated blocks of
    a model whose memory plan reuses them, share it). A memory is only a layout and a
    pointer into a buffer it keeps alive, so no other buffer has its address while it
    is cached; the cache is dropped when the block ends (Context.load holds one),
    before any buffer is freed. A block inside another shares the outer one's."""
    if _memories.get() is not None:
        yield
        return
    token = _memories.set(_LoadCache())
    try:
        yield
    finally:
        _memories.reset(token)


def _memory(desc: MemoryDesc, buffer: np.ndarray, what: str, name: str,
            cache: _LoadCache | None) -> capi.Memory:
    """A memory object over `buffer` in layout `desc` (checked to hold its bytes): the
    memory_cache's `cache` when one is given."""
    if cache is None:
        return capi.Memory(desc, _address(buffer, desc.nbytes, what, name), buffer)
    layout = desc.layout_id
    held = cache.bound.get((id(buffer), layout))
    if held is not None:
        return held[1]
    address = _address(buffer, desc.nbytes, what, name)
    memory = cache.memories.get((layout, address))
    if memory is None:
        memory = cache.memories[layout, address] = capi.Memory(desc, address, buffer)
    cache.bound[id(buffer), layout] = (buffer, memory)
    return memory


def _address(buffer: np.ndarray, nbytes: int, what: str, name: str) -> int:
    """Where the bytes of `buffer` (tensor `name` of primitive `what`) start."""
    flags = buffer.flags if isinstance(buffer, np.ndarray) else None
    if flags is None or not flags.c_contiguous:
        raise ValueError(f"oneDNN {what} {name}: the buffer must be a C-contiguous numpy "
                         "array")
    if buffer.nbytes < nbytes:
        raise ValueError(f"oneDNN {what} {name}: the buffer has {buffer.nbytes} bytes, "
                            f"the primitive needs {nbytes}")
    if flags.writeable and buffer.nbytes:  # 5x faster than __array_interface__
        return ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    return buffer.__array_interface__["data"][0]


def _pair(values, what: str) -> tuple[int, int]:
    values = tuple(int(v) for v in values)
    if len(values) != 2:
        raise ValueError(f"oneDNN: {what} must have 2 entries, found {list(values)}")
    return values


def _weights_plain(weight_shape, group, dtype, transposed: bool) -> tuple[tuple, MemoryDesc]:
    """oneDNN's logical weight dims ([O, C, *kernel], or [g, O/g, C/g, *kernel]) and the
    plain layout of LightNet's weight: [O, C/g, *kernel] for a convolution, [C, O/g,
    *kernel] (transposed) for a deconvolution."""
    kernel = tuple(weight_shape[2:])
    if transposed:
        c, og = weight_shape[:2]
        cg = c // group
        # LightNet memory: [g, C/g, O/g, *kernel] in C order.
        mem = (group, cg, og) + kernel
        logical = (group, og, cg) + kernel
        perm = (0, 2, 1) + tuple(range(3, 3 + len(kernel)))  # logical axis -> memory axis
    else:
        o, cg = weight_shape[:2]
        mem = logical = (group, o // group, cg) + kernel
        perm = tuple(range(3 + len(kernel)))
    mem_strides = [0] * len(mem)
    step = 1
    for axis in reversed(range(len(mem))):
        mem_strides[axis] = step
        step *= mem[axis]
    strides = [mem_strides[perm[i]] for i in range(len(mem))]
    if group == 1:
        logical, strides = logical[1:], strides[1:]
    return logical, MemoryDesc.with_strides(logical, dtype, strides)


def _conv(what, function, src_shape, weight_shape, dst_shape, bias, group, stride, padding,
          dilation, dtype, src, dst, post_ops, transposed):
    logical, weights_plain = _weights_plain(weight_shape, group, held(dtype), transposed)
    src_d = _desc(src_shape, dtype, src)
    dst_d = _desc(dst_shape, dtype, dst)
    weights_d = MemoryDesc.with_tag(logical, dtype, capi.dnnl_format_tag_any)
    o = dst_shape[1]
    bias_d = plain_desc((o,), held(dtype)) if bias else None
    rank = len(src_shape) - 2
    attr, extra = _attr(post_ops, dst_shape, dtype)
    alg = capi.dnnl_deconvolution_direct if transposed else capi.dnnl_convolution_direct
    pd = capi.PrimitiveDesc.create(
        function, capi.library().engine, capi.dnnl_forward_inference, alg, src_d,
        weights_d, bias_d, dst_d, capi.dims(stride),
        capi.dims([d - 1 for d in dilation]), capi.dims(padding[:rank]),
        capi.dims(padding[rank:]), attr)
    args = {"src": capi.DNNL_ARG_SRC, "weights": capi.DNNL_ARG_WEIGHTS, "dst": capi.DNNL_ARG_DST}
    plain = {"src": plain_desc(src_shape, held(dtype)), "weights": weights_plain,
             "dst": plain_desc(dst_shape, held(dtype))}
    if bias:
        args["bias"] = capi.DNNL_ARG_BIAS
        plain["bias"] = bias_d
    return Kernel(what, pd, args, plain, extra)


def conv2d(src_shape, weight_shape, *, bias: bool, group: int = 1, stride=(1, 1),
           padding=(0, 0, 0, 0), dilation=(1, 1), dtype: str = "float32", src="any",
           dst="any", post_ops=()) -> Kernel:
    """Convolution (the cpu conv2d) of 2 or 3 spatial axes: src [N, C, H, W] or [N, C, D,
    H, W], weight [O, C/group, *kernel], bias [O] when `bias`, `padding` the spatial
    begins then ends; tensors src, weights, bias, dst."""
    n, c = src_shape[:2]
    o, cg = weight_shape[:2]
    rank = len(src_shape) - 2
    if c != cg * group or o % group:
        raise ValueError(f"oneDNN convolution: {c} input and {o} output channels do not "
                            f"split into {group} groups of weight {list(weight_shape)}")
    stride, dilation = tuple(int(v) for v in stride), tuple(int(v) for v in dilation)
    if rank not in (2, 3) or len(weight_shape) != rank + 2 or {len(stride), len(dilation)} \
            != {rank} or len(padding) != 2 * rank:
        raise ValueError(f"oneDNN convolution: weight {list(weight_shape)}, stride "
                         f"{list(stride)}, dilation {list(dilation)}, padding "
                         f"{list(padding)} do not fit a source {list(src_shape)}")
    out = conv2d_output_hw(src_shape[2:], weight_shape[2:], stride, padding, dilation)
    return _conv(f"conv{rank}d", "dnnl_convolution_forward_primitive_desc_create", src_shape,
                 weight_shape, (n, o) + tuple(out), bias, group, stride, tuple(padding),
                 dilation, dtype, src, dst, post_ops, transposed=False)


def deconv2d(src_shape, weight_shape, *, bias: bool, group: int = 1, stride=(1, 1),
             padding=(0, 0, 0, 0), output_padding=(0, 0), dilation=(1, 1),
             dtype: str = "float32", src="any", dst="any", post_ops=()) -> Kernel:
    """Transposed convolution (the cpu deconv2d): weight [C, O/group, kh, kw]; the
    output padding enlarges the bottom/right of dst (oneDNN: less end padding)."""
    n, c, h, w = src_shape
    wc, og, kh, kw = weight_shape
    if wc != c or c % group:
        raise ValueError(f"oneDNN deconv2d: weight {list(weight_shape)} does not fit "
                            f"{c} input channels in {group} groups")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    output_padding = _pair(output_padding, "output padding")
    oh, ow = deconv2d_output_hw((h, w), (kh, kw), stride, padding, output_padding, dilation)
    top, left, bottom, right = padding
    ends = (bottom - output_padding[0], right - output_padding[1])
    if min(top, left, *ends) < 0:
        raise Unsupported("oneDNN deconvolution: negative padding")
    return _conv("deconv2d", "dnnl_deconvolution_forward_primitive_desc_create", src_shape,
                 weight_shape, (n, og * group, oh, ow), bias, group, stride,
                 (top, left, *ends), dilation, dtype, src, dst, post_ops, transposed=True)


def matmul(a_shape, b_shape, *, trans_a: bool = False, trans_b: bool = False, bias_shape=None,
           dtype: str = "float32", b_layout="any", post_ops=(),
           a_layout: MemoryDesc | None = None, alpha: float = 1.0,
           dst_layout: MemoryDesc | None = None) -> Kernel:
    """dst = op(A) @ op(B) (+ bias, broadcast) (the cpu matmul with alpha = beta = 1;
    an alpha is an eltwise linear post-op), over the last two axes, leading (batch)
    axes broadcasting like numpy's: an operand of fewer dimensions is described with
    leading dims of 1 (oneDNN takes operands and dst of one rank, broadcasting batch
    dims of 1). A and B in their plain layouts (op transposes them by strides, no
    copy). B (`weights`) is "plain" when it is computed per run; a static one
    (load_weights reorders it) "any" (oneDNN's choice) or "transposed" (B^T dense,
    which gemm:jit:f32 on AVX2 multiplies faster than the [K, N] it chooses: 104 against
    85 GFLOP/s for BERT's [128, 768] @ [768, 3072] on 2 cores, where N = 3072 rows
    of 12 KB alias in the cache). A descriptor as `a_layout` or `b_layout` is the
    operand's layout before op (strides of a view: a transpose_view's, read as they
    are). `alpha` scales the product as oneDNN's weights scale (one value, bound by the
    kernel itself), which gemm:jit:f32 applies as its GEMM's alpha: a batched [12, 128,
    64] @ [12, 64, 128] took 0.214 ms so against 0.223 bare and 0.271 with the
    eltwise linear post-op (2 AVX2 cores). `dst_layout`: the output's strides, where it
    is written laid out otherwise than plain (attention's context straight into its
    transpose's [B, T, H, D]). Tensors src, weights, bias, dst."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if min(len(a_shape), len(b_shape)) < 2:
        raise ValueError(f"oneDNN matmul: operands of 2 or more dimensions, found "
                         f"{list(a_shape)} and {list(b_shape)}")
    rank = max(len(a_shape), len(b_shape))
    if rank > capi.DNNL_MAX_NDIMS:
        raise Unsupported(f"oneDNN matmul: at most {capi.DNNL_MAX_NDIMS} dimensions")
    a_shape = (1,) * (rank - len(a_shape)) + a_shape
    b_shape = (1,) * (rank - len(b_shape)) + b_shape

    def operand(shape, trans):
        """The logical shape, and the layout of the operand in dtype and as held."""
        order = list(range(len(shape)))
        if trans:
            shape = shape[:-2] + (shape[-1], shape[-2])
            order[-2], order[-1] = order[-1], order[-2]
        return shape, strided_desc(shape, dtype, order), strided_desc(shape, held(dtype), order)

    a_log, a_d, a_plain = operand(a_shape, trans_a)
    b_log, b_d, b_plain = operand(b_shape, trans_b)
    if a_layout is not None:
        a_d = a_layout.transposed(_last_two_swapped(rank)) if trans_a else a_layout
    if a_log[-1] != b_log[-2]:
        raise ValueError(f"oneDNN matmul: A {list(a_shape)} and B {list(b_shape)} do not "
                            "multiply")
    batch = broadcast_shape(a_log[:-2], b_log[:-2])
    dst_shape = tuple(batch) + (a_log[-2], b_log[-1])
    if b_layout == "transposed":  # B^T dense: each column of B a row, as a weight
        order = list(range(len(b_log)))
        order[-2], order[-1] = order[-1], order[-2]
        b_d = strided_desc(b_log, dtype, order)
    elif isinstance(b_layout, MemoryDesc):
        b_d = b_layout.transposed(_last_two_swapped(rank)) if trans_b else b_layout
    elif b_layout != "plain":
        b_d = _desc(b_log, dtype, b_layout)
    dst_d = plain_desc(dst_shape, dtype) if dst_layout is None else dst_layout
    args = {"src": capi.DNNL_ARG_SRC, "weights": capi.DNNL_ARG_WEIGHTS, "dst": capi.DNNL_ARG_DST}
    plain = {"src": a_plain, "weights": b_plain, "dst": plain_desc(dst_shape, held(dtype))}
    bias_d = None
    if bias_shape is not None:
        bias_shape = (1,) * (len(dst_shape) - len(bias_shape)) + tuple(bias_shape)
        if broadcast_shape(dst_shape, bias_shape) != dst_shape:
            raise ValueError(f"oneDNN matmul: bias {list(bias_shape)} does not broadcast "
                                f"to {list(dst_shape)}")
        bias_d = plain_desc(bias_shape, held(dtype))
        args["bias"] = capi.DNNL_ARG_BIAS
        plain["bias"] = bias_d
    scales = {capi.DNNL_ARG_WEIGHTS: 0} if alpha != 1 else None
    attr, extra = _attr(post_ops, dst_shape, dtype, scales)
    if scales:
        extra["alpha"] = (capi.DNNL_ARG_ATTR_SCALES | capi.DNNL_ARG_WEIGHTS,
                          plain_desc((1,), "float32"))
    pd = capi.PrimitiveDesc.create(
        "dnnl_matmul_primitive_desc_create", capi.library().engine, a_d, b_d,
        bias_d, dst_d, attr)
    kernel = Kernel("matmul", pd, args, plain, extra)
    if scales:
        kernel.constants["alpha"] = np.array([alpha], np.float32)
    return kernel


def _last_two_swapped(rank: int) -> tuple[int, ...]:
    return (*range(rank - 2), rank - 1, rank - 2)


# A linear layer's blocked layout: channels in blocks of 8 (AVX2's).
BLOCKED_4D = "aBcd8b"


def blocked_matrix(shape, dtype: str = "float32") -> MemoryDesc:
    """The matrix [M, C] held as a linear's blocked operand: [1, C, 1, M] in channel
    blocks of 8 (BLOCKED_4D) seen as [M, C], oneDNN's `Ba8b`."""
    m, c = shape
    return _desc((1, c, 1, m), dtype, BLOCKED_4D).reshaped((c, m)).transposed((1, 0))


class Linear:
    """dst[M, N] = A[M, K] @ B[K, N] (+ bias [N]) with a static B, in float32, as a 1x1
    convolution over [1, K, 1, M] in channel blocks of 8 (`aBcd8b`), A reordered in
    and the product out around it: on AVX2, where oneDNN's f32 matmul is gemm:jit:f32
    (which packs B on every call), its jit_1x1 convolution reads B reordered once, at
    load (ABcd8b8a), and ran BERT's and GPT-2's linear layers 5-10 % faster, the two
    reorders included (`linear`). `src_blocked` / `dst_blocked`: A is read, the
    product written, in the blocked layout itself (blocked_matrix), not reordered: a
    transformer's feed-forward product between its two linears (0.1-0.15 ms a reorder
    of [128, 3072] on 2 AVX2 cores). A Kernel to its callers: tensors src, weights,
    bias, dst, all but the weights plain unless blocked; the blocked copies live in
    its scratchpad. `residual`: the output reorder adds the product to what dst holds
    (a sum post-op: a residual added in place, no pass of its own)."""

    what = "linear"

    def __init__(self, a_shape, b_shape, trans_b: bool, bias: bool, dtype: str, post_ops,
                 src_blocked: bool = False, dst_blocked: bool = False,
                 residual: bool = False):
        (m, k), n = a_shape, b_shape[0] if trans_b else b_shape[1]
        self.conv = conv2d((1, k, 1, m), (n, k, 1, 1), bias=bias, dtype=dtype,
                           src=BLOCKED_4D, dst=BLOCKED_4D, post_ops=post_ops)
        # [M, K] in C order is [1, K, 1, M] channels-last.
        self.reorder_in = None if src_blocked else reorder(
            _desc((1, k, 1, m), dtype, "acdb"), self.conv.descs["src"])
        self.reorder_out = None if dst_blocked else reorder(
            self.conv.descs["dst"], _desc((1, n, 1, m), dtype, "acdb"),
            post_ops=[sum_post_op()] if residual else ())
        self.impl_info = self.conv.impl_info
        # B [K, N] (B^T [N, K] with trans_b) is the weight [N, K, 1, 1] by strides.
        weights = strided_desc((n, k, 1, 1), held(dtype), (1, 0, 2, 3) if not trans_b
                               else (0, 1, 2, 3))
        self.descs = {
            "src": blocked_matrix((m, k), dtype) if src_blocked else plain_desc((m, k), dtype),
            "weights": self.conv.descs["weights"],
            "dst": blocked_matrix((m, n), dtype) if dst_blocked else plain_desc((m, n), dtype)}
        self.plain = {"src": plain_desc((m, k), held(dtype)), "weights": weights,
                      "dst": plain_desc((m, n), held(dtype))}
        if bias:
            self.descs["bias"] = self.plain["bias"] = self.conv.descs["bias"]
        self.args = dict.fromkeys(self.descs)  # its tensors, as a Kernel's
        # The scratchpad: the convolution's, then the blocked copies it reorders.
        self.scratchpad = self.conv.scratchpad
        self._at = {}
        for name, copy in (("src", self.reorder_in), ("dst", self.reorder_out)):
            if copy is not None:
                self._at[name] = -(-self.scratchpad // 64) * 64
                self.scratchpad = self._at[name] + self.conv.nbytes(name)

    def nbytes(self, name: str) -> int:
        return self.descs[name].nbytes

    def format(self, name: str) -> str:
        return self.descs[name].format

    load_weights = Kernel.load_weights

    def bind(self, buffers: dict[str, np.ndarray], scratchpad: np.ndarray | None = None,
             share: bool = True):
        if self.scratchpad and (scratchpad is None or scratchpad.nbytes < self.scratchpad):
            raise ValueError(f"oneDNN linear: needs a scratchpad of {self.scratchpad} bytes")
        if self.scratchpad:
            scratchpad = scratchpad.reshape(-1).view(np.uint8)
        conv_buffers = dict(buffers)
        for name, at in self._at.items():
            conv_buffers[name] = scratchpad[at:at + self.conv.nbytes(name)]
        pad = self.conv.scratchpad
        steps = [self.conv.bind(conv_buffers, scratchpad[:pad] if pad else None, share=share)]
        if self.reorder_in is not None:
            steps.insert(0, self.reorder_in.bind(
                {"src": buffers["src"], "dst": conv_buffers["src"]}, share=share))
        if self.reorder_out is not None:
            steps.append(self.reorder_out.bind(
                {"src": conv_buffers["dst"], "dst": buffers["dst"]}, share=share))
        if len(steps) == 1:
            return steps[0]

        def run():
            for step in steps:
                step()
        return run

    def __repr__(self) -> str:
        return f"<linear [{self.impl_info}] weights: {self.format('weights')}>"


def linear(a_shape, b_shape, *, trans_b: bool = False, bias: bool = False,
           dtype: str = "float32", post_ops=(), src_blocked: bool = False,
           dst_blocked: bool = False, residual: bool = False) -> Linear:
    """A[M, K] @ B (B [K, N], or [N, K] with trans_b) + bias [N] as a Linear (above),
    plus what dst holds with `residual`; float32, eltwise post-ops only."""
    if dtype != "float32":
        raise ValueError(f"oneDNN linear: float32 only, found {dtype}")
    if residual and dst_blocked:
        raise ValueError("oneDNN linear: a residual is added to a plain product only")
    if any(p.kind != "eltwise" for p in post_ops):
        raise ValueError("oneDNN linear: eltwise post-ops only")
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise ValueError(f"oneDNN linear: 2-D operands, found {list(a_shape)} and "
                         f"{list(b_shape)}")
    return Linear(tuple(a_shape), tuple(b_shape), trans_b, bias, dtype, post_ops,
                  src_blocked, dst_blocked, residual)


def qconv2d(src_shape, weight_shape, *, src_dtype: str, dst_dtype: str, bias: bool,
            quantization: Quantization, group: int = 1, stride=(1, 1), padding=(0, 0, 0, 0),
            dilation=(1, 1), post_ops=()) -> Kernel:
    """int8 convolution (the cpu qconv2d): src [N, C, H, W] uint8 or int8, weight [O,
    C/group, kh, kw] int8, a float32 bias [O] (the cpu's int32 bias times src_scale *
    weight_scale, which oneDNN adds after scaling) when `bias`, dst of `dst_dtype`
    (uint8, int8, float32 or int32). oneDNN's int8 kernels read and write channels-last
    (they are its reference ones on NCHW): src and dst are channels-last, their plain
    layouts NCHW. Tensors src, weights, bias, dst, and the scales and zero points of
    `quantization` (src_scale, weight_scale, dst_scale, src_zero, dst_zero)."""
    n, c, h, w = src_shape
    o, cg, kh, kw = weight_shape
    if c != cg * group or o % group:
        raise ValueError(f"oneDNN qconv2d: {c} input and {o} output channels do not "
                         f"split into {group} groups of weight {list(weight_shape)}")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    dst_shape = (n, o) + tuple(conv2d_output_hw((h, w), (kh, kw), stride, padding, dilation))
    logical, weights_plain = _weights_plain(weight_shape, group, "int8", False)
    src_d = MemoryDesc.with_tag(tuple(src_shape), src_dtype, capi.dnnl_acdb)
    dst_d = MemoryDesc.with_tag(dst_shape, dst_dtype, capi.dnnl_acdb)
    weights_d = MemoryDesc.with_tag(logical, "int8", capi.dnnl_format_tag_any)
    bias_d = plain_desc((o,), "float32") if bias else None
    # Per output channel: oneDNN's weight dims [O, ...], or [groups, O / groups, ...].
    attr, extra = _quantized_attr(quantization, 1 if group == 1 else 3, post_ops)
    top, left, bottom, right = padding
    pd = capi.PrimitiveDesc.create(
        "dnnl_convolution_forward_primitive_desc_create", capi.library().engine,
        capi.dnnl_forward_inference, capi.dnnl_convolution_direct, src_d, weights_d, bias_d,
        dst_d, capi.dims(stride), capi.dims([d - 1 for d in dilation]),
        capi.dims((top, left)), capi.dims((bottom, right)), attr)
    args = {"src": capi.DNNL_ARG_SRC, "weights": capi.DNNL_ARG_WEIGHTS, "dst": capi.DNNL_ARG_DST}
    plain = {"src": plain_desc(src_shape, src_dtype), "weights": weights_plain,
             "dst": plain_desc(dst_shape, dst_dtype)}
    if bias:
        args["bias"] = capi.DNNL_ARG_BIAS
        plain["bias"] = bias_d
    return Kernel("qconv2d", pd, args, plain, extra)


def qmatmul(a_shape, b_shape, *, src_dtype: str, dst_dtype: str, bias: bool,
            quantization: Quantization, post_ops=()) -> Kernel:
    """int8 matrix product (the cpu qmatmul): A [..., M, K] uint8 or int8 and dst plain,
    B [..., K, N] int8 in the layout the matmul chooses (load_weights), batch dims
    broadcasting; a float32 bias [N] (the cpu's int32 bias times the scales) when
    `bias`; a weight scale per column. Tensors src, weights, bias, dst, and the scales
    and zero points of `quantization`."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    rank = max(len(a_shape), len(b_shape))
    if rank > capi.DNNL_MAX_NDIMS:
        raise Unsupported(f"oneDNN matmul: at most {capi.DNNL_MAX_NDIMS} dimensions")
    a_shape = (1,) * (rank - len(a_shape)) + a_shape
    b_shape = (1,) * (rank - len(b_shape)) + b_shape
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(f"oneDNN qmatmul: A {list(a_shape)} and B {list(b_shape)} do not "
                         "multiply")
    dst_shape = tuple(broadcast_shape(a_shape[:-2], b_shape[:-2])) + (a_shape[-2],
                                                                       b_shape[-1])
    if rank == 2:
        kernel = _qlinear(*a_shape, b_shape[1], src_dtype=src_dtype, dst_dtype=dst_dtype,
                          bias=bias, quantization=quantization, post_ops=post_ops)
        if not kernel.impl_info.startswith("ref"):
            return kernel
    a_d = plain_desc(a_shape, src_dtype)
    b_d = MemoryDesc.with_tag(b_shape, "int8", capi.dnnl_format_tag_any)
    dst_d = plain_desc(dst_shape, dst_dtype)
    bias_d = plain_desc((1,) * (rank - 1) + (b_shape[-1],), "float32") if bias else None
    attr, extra = _quantized_attr(quantization, 1 << (rank - 1), post_ops)
    pd = capi.PrimitiveDesc.create("dnnl_matmul_primitive_desc_create", capi.library().engine,
                                   a_d, b_d, bias_d, dst_d, attr)
    args = {"src": capi.DNNL_ARG_SRC, "weights": capi.DNNL_ARG_WEIGHTS, "dst": capi.DNNL_ARG_DST}
    plain = {"src": a_d, "weights": plain_desc(b_shape, "int8"), "dst": dst_d}
    if bias:
        args["bias"] = capi.DNNL_ARG_BIAS
        plain["bias"] = bias_d
    return Kernel("qmatmul", pd, args, plain, extra)


def _qlinear(m: int, k: int, n: int, *, src_dtype: str, dst_dtype: str, bias: bool,
             quantization: Quantization, post_ops) -> Kernel:
    """A 2-D qmatmul, A [M, K] @ B [K, N], as oneDNN's int8 1x1 convolution of one image
    of M x 1 pixels: A and dst are its channels-last source and output byte for byte
    (views), B read as its weights [N, K, 1, 1] (a classifier's row: 0.06 ms, gemm:jit's
    int8 matmul 0.19 ms; BERT's 128 x 768 @ 768 x 768 with a source zero point 0.54 ms,
    1.04 as M images of one pixel). Tensors as qmatmul's."""
    src_d = MemoryDesc.with_tag((1, k, m, 1), src_dtype, capi.dnnl_acdb)
    dst_d = MemoryDesc.with_tag((1, n, m, 1), dst_dtype, capi.dnnl_acdb)
    weights_d = MemoryDesc.with_tag((n, k, 1, 1), "int8", capi.dnnl_format_tag_any)
    bias_d = plain_desc((n,), "float32") if bias else None
    attr, extra = _quantized_attr(quantization, 1, post_ops)
    pd = capi.PrimitiveDesc.create(
        "dnnl_convolution_forward_primitive_desc_create", capi.library().engine,
        capi.dnnl_forward_inference, capi.dnnl_convolution_direct, src_d, weights_d, bias_d,
        dst_d, capi.dims((1, 1)), capi.dims((0, 0)), capi.dims((0, 0)), capi.dims((0, 0)),
        attr)
    args = {"src": capi.DNNL_ARG_SRC, "weights": capi.DNNL_ARG_WEIGHTS, "dst": capi.DNNL_ARG_DST}
    plain = {"src": plain_desc((m, k), src_dtype),
             "weights": MemoryDesc.with_strides((n, k, 1, 1), "int8", (1, n, n * k, n * k)),
             "dst": plain_desc((m, n), dst_dtype)}
    if bias:
        args["bias"] = capi.DNNL_ARG_BIAS
        plain["bias"] = bias_d
    kernel = Kernel("qmatmul", pd, args, plain, extra)
    kernel.views = {"src": src_d, "dst": dst_d}
    kernel.descs["src"], kernel.descs["dst"] = plain["src"], plain["dst"]
    return kernel


def pool(src_shape, *, kind: str, size, stride, padding=None, dilation=None,
         ceil_mode: bool = False, count_include_pad: bool = False, dtype: str = "float32",
         src="plain", dst="any") -> Kernel:
    """Max or average pooling over the 2 or 3 spatial axes of NCHW / NCDHW (the cpu
    maxpool / avgpool); `padding` the spatial begins then ends (None: none), `dilation`
    None: 1 on every axis; tensors src, dst."""
    rank = len(src_shape) - 2
    padding = tuple(padding or (0,) * (2 * rank))
    dilation = tuple(dilation or (1,) * rank)
    size, stride = tuple(int(v) for v in size), tuple(int(v) for v in stride)
    if rank not in (2, 3) or {len(size), len(stride), len(dilation)} != {rank} \
            or len(padding) != 2 * rank:
        raise ValueError(f"oneDNN pooling: size {list(size)}, stride {list(stride)}, "
                         f"dilation {list(dilation)}, padding {list(padding)} do not fit a "
                         f"{rank}-D pooling")
    out = pool2d_output_hw(src_shape[2:], size, stride, padding, ceil_mode=ceil_mode,
                           dilation=dilation)
    begins, explicit_ends = padding[:rank], padding[rank:]
    # oneDNN takes the end padding the output needs (ceil mode: more than the explicit).
    ends = tuple((o - 1) * s + (k - 1) * d + 1 - i - b for o, s, k, d, i, b in
                 zip(out, stride, size, dilation, src_shape[2:], begins))
    if kind == "max":
        alg = capi.dnnl_pooling_max
    elif kind == "avg":
        if count_include_pad and any(e > x for e, x in zip(ends, explicit_ends)):
            # oneDNN counts the implicit ceil-mode cells too; the cpu kernel does not.
            raise Unsupported("oneDNN average pooling counting padding, in ceil mode")
        alg = (capi.dnnl_pooling_avg_include_padding if count_include_pad
               else capi.dnnl_pooling_avg_exclude_padding)
    else:
        raise ValueError(f"oneDNN pooling: kind must be max or avg, found {kind!r}")
    if min(ends) < 0:
        ends = tuple(max(e, 0) for e in ends)  # windows never reach the explicit end padding
    dst_shape = tuple(src_shape[:2]) + tuple(out)
    src_d = _desc(src_shape, dtype, src, f"{kind}pool", chooses=False)
    attr, _ = _attr((), dst_shape, dtype)
    pd = capi.PrimitiveDesc.create(
        "dnnl_pooling_forward_primitive_desc_create", capi.library().engine,
        capi.dnnl_forward_inference, alg, src_d, _desc(dst_shape, dtype, dst),
        capi.dims(stride), capi.dims(size),
        capi.dims([d - 1 for d in dilation]), capi.dims(begins), capi.dims(ends),
        attr)
    return Kernel(f"{kind}pool{rank}d", pd, {"src": capi.DNNL_ARG_SRC, "dst": capi.DNNL_ARG_DST},
                  {"src": plain_desc(src_shape, held(dtype)),
                   "dst": plain_desc(dst_shape, held(dtype))})


def _unary(what, function, shape, dtype, src, dst, before=(), after=(), *, dst_shape=None,
           stats=None) -> Kernel:
    """A primitive of one source and one destination, made by
    `function(engine, forward_inference, *before, src, dst, *after, attr)`; `stats`
    are further [C] tensors (batchnorm's): name -> (arg, desc)."""
    dst_shape = tuple(shape) if dst_shape is None else tuple(dst_shape)
    src_d = _desc(shape, dtype, src, what, chooses=False)
    # A dst "any" of the source's shape takes the source's layout (no reorder between).
    dst_d = _desc(dst_shape, dtype, src_d if dst == "any" and dst_shape == tuple(shape)
                  else dst)
    attr, _ = _attr((), dst_shape, dtype)
    pd = capi.PrimitiveDesc.create(function, capi.library().engine, capi.dnnl_forward_inference,
                                   *before, src_d, dst_d, *after, attr)
    args = {"src": capi.DNNL_ARG_SRC, "dst": capi.DNNL_ARG_DST}
    plain = {"src": plain_desc(shape, held(dtype)), "dst": plain_desc(dst_shape, held(dtype))}
    for name, (arg, desc) in (stats or {}).items():
        args[name] = arg
        plain[name] = desc
    return Kernel(what, pd, args, plain)


def eltwise(shape, name: str, alpha: float = 0.0, beta: float = 0.0, *,
            dtype: str = "float32", src="plain", dst="any") -> Kernel:
    """dst = f(src), f one of ELTWISE (relu: alpha is the negative slope; clip:
    alpha, beta are min, max); tensors src, dst (may be the same buffer)."""
    alg = _lookup(ELTWISE, name, "element-wise function")
    return _unary(name, "dnnl_eltwise_forward_primitive_desc_create", shape, dtype, src, dst,
                  (alg,), (float(alpha), float(beta)))


def binary(shape0, shape1, name: str, *, dtype: str = "float32", src0="plain", src1="plain",
           dst="any", post_ops=(), quantized: bool = False) -> Kernel:
    """dst = src0 <name> src1 (add, mul, sub, div, max, min), src1 broadcasting to src0's
    shape (oneDNN broadcasts the second operand only); tensors src0, src1, dst.
    `quantized` (8-bit tensors): dst = src0_scale * src0 <name> src1_scale * src1 + shift,
    rounded half to even and saturated, the three (float32, one each) given at run time."""
    alg = _lookup(BINARY, name, "binary function")
    shape0, shape1 = tuple(shape0), tuple(shape1)
    dst_shape = broadcast_shape(shape0, shape1)
    if dst_shape != shape0:
        raise Unsupported("oneDNN binary: the first operand must have the result's shape")
    shape1 = (1,) * (len(shape0) - len(shape1)) + shape1
    src0_d = _desc(shape0, dtype, src0, name, chooses=False)
    src1_d = _desc(shape1, dtype, src1, name, chooses=False)
    dst_d = _desc(dst_shape, dtype, src0_d if dst == "any" else dst)
    scales = None
    if quantized:  # the shift a first post-op (an addend of one float32), then the others
        one = (1,) * len(shape0)
        post_ops = (binary_post_op("add", one, plain_desc(one, "float32")), *post_ops)
        scales = {capi.DNNL_ARG_SRC: 0, capi.DNNL_ARG_SRC_1: 0}
    attr, extra = _attr(post_ops, dst_shape, dtype, scales)
    if quantized:
        extra["shift"] = extra.pop("post_op_0")
        for tensor, arg in (("src0_scale", capi.DNNL_ARG_SRC),
                            ("src1_scale", capi.DNNL_ARG_SRC_1)):
            extra[tensor] = (capi.DNNL_ARG_ATTR_SCALES | arg, plain_desc((1,), "float32"))
    pd = capi.PrimitiveDesc.create("dnnl_binary_primitive_desc_create", capi.library().engine,
                                   alg, src0_d, src1_d, dst_d, attr)
    return Kernel(name, pd, {"src0": capi.DNNL_ARG_SRC, "src1": capi.DNNL_ARG_SRC_1,
                             "dst": capi.DNNL_ARG_DST},
                  {"src0": plain_desc(shape0, held(dtype)), "src1": plain_desc(shape1, held(dtype)),
                   "dst": plain_desc(dst_shape, held(dtype))}, extra)


# Bytes below which a source's runs in a plain concat's output are too short for
# oneDNN's concat primitive (a memory copy per run): Join reorders each source instead.
SHORT_RUN = 64


def concat(shapes, axis: int, *, dtype: str = "float32", srcs=None,
           dst="any") -> Kernel | Join:
    """dst = the sources joined along `axis`; tensors src0 .. src<n-1>, dst. `srcs` is
    one layout per source (default plain). Plain sources into a plain dst whose runs
    (a source's elements from `axis` on) are shorter than SHORT_RUN bytes are a Join."""
    shapes = [tuple(s) for s in shapes]
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    dst_shape = tuple(out)
    descs = [_desc(s, dtype, layout, "concat", chooses=False) for s, layout in
             zip(shapes, srcs if srcs is not None else ["plain"] * len(shapes))]
    run = min(math.prod(s[axis:]) for s in shapes) * plain_desc((1,), dtype).nbytes
    if run < SHORT_RUN and dst in ("any", "plain") and all(
            d == plain_desc(s, dtype) for d, s in zip(descs, shapes)):
        return Join(shapes, axis, dst_shape, dtype)
    handles = (ctypes.c_void_p * len(descs))(*(d.handle.value for d in descs))
    dst_d = None if dst == "any" else _desc(dst_shape, dtype, dst)
    attr, _ = _attr((), dst_shape, dtype)
    pd = capi.PrimitiveDesc.create("dnnl_concat_primitive_desc_create", capi.library().engine,
                                   dst_d, len(descs), axis, handles,
                                   attr)
    args = {f"src{i}": capi.DNNL_ARG_MULTIPLE_SRC + i for i in range(len(shapes))}
    args["dst"] = capi.DNNL_ARG_DST
    plain = {f"src{i}": plain_desc(s, held(dtype)) for i, s in enumerate(shapes)}
    plain["dst"] = plain_desc(dst_shape, held(dtype))
    return Kernel("concat", pd, args, plain)


class Join:
    """Plain sources joined along an axis into a plain dst by one reorder each, into its
    part of dst (a sub-memory): where each source is many short runs of dst, oneDNN's
    concat primitive copies them one by one. Deformable DETR's stack of four [8, 32,
    300, 1, 4] along axis 3 (runs of 16 bytes) took 1.22 ms so, 0.33 as reorders (2
    AVX2 cores); runs of 256 bytes (twelve [1, 128, 64] along the last axis) 0.014
    against 0.048. A Kernel to its callers: tensors src0 .. src<n-1>, dst."""

    what = "concat"

    def __init__(self, shapes, axis: int, dst_shape, dtype: str):
        whole = plain_desc(dst_shape, dtype)
        self.parts, offset = [], 0
        for shape in shapes:
            at = [0] * len(shape)
            at[axis] = offset
            offset += shape[axis]
            self.parts.append(reorder(plain_desc(shape, dtype), whole.submemory(shape, at)))
        self.impl_info = self.parts[0].impl_info
        self.descs = {f"src{i}": plain_desc(s, dtype) for i, s in enumerate(shapes)}
        self.descs["dst"] = whole
        self.plain = {f"src{i}": plain_desc(s, held(dtype)) for i, s in enumerate(shapes)}
        self.plain["dst"] = plain_desc(dst_shape, held(dtype))
        self.args = dict.fromkeys(self.descs)  # its tensors, as a Kernel's
        self.scratchpad = 0

    def nbytes(self, name: str) -> int:
        return self.descs[name].nbytes

    def format(self, name: str) -> str:
        return self.descs[name].format

    def bind(self, buffers: dict[str, np.ndarray], scratchpad: np.ndarray | None = None,
             share: bool = True):
        steps = [part.bind({"src": buffers[f"src{i}"], "dst": buffers["dst"]}, share=share)
                 for i, part in enumerate(self.parts)]

        def run():
            for step in steps:
                step()
        return run

    def __repr__(self) -> str:
        return f"<concat by {len(self.parts)} reorders [{self.impl_info}]>"


def batchnorm(shape, epsilon: float, *, relu: bool = False, dtype: str = "float32",
              src="plain", dst="any") -> Kernel:
    """Inference batch normalization over axis 1 (the cpu batchnorm), then a relu if
    `relu`; tensors src, mean, variance, scale, shift ([C] float32 each), dst."""
    args = {"mean": capi.DNNL_ARG_MEAN, "variance": capi.DNNL_ARG_VARIANCE,
            "scale": capi.DNNL_ARG_SCALE, "shift": capi.DNNL_ARG_SHIFT}
    stats = {name: (arg, plain_desc((shape[1],), "float32")) for name, arg in args.items()}
    flags = capi.dnnl_use_global_stats | capi.dnnl_use_scale | capi.dnnl_use_shift
    if relu:
        flags |= capi.dnnl_fuse_norm_relu
    return _unary("batchnorm", "dnnl_batch_normalization_forward_primitive_desc_create", shape,
                  dtype, src, dst, (), (float(epsilon), flags), stats=stats)


def layernorm(shape, epsilon: float, *, scale: bool = True, shift: bool = True,
              dtype: str = "float32", src="plain", dst="any") -> Kernel:
    """Layer normalization over the last axis, its statistics (the mean and the biased
    variance) computed in float32 (the cpu layernorm over one axis: normalize the
    trailing axes of a plain tensor by describing them as one); tensors src, scale,
    shift ([C] float32 each, when `scale` / `shift`), dst."""
    stats = {}
    flags = capi.dnnl_normalization_flags_none
    if scale:
        stats["scale"] = (capi.DNNL_ARG_SCALE, plain_desc((shape[-1],), "float32"))
        flags |= capi.dnnl_use_scale
    if shift:
        stats["shift"] = (capi.DNNL_ARG_SHIFT, plain_desc((shape[-1],), "float32"))
        flags |= capi.dnnl_use_shift
    kernel = _unary("layernorm", "dnnl_layer_normalization_forward_primitive_desc_create",
                    shape, dtype, src, dst, (), (None, float(epsilon), flags), stats=stats)
    if kernel.descs["dst"].format != kernel.descs["src"].format:
        # oneDNN 3.2's jit:uni takes a plain src and a blocked dst, and writes dst plain.
        raise Unsupported(f"oneDNN layernorm: dst in another layout than src "
                          f"({kernel.descs['src'].format} to {kernel.descs['dst'].format})")
    return kernel


def lstm(seq: int, batch: int, inputs: int, hidden: int, *, reverse: bool, peephole: bool,
         states: bool, dtype: str = "float32") -> Kernel:
    """One layer, one direction of oneDNN's LSTM (gates i, f, c~, o; sigmoid, tanh,
    tanh): tensors src_layer [seq, batch, inputs] and dst_layer [seq, batch, hidden]
    plain; weights_layer [1, 1, inputs, 4, hidden] and weights_iter [1, 1, hidden, 4,
    hidden] in the layout oneDNN chooses (plain: ldigo); bias [1, 1, 4, hidden] and, with
    `peephole`, weights_peephole [1, 1, 3, hidden] (gates i, f, o) plain; with `states`,
    the initial states src_iter and src_iter_c [1, 1, batch, hidden] plain (oneDNN takes
    both or neither; neither: zeros). No final states: oneDNN writes the last cell state
    only with the last hidden state, which Y holds."""
    state = (1, 1, batch, hidden)
    plain = {"src_layer": plain_desc((seq, batch, inputs), dtype),
             "weights_layer": plain_desc((1, 1, inputs, 4, hidden), dtype),
             "weights_iter": plain_desc((1, 1, hidden, 4, hidden), dtype),
             "bias": plain_desc((1, 1, 4, hidden), dtype),
             "dst_layer": plain_desc((seq, batch, hidden), dtype)}
    args = {"src_layer": capi.DNNL_ARG_SRC, "weights_layer": capi.DNNL_ARG_WEIGHTS,
            "weights_iter": capi.DNNL_ARG_WEIGHTS_1, "bias": capi.DNNL_ARG_BIAS,
            "dst_layer": capi.DNNL_ARG_DST}
    if states:
        plain["src_iter"] = plain_desc(state, dtype)
        plain["src_iter_c"] = plain_desc(state, dtype)
        args.update(src_iter=capi.DNNL_ARG_SRC_1, src_iter_c=capi.DNNL_ARG_SRC_2)
    if peephole:
        plain["weights_peephole"] = plain_desc((1, 1, 3, hidden), dtype)
        args["weights_peephole"] = capi.DNNL_ARG_WEIGHTS_2
    descs = {**plain, "weights_layer": _desc(plain["weights_layer"].shape, dtype, "any"),
             "weights_iter": _desc(plain["weights_iter"].shape, dtype, "any")}
    direction = (capi.dnnl_unidirectional_right2left if reverse
                 else capi.dnnl_unidirectional_left2right)
    pd = capi.PrimitiveDesc.create(
        "dnnl_lstm_forward_primitive_desc_create", capi.library().engine,
        capi.dnnl_forward_inference, direction, descs["src_layer"], descs.get("src_iter"),
        descs.get("src_iter_c"), descs["weights_layer"], descs["weights_iter"],
        descs.get("weights_peephole"), None, descs["bias"], descs["dst_layer"], None, None,
        0, capi.Attr())
    return Kernel("lstm", pd, args, plain)


def lrn(shape, *, size: int, alpha: float, beta: float, bias: float, dtype: str = "float32",
        src="plain", dst="any") -> Kernel:
    """Local response normalization across channels (the cpu lrn), odd sizes; tensors
    src, dst."""
    if size % 2 == 0:
        # oneDNN's window is symmetric; the cpu kernel's reaches one channel further.
        raise Unsupported("oneDNN LRN of an even size")
    return _unary("lrn", "dnnl_lrn_forward_primitive_desc_create", shape, dtype, src, dst,
                  (capi.dnnl_lrn_across_channels,),
                  (int(size), float(alpha), float(beta), float(bias)))


def softmax(shape, axis: int, *, dtype: str = "float32", src="plain", dst="any",
            log: bool = False) -> Kernel:
    """Softmax along `axis` (the cpu softmax), or its logarithm (log_softmax); tensors
    src, dst."""
    alg = capi.dnnl_softmax_log if log else capi.dnnl_softmax_accurate
    return _unary("softmax", "dnnl_softmax_forward_primitive_desc_create", shape, dtype, src,
                  dst, (alg,), (int(axis),))


# reduce's func -> (oneDNN's algorithm, its p): l1 and l2 are the p-norms' root of the
# sum of |x|^p, sum_square the sum of |x|^2 without the root.
REDUCTION = {"mean": (capi.dnnl_reduction_mean, 0.0), "sum": (capi.dnnl_reduction_sum, 0.0),
             "max": (capi.dnnl_reduction_max, 0.0), "min": (capi.dnnl_reduction_min, 0.0),
             "prod": (capi.dnnl_reduction_mul, 0.0),
             "l1": (capi.dnnl_reduction_norm_lp_sum, 1.0),
             "l2": (capi.dnnl_reduction_norm_lp_sum, 2.0),
             "sum_square": (capi.dnnl_reduction_norm_lp_power_p_sum, 2.0)}


def reduction(shape, axes, name: str, *, dtype: str = "float32", src="plain") -> Kernel:
    """dst = the `name` reduction of src over `axes` (mean, sum, max, min, prod, l1, l2,
    sum_square), which stay with size 1; dst plain; tensors src, dst. A plain source is
    reduced as the same bytes seen through merged_reduction's shape (views): oneDNN's
    jit kernel reduces a plain source's trailing axes only, and tells the reduced
    axes by src and dst dims that differ, so a size-1 dim after them ([N, C, S, 1] over
    [2, 3]: a kept axis behind the reduced one) sent it to its reference kernel."""
    alg, p = _lookup(REDUCTION, name, "reduction")
    shape = tuple(shape)
    dst_shape = tuple(1 if i in axes else d for i, d in enumerate(shape))
    if dst_shape == shape:
        raise Unsupported("oneDNN reduction: every reduced axis has one element")
    src_d = _desc(shape, dtype, src, f"reduce {name}", chooses=False)
    dst_d = plain_desc(dst_shape, dtype)
    views = {}
    if src_d == plain_desc(shape, dtype):
        merged, merged_axes = merged_reduction(shape, axes)
        if name in ("sum", "mean") and dtype == "float32":
            kernel = _reduction_by_product(shape, dst_shape, merged, merged_axes, name)
            if kernel is not None:
                return kernel
        merged_dst = tuple(1 if i in merged_axes else d for i, d in enumerate(merged))
        views = {"src": plain_desc(merged, dtype), "dst": plain_desc(merged_dst, dtype)}
    attr, _ = _attr((), dst_shape, dtype)
    pd = capi.PrimitiveDesc.create("dnnl_reduction_primitive_desc_create",
                                   capi.library().engine, alg, views.get("src", src_d),
                                   views.get("dst", dst_d), p, 0.0, attr)
    kernel = Kernel(f"reduce {name}", pd, {"src": capi.DNNL_ARG_SRC, "dst": capi.DNNL_ARG_DST},
                    {"src": plain_desc(shape, held(dtype)),
                     "dst": plain_desc(dst_shape, held(dtype))})
    if views:
        kernel.views = views
        kernel.descs["src"], kernel.descs["dst"] = src_d, dst_d
    return kernel


# Kept elements from which a sum or mean over one run of axes is a product (below).
PRODUCT_REDUCTION_ROWS = 8


def _reduction_by_product(shape, dst_shape, merged, merged_axes, name: str) -> Kernel | None:
    """The float32 sum (or mean) of a plain source over one run of axes as a matmul by a
    vector of ones (1 / K for a mean) the kernel holds: [R, K] @ [K, 1] over trailing
    axes, [1, 1, K] @ [B, K, R] over inner or leading ones. oneDNN's jit reduction of
    many short rows is slow: Deformable DETR's [8, 32, 300, 16] over its last axis took
    5.0 ms, the product 0.09 (2 AVX2 cores), [2048, 49] 0.22 against 0.008. None where
    the reduction is not of that form, keeps fewer than PRODUCT_REDUCTION_ROWS elements
    (a whole tensor to one value is a dot product, which oneDNN's GEMM runs on one
    thread: [1, 1M] 0.84 ms against the reduction's 0.12), or the product would be a
    reference kernel."""
    if len(merged_axes) != 1 or len(merged) > 3:  # (of 3, the middle one is reduced)
        return None
    k = merged[merged_axes[0]]
    kept = math.prod(merged) // k
    if kept < PRODUCT_REDUCTION_ROWS:
        return None
    if merged_axes == [len(merged) - 1]:  # [R, K] @ [K, 1]
        data, vector, out = (kept, k), (k, 1), (kept, 1)
        a, b, data_arg, vector_arg = data, vector, capi.DNNL_ARG_SRC, capi.DNNL_ARG_WEIGHTS
    else:  # [1, 1, K] @ [B, K, R]
        data = (merged[0], k, merged[-1]) if len(merged) == 3 else (1, k, merged[-1])
        vector, out = (1, 1, k), (data[0], 1, data[2])
        a, b, data_arg, vector_arg = vector, data, capi.DNNL_ARG_WEIGHTS, capi.DNNL_ARG_SRC
    attr, _ = _attr((), out, "float32")
    pd = capi.PrimitiveDesc.create("dnnl_matmul_primitive_desc_create", capi.library().engine,
                                   plain_desc(a), plain_desc(b), None, plain_desc(out), attr)
    src_d, dst_d = plain_desc(shape), plain_desc(dst_shape)
    kernel = Kernel(f"reduce {name}", pd,
                    {"src": data_arg, "dst": capi.DNNL_ARG_DST, "vector": vector_arg},
                    {"src": src_d, "dst": dst_d, "vector": plain_desc(vector)})
    if kernel.impl_info.startswith("ref"):
        return None
    kernel.views = {"src": plain_desc(data), "dst": plain_desc(out)}
    kernel.descs["src"], kernel.descs["dst"] = src_d, dst_d
    kernel.constants["vector"] = np.full(vector, 1.0 if name == "sum" else 1.0 / k,
                                         np.float32)
    return kernel


def merged_reduction(shape, axes) -> tuple[tuple[int, ...], list[int]]:
    """(shape, axes) of the same reduction of the same plain bytes, with the size-1 dims
    dropped and adjacent dims both reduced (or both kept) merged into one: [2, 5, 7, 1]
    over [2, 3] is [10, 7] over [1]. At least one reduced dim has more than one element."""
    dims, reduced = [], []
    for i, d in enumerate(shape):
        if d == 1:
            continue
        if reduced and reduced[-1] == (i in axes):
            dims[-1] *= d
        else:
            dims.append(d)
            reduced.append(i in axes)
    return tuple(dims), [i for i, r in enumerate(reduced) if r]


def shuffle(shape, axis: int, group_size: int, *, dtype: str = "float32", src="plain",
            dst="any") -> Kernel:
    """A channel shuffle along `axis` (the cpu channel_shuffle with `group` groups is
    oneDNN's shuffle with group_size = shape[axis] / group); tensors src, dst."""
    return _unary("shuffle", "dnnl_shuffle_forward_primitive_desc_create", shape, dtype, src,
                  dst, (), (int(axis), int(group_size)))


def resample(src_shape, dst_shape, mode: str, *, dtype: str = "float32", src="plain",
             dst="any") -> Kernel:
    """Resampling of the spatial axes (2 onwards) to dst_shape: mode "linear" is the
    cpu resize's TL_LINEAR (half-pixel centres); tensors src, dst."""
    src_shape, dst_shape = tuple(src_shape), tuple(dst_shape)
    if src_shape[:2] != dst_shape[:2] or len(src_shape) < 3:
        raise Unsupported("oneDNN resampling: only the spatial axes (2 onwards) change")
    if mode == "linear":
        alg = capi.dnnl_resampling_linear
    elif mode == "nearest":
        alg = capi.dnnl_resampling_nearest
    else:
        raise ValueError(f"oneDNN resample: mode must be linear or nearest, found {mode!r}")
    # No factors: oneDNN derives them from the shapes.
    return _unary("resample", "dnnl_resampling_forward_primitive_desc_create", src_shape, dtype,
                  src, dst, (alg, None), dst_shape=dst_shape)


def reorder(src: MemoryDesc, dst: MemoryDesc, post_ops=()) -> Kernel:
    """Copy a tensor from one layout (or data type) to another; tensors src, dst. A
    sum post-op adds what dst holds (oneDNN's reorders take no other)."""
    lib = capi.library()
    attr, _ = _attr(post_ops, src.shape, src.dtype)
    pd = capi.PrimitiveDesc.create("dnnl_reorder_primitive_desc_create", src, lib.engine,
                                   dst, lib.engine, attr)
    return Kernel("reorder", pd, {"src": capi.DNNL_ARG_SRC, "dst": capi.DNNL_ARG_DST},
                  {"src": plain_desc(src.shape, src.dtype), "dst": plain_desc(dst.shape,
                                                                              dst.dtype)})


def quantizing_reorder(src: MemoryDesc, dst: MemoryDesc, *, side: str, zero: bool) -> Kernel:
    """A reorder that quantizes (`side` "dst": float32 src, 8-bit dst = saturate(round(src
    / scale) + zero), oneDNN multiplying by the scale's reciprocal) or dequantizes (`side`
    "src": 8-bit src, float32 dst = (src - zero) * scale), one scale and zero point (when
    `zero`) given at run time. Tensors src, dst, scale, zero."""
    lib = capi.library()
    arg = capi.DNNL_ARG_DST if side == "dst" else capi.DNNL_ARG_SRC
    attr = capi.Attr((), {arg: 0}, {arg: 0} if zero else None)
    pd = capi.PrimitiveDesc.create("dnnl_reorder_primitive_desc_create", src, lib.engine,
                                   dst, lib.engine, attr)
    extra = {"scale": (capi.DNNL_ARG_ATTR_SCALES | arg, plain_desc((1,), "float32"))}
    if zero:
        extra["zero"] = (capi.DNNL_ARG_ATTR_ZERO_POINTS | arg, plain_desc((1,), "int32"))
    return Kernel("quantizing reorder", pd, {"src": capi.DNNL_ARG_SRC, "dst": capi.DNNL_ARG_DST},
                  {"src": plain_desc(src.shape, src.dtype), "dst": plain_desc(dst.shape,
                                                                              dst.dtype)},
                  extra)
