"""The dnnl layout pass: which tensors live in oneDNN's layouts, and where reorders go.

Run by the compile pipeline for the dnnl target after its expanders and combiners.
A tensor a dnnl op writes and only dnnl ops read stays in the layout oneDNN picks
for it (the producer's choice; format `any`). A reorder op is inserted only where a
tensor crosses a border:

- a dnnl op reading a tensor a non-dnnl op made (a cpu op, a model input): a
  `reorder_dnnl` (to: dnnl) makes a copy of it whose layout its first dnnl reader
  chooses; every dnnl reader shares that copy;
- a dnnl op reading a weight (a static tensor of two or more dims; biases and
  statistics are read plain): a `weights_dnnl` op reorders it once, at load, into a
  static tensor of the reader's own layout (planned in the arena, so the memory
  report and limit count it);
- a dnnl op's output a non-dnnl op reads, or a model output: the dnnl op writes
  `<name>_dnnl` and a `reorder_dnnl` (to: plain) makes `<name>` from it.

An 8-bit tensor (TL_UINT8, TL_INT8) the ops of INT8_LAYOUT_OPS make and read (int8
convolutions, max pools, concats, sums and products, quantizes and dequantizes) is laid out as a float
one: oneDNN's int8 kernels work channels-last, and a chain of them passes its tensors
channels-last, with a reorder only where one crosses to another op. Other tensors of
other dtypes than TL_FLOAT (the integer source of a `cast_dnnl`, its integer output, an
int8 product's, an int32 accumulator) are read and written plain, with no reorder; an
int8 weight (TL_INT8, two or more dims) gets its `weights_dnnl` as a float one.

The reorders are ops of the compiled IR (`-c`, `--dot`); the layouts themselves are
the machine's oneDNN's choice, made again whenever the model is checked (an IR
records which tensors are dnnl's, never their formats or sizes).

The data type of a dnnl tensor is decided here too. In float32 (the default)
every tensor is float32. In bfloat16, the `reorder_dnnl` ops into dnnl's layout
hold their copy in bfloat16 (their `dtype` param, recorded in the IR) and the
`weights_dnnl` ops convert weights once, at load; a dnnl op computes in the data
type of the tensors it reads (lightnet.archs.dnnl.ops), so its output is bfloat16 too,
and model inputs, outputs and cpu ops stay float32. The ops the dnnl optimizer
description lists as `float32_ops` (a softmax), and the dnnl ops making what they
read, compute in float32 inside such a region; an element-wise dnnl op (its
`elementwise_ops`) computes in what it reads: in the data type of the dnnl op making
it, in float32 where a cpu op or the model's input makes it (converting such a tensor
for one element-wise op would cost two conversions and a rounding, and gain
nothing). A reorder
converts where a dnnl op reads a tensor held in the other data type.
"""

from __future__ import annotations

from lightnet.archs.dnnl import conv_layouts
from lightnet.archs.dnnl import ops as dnnl_ops
from lightnet.archs.registry import get_arch, get_proto
from lightnet.ir.op import Op, unique_name
from lightnet.ir.param import Param
from lightnet.ir.tensor import DType

DNNL = "dnnl"
REORDER = "reorder_dnnl"
WEIGHTS = "weights_dnnl"
# The dnnl ops that choose their source's layout when the layout pass leaves it to them.
CHOOSERS = ("conv2d_dnnl", "conv3d_dnnl", "deconv2d_dnnl")

FLOAT32 = "float32"
FLOAT = DType.TL_FLOAT  # (an Enum member looked up once: the pass asks per tensor)
EIGHT_BIT = (DType.TL_UINT8, DType.TL_INT8)
# The dnnl ops that read and write 8-bit activations in oneDNN's layouts.
INT8_LAYOUT_OPS = frozenset({"qconv2d_dnnl", "quantize_dnnl", "dequantize_dnnl",
                             "maxpool2d_int8_dnnl", "concat_int8_dnnl", "qelew_dnnl"})

# The args a dnnl op reads in float32 whatever it computes in (oneDNN's biases and
# normalization statistics): static ones of one dimension are read plain.
FLOAT32_ARGS = frozenset({"bias", "scale", "offset", "mean", "var"})


def _is_dnnl(op) -> bool:
    """A dnnl op of the model's own (not a reorder this pass inserts)."""
    proto = op.proto  # (not Op's properties: called for every op, some twice)
    return proto.arch == DNNL and proto.optype not in (REORDER, WEIGHTS)


def _makes_dnnl(op) -> bool:
    """Whether `op`'s output is in oneDNN's layout: a dnnl op's, or a reorder's into it
    (so that the pass leaves a model it already laid out as it is)."""
    return _is_dnnl(op) or op.optype == WEIGHTS or (
        op.optype == REORDER and op.values.get("to") in ("dnnl", "linear"))


def _laid_out(op, entry) -> bool:
    """Whether dnnl op `op` reads or writes `entry` (a tensor the run computes) in
    oneDNN's layout: a float one, or an 8-bit one of an op of INT8_LAYOUT_OPS."""
    return entry.dtype is FLOAT or (entry.dtype in EIGHT_BIT
                                             and op.optype in INT8_LAYOUT_OPS)


def _int8_weight(entry) -> bool:
    """An int8 convolution's or product's weight, which a weights_dnnl op reorders into
    its reader's layout as a float one."""
    return entry.static and entry.dtype is DType.TL_INT8 and entry.ndim >= 2


def lay_out(ctx, dtype: str = FLOAT32) -> None:
    """Insert the reorders the dnnl ops of `ctx` need at their borders, their copies
    held in `dtype` (float32 or bfloat16; see the module docstring). Every op whose
    tensors or params changed, or that reads an entry other than when it was checked
    (a pass replacing its producer, a reorder inserted before it), is checked again
    (Context.rewrite), so every dnnl op is created with the layouts its inputs then
    have."""
    ops = list(ctx.ops)
    if not any(_is_dnnl(op) for op in ops):
        return
    tensors = ctx.tensors
    convs_laid_out = _choose_conv_layouts(ops, tensors) if dtype == FLOAT32 else []
    dfg_ops, consumers, made_by = ctx.dfg.ops, ctx.dfg.consumers, ctx.dfg.producer

    def producer(name: str):
        """The op making `name`; None for none (the graph is as it was until the
        rewrite below)."""
        return dfg_ops[made_by[name]] if name in made_by else None

    dnnl_ops = {op.name for op in ops if _is_dnnl(op)}

    def readers(name: str) -> list:
        """The ops reading `name` (the graph is as it was until the rewrite below)."""
        return [dfg_ops[r] for r in consumers.get(name, ())]

    def laid_out_for(reader, entry) -> bool:
        """Whether `reader` reads `entry` in dnnl's layout: a dnnl op laying it out,
        or a reorder of it to plain (of a model laid out before)."""
        if reader.name in dnnl_ops:
            return _laid_out(reader, entry)
        return reader.optype == REORDER and reader.values.get("to") == "plain"

    outputs = set(ctx.dfg.dangling_outs)  # the model's outputs (in any order)
    tensor_names = set(tensors)
    op_names = set(dfg_ops)

    def fresh(base: str) -> str:
        name = f"{base}_dnnl"
        if name in tensor_names:
            name = unique_name(f"{base}_dnnl", tensor_names)
        tensor_names.add(name)
        return name

    serials: dict[str, int] = {}  # a prefix -> the serial number its next op may take

    def new_op(optype: str, src: str, dst: str, **params) -> Op:
        # unique_name(prefix, op_names), resumed where the last one of the prefix
        # stopped (op_names only grows): not a scan from 1 for every reorder.
        prefix = optype.removesuffix("_dnnl") + "_"
        n = serials.get(prefix, 1)
        while f"{prefix}{n}" in op_names:
            n += 1
        serials[prefix] = n + 1
        name = f"{prefix}{n}"
        op_names.add(name)
        return Op(get_proto(optype), name, {"src": src}, {"dst": dst},
                  {k: Param.from_value(k, v) for k, v in params.items()})

    # The dnnl ops computing in another data type than `dtype` (in bfloat16 only).
    others = {} if dtype == FLOAT32 else _other_data_types(ops, dtype, producer)

    shared = _shared_linear_sources(ops, tensors, producer) if dtype == FLOAT32 else {}
    linear_copies: dict[tuple, str] = {}  # a shared source's key -> its blocked copy
    unread: set[str] = set()  # views of a shared source its linears no longer read
    result: list[Op] = []
    ins: list[tuple[Op, str, str]] = []  # (op, input arg, new tensor)
    outs: list[tuple[Op, str, str]] = []  # (op, output arg, new tensor)
    copies: dict[tuple[str, str], str] = {}  # (a tensor, a data type) -> its dnnl copy
    renamed: dict[str, str] = {}  # a dnnl op's output -> what it writes (plain readers)
    # A tensor a dnnl op (or a reorder into dnnl's layout) makes -> the data type it is
    # held in there (None: a weight), filled in run order, before the tensor is read.
    held_in: dict[str, str | None] = {}
    for op in ops:
        dnnl = op.name in dnnl_ops
        if dnnl:
            computes = others.get(op.name, dtype)  # the data type it computes and holds
            for arg, name in op.tensors_in.items():
                entry = tensors[name]
                group = shared.get(op.name) if arg == "src1" else None
                if group is not None:  # one blocked copy for the linears reading it
                    if group not in linear_copies:
                        linear_copies[group] = fresh(name)
                        result.append(new_op(REORDER, name, linear_copies[group], to="linear"))
                    else:
                        unread.add(name)
                    ins.append((op, arg, linear_copies[group]))
                    continue
                if entry.dtype in EIGHT_BIT and not entry.static and not _laid_out(op, entry):
                    continue  # read plain (an int8 product's source)
                if name in held_in:
                    held = held_in[name]
                    if held is not None and held != computes and entry.dtype is FLOAT:
                        # Between dnnl ops computing in different data types.
                        if (name, computes) not in copies:
                            copies[name, computes] = fresh(name)
                            result.append(new_op(REORDER, renamed.get(name, name),
                                                 copies[name, computes], to="dnnl",
                                                 dtype=computes))
                        ins.append((op, arg, copies[name, computes]))
                    continue
                if entry.dtype is not FLOAT and not (
                        _int8_weight(entry) or _laid_out(op, entry) and not entry.static):
                    continue  # read plain: oneDNN's layouts hold float data (a cast's source)
                if entry.static:
                    if entry.ndim < 2 and (computes == FLOAT32 or arg in FLOAT32_ARGS):
                        continue
                    # One per reader: each reads the weight in the layout it chose.
                    new = fresh(name)
                    result.append(new_op(WEIGHTS, name, new))
                    ins.append((op, arg, new))
                else:
                    if (name, computes) not in copies:
                        copies[name, computes] = fresh(name)
                        params = {"to": "dnnl"}
                        if computes != FLOAT32 and entry.dtype is FLOAT:
                            params["dtype"] = computes
                        result.append(new_op(REORDER, name, copies[name, computes], **params))
                    ins.append((op, arg, copies[name, computes]))
        result.append(op)
        if dnnl:
            held_in.update(dict.fromkeys(op.tensors_out.values(), computes))
        elif _makes_dnnl(op):
            held_in.update(dict.fromkeys(op.tensors_out.values(), _holds(op, others, dtype)))
        if dnnl:
            for arg, name in op.tensors_out.items():
                entry = tensors[name]
                if not _laid_out(op, entry):
                    continue  # written plain (a cast to an integer)
                if name not in outputs and all(laid_out_for(dfg_ops[r], entry)
                                               for r in consumers.get(name, ())):
                    continue  # no plain reader
                new = fresh(name)
                outs.append((op, arg, new))
                renamed[name] = new
                for r in readers(name):
                    if r.name in dnnl_ops and _laid_out(r, entry):
                        ins.extend((r, a, new) for a, n in r.tensors_in.items() if n == name)
                result.append(new_op(REORDER, new, name, to="plain"))
    for op, arg, new in ins:
        op.tensors_in[arg] = new
    if unread:  # a view (a reshape) nothing reads now: not made, and not an output
        read = {n for op in result for n in op.tensors_in.values()}
        result = [op for op in result if not (
            not _is_dnnl(op) and len(op.tensors_out) == 1
            and all(n in unread and n not in read and tensors[n].owner is not None
                    for n in op.tensors_out.values()))]
    for op, arg, new in outs:
        op.tensors_out[arg] = new
    changed = {id(op): op for op, _, _ in (*ins, *outs)}
    changed.update((id(op), op) for op in convs_laid_out)
    ctx.rewrite(result, list(changed.values()))  # the ops next to the reorders, ...
    _drop_copies(ctx)


def _other_data_types(ops, dtype: str, producer) -> dict[str, str]:
    """The data type each dnnl op of `ops` (in run order) computes in where it is not
    `dtype` (bfloat16), by name: float32 for the float32_ops and the dnnl ops making
    what they read; an element-wise op's is what its source is held in, float32 where a
    cpu op or the model's input makes it (see the module docstring). `producer(name)`:
    the op making tensor `name`, None for none."""
    arch = get_arch(DNNL)
    computes: dict[str, str] = {}
    for op in ops:
        if _is_dnnl(op) and op.optype in arch.float32_ops:
            computes[op.name] = FLOAT32
            for name in op.tensors_in.values():
                source = producer(name)
                if source is not None and _is_dnnl(source):
                    computes[source.name] = FLOAT32
    for op in ops:  # in run order: a source's data type is settled first
        if (_is_dnnl(op) and op.optype in arch.elementwise_ops
                and op.name not in computes):
            source = producer(op.tensors_in["src"])
            held = (_holds(source, computes, dtype)
                    if source is not None and _makes_dnnl(source) else None)
            computes[op.name] = held or FLOAT32
    return {name: held for name, held in computes.items() if held != dtype}


def _holds(op, others: dict[str, str], dtype: str) -> str | None:
    """The data type op `op`, making a tensor in dnnl's layout, holds it in: a dnnl
    op's (`others`, by name, where it is not `dtype`), a reorder's `dtype` param; None
    for a weight."""
    if _is_dnnl(op):
        return others.get(op.name, dtype)
    return op.values.get("dtype", FLOAT32) if op.optype == REORDER else None


def _shared_linear_sources(ops, tensors, producer) -> dict[str, tuple]:
    """The float32 matmuls running as linears (dnnl.linear_shapes) that read one matrix
    with others (BERT's Q, K and V projections of one layernorm, through reshapes of
    it): by op name, the key of their shared source. Each would reorder the matrix into
    its blocked layout itself; one reorder_dnnl (to: linear) makes that copy for all.
    `producer(name)`: the op making tensor `name`, None for none."""
    readers: dict[tuple, list[str]] = {}
    for op in ops:
        if op.proto.optype != "matmul_dnnl" or "addend" in op.tensors_in or op.values["alpha"] != 1:
            continue
        src, weight = tensors[op.tensors_in["src1"]], tensors[op.tensors_in["src2"]]
        made_by = producer(src.name)
        if (src.dtype is not DType.TL_FLOAT or src.static or made_by is None
                or made_by.optype == "matmul_dnnl" and made_by.values["blocked"]
                or not dnnl_ops.linear_shapes(src.shape, weight.shape, op.values["transA"],
                                              op.values["transB"], weight.static)):
            continue
        root = tensors.root(src.name)
        if tensors.offset_in_root(src.name) == 0 and root.nbytes == src.nbytes:
            readers.setdefault((root.name, src.shape), []).append(op.name)
    return {name: key for key, names in readers.items() if len(names) > 1 for name in names}


def _choose_conv_layouts(ops, tensors) -> list:
    """Set the `layout` param of each convolution to the one conv_layouts chooses
    (blocked, channels_last, or any: left out); the convolutions whose param changed."""
    chosen = conv_layouts.choose(ops, tensors)
    changed = []
    for op in ops:
        if op.proto.optype != conv_layouts.CONV:  # (not the property: per op)
            continue
        layout = chosen.get(op.name, "any")
        if op.values.get("layout", "any") != layout:
            if layout == "any":
                del op.params["layout"]
            else:
                op.params["layout"] = Param.from_value("layout", layout)
            changed.append(op)
    return changed


def _drop_copies(ctx) -> None:
    """Remove the reorders that turned out to copy a tensor into the layout it has (a
    dnnl op reading or writing LightNet's plain layout: a matmul, or an op fed plain
    data): their readers read the tensor itself, and a dnnl producer writes the plain
    tensor a reorder made. The ops this changes are checked again (Context.rewrite)."""
    copies = [op for op in ctx.ops if op.proto.optype == REORDER and all(
        ctx.tensors[n].layout is None for n in op.tensor_names())
        and not (op.values["to"] == "dnnl" and _chooser_reads(ctx, op.tensors_out["dst"]))]
    if not copies:
        return
    renames = {}  # tensor -> the tensor it becomes
    for op in copies:
        src, dst = op.tensors_in["src"], op.tensors_out["dst"]
        if op.values["to"] == "dnnl":
            renames[dst] = src  # the dnnl readers read the plain tensor
        else:
            renames[src] = dst  # the dnnl producer writes the plain tensor
    dropped = {id(op) for op in copies}
    ops = [op for op in ctx.ops if id(op) not in dropped]
    # The ops naming a renamed tensor, found through the data-flow graph (a model of
    # thousands of ops has a few copies).
    dfg = ctx.dfg
    naming = {}
    for name in renames:
        for op_name in (dfg.producer.get(name), *dfg.consumers.get(name, ())):
            op = dfg.ops.get(op_name)
            if op is not None and id(op) not in dropped:
                naming[id(op)] = op
    changed = list(naming.values())
    for op in changed:
        for names in (op.tensors_in, op.tensors_out):
            for arg, name in names.items():
                if name in renames:
                    names[arg] = renames[name]
    ctx.rewrite(ops, changed)


def _chooser_reads(ctx, name: str) -> bool:
    """Whether an op that chooses its source's layout reads `name`: given the plain
    tensor instead of one left to it, it could choose its output's layout otherwise."""
    return any(ctx.dfg.ops[r].optype in CHOOSERS for r in ctx.dfg.consumers.get(name, []))
