"""What the dnnl ops' descriptions call: one function per op, run when the op is
checked, creates its primitive; `bind` makes its run call at load.

A dnnl op's `scratch` is `dnnl.<op>(op, <its tensor entries and params>)`: the function
creates the primitive (oneDNN choosing the layouts it may), records the layouts on
the entries (the output's, and an input's the layout pass left to its reader), keeps
the Call in `op.values["call"]` and returns the bytes of scratch it needs (oneDNN's
scratchpad, and a reordered source where it has one), which the memory plan gives
the op. Its `static_run` is `execute = dnnl.bind(op, scratch,
src=src, ...)` over the arena arrays; its `run`, `execute()`.

An entry's `layout` (a Layout, dnnl's record of the tensor) says how the op finds a
tensor: None is LightNet's plain C order; a layout of format PENDING is a tensor the
layout pass made for dnnl ops whose layout the first dnnl op reading it chooses (a
convolution's preferred source or weights layout); any other format is the oneDNN
format a producer chose, its descriptor in `layout.desc`.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import math
from dataclasses import dataclass

import numpy as np

from lightnet.archs.dnnl import capi, primitives
from lightnet.archs.dnnl.primitives import (Unsupported, binary_post_op, eltwise_post_op,
                                             sum_post_op)
from lightnet.errors import LightNetError

PENDING = "any"

__all__ = ["PENDING", "Layout", "Call", "Unsupported", "kernel_cache", "bind", "conv2d", "deconv2d", "matmul",
           "qconv2d", "qmatmul", "lstm", "int8_exact", "int8_sums_exact", "int8_residual",
           "zero_point", "quantize", "dequantize",
           "merged_groups", "linear_shapes", "pool", "transpose", "batchnorm", "layernorm",
           "lrn", "softmax",
           "eltwise", "gelu", "binary", "concat",
           "shuffle", "reduce", "unary", "slice", "reshape", "reorder", "as_view",
           "kernel_counts", "describe_kernels"]


@dataclass(eq=False, frozen=True)
class Layout:
    """dnnl's record of a tensor it holds in a layout of its own (TensorEntry.layout,
    lightnet.ir.tensor.Layout): oneDNN's `format` (PENDING: its first dnnl reader
    chooses) and descriptor `desc`; for a weight the plain layout `source` it is
    reordered from; for a pending tensor the data type oneDNN is to hold it in
    (`dtype`, bfloat16 in a bfloat16 model: the layout pass's choice; None: its
    own). `span`: of a view of its owner's memory (see as_view), the bytes of that
    memory from the view's start, which a descriptor at an offset into it (a
    sub-memory's) does not give. Frozen: the entries of ops of one signature share it
    (lightnet.ir.op.CheckMemo); an op choosing a layout gives the entry another."""

    format: str
    desc: object = None
    source: object = None
    dtype: str | None = None
    span: int | None = None

    @property
    def key(self) -> tuple:
        """The layout by its content (what an op's check reads of it: lightnet.ir.op.
        CheckMemo keys checks by it)."""
        return (self.format, None if self.desc is None else self.desc.key,
                None if self.source is None else self.source.key, self.dtype, self.span)

    @property
    def nbytes(self) -> int | None:
        """The library's figure, blocked padding included; None while pending; a
        view's span."""
        if self.span is not None:
            return self.span
        return None if self.desc is None else self.desc.nbytes

    def is_block_of(self, whole: Layout, axis: int) -> bool:
        return (self.desc is not None and getattr(whole, "desc", None) is not None
                and self.desc.is_block_of(whole.desc, axis))


def _pending(entry) -> bool:
    """Whether `entry`'s layout is left to its first dnnl reader."""
    return entry.layout is not None and entry.layout.format == PENDING


def _format(entry) -> str | None:
    return None if entry.layout is None else entry.layout.format


def _dtype(entry) -> str:
    """The data type oneDNN holds `entry` in, which the ops reading it compute in:
    its layout's, the layout pass's choice for a tensor whose layout is pending,
    else its own (float32)."""
    layout = entry.layout
    if layout is not None and layout.desc is not None:
        return layout.desc.dtype
    if layout is not None and layout.dtype is not None:
        return layout.dtype
    return _np_name(entry.dtype)


_NP_NAMES: dict = {}


def _np_name(dtype) -> str:
    """`dtype.np.name` (a LightNet DType's numpy name), looked up once."""
    name = _NP_NAMES.get(dtype)
    if name is None:
        name = _NP_NAMES[dtype] = dtype.np.name
    return name


def _computes_in(*entries) -> str:
    """The data type an op reading `entries` computes in: that of the first one
    computed at run time (a weight takes the reader's), else the first one's."""
    return _dtype(next((e for e in entries if not e.static), entries[0]))


def _layout(entry, chooses: bool = False):
    """How a primitive is to read `entry`: "plain", "any" (it chooses) or a descriptor."""
    if entry.layout is None:
        return "plain"
    if _pending(entry):
        return "any" if chooses else "plain"
    return entry.layout.desc


def record(entry, desc, source=None) -> None:
    """Give `entry` the layout `desc` (oneDNN's descriptor); `source` is how the
    kernel reads LightNet's plain tensor (a transposed weight's strides, a lower-ranked
    operand with leading dims of 1), what a weight is reordered from. A desc that is
    that (by default the C order of the entry's shape) leaves the entry plain (any op
    may read it): a square weight's transpose is not."""
    if desc == (source or _plain(entry.shape, _np_name(entry.dtype))):
        entry.layout = None
        return
    entry.layout = Layout(desc.format, desc, source)


def as_view(dst, src, desc) -> None:
    """Make `dst` a view of `src`'s memory seen through `desc` (strides, and an offset
    into it where desc is a sub-memory's): its owner is src, and it is bound to src's
    bytes from where src starts. A desc that is the C order of dst's shape leaves dst
    plain, at src's start (owner_offset 0: src may be held in strides, a matmul's
    dst_axes)."""
    dst.owner = src.name
    if desc == _plain(dst.shape, _np_name(dst.dtype)):
        dst.layout, dst.owner_offset = None, 0
        return
    dst.layout = Layout(desc.format, desc, span=src.stored_nbytes)


class Call:
    """A primitive and the op args its tensors are: `args` maps the kernel's tensor
    names to the op's arg names; `entries` are the op's tensor entries by arg name.
    `before`: reorders run first, each of a source (by the kernel's tensor name) into
    the op's scratch, in the layout the kernel reads it in."""

    def __init__(self, kernel: primitives.Kernel, args: dict[str, str], entries: dict,
                 before: dict[str, primitives.Kernel] | None = None,
                 after: dict[str, primitives.Kernel] | None = None):
        self.kernel = kernel
        self.args = args
        self.impl_info = kernel.impl_info
        # A reorder of a source into the op's scratch (after the scratchpad), when the
        # kernel reads it in a layout other than its producer's; of an output the kernel
        # writes into the scratch, to the op's plain tensor (`after`: an int8 output,
        # which the layout pass leaves plain).
        self.before = dict(before or {})
        self.after = dict(after or {})
        self.scratch = kernel.scratchpad
        self.places = {}
        for name in (*self.before, *self.after):
            at = -(-self.scratch // 64) * 64
            self.places[name] = at
            self.scratch = at + kernel.nbytes(name)
        for name, arg in args.items():
            entry = entries.get(arg)
            if entry is None or name in self.after:
                continue
            if _pending(entry):  # left to this reader by the layout pass
                record(entry, kernel.descs[name], kernel.plain[name])
            elif name == "dst":
                record(entry, kernel.descs[name])
        # A tensor held plain that the kernel reads in a layout of its own (a weight the
        # layout pass has not reordered) cannot be bound: refused at load, never
        # computed wrongly.
        self.misread = [arg for name, arg in args.items() if entries.get(arg) is not None
                        and entries[arg].layout is None and name not in self.before
                        and name not in self.after and not _reads_plain(kernel, name)]

    def bind(self, scratch, arrays: dict):
        """The run call over the op's bound arrays (by arg name) and its scratch."""
        if self.misread:
            raise ValueError(f"oneDNN {self.kernel.what} reads {self.misread} in a layout "
                             "of its own, but they are plain: compile the model for dnnl "
                             "(its layout pass reorders them)")
        # Arena arrays as they are: a memory takes a buffer's address, whatever its dtype.
        buffers = {name: arrays[arg] for name, arg in self.args.items()
                   if arrays.get(arg) is not None}
        pad = self.kernel.scratchpad
        if not self.before and not self.after:
            return self.kernel.bind(buffers, scratch if pad else None)
        steps, last = [], []
        for name, reorder in (*self.before.items(), *self.after.items()):
            at = self.places[name]
            place = scratch[at:at + self.kernel.nbytes(name)]
            if name in self.before:
                steps.append(reorder.bind({"src": buffers[name], "dst": place}))
            else:
                last.append(reorder.bind({"src": place, "dst": buffers[name]}))
            buffers[name] = place
        steps.append(self.kernel.bind(buffers, scratch[:pad] if pad else None))
        steps += last
        if len(steps) == 2:
            reorder, execute = steps

            def run():
                reorder()
                execute()
            return run

        def run_all():
            for step in steps:
                step()
        return run_all


def _reads_plain(kernel: primitives.Kernel, name: str) -> bool:
    """Whether `kernel` reads its tensor `name` in LightNet's plain layout (asked of a
    kernel once per tensor: ops share kernels, see kernel_cache)."""
    plain = kernel.__dict__.setdefault("_reads_plain", {})
    if name not in plain:
        plain[name] = kernel.descs[name] == kernel.plain[name]
    return plain[name]


def _bytes(array):
    """The bytes of an arena array (a blocked tensor is bound as bytes already)."""
    return array.reshape(-1).view(np.uint8)


# The primitives (and plain layouts) made while a model compiles, by what defines each
# (kernel_cache): None outside a compile.
_cache: contextvars.ContextVar[dict | None] = contextvars.ContextVar("dnnl_kernels",
                                                                      default=None)


@contextlib.contextmanager
def kernel_cache():
    """Within the block, a primitive is created once for everything that defines it (its
    constructor, shapes, layouts, data type, params and post-ops) and then shared: the
    ops of a compile are checked several times (when expand lowers them, by the layout
    pass and its removal of copies, again when an op refused for its reference kernel
    makes the model compile again), and many ops of a model take the same primitive. A
    layout is part of the key by its content (MemoryDesc.key), so an op whose inputs'
    layouts changed gets the primitive of its new layouts. Context.compile holds one
    cache; a primitive is immutable once created (a Kernel is bound to each op's
    memories at load), so ops may share it. The cache is the calling thread's (a
    context variable); a block inside another shares the outer one's."""
    if _cache.get() is not None:
        yield
        return
    token = _cache.set({})
    try:
        yield
    finally:
        _cache.reset(token)


def _key(value):
    """`value` (an argument of a primitive constructor) as part of a cache key: a
    layout by its content, a float exactly (-0.0 is not 0.0), sequences as tuples."""
    kind = type(value)
    if kind is str or kind is int or value is None:
        return value
    if kind is tuple or kind is list:
        return tuple(v if type(v) is int else _key(v) for v in value)
    if kind is float:
        return ("float", value.hex())
    if isinstance(value, primitives.MemoryDesc):
        return ("desc", value.key)
    if isinstance(value, primitives.PostOp):
        return ("post-op", value.kind, value.name, _key(value.alpha), _key(value.beta),
                _key(value.shape), _key(value.layout))
    if isinstance(value, (float, np.floating)):
        return ("float", float(value).hex())
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    if isinstance(value, (np.integer, bool)):
        return (type(value).__name__, int(value))
    return value


def _create(constructor, *args, **kwargs) -> primitives.Kernel:
    """The primitive (one made before in this kernel_cache, when there is one); what
    oneDNN computes otherwise than the cpu kernel (Unsupported, which the dnnl expanders
    keep on the cpu) fails the op's check."""
    cache = _cache.get()
    if cache is not None:
        key = (constructor, _key(args), tuple((k, _key(v)) for k, v in kwargs.items()))
        kernel = cache.get(key)
        if kernel is not None:
            return kernel
    try:
        kernel = constructor(*args, **kwargs)
    except Unsupported as e:
        raise ValueError(f"{e} (the dnnl expanders keep such an op on the cpu)") from None
    if cache is not None:
        cache[key] = kernel
    return kernel


def _plain(shape, dtype: str):
    """primitives.plain_desc(shape, dtype), one per shape and data type in a
    kernel_cache."""
    cache = _cache.get()
    if cache is None:
        return primitives.plain_desc(shape, dtype)
    key = ("plain", tuple(shape), dtype)
    desc = cache.get(key)
    if desc is None:
        desc = cache[key] = primitives.plain_desc(shape, dtype)
    return desc


def _settle(op, call) -> int:
    op.values["call"] = call
    return call.scratch


def bind(op, scratch, **arrays):
    """The run call of dnnl op `op` over its arena arrays (by arg name) and scratch. A
    Call is not changed once made (ops of one signature share it: lightnet.ir.op.
    CheckMemo); a concat the memory plan assembled in place gets a copy of its own
    that says so (what describe_kernels reports: no primitive runs)."""
    call = op.values["call"]
    if isinstance(call, _Concat) and call.in_place(arrays):
        call = op.values["call"] = copy.copy(call)
        call.impl_info = "concat in place"
    return call.bind(scratch, arrays)


# Fused activations: the eltwise post-op of each, with oneDNN's alpha and beta from the
# op's activation params, which its description passes (negslope, clip_min, clip_max,
# hard_alpha, hard_beta, swish_alpha). hard_swish: d = s * max(0, min(1, alpha * s +
# beta)); hard_sigmoid: max(0, min(1, alpha * s + beta)); swish: s / (1 + exp(-alpha * s)).
_ACTIVATIONS = {
    "relu": lambda a: ("relu",),
    "lrelu": lambda a: ("lrelu", a["negslope"]),
    "clip": lambda a: ("clip", a["clip_min"], a["clip_max"]),
    "sigmoid": lambda a: ("sigmoid",),
    "tanh": lambda a: ("tanh",),
    "hard_swish": lambda a: ("hardswish", a["hard_alpha"], a["hard_beta"]),
    "hard_sigmoid": lambda a: ("hardsigmoid", a["hard_alpha"], a["hard_beta"]),
    "gelu": lambda a: ("gelu_erf",),
    "gelu_tanh": lambda a: ("gelu_tanh",),
    "swish": lambda a: ("swish", a["swish_alpha"]),
}


def _post_ops(residual, activation: str, **params):
    """The post-ops of a fused residual (a sum) and activation; `params` are the op's
    activation params (see _ACTIVATIONS)."""
    post = [sum_post_op()] if residual is not None else []
    if activation in _ACTIVATIONS:
        post.append(eltwise_post_op(*_ACTIVATIONS[activation](params)))
    elif activation != "none":
        raise ValueError(f"oneDNN: no fused activation {activation!r}")
    return post


def conv2d(op, src, weight, bias, residual, dst, *, group, stride, padding, dilation,
           activation="none", layout="any", **act) -> int:
    """A convolution of 2 or 3 spatial axes (conv2d_dnnl, conv3d_dnnl) with its fused
    residual (a sum post-op: dst is the residual's memory, so it takes its layout) and
    activation (`act`: its params, see _post_ops); bias may be None.

    `layout` "any": it reads its source in the layout the producer chose. Where oneDNN
    has no direct implementation for that layout with its own choice of output (it
    would run its GEMM-based or reference one), the output takes the source's layout;
    failing that, the source is reordered first, into the op's scratch, to the layout
    the convolution prefers, if that runs a faster kernel (_slowness).
    "channels_last" or "blocked" (the layout pass's choice on AVX2 for a 2-D one,
    lightnet.archs.dnnl.conv_layouts): source and output in that layout, a source held
    otherwise reordered first, unless the residual is held otherwise or that kernel is
    slower (then as "any")."""
    pending = residual is not None and _pending(residual)
    fixed_dst = residual is not None and not pending

    def create(src_layout, dst_layout):
        return _create(
            primitives.conv2d, src.shape, weight.shape, bias=bias is not None, group=group,
            stride=stride, padding=padding, dilation=dilation, dtype=_dtype(src),
            src=src_layout, dst=dst_layout,
            post_ops=_post_ops(residual, activation, **act))

    before = {}
    kernel = _chosen(create, layout, src, residual if fixed_dst else None, before)
    if kernel is None:
        src_layout = _layout(src, chooses=True)
        dst_layout = _layout(residual) if fixed_dst else "any"
        kernel = create(src_layout, dst_layout)
        if _slowness(kernel) and src_layout != "any":
            if not fixed_dst and (_format(src) in primitives.TAGS_4D
                                  or _format(src) in primitives.TAGS_5D):
                kernel = min(kernel, create(src_layout, _format(src)), key=_slowness)
            if _slowness(kernel):
                preferred = create("any", dst_layout)
                if _slowness(preferred) < _slowness(kernel):
                    before["src"] = _create(primitives.reorder, _desc(src),
                                            preferred.descs["src"])
                    kernel = preferred
    if pending:
        record(residual, kernel.descs["dst"])
    if residual is not None:
        dst.owner = residual.name  # the sum post-op adds into the residual's memory
    call = Call(kernel, {"src": "src", "weights": "weight", "bias": "bias", "dst": "dst"},
                {"src": src, "weight": weight, "bias": bias, "dst": dst}, before)
    return _settle(op, call)


# The blocked layout of conv_layouts' "blocked" (AVX2's block of 8 channels).
BLOCKED = "aBcd8b"


def _chosen(create, layout: str, src, residual, before: dict):
    """The convolution in the layout the layout pass chose for it (`layout`
    channels_last or blocked), its source reordered into it first where the producer holds it
    otherwise (`before`); None for "any", where a given residual (its output's memory)
    is held otherwise, or where that kernel is not direct."""
    if layout == "any":
        return None
    tag = "acdb" if layout == "channels_last" else BLOCKED
    kernel = create(_tagged(src.shape, _dtype(src), (tag,))[0], tag)
    if _slowness(kernel):
        return None
    if residual is not None and _desc(residual) != kernel.descs["dst"]:
        return None
    if not _pending(src) and _desc(src) != kernel.descs["src"]:
        before["src"] = _create(primitives.reorder, _desc(src), kernel.descs["src"])
    return kernel


def _reference(kernel) -> bool:
    return kernel.impl_info.startswith("ref")


def _slowness(kernel) -> int:
    """0 for a direct jit convolution, 1 for oneDNN's GEMM-based one (im2col and a GEMM,
    `gemm:jit`: what it runs on a plain source; a depthwise 7x7 takes many times the
    direct kernel's time), 2 for its reference one."""
    return 2 if _reference(kernel) else int("gemm" in kernel.impl_info)


def merged_groups(src_shape, weight_shape, *, group: int, stride, padding, dilation) -> int:
    """How many groups of a grouped convolution to run as one (block-diagonal weights:
    kernels.merge_conv_groups) so that oneDNN runs a direct kernel, not its GEMM-based
    one: ResNeXt's 32 groups of 4 channels fit no channel block of a direct kernel, and
    im2col and a GEMM per group took 4x the time of 16 groups of 8 channels with twice
    the products. 1 where the convolution is direct already, depthwise, or no merge of
    at most 4 groups (4x the products) is."""
    return _merged_groups(tuple(src_shape), tuple(weight_shape), group, tuple(stride),
                          tuple(padding), tuple(dilation))


@functools.lru_cache(maxsize=256)
def _merged_groups(src_shape, weight_shape, group, stride, padding, dilation) -> int:
    per_group = weight_shape[1]
    if group == 1 or per_group == 1:
        return 1

    def slowness(groups: int) -> int:
        weight = (weight_shape[0], per_group * (group // groups)) + tuple(weight_shape[2:])
        try:
            return _slowness(primitives.conv2d(src_shape, weight, bias=True, group=groups,
                                               stride=stride, padding=padding,
                                               dilation=dilation))
        except (Unsupported, LightNetError):
            return 2

    if not slowness(group):
        return 1
    for merge in (2, 3, 4):
        if group % merge == 0 and not slowness(group // merge):
            return merge
    return 1


def _tagged(shape, dtype: str, tags) -> list:
    """`shape` in `dtype` laid out as each of the 4-D tags `tags` (none unless 4-D)."""
    if len(shape) != 4:
        return []
    return [primitives.MemoryDesc.with_tag(tuple(shape), dtype, primitives.TAGS_4D[t])
            for t in tags]


def _avoid_reference(kernel, create, entry, name: str, layouts, before: dict):
    """`kernel`, or, where it is oneDNN's reference one, the first kernel `create(desc)`
    makes that is not, reading `entry` (the kernel's tensor `name`) in the layout `desc`
    of `layouts`: an entry left to the op takes that layout, any other is reordered into
    it first (`before`, into the op's scratch). `kernel` when none is."""
    if not _reference(kernel):
        return kernel
    for desc in layouts:
        again = create(desc)
        if not _reference(again):
            if not _pending(entry):
                before[name] = _create(primitives.reorder, _desc(entry), desc)
            return again
    return kernel


def _channels_last_if_plain_is_slow(kernel, create, src, before: dict):
    """`kernel`, or, where it reads a plain 4-D or 5-D `src` (or one left to it) with no
    jit kernel (oneDNN's plain pooling and batchnorm loops), the first one `create(desc)`
    makes reading it channels-last or in channel blocks that is a jit kernel (a
    batchnorm channels-last has one only for whole vectors of channels): a source left
    to the op takes that layout, a plain one is reordered first (`before`, into the
    op's scratch)."""
    if "jit" in kernel.impl_info or _format(src) not in (None, PENDING):
        return kernel
    descs = ([primitives.MemoryDesc.with_tag(tuple(src.shape), _dtype(src), tag)
              for tag in primitives.TAGS_5D.values()] if len(src.shape) == 5 else
             _tagged(src.shape, _dtype(src), ("acdb", "aBcd8b", "aBcd16b")))
    for desc in descs:
        again = create(desc)
        if "jit" in again.impl_info:
            if not _pending(src):
                before["src"] = _create(primitives.reorder, _desc(src), desc)
            return again
    return kernel


def _read_plain(entry, dtype: str, name: str, before: dict) -> None:
    """Have a primitive read `entry` (computed per run) in LightNet's plain layout, in
    `dtype`: a copy the layout pass left to it is made plain; one a producer holds in
    a layout of its own is reordered first (`before`, by the kernel's tensor `name`)."""
    plain = _plain(entry.shape, dtype)
    if _pending(entry):
        record(entry, plain)
    elif entry.layout is not None and entry.layout.desc != plain:
        before[name] = _create(primitives.reorder, entry.layout.desc, plain)


def matmul_post_ops_cheap() -> bool:
    """Whether oneDNN's float32 matmul applies a GELU, or any post-op of a batched
    (attention) product, as cheaply as a pass of its own: at AVX-512 (brgemm), not
    below it, where the matmul is gemm:jit:f32, which applies them in a loop of its
    own (2 AVX2 cores: BERT's [128, 768] @ [768, 3072] 5.6 ms, 6.9 ms with the erf
    GELU, 9.8 ms with the tanh one, the eltwise primitive 0.25 and 1.2 ms; its
    [12, 128, 64] @ [12, 64, 128] scores 0.225 ms, 0.441 ms with the scale and the
    mask add fused, each apart 0.044 ms). A relu or an add after a 2-D product
    costs it nothing."""
    lib = capi.library()
    return lib.isa & capi.dnnl_cpu_isa_avx512_core == capi.dnnl_cpu_isa_avx512_core


def linear_shapes(a_shape, b_shape, trans_a: bool, trans_b: bool, b_static: bool) -> bool:
    """Whether a float32 matmul of these operands runs as primitives.linear (a 1x1
    convolution in channel blocks, its operand and product reordered around it): [M,
    K] @ static B with M >= 8 and K, N >= 768, below AVX-512 (where the matmul is
    gemm:jit:f32). Against the matmul, on 2 AVX2 cores: [128, 768] @ [768, 3072] 0.90,
    [197, 768] @ [768, 768] 0.94, [8, 768] @ [768, 3072] 0.69; it is slower where the
    reorders weigh more or a product is a matrix-vector one: [64, 256] @ [256, 256]
    1.38, [4, 512] @ [512, 1000] 1.11, [1, 2048] @ [2048, 1000] 1.80."""
    if (not b_static or trans_a or len(a_shape) != 2 or len(b_shape) != 2
            or matmul_post_ops_cheap()):
        return False
    m, k = a_shape
    n = b_shape[0] if trans_b else b_shape[1]
    return m >= 8 and min(k, n) >= 768


def _as_linear(src1, src2, trans_a: bool, trans_b: bool, dtype: str, post) -> bool:
    """Whether this matmul runs as primitives.linear (linear_shapes), its B a weight
    the layout pass left to it and its post-ops eltwise ones."""
    return (dtype == "float32" and _pending(src2) and all(p.kind == "eltwise" for p in post)
            and linear_shapes(src1.shape, src2.shape, trans_a, trans_b, src2.static))


def _strided(entry, dtype: str, rank: int):
    """The layout `entry` is held in when the matmul can read it as it is: strides with
    no blocks (a transpose_view's), of the matmul's rank and data type, one of the
    matrix dims innermost (oneDNN's gemm reads no other: a channels-last stack, a
    dequantize's of a 4-D int8 tensor, took its reference kernel); else None."""
    layout = entry.layout
    if layout is None or layout.desc is None or entry.ndim != rank:
        return None
    desc = layout.desc
    if desc.dtype != dtype or not desc.unblocked:
        return None
    matrix_dims = {chr(ord("a") + rank - 2), chr(ord("a") + rank - 1)}
    return desc if desc.format[-1] in matrix_dims else None


def matmul(op, src1, src2, bias, dst, *, transA, transB, alpha=1.0, beta=1.0,
           activation="none", addend=None, blocked=False, residual=None, dst_axes=(),
           **act) -> int:
    """dst = act(alpha * A' @ B' + beta * bias + addend) + residual, over stacks of
    matrices (batch dims broadcasting); alpha is oneDNN's weights scale (an eltwise
    linear post-op of a product run as a linear), so a bias goes with alpha = beta = 1
    only (beta = 0 leaves it out); the addend (broadcasting) a binary add
    post-op, the activation an eltwise one. A, a B computed per run, the addend and
    the output plain (transposes are strides; a source a producer holds in a layout
    of its own is reordered first, into the scratch); a static B (a weight) in the
    layout the matmul chose. A product run as a linear reads an A held in its blocked
    layout (primitives.blocked_matrix: a linear's `blocked` product, an element-wise
    op between) as it is, and writes its product so when `blocked`. A plain residual
    (the combiner matmul_sum's; no activation) is added in place: dst is its memory
    (its owner), a sum post-op adds into it (in a linear, its output reorder's); one
    held in a layout of its own (or in bfloat16) is read as an addend instead. With
    `dst_axes`, dst is laid out as its transpose by them is in C order (the
    transpose_view reading it sees plain bytes: the copy is not made)."""
    dtype = _computes_in(src1, src2)
    if bias is not None and beta == 0:
        bias = None
    if bias is not None and (alpha != 1 or beta != 1):
        raise ValueError("oneDNN matmul: alpha * A' @ B' + bias needs alpha = beta = 1 (the "
                         "dnnl expanders keep such an op on the cpu)")
    if residual is not None and (addend is not None or activation != "none" or blocked):
        raise ValueError("oneDNN matmul: a residual goes with no addend, activation or "
                         "blocked output")
    if dst_axes and (residual is not None or addend is not None or blocked):
        raise ValueError("oneDNN matmul: an output laid out transposed goes with no "
                         "residual, addend or blocked output")
    if residual is not None and _pending(residual):
        record(residual, _plain(residual.shape, dtype))
    in_place = residual is not None and residual.layout is None and dtype == "float32"
    if residual is not None and not in_place:
        addend, residual = residual, None
        addend_arg = "residual"  # the op's arg the addend is bound from
    else:
        addend_arg = "addend"
    before = {}
    # alpha: a linear post-op of a product run as a linear, else the matmul's scale.
    linear_alpha = alpha != 1 and _as_linear(src1, src2, transA, transB, dtype, [])
    post = [eltwise_post_op("linear", alpha)] if linear_alpha else []
    args = {"src": "src1", "weights": "src2", "dst": "dst"}
    if addend is not None:
        args[f"post_op_{len(post)}"] = addend_arg
        if not addend.static:
            _read_plain(addend, dtype, f"post_op_{len(post)}", before)
        # A residual read as an addend has the product's elements, in its own shape.
        post.append(binary_post_op("add", dst.shape if addend_arg == "residual"
                                   else addend.shape))
    post += _post_ops(None, activation, **act)
    as_linear = _as_linear(src1, src2, transA, transB, dtype, post)
    if in_place and not as_linear:
        post.append(primitives.sum_post_op())  # the GEMM's beta = 1
    src_blocked = (as_linear and src1.layout is not None and src1.layout.desc is not None
                   and src1.layout.desc == primitives.blocked_matrix(src1.shape, dtype))
    rank = max(src1.ndim, src2.ndim)
    a_desc = None if as_linear or src1.static else _strided(src1, dtype, rank)
    b_desc = None if src2.static else _strided(src2, dtype, rank)
    if not src1.static and not src_blocked and a_desc is None:
        _read_plain(src1, dtype, "src", before)
    if not src2.static and b_desc is None:
        _read_plain(src2, dtype, "weights", before)
    # A static B in float32 as B^T (primitives.matmul: gemm:jit:f32 runs it faster);
    # in bfloat16 where oneDNN chooses.
    weights = (("transposed" if dtype == "float32" else "any")
               if src2.static and _pending(src2) else "plain")
    if as_linear:
        kernel = _create(primitives.linear, src1.shape, src2.shape, trans_b=transB,
                         bias=bias is not None, dtype=dtype, post_ops=post,
                         src_blocked=src_blocked, dst_blocked=bool(blocked),
                         residual=in_place)
    else:
        kernel = _create(primitives.matmul, src1.shape, src2.shape, trans_a=transA,
                         trans_b=transB, bias_shape=None if bias is None else bias.shape,
                         dtype=dtype, post_ops=post, a_layout=a_desc,
                         b_layout=weights if b_desc is None else b_desc,
                         alpha=1.0 if linear_alpha else alpha,
                         dst_layout=_transposed_layout(dst.shape, dst_axes, dtype))
    if bias is not None:
        args["bias"] = "bias"
    if in_place:
        dst.owner = residual.name  # the sum post-op adds into the residual's memory
    return _settle(op, Call(kernel, args, {"src1": src1, "src2": src2, "bias": bias,
                                           addend_arg: addend, "dst": dst}, before))


def _transposed_layout(shape, axes, dtype: str):
    """The layout of a tensor of `shape` whose transpose by `axes` is in C order (None
    for no axes): the C order of the transpose seen with the inverse permutation."""
    if not axes:
        return None
    inverse = [0] * len(axes)
    for i, a in enumerate(axes):
        inverse[a] = i
    return _plain([shape[a] for a in axes], dtype).transposed(inverse)


def int8_exact() -> bool:
    """Whether oneDNN's int8 convolution and matmul compute the exact int32 sums of any
    8-bit operands here: with VNNI (AVX2 VNNI, AVX-512 VNNI and up), which accumulates
    u8 x s8 products in int32."""
    isa = capi.library().isa
    return any(isa & bits == bits for bits in (capi.dnnl_cpu_isa_avx2_vnni,
                                               capi.dnnl_cpu_isa_avx512_core_vnni))


# The largest weight magnitude whose pairs of products with uint8 values fit int16:
# 2 * 255 * 64 = 32640 <= 32767 (ONNX Runtime's quantizer, reduce_range, writes
# weights in [-64, 64]).
SEVEN_BIT = 64


def int8_sums_exact(src_dtype: str, weight) -> bool:
    """Whether oneDNN sums a source of `src_dtype` (a DType name) against `weight` (its
    values; None: unknown at compile) exactly, so that the dnnl expanders may lower a
    quantized op to it. With VNNI always. Below it (AVX2) oneDNN adds pairs of u8 x s8
    products in int16 with saturation (vpmaddubsw): exact for a uint8 source and weights
    within +-64. An int8 source is shifted to uint8 against weights halved (oneDNN's
    scale adjustment), never exact there."""
    if int8_exact():
        return True
    return (src_dtype == "TL_UINT8" and weight is not None
            and -SEVEN_BIT <= int(weight.min()) and int(weight.max()) <= SEVEN_BIT)


def _quantization(weight_scale, dst_scale, src_zero, dst_zero) -> primitives.Quantization:
    return primitives.Quantization(
        weight_scales=0 if weight_scale is None else weight_scale.len,
        dst_scale=dst_scale is not None, src_zero=src_zero is not None,
        dst_zero=dst_zero is not None)


# The run-time arguments of an int8 primitive's scales and zero points, by op arg.
_QUANTIZATION_ARGS = ("src_scale", "weight_scale", "dst_scale", "src_zero", "dst_zero")


def qconv2d(op, src, weight, bias, residual, dst, *, group, stride, padding, dilation,
            activation="none", weight_scale=None, dst_scale=None, src_zero=None,
            dst_zero=None, mid_scale=0.0, mid_zero=0, residual_scale=1.0,
            residual_zero=0) -> int:
    """An int8 convolution (scales and zero points as the entries given: None for none)
    with a fused relu, and a fused residual add (see _residual_post_ops: dst is the
    residual's memory). oneDNN's int8 kernels work channels-last, and the layout pass
    passes 8-bit tensors between them so (and a float output as any other): a source
    held otherwise (plain, a producer's other layout) is reordered into the scratch
    first; an int32 output, which LightNet holds plain, is written there and reordered
    into dst after."""
    post_ops = _post_ops(None, activation)
    if residual is not None:
        post_ops += _residual_post_ops(residual, mid_scale, mid_zero, residual_scale,
                                       residual_zero)
    kernel = _create(primitives.qconv2d, src.shape, weight.shape,
                     src_dtype=_np_name(src.dtype), dst_dtype=_np_name(dst.dtype),
                     bias=bias is not None,
                     quantization=_quantization(weight_scale, dst_scale, src_zero, dst_zero),
                     group=group, stride=stride, padding=padding, dilation=dilation,
                     post_ops=post_ops)
    before, after = {}, {}
    if not _pending(src) and _desc(src) != kernel.descs["src"]:
        before["src"] = _create(primitives.reorder, _desc(src), kernel.descs["src"])
    if dst.dtype.name == "TL_INT32":
        after["dst"] = _create(primitives.reorder, kernel.descs["dst"], kernel.plain["dst"])
    if residual is not None:
        if _pending(residual):
            record(residual, _tagged(residual.shape, _np_name(residual.dtype), ("acdb",))[0])
        elif _format(residual) != "acdb":
            raise ValueError(f"oneDNN qconv2d: a residual held as {_format(residual)}, "
                             "not channels-last")
        dst.owner = residual.name  # the sum post-op adds into the residual's memory
    args = {"src": "src", "weights": "weight", "bias": "bias", "dst": "dst"}
    args.update((name, name) for name in _QUANTIZATION_ARGS if name in kernel.args)
    return _settle(op, Call(kernel, args, {"src": src, "weight": weight, "bias": bias,
                                           "dst": dst}, before, after))


def int8_residual(conv, add) -> str | None:
    """The input of qelew_dnnl `add` (an optimizer rule's OpView, a sum) that the
    qint8_sum combiner adds inside qconv2d_dnnl `conv`, "src1" or "src2"; None where it
    cannot: the other input must be conv's output dequantized as conv quantizes it (the
    same scale and zero point, known at compile), the residual of its shape, with a
    scale and zero point known at compile, made by another int8 convolution (which
    writes channels-last, as conv does: other int8 ops keep their sources' layout, which
    may be plain), and conv may write into its memory (OpView.may_overwrite)."""
    out = conv.outs.dst.name
    names = (add.ins.src1.name, add.ins.src2.name)
    if out not in names or names[0] == names[1]:
        return None
    mid, res = ("src1", "src2") if names[0] == out else ("src2", "src1")
    residual = getattr(add.ins, res)
    if (residual.shape != conv.outs.dst.shape or add.producer(res) != "qconv2d_dnnl"
            or not conv.known("dst_scale") or not add.known(f"{mid}_scale", f"{res}_scale")
            or conv.value("dst_scale")[0] != add.value(f"{mid}_scale")[0]):
        return None
    zeros = [zero_point(conv, "dst_zero"), zero_point(add, f"{mid}_zero"),
             zero_point(add, f"{res}_zero")]
    if None in zeros or zeros[0] != zeros[1]:
        return None
    return res if conv.may_overwrite(residual) else None


def zero_point(view, arg: str) -> int | None:
    """Input `arg`'s zero point (0 when not given; None when not known at compile)."""
    if not view.given(arg):
        return 0
    value = view.value(arg)
    return None if value is None else int(value.reshape(-1)[0])


def _residual_post_ops(residual, mid_scale, mid_zero, residual_scale, residual_zero) -> list:
    """A QDQ model's residual add after a convolution, as ONNX computes it: the
    convolution's output quantized (scale mid_scale, zero point mid_zero, saturating to
    the type of the residual and dst) and dequantized by linear, round (half to even),
    clip and linear post-ops, then the residual added by a sum taking its zero point off
    and scaling it. dst's own scale and zero point requantize the sum."""
    info = np.iinfo(_np_name(residual.dtype))
    return [eltwise_post_op("linear", 1.0 / mid_scale), eltwise_post_op("round"),
            eltwise_post_op("clip", info.min - mid_zero, info.max - mid_zero),
            eltwise_post_op("linear", mid_scale),
            sum_post_op(residual_scale, residual_zero, _np_name(residual.dtype))]


def qmatmul(op, src1, src2, bias, dst, *, activation="none", weight_scale=None,
            dst_scale=None, src_zero=None, dst_zero=None) -> int:
    """An int8 matrix product (scales and zero points as qconv2d's), A and dst plain, B
    (a weight) in the layout the matmul chose."""
    kernel = _create(primitives.qmatmul, src1.shape, src2.shape,
                     src_dtype=_np_name(src1.dtype), dst_dtype=_np_name(dst.dtype),
                     bias=bias is not None,
                     quantization=_quantization(weight_scale, dst_scale, src_zero, dst_zero),
                     post_ops=_post_ops(None, activation))
    args = {"src": "src1", "weights": "src2", "bias": "bias", "dst": "dst"}
    args.update((name, name) for name in _QUANTIZATION_ARGS if name in kernel.args)
    return _settle(op, Call(kernel, args, {"src1": src1, "src2": src2, "bias": bias,
                                           "dst": dst}))


def _channels_last_or_plain(entry, dtype: str):
    """`entry`'s shape in `dtype`, channels-last when 4-D (oneDNN's int8 layout)."""
    tagged = _tagged(entry.shape, dtype, ("acdb",))
    return tagged[0] if tagged else _plain(entry.shape, dtype)


def _quantizing_reorder(op, src, scale, zero, dst, dst_desc, side: str) -> int:
    """A quantize or dequantize as oneDNN's reorder (see quantize, dequantize): `src`
    read where it is (one left to the op plain), written as `dst_desc`."""
    if _pending(src):
        record(src, _plain(src.shape, _dtype(src)))
    kernel = _create(primitives.quantizing_reorder, _desc(src), dst_desc, side=side,
                     zero=zero is not None)
    args = {"src": "src", "dst": "dst", "scale": "scale"}
    if zero is not None:
        args["zero"] = "zero"
    return _settle(op, Call(kernel, args, {"src": src, "scale": scale, "zero": zero,
                                           "dst": dst}))


def quantize(op, src, scale, zero, dst) -> int:
    """float32 to 8-bit integers (one scale and zero point) in one pass of oneDNN's
    reorder, from the source's layout to channels-last where 4-D (the layout of oneDNN's
    int8 convolutions, which read it as it is), else plain; plain too from a source held
    plain (a matmul's or softmax's: attention's scores, whose readers, element-wise ops
    and products, read plain faster: the addition of a mask [1, 1, T, T] broadcast over
    channels-last scores [1, H, T, T] took 6x as long)."""
    dtype = _np_name(dst.dtype)
    held_plain = not _pending(src) and _desc(src) == _plain(src.shape, _dtype(src))
    return _quantizing_reorder(op, src, scale, zero, dst, _plain(dst.shape, dtype) if held_plain
                               else _channels_last_or_plain(dst, dtype), "dst")


def dequantize(op, src, scale, zero, dst) -> int:
    """8-bit integers to float32 (one scale and zero point) in one pass of oneDNN's
    reorder, the output channels-last where the source is (an int8 convolution's), else
    plain."""
    layout = _channels_last_or_plain(src, _np_name(src.dtype))
    laid = not _pending(src) and _desc(src) == layout and src.layout is not None
    return _quantizing_reorder(op, src, scale, zero, dst,
                               _channels_last_or_plain(dst, "float32") if laid
                               else _plain(dst.shape, "float32"), "src")


def deconv2d(op, src, weight, bias, dst, *, group, stride, padding, output_padding,
             dilation) -> int:
    """A transposed convolution reading its source in the producer's layout (or choosing
    it), its weight reordered once into the layout it chose."""
    kernel = _create(primitives.deconv2d, src.shape, weight.shape, bias=bias is not None,
                     group=group, stride=stride, padding=padding,
                     output_padding=output_padding, dilation=dilation, dtype=_dtype(src),
                     src=_layout(src, chooses=True))
    return _settle(op, Call(kernel, {"src": "src", "weights": "weight", "bias": "bias",
                                     "dst": "dst"},
                            {"src": src, "weight": weight, "bias": bias, "dst": dst}))


def batchnorm(op, src, scale, offset, mean, var, dst, *, epsilon, activation="none") -> int:
    """Inference batch normalization in the source's layout (a plain one channels-last:
    oneDNN's plain loop, ncsp_bnorm, took 1.0 ms on DenseNet's 64x56x56, its jit kernel
    channels-last 0.18), with a fused relu (oneDNN's fuse_norm_relu) when `activation`
    says so; the [C] tensors plain."""

    def create(layout):
        return _create(primitives.batchnorm, src.shape, epsilon, relu=activation == "relu",
                       dtype=_dtype(src), src=layout)

    before = {}
    kernel = _channels_last_if_plain_is_slow(create(_layout(src)), create, src, before)
    args = {"src": "src", "mean": "mean", "variance": "var", "scale": "scale",
            "shift": "offset", "dst": "dst"}
    return _settle(op, Call(kernel, args, {"src": src, "scale": scale, "offset": offset,
                                           "mean": mean, "var": var, "dst": dst}, before))


def lrn(op, src, dst, *, size, alpha, beta, bias) -> int:
    """Local response normalization across channels (odd sizes) in the source's layout."""
    kernel = _create(primitives.lrn, src.shape, size=size, alpha=alpha, beta=beta, bias=bias,
                     dtype=_dtype(src), src=_layout(src))
    return _settle(op, Call(kernel, {"src": "src", "dst": "dst"}, {"src": src, "dst": dst}))


def layernorm(op, src, scale, bias, dst, *, axis, epsilon) -> int:
    """Layer normalization over the axes `axis`.. of `src`, described as one (the
    tensor is read and written plain, each row of them dense); scale and bias (None:
    none) hold one float32 value per normalized element, read plain."""
    dtype = _dtype(src)
    rows, width = math.prod(src.shape[:axis]), math.prod(src.shape[axis:])
    if scale.len != width or (bias is not None and bias.len != width):
        raise ValueError(f"oneDNN layernorm: scale and bias of {width} values")
    before = {}
    _read_plain(src, dtype, "src", before)
    # Never another layout for dst than src's: oneDNN 3.2 creates jit:uni for a plain
    # src and a blocked dst, and writes dst plain (docs/performance.md, "The products
    # at the machine's peak").
    kernel = _create(primitives.layernorm, (rows, width), epsilon, scale=True,
                     shift=bias is not None, dtype=dtype, src="plain", dst="plain")
    record(dst, _plain(dst.shape, dtype))
    args = {"src": "src", "scale": "scale", "dst": "dst"}
    if bias is not None:
        args["shift"] = "bias"
    # dst is left out of the entries: its layout, recorded here, is of its own shape.
    return _settle(op, Call(kernel, args, {"src": src, "scale": scale, "bias": bias},
                            before))


def lstm(op, x, w_layer, w_iter, bias, initial_h, initial_c, peephole, y,
         direction) -> int:
    """One direction of an LSTM: its weights oneDNN's (the dnnl expander made them of
    the ONNX ones), the two matrices read in the layout the primitive chose (a
    weights_dnnl op reorders them once, at load); x, the initial states and y plain."""
    dtype = _dtype(x)
    seq, batch, inputs = x.shape
    kernel = _create(primitives.lstm, seq, batch, inputs, w_iter.shape[2],
                     reverse=direction == "reverse", peephole=peephole is not None,
                     states=initial_h is not None, dtype=dtype)
    before = {}
    for entry, name in ((x, "src_layer"), (initial_h, "src_iter"), (initial_c, "src_iter_c")):
        if entry is not None:
            _read_plain(entry, dtype, name, before)
    record(y, _plain(y.shape, dtype))
    names = {"src_layer": "x", "weights_layer": "w_layer", "weights_iter": "w_iter",
             "bias": "bias", "src_iter": "initial_h", "src_iter_c": "initial_c",
             "weights_peephole": "peephole", "dst_layer": "y"}
    entries = {"x": x, "w_layer": w_layer, "w_iter": w_iter, "bias": bias,
               "initial_h": initial_h, "initial_c": initial_c, "peephole": peephole}
    # y is left out of the entries: its layout, recorded here, is of its own shape.
    return _settle(op, Call(kernel, {k: v for k, v in names.items() if k in kernel.args},
                            entries, before))


def softmax(op, src, dst, *, axis, log: bool = False) -> int:
    """Softmax (or, `log`, its logarithm) along `axis` in the source's layout; where
    oneDNN has only its reference kernel for that (a plain source and an axis not the
    last: YOLO's box head over 16 bins of axis 1), in a layout with `axis` innermost, the
    source reordered into it."""
    dtype = _dtype(src)

    def create(layout):
        return _create(primitives.softmax, src.shape, axis, dtype=dtype, src=layout, log=log)

    before = {}
    inner = [a for a in range(src.ndim) if a != axis] + [axis]
    kernel = _avoid_reference(create(_layout(src)), create, src, "src",
                              [primitives.strided_desc(src.shape, dtype, inner)], before)
    return _settle(op, Call(kernel, {"src": "src", "dst": "dst"}, {"src": src, "dst": dst},
                            before))


def _shuffle_views(desc, group: int):
    """A channel shuffle of a plain or channels-last 4-D layout `desc` as a reorder:
    the source seen as [N, group, C / group, H, W] by its strides, the output the same
    elements with channel j * group + i where the source has i * C / group + j."""
    n, c, h, w = desc.shape
    per = c // group
    stride_n, stride_c, stride_h, stride_w = desc.strides
    src = (stride_n, per * stride_c, stride_c, stride_h, stride_w)
    dst = (stride_n, stride_c, group * stride_c, stride_h, stride_w)
    shape = (n, group, per, h, w)
    return (primitives.MemoryDesc.with_strides(shape, desc.dtype, src),
            primitives.MemoryDesc.with_strides(shape, desc.dtype, dst))


class _Reordered:
    """An op's call that is one reorder of its source's bytes into its output's (views of
    other shapes than the op's tensors, as a channel shuffle's)."""

    def __init__(self, kernel: primitives.Kernel):
        self.kernel = kernel
        self.impl_info = kernel.impl_info

    def bind(self, scratch, arrays: dict):
        return self.kernel.bind({"src": _bytes(arrays["src"]), "dst": _bytes(arrays["dst"])})


class _View:
    """The call of an op whose output is a view of its source's memory: nothing runs
    (its load returns no run call, so the op is not in the run list)."""

    impl_info = "view"

    def bind(self, scratch, arrays: dict):
        return None


def transpose(op, src, dst, *, axes, view: bool = False) -> int:
    """dst = src with its axes permuted (numpy's transpose): one reorder reading src in
    its producer's layout seen with permuted axes (a blocked one too, so no reorder to
    plain comes first). dst is plain, or channels-last where that is the order src's
    bytes are in already ([N, H, W, C] to [N, C, H, W]: a copy, and the convolution
    reading it runs a direct kernel on it where a plain source would take im2col).
    With `view`, dst is src's memory in that permuted layout, no copy (its readers are
    matmuls, which take strided operands as they are)."""
    if _pending(src):
        record(src, primitives.plain_desc(src.shape, _dtype(src)))
    desc = _desc(src).transposed(axes)
    if view:
        as_view(dst, src, desc)
        op.values["call"] = _View()
        return 0
    out = primitives.plain_desc(dst.shape, desc.dtype)
    if desc.ndim == 4 and desc.format == "acdb":
        out = _tagged(dst.shape, desc.dtype, ("acdb",))[0]
    kernel = _create(primitives.reorder, desc, out)
    record(dst, kernel.descs["dst"])
    op.values["call"] = _Reordered(kernel)
    return 0


def cast(op, src, dst) -> int:
    """dst = src converted to dst's data type: one reorder between their plain layouts
    (oneDNN converts as it copies)."""
    if _pending(src):
        record(src, _plain(src.shape, _np_name(src.dtype)))
    kernel = _create(primitives.reorder, _desc(src), _plain(dst.shape, _np_name(dst.dtype)))
    op.values["call"] = _Reordered(kernel)
    return 0


def shuffle(op, src, dst, *, group) -> int:
    """A channel shuffle. Of a plain or channels-last source (or one left to the op,
    which takes plain): a reorder between two views of it (_shuffle_views), in its layout
    (oneDNN's shuffle primitive runs its reference kernel on those); of a blocked one,
    oneDNN's shuffle in that layout (its group_size is the channels of one of LightNet's
    groups), else in channel blocks."""
    dtype = _dtype(src)
    if _pending(src) and src.ndim == 4:
        record(src, primitives.plain_desc(src.shape, dtype))
    if src.ndim == 4 and _format(src) in (None, "acdb"):
        desc = _desc(src)
        kernel = _create(primitives.reorder, *_shuffle_views(desc, group))
        record(dst, desc)
        op.values["call"] = _Reordered(kernel)
        return 0

    def create(layout):
        return _create(primitives.shuffle, src.shape, 1, src.shape[1] // group, dtype=dtype,
                       src=layout)

    before = {}
    kernel = _avoid_reference(create(_layout(src)), create, src, "src",
                              _tagged(src.shape, dtype, ("aBcd16b", "aBcd8b")), before)
    return _settle(op, Call(kernel, {"src": "src", "dst": "dst"}, {"src": src, "dst": dst},
                            before))


def pool(op, src, dst, *, kind, size, stride, padding, dilation=None, ceil_mode=False,
         count_include_pad=False) -> int:
    """Max or average pooling (2-D or 3-D), reading its source in the producer's layout; a plain
    one channels-last instead (reordered first, into the op's scratch, unless left to
    it), where oneDNN has no jit kernel for plain (its `simple_nchw` loop took 2.4 ms
    on AlexNet's 3x3 max pool of 64x55x55, its jit kernel channels-last 0.05)."""

    def create(layout):
        return _create(primitives.pool, src.shape, kind=kind, size=size, stride=stride,
                       padding=padding, dilation=dilation, ceil_mode=ceil_mode,
                       count_include_pad=count_include_pad, dtype=_dtype(src), src=layout)

    before = {}
    kernel = _channels_last_if_plain_is_slow(create(_layout(src)), create, src, before)
    return _settle(op, Call(kernel, {"src": "src", "dst": "dst"}, {"src": src, "dst": dst},
                            before))


def resample(op, src, dst, *, mode: str) -> int:
    """Resample the spatial axes (2 onwards) of src, read in its producer's layout, to
    dst's shape: mode "linear" (half-pixel centres, clamped: the cpu resize's and
    upsample's TL_LINEAR) or "nearest" (which the expanders use for integer upscales
    only, where every nearest rule picks floor(i / factor))."""
    kernel = _create(primitives.resample, src.shape, dst.shape, mode, dtype=_dtype(src),
                     src=_layout(src))
    return _settle(op, Call(kernel, {"src": "src", "dst": "dst"}, {"src": src, "dst": dst}))


def eltwise(op, src, dst, name: str, alpha: float = 0.0, beta: float = 0.0) -> int:
    """dst = f(src) in src's layout (relu, lrelu, clip, sigmoid, tanh, ...)."""
    kernel = _create(primitives.eltwise, src.shape, name, alpha, beta, dtype=_dtype(src),
                                src=_layout(src))
    return _settle(op, Call(kernel, {"src": "src", "dst": "dst"}, {"src": src, "dst": dst}))


# GELU's tanh form, 0.5 x (1 + tanh(u)) with u = sqrt(2 / pi) (x + 0.044715 x^3), is
# x * sigmoid(2u) and 2u = x (A + B x^2): one binary primitive x * x with post-ops
# linear (B t + A), * x, sigmoid, * x.
_GELU_TANH_A = 2.0 * math.sqrt(2.0 / math.pi)
_GELU_TANH_B = _GELU_TANH_A * 0.044715


def gelu(op, src, dst, approximate: str) -> int:
    """dst = GELU(src), oneDNN's eltwise gelu_erf (approximate none) or gelu_tanh in
    src's layout. A float32 source of the tanh form, plain or a linear's blocked
    product, is x * sigmoid(2u) instead (above): oneDNN's tanh evaluates a table by
    gather instructions, slow on AMD's AVX2 cores (GPT-2's [128, 3072] took 1.11 ms as
    gelu_tanh, 0.29 so, the erf form 0.24), its sigmoid an exponential."""
    if approximate != "tanh":
        return eltwise(op, src, dst, "gelu_erf")
    dtype = _dtype(src)
    layout = _layout(src)
    shape = tuple(src.shape)
    if dtype != "float32" or not (
            layout == "plain" or src.ndim == 2 and layout == primitives.blocked_matrix(shape)):
        return eltwise(op, src, dst, "gelu_tanh")
    operand = None if layout == "plain" else layout
    post = [eltwise_post_op("linear", _GELU_TANH_B, _GELU_TANH_A),
            binary_post_op("mul", shape, operand), eltwise_post_op("sigmoid"),
            binary_post_op("mul", shape, operand)]
    kernel = _create(primitives.binary, shape, shape, "mul", dtype=dtype, src0=layout,
                     src1=layout, post_ops=post)
    if _reference(kernel):  # blocks padded past the last channel
        return eltwise(op, src, dst, "gelu_tanh")
    args = {"src0": "src", "src1": "src", "post_op_1": "src", "post_op_3": "src",
            "dst": "dst"}
    return _settle(op, Call(kernel, args, {"src": src, "dst": dst}))


# The unary op's functions as oneDNN eltwise ones: (name, alpha, beta).
_UNARY = {"exp": ("exp", 0.0, 0.0), "sqrt": ("sqrt", 0.0, 0.0),
          "neg": ("linear", -1.0, 0.0), "reciprocal": ("pow", 1.0, -1.0),
          "abs": ("abs", 0.0, 0.0), "log": ("log", 0.0, 0.0), "round": ("round", 0.0, 0.0),
          "mish": ("mish", 0.0, 0.0), "softplus": ("soft_relu", 1.0, 0.0)}


def unary(op, src, dst, func: str, alpha: float = 1.0) -> int:
    """dst = func(src) (see _UNARY and elu) as oneDNN's eltwise: neg is linear
    -1 * x + 0, reciprocal pow 1 * x^-1, softplus soft_relu with alpha 1, elu takes alpha."""
    if func == "elu":
        return eltwise(op, src, dst, "elu", alpha, 0.0)
    return eltwise(op, src, dst, *_UNARY[func])


def reduce(op, src, dst, *, func: str, axes) -> int:
    """The reduction over `axes` of the source in its producer's layout,
    else (oneDNN reduces blocked and channels-last sources by its reference kernel only)
    reordered plain first; the output plain. oneDNN keeps the reduced axes with size 1:
    a dst without them (no keepdims) holds the same bytes in the same order."""
    dtype = _dtype(src)

    def create(layout):
        return _create(primitives.reduction, src.shape, axes, func, dtype=dtype, src=layout)

    before = {}
    kernel = _avoid_reference(create(_layout(src)), create, src, "src",
                              [primitives.plain_desc(src.shape, dtype)], before)
    call = Call(kernel, {"src": "src", "dst": "dst"}, {"src": src, "dst": dst}, before)
    record(dst, primitives.plain_desc(dst.shape, _dtype(dst)))
    return _settle(op, call)


def binary(op, src1, src2, dst, name: str, quantized: bool = False) -> int:
    """dst = src1 <name> src2, src2 of src1's shape or broadcasting to it (its dims
    equal or 1, oneDNN broadcasting the second operand only); dst in src1's layout.

    src2 is read in its producer's layout (or plain). Where oneDNN has only its
    reference implementation for the two layouts (a broadcast operand, such as a
    squeeze-excite gate [N, C, 1, 1], in a layout other than src1's), it reads src2 in
    src1's layout instead: a src2 left to it takes that layout, any other is reordered
    into it first, into the op's scratch. A src2 of fewer dims is read as of src1's
    rank with leading dims of 1: one left to it (a weight, such as a per-channel
    scale [C, 1, 1]) like one of src1's rank, any other (a bias [C] added to
    [N, T, C]) plain.

    `quantized`: 8-bit tensors, dst = scale1 * src1 <name> scale2 * src2 + shift
    (primitives.binary), the three given at run time (arrays `scale1`, `scale2`,
    `shift`)."""
    dtype = _computes_in(src1, src2)
    shape2 = (1,) * (src1.ndim - src2.ndim) + tuple(src2.shape)

    def create(layout):
        return _create(primitives.binary, src1.shape, src2.shape, name, dtype=dtype,
                       src0=_layout(src1), src1=layout, quantized=quantized)

    before = {}
    if src2.ndim < src1.ndim and not _pending(src2):
        _read_plain(src2, dtype, "src1", before)
        kernel = create("plain")
    else:
        kernel = create(_layout(src2))
        like = _like(kernel.descs["src0"], shape2, dtype)
        kernel = _avoid_reference(kernel, create, src2, "src1", [like] if like else [], before)
    args = {"src0": "src1", "src1": "src2", "dst": "dst"}
    if quantized:
        args.update(src0_scale="scale1", src1_scale="scale2", shift="shift")
    return _settle(op, Call(kernel, args, {"src1": src1, "src2": src2, "dst": dst}, before))


def _like(desc, shape, dtype: str):
    """A layout of `shape` in `dtype` laid out as `desc` is (plain, or one of the 4-D
    tags), or None when desc is neither."""
    if desc == _plain(desc.shape, desc.dtype):
        return _plain(shape, dtype)
    if len(shape) == 4:
        for tag in primitives.TAGS_4D.values():
            if desc == primitives.MemoryDesc.with_tag(desc.shape, desc.dtype, tag):
                return primitives.MemoryDesc.with_tag(shape, dtype, tag)
    return None


class _Concat(Call):
    """A concat's call: oneDNN's concat primitive, or, where the memory plan placed
    sources inside the output (lightnet.compiler.memory_plan.assemble_in_place: their
    producers write there), a byte copy of each source it did not place."""

    def in_place(self, arrays: dict) -> bool:
        """Whether the memory plan placed a source inside the output."""
        dst = arrays["dst"]
        return any(np.shares_memory(arrays[arg], dst) for name, arg in self.args.items()
                   if name != "dst")

    def bind(self, scratch, arrays: dict):
        if not self.in_place(arrays):
            return super().bind(scratch, arrays)
        dst = _bytes(arrays["dst"])
        srcs = [_bytes(arrays[arg]) for name, arg in self.args.items() if name != "dst"]
        copies, offset = [], 0
        for s in srcs:
            part = dst[offset:offset + s.size]
            if not np.shares_memory(s, part):
                copies.append((s, part))
            offset += s.size

        def run():
            for s, part in copies:
                np.copyto(part, s)
        return run


def concat(op, srcs, dst, axis: int) -> int:
    """The sources (src1, src2, ...) joined along `axis`, each read in its own layout,
    else all channels-last: oneDNN joins sources of different layouts, or channel blocks
    cut by the joint (58 + 58 channels in blocks of 8), with its reference kernel only.
    A source held otherwise is then reordered first, into the op's scratch."""
    dtype = _computes_in(*srcs)

    def create(layouts):
        return _create(primitives.concat, [s.shape for s in srcs], axis, dtype=dtype,
                       srcs=layouts)

    kernel = create([_layout(s) for s in srcs])
    before = {}
    if _reference(kernel) and all(s.ndim == 4 for s in srcs):
        layouts = [_tagged(s.shape, dtype, ("acdb",))[0] for s in srcs]
        again = create(layouts)
        if not _reference(again):
            kernel = again
            for i, (s, desc) in enumerate(zip(srcs, layouts)):
                if not _pending(s) and _desc(s) != desc:
                    before[f"src{i}"] = _create(primitives.reorder, _desc(s), desc)
    args = {f"src{i}": f"src{i + 1}" for i in range(len(srcs))}
    args["dst"] = "dst"
    entries = {f"src{i + 1}": s for i, s in enumerate(srcs)}
    return _settle(op, _Concat(kernel, args, {**entries, "dst": dst}, before))


class _Slice:
    """A slice op's call: oneDNN's reorder of the part of the source (a sub-memory of
    its layout) into the output; `first`, where the part cuts the source's channel
    blocks, reorders the whole source channels-last (plain, unless 4-D) into the op's
    scratch before."""

    def __init__(self, kernel: primitives.Kernel, first: primitives.Kernel | None):
        self.kernel, self.first = kernel, first
        self.impl_info = kernel.impl_info
        self.scratch = 0 if first is None else first.nbytes("dst")

    def bind(self, scratch, arrays: dict):
        src, dst = _bytes(arrays["src"]), _bytes(arrays["dst"])
        if self.first is None:
            return self.kernel.bind({"src": src, "dst": dst})
        place = scratch[:self.scratch]
        whole = self.first.bind({"src": src, "dst": place})
        part = self.kernel.bind({"src": place, "dst": dst})

        def run():
            whole()
            part()
        return run


def slice(op, src, dst, *, axis: int, start: int, len: int,  # noqa: A002
          view: bool = False) -> int:
    """dst = the `len` entries of src from `start` along `axis`, src read in its
    producer's layout (plain where the layout pass left it to this op); dst in that
    layout (see _Slice). With `view`, dst is that part of src's memory, no copy (a
    sub-memory: src's strides from the part's offset), where src is held without
    blocks; a blocked src is copied."""
    dtype = _dtype(src)
    if _pending(src):
        record(src, _plain(src.shape, dtype))
    whole = _desc(src)
    shape, offsets = list(src.shape), [0] * src.ndim
    shape[axis], offsets[axis] = len, start
    if view and whole.unblocked:
        as_view(dst, src, whole.submemory(shape, offsets))
        op.values["call"] = _View()
        return 0
    first = None
    try:
        part = whole.submemory(shape, offsets)
    except LightNetError:  # oneDNN's sub-memories of a blocked layout are whole blocks
        dense = (_tagged(src.shape, dtype, ("acdb",)) or [primitives.plain_desc(src.shape,
                                                                                dtype)])[0]
        first = _create(primitives.reorder, whole, dense)
        whole, part = dense, dense.submemory(shape, offsets)
    out = _like(whole, shape, dtype) or _plain(shape, dtype)
    kernel = _create(primitives.reorder, part, out)
    record(dst, kernel.descs["dst"])
    op.values["call"] = _Slice(kernel, first)
    return op.values["call"].scratch


def reshape(op, src, dst) -> int:
    """dst = src seen with dst's shape, a view of its memory: src's layout reshaped by
    oneDNN (dnnl_memory_desc_reshape: dims split, or joined where their strides
    allow; a slice_dnnl view's strides and offset kept), plain where src is."""
    if _pending(src):
        record(src, _plain(src.shape, _dtype(src)))
    try:
        desc = _desc(src).reshaped(dst.shape)
    except LightNetError as e:
        raise ValueError(f"oneDNN reshape: {_desc(src).format} {list(src.shape)} cannot be "
                         f"seen as {list(dst.shape)} ({e})") from None
    as_view(dst, src, desc)
    op.values["call"] = _View()
    return 0


class Reorder:
    """A reorder op's call: to oneDNN's layout (the dst entry is PENDING until its
    first dnnl reader chooses) or back to plain. The primitive is made at load, when
    both layouts are settled."""

    impl_info = None
    # It reads its entries again at load (the layout its reader chose), so an op
    # holding it is checked anew every time it is checked (lightnet.ir.op.CheckMemo).
    keeps_entries = True

    def __init__(self, src, dst, to: str, dtype: str):
        self.src, self.dst, self.to = src, dst, to
        if to == "dnnl":
            dst.layout = Layout(PENDING, dtype=dtype)
        elif to == "linear":
            if dst.ndim != 2 or dtype != "float32":
                raise ValueError(f"oneDNN reorder to a linear's layout: a float32 matrix, "
                                 f"found {dtype} {list(dst.shape)}")
            desc = primitives.blocked_matrix(dst.shape, dtype)
            dst.layout = Layout(desc.format, desc)

    def bind(self, scratch, arrays: dict):
        if _pending(self.dst):
            raise ValueError("no dnnl op reads the reordered tensor")
        # A plain source is read as the reader's kernel holds it (a weight's own
        # strides); a dnnl tensor (converted to another data type) in its layout.
        made = self.dst.layout
        plain = self.to == "dnnl" and self.src.layout is None
        source = made.source if plain and made is not None else None
        kernel = primitives.reorder(source or _desc(self.src), _desc(self.dst))
        self.impl_info = kernel.impl_info
        # Only a reorder into an int8 weight's layout (computing its compensation) takes
        # a scratchpad: a weights_dnnl op's, run once at load.
        pad = np.empty(kernel.scratchpad, np.uint8) if kernel.scratchpad else None
        return kernel.bind({"src": _bytes(arrays["src"]), "dst": _bytes(arrays["dst"])}, pad)


def _desc(entry):
    if entry.layout is None:
        return _plain(entry.shape, _dtype(entry))
    return entry.layout.desc


def reorder(op, src, dst, to: str, dtype: str = "float32") -> int:
    """A reorder op copying `src` to oneDNN's layout (`to` "dnnl"), held in `dtype`
    there (an 8-bit tensor in its own), to a linear's blocked operand (`to` "linear"),
    or to plain; it needs no scratchpad."""
    if _np_name(src.dtype) in ("uint8", "int8"):
        dtype = _np_name(src.dtype)
    op.values["call"] = Reorder(src, dst, to, dtype)
    return 0


def kernel_counts(ops) -> dict[str, int]:
    """How many of the dnnl ops `ops` run each of oneDNN's implementations (impl_info),
    in order of first use; a reorder's is known once the model is loaded."""
    counts: dict[str, int] = {}
    for op in ops:
        info = getattr(op.values.get("call"), "impl_info", None)
        if info is not None:
            counts[info] = counts.get(info, 0) + 1
    return counts


def describe_kernels(ops) -> str:
    """The kernel_counts of the loaded dnnl ops in one line: what `lightnet bench` and
    bench/run.py print."""
    counts = kernel_counts(ops)
    if not counts:
        return "oneDNN: none (no op runs on dnnl)"
    return "oneDNN: " + ", ".join(f"{k} x{n}" for k, n in counts.items())
