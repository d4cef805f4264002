"""`lightnet MODEL`: compile a model (or write the compiled IR), run it once on
the given inputs, and show what came out."""

from __future__ import annotations

import json
import time
from pathlib import Path

from lightnet.archs.registry import archs, threads_set
from lightnet.cli import arrays
from lightnet.errors import LightNetError
from lightnet.files import model_source
from lightnet.files import weight_file
from lightnet.ir import symbolic
from lightnet.runtime.context import Context


def run(args, out) -> None:
    ctx = Context(memory_limit=args.memory_limit, threads=args.threads, seed=args.seed,
                  fold_limit=args.fold_limit)
    if args.run and model_source.is_onnx(args.model):
        raise LightNetError(f"{args.model}: -r runs a compiled LightNet IR; an ONNX model is "
                            "compiled as it is read (drop -r)")
    if args.run and args.precision != "f32":
        raise LightNetError(f"{args.model}: -r runs the IR as compiled, in the precision "
                            "given to -c (drop --precision)")
    doc, label, weights = model_source.read(args.model, args.datafile, args.fold_limit)
    shapes = arrays.input_shapes(args.inputs, model_source.input_names(doc))
    ctx.init(doc, dims=model_source.command_dims(doc, label, shapes=shapes), label=label)
    feeds = arrays.read_fed(args.inputs, ctx)
    if args.dot_before:
        write_text(args.dot_before, dot(ctx))
    known = None
    if args.run:
        ctx.plan()
    else:
        # Weights before optimizing, so rules may fold them. `-c` without `-f`
        # keeps them apart: the compiled IR then takes any weight file.
        known = weights
        if known is None and not args.compile:
            known = {}  # a model without weights from a file: its constants are known
        ctx.compile(args.target, combine=not args.no_combine, weights=known,
                    precision=args.precision)
    if args.dot:
        write_text(args.dot, dot(ctx))
    if args.mem_report:
        for report in ctx.mem.values():
            print(report.describe(), file=out)
    if args.compile:
        weights_out = args.weights_out or str(Path(args.outfile).with_suffix(".npz"))
        if symbolic.names(doc):
            write_symbolic(doc, label, args, known, weights_out)
            return
        ctx.print(args.outfile)
        if weights is not None:
            ctx.save_weights(weights_out)
        return
    ctx.load(args.datafile if args.run else None)
    for name, array in feeds.items():
        ctx.set_data(name, array)
    zeros = [n for n in ctx.inputs if n not in feeds]
    if zeros:
        print(f"info: no --input for {', '.join(zeros)}: running on zeros", file=out)
    out.flush()
    start = time.perf_counter()
    ctx.run()
    elapsed = time.perf_counter() - start
    out.flush()  # what print ops printed comes first
    print(f"info: run time: {elapsed:.6f}s", file=out)
    outputs = {n: ctx.get_data(n) for n in ctx.outputs}
    if args.save:
        arrays.save(args.save, outputs)
        print(f"info: outputs {', '.join(outputs) or '(none)'} written to {args.save}",
              file=out)
    else:
        for name, array in outputs.items():
            print(arrays.summary(name, array), file=out)
    if args.profile:
        with threads_set(args.threads):  # what the timed runs use
            for line in kernel_lines(ctx.ops):
                print(f"info: {line}", file=out)
        print(format_profile(ctx.profile()), file=out)


def write_symbolic(doc, label: str, args, weights, weights_out: str) -> None:
    """`-c` of a model with symbolic dims: the compiled IR keeps them (compiled
    at several values of the dims, see symbolic.generalize), and its weights: no
    constants folded (what ops compute from weights may depend on the dims, as a slice
    of a position table to the sequence's length does)."""
    def build(dims):
        ctx = Context(memory_limit=args.memory_limit, seed=args.seed, fold_limit=args.fold_limit)
        ctx.init(doc, dims=dims, label=label)
        if not args.run:  # -r: the IR is compiled already
            ctx.compile(args.target, combine=not args.no_combine, weights=weights,
                        precision=args.precision, fold=False)
        compiled = None
        if weights is not None:
            compiled = {n: ctx.weights[n] for n, e in ctx.tensors.items() if e.from_file}
        return json.loads(ctx.print()), compiled

    compiled_doc, compiled_weights = symbolic.generalize(build, symbolic.names(doc), {}, label)
    bounds = doc.get("interface", {}).get("dims")  # bind drops them, the compiled IR keeps them
    if bounds:
        compiled_doc.setdefault("interface", {})["dims"] = bounds
    write_text(args.outfile, json.dumps(compiled_doc, indent=4) + "\n")
    if compiled_weights is not None:
        try:
            weight_file.write_npz(weights_out, compiled_weights)
        except OSError as e:
            raise LightNetError(f"{weights_out}: cannot write the weights: "
                                f"{e.strerror}") from None


def dot(ctx: Context) -> str:
    """The model as Graphviz DOT (`--dot`), the ops of every architecture that runs
    beside its fallback (dnnl's) filled."""
    return ctx.dfg.to_dot(ctx.ops, ctx.tensors, {a.name for a in archs().values() if a.fallback})


def write_text(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise LightNetError(f"{path}: cannot write: {e.strerror}") from None


def kernel_lines(ops) -> list[str]:
    """What each architecture says of the kernels it runs `ops` with (Arch.describe_kernels:
    numpy's BLAS, oneDNN's implementations)."""
    return [line for arch in archs().values() if (line := arch.describe_kernels(ops))]


def format_profile(times) -> str:
    total = sum(t for _, t in times) or 1e-12
    width = max([len("op")] + [len(op.name) for op, _ in times])
    owidth = max([len("optype")] + [len(op.optype) for op, _ in times])
    lines = [f"{'op':<{width}}  {'optype':<{owidth}}  {'ms':>10}  {'%':>6}"]
    for op, t in times:
        lines.append(f"{op.name:<{width}}  {op.optype:<{owidth}}  {t * 1e3:>10.3f}  "
                     f"{100 * t / total:>6.1f}")
    lines.append(f"{'total':<{width}}  {'':<{owidth}}  {total * 1e3:>10.3f}  {100.0:>6.1f}")
    return "\n".join(lines)
