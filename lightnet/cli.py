"""The `lightnet` command: compile and run a model.

Exit status: 0 on success, 1 on a user error (one line on stderr), 2 on bad
usage. `--debug` shows the traceback of an error.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import traceback
import warnings
from pathlib import Path

from lightnet import blas, mem
from lightnet.context import Context
from lightnet.errors import LightNetError, LightNetWarning, one_line


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lightnet",
        description="Compile a LightNet IR model for a target and run it.",
    )
    p.add_argument("model", metavar="MODEL.json", help="the IR to run; - reads standard input")
    p.add_argument("-t", "--target", default="cpu", help="the target arch (default: cpu)")
    p.add_argument("-c", "--compile", action="store_true",
                   help="compile only, and write the compiled IR to OUT")
    p.add_argument("-o", "--outfile", default="out.json", metavar="OUT",
                   help="where -c writes the compiled IR (default: out.json)")
    p.add_argument("-r", "--run", action="store_true",
                   help="MODEL is already compiled: run it as it is")
    p.add_argument("-f", "--datafile", metavar="DATAFILE",
                   help="weight file (.npz or LightNet's .wts); read before optimizing, "
                        "so rules fold constants (a batchnorm into the conv's weights)")
    p.add_argument("-w", "--weights-out", metavar="WEIGHTS",
                   help="with -c and -f: where to write the compiled model's weights, in "
                        "LightNet's format when it ends in .wts (default: OUT with the "
                        "suffix .npz)")
    p.add_argument("--no-combine", action="store_true",
                   help="lower the model without fusing ops (to compare results)")
    p.add_argument("--mem-report", action="store_true",
                   help="print the memory plan: arena, all tensors, lower bound")
    p.add_argument("--profile", action="store_true",
                   help="print the time of each op (run once more, timed per op)")
    p.add_argument("--dot", metavar="FILE", help="write the compiled data-flow graph (DOT)")
    p.add_argument("--dot-before", metavar="FILE",
                   help="write the data-flow graph before compiling (DOT)")
    p.add_argument("--memory-limit", type=_size, metavar="BYTES",
                   help="refuse a model needing more memory than BYTES (suffixes K, M, G: "
                        "512M); default: the memory the machine has available")
    p.add_argument("--threads", type=_threads, metavar="N",
                   help="threads of numpy's BLAS while the model runs (default: as the "
                        "environment sets them, e.g. OPENBLAS_NUM_THREADS)")
    p.add_argument("--seed", type=_seed, default=0, metavar="N",
                   help="seed of the random values of ops such as create with a range "
                        "(default: 0)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return p


def _size(text: str) -> int:
    try:
        return mem.parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _threads(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, found {text!r}")
    return int(text)


def _seed(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, found {text!r}")
    return int(text)


def run(args, out) -> None:
    ctx = Context(memory_limit=args.memory_limit, threads=args.threads, seed=args.seed)
    ctx.init(args.model)
    if args.dot_before:
        write_text(args.dot_before, ctx.dfg.to_dot(ctx.tensors))
    if args.run:
        ctx.plan()
    else:
        # Weights before optimizing, so rules may fold them. `-c` without `-f`
        # keeps them apart: the compiled IR then takes any weight file.
        weights = args.datafile
        if weights is None and not args.compile:
            weights = {}  # a model without weights from a file: its constants are known
        ctx.compile(args.target, combine=not args.no_combine, weights=weights)
    if args.dot:
        write_text(args.dot, ctx.dfg.to_dot(ctx.tensors))
    if args.mem_report:
        for report in ctx.mem.values():
            print(format_mem_report(report), file=out)
    if args.compile:
        ctx.print(args.outfile)
        if args.datafile is not None:
            ctx.save_weights(args.weights_out or str(Path(args.outfile).with_suffix(".npz")))
        return
    ctx.load(args.datafile if args.run else None)
    start = time.perf_counter()
    ctx.run()
    elapsed = time.perf_counter() - start
    out.flush()
    print(f"info: run time: {elapsed:.6f}s", file=out)
    if args.profile:
        with blas.threads(args.threads):  # what the timed runs use
            print(f"info: {blas.describe()}", file=out)
        print(format_profile(ctx.profile()), file=out)


def write_text(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise LightNetError(f"{path}: cannot write: {e.strerror}") from None


def format_mem_report(r) -> str:
    ratio = r.arena / r.lower_bound if r.lower_bound else 1.0
    return (f"memory {r.mtype}: arena {r.arena} bytes, all tensors {r.total} bytes, "
            f"lower bound {r.lower_bound} bytes (arena / lower bound = {ratio:.3f}); "
            f"weights {r.weights} bytes")


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


def report_errors(prog: str, debug: bool, body) -> int:
    """Run `body()` as a command's work, and turn what it raises into the
    commands' contract: a user error is one line on stderr and status 1; a
    bug is one `internal error` line and status 1; --debug adds the traceback."""
    try:
        body()
    except LightNetError as e:
        if debug:
            traceback.print_exc()
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (prog ... | head): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug in LightNet, not in the user's input
        if debug:
            traceback.print_exc()
        print(f"{prog}: internal error: {type(e).__name__}: {e} "
              "(please report it; --debug shows the traceback)", file=sys.stderr)
        return 1
    return 0


@contextlib.contextmanager
def show_warnings(prog: str):
    """While in it, a LightNetWarning prints as one `PROG: warning: ...` line."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", LightNetWarning)
        default = warnings.showwarning

        def show(message, category, *args, **kwargs):
            if issubclass(category, LightNetWarning):
                print(f"{prog}: warning: {one_line(str(message))}", file=sys.stderr)
            else:
                default(message, category, *args, **kwargs)

        warnings.showwarning = show
        yield


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    with show_warnings("lightnet"):
        return report_errors("lightnet", args.debug, lambda: run(args, sys.stdout))
