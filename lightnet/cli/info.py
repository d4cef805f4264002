"""`lightnet info MODEL`: what a model takes and returns, what it is made of and
what running it costs, without running it.

Op counts are given for the model as written and compiled for the target.
Parameters are the elements of the tensors the model creates with `create`
ops (its weights and constants), as written. MACs (multiply-accumulates) are
those of the compiled model's convolutions, transposed convolutions and
matrix and dot products, the arithmetic that dominates a network; elementwise
ops, pools and normalizations are not counted. The kernels are those of the
target's library (Arch.kernel_counts: the oneDNN implementations the compiled dnnl
ops run; a reorder's is chosen at load, so `lightnet bench` lists those too); the
ops for which it has only its reference kernel run on its fallback (the cpu)
instead, and are counted too.
"""

from __future__ import annotations

import json
import math
from collections import Counter

from lightnet.archs.registry import archs, get_arch
from lightnet.compiler import targets
from lightnet.compiler.memory_plan import MemReport
from lightnet.files import model_source
from lightnet.ir.tensor import MemType
from lightnet.runtime.context import Context


def _family(op) -> str:
    """The optype an op is a variant of: `conv2d` for `conv2d_cpu` (every
    arch's variant of X is named X_<arch> and computes what X does)."""
    return op.optype if op.arch == "none" else op.optype.removesuffix(f"_{op.arch}")


def _conv_macs(op, shape) -> int:
    # dst[n, o, y, x] sums weight[o, :, :, :] (C / group * kh * kw products; 3-D alike).
    return math.prod(shape("dst")) * math.prod(shape("weight")[1:])


def _deconv_macs(op, shape) -> int:
    # src[n, c, y, x] is multiplied by weight[c, :, :, :] (O / group * kh * kw).
    return math.prod(shape("src")) * math.prod(shape("weight")[1:])


def _matmul_macs(op, shape) -> int:
    inner = shape("src1")[-2] if op.values["transA"] else shape("src1")[-1]
    return math.prod(shape("dst")) * inner


MACS = {
    "conv2d": _conv_macs,
    "conv3d": _conv_macs,
    "depthwise_conv2d": _conv_macs,
    "deconv2d": _deconv_macs,
    "matmul": _matmul_macs,
    "einsum": lambda op, shape: op.values["plan"].macs,
    "dot_product": lambda op, shape: math.prod(shape("src1")),
}


def op_macs(op, tensors) -> int:
    """Multiply-accumulates of one run of `op` (0 for an op MACS does not count)."""
    count = MACS.get(_family(op))
    if count is None:
        return 0
    return count(op, lambda arg: tensors[op.tensors_in.get(arg) or op.tensors_out[arg]].shape)


def _tensor(entry) -> dict:
    return {"name": entry.name, "dtype": str(entry.dtype.np), "shape": list(entry.shape)}


def collect(model, target: str = "cpu", datafile=None, memory_limit=None,
            precision: str = "f32", fold_limit=None) -> dict:
    """The summary of `model` (a JSON IR, compiled or not, or an ONNX model) as
    a dict, the document `lightnet info --json` prints; compiled in `precision`."""
    ctx = Context(memory_limit=memory_limit, fold_limit=fold_limit)
    weights = model_source.init(ctx, model, datafile)
    params = [ctx.tensors[n] for op in ctx.ops if _family(op) == "create"
              for n in op.tensors_out.values()]
    given = Counter(op.optype for op in ctx.ops)
    # The model's products, as given: a compiled op may compute more (a grouped
    # convolution run as fewer groups of block-diagonal weights multiplies zeros).
    macs = sum(op_macs(op, ctx.tensors) for op in ctx.ops)
    doc = {
        "model": ctx.label,
        "target": targets.resolve(target),
        "inputs": [_tensor(ctx.tensors[n]) for n in ctx.inputs],
        "outputs": [_tensor(ctx.tensors[n]) for n in ctx.outputs],
        "parameters": {"count": sum(e.len for e in params),
                       "bytes": sum(e.nbytes for e in params)},
    }
    if weights is None and not any(e.from_file for e in ctx.tensors.values()):
        weights = {}  # every constant is known: compile as `lightnet MODEL` does
    ctx.compile(target, weights=weights, precision=precision)  # plans memory; allocates nothing
    compiled = Counter(op.optype for op in ctx.ops)
    doc["ops"] = {"given": _by_count(given), "compiled": _by_count(compiled)}
    doc["macs"] = macs
    doc["kernels"] = {k: n for arch in archs().values()
                      for k, n in arch.kernel_counts(ctx.ops).items()}
    doc["refused"] = dict(Counter(optype for optype, _ in ctx.refused.values()))
    doc["memory"] = {str(r.mtype): {"arena": r.arena, "lower_bound": r.lower_bound,
                                    "all_tensors": r.total, "weights": r.weights}
                     for r in ctx.mem.values()}
    return doc


def _by_count(counts: Counter) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def format_text(doc: dict) -> str:
    lines = [f"model: {doc['model']}"]
    for kind in ("inputs", "outputs"):
        lines.append(f"{kind}:" if doc[kind] else f"{kind}: none")
        lines += [f"  {t['name']}: {t['dtype']}[{', '.join(map(str, t['shape']))}]"
                  for t in doc[kind]]
    for label, counts in (("ops as given", doc["ops"]["given"]),
                          (f"ops compiled for {doc['target']}", doc["ops"]["compiled"])):
        lines.append(f"{label}: {sum(counts.values())}")
        width = max(map(len, counts), default=0)
        lines += [f"  {optype:<{width}}  {n}" for optype, n in counts.items()]
    p = doc["parameters"]
    lines.append(f"parameters: {p['count']}{_si(p['count'])}, "
                 f"{p['bytes']} bytes{_si(p['bytes'])}")
    lines.append(f"MACs: {doc['macs']}{_si(doc['macs'])}")
    arch = get_arch(doc["target"])
    for label, counts in ((f"{arch.library} kernels", doc["kernels"]),
                          (f"on the {arch.fallback}, {arch.library} having only its "
                           "reference kernel", doc["refused"])):
        if counts:
            lines.append(f"{label}: " + ", ".join(f"{k} x{n}" for k, n in counts.items()))
    lines += [MemReport(MemType(mtype), m["arena"], m["all_tensors"], m["lower_bound"],
                        m["weights"]).describe() for mtype, m in doc["memory"].items()]
    return "\n".join(lines)


def _si(n: int) -> str:
    """` (1.23 M)` for 1234567: the size at a glance; empty below 1000."""
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f" ({n / scale:.3g} {unit})"
    return ""


def info(args, out) -> None:
    doc = collect(args.model, args.target, args.datafile, args.memory_limit, args.precision,
                  args.fold_limit)
    print(json.dumps(doc, indent=1) if args.json else format_text(doc), file=out)
