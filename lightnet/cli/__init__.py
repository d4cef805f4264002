"""The `lightnet` command: run a model, `lightnet info` summarizes one,
`lightnet bench` measures its latency, `lightnet quantize` makes an int8 model of an
ONNX one. This module only parses arguments and
hands them to the command's module (runner, summary, latency).

Exit status: 0 on success, 1 on a user error (one line on stderr), 2 on bad
usage. `--debug` shows the traceback of an error.
"""

from __future__ import annotations

import argparse
import sys

from lightnet.cli import arrays, bench, info, quantize, run
from lightnet.command import fold_limit_option, parse_shape, report_errors, show_warnings
from lightnet.compiler import memory_plan, pipeline, targets

USAGE = """lightnet [options] MODEL
       lightnet info [options] MODEL
       lightnet bench [options] MODEL
       lightnet quantize [options] MODEL.onnx --calibrate SAMPLES.npz"""

COMMANDS_HELP = """\
MODEL is a JSON IR (- reads it from standard input) or an ONNX model (.onnx,
imported in memory; needs pip install 'lightnet[onnx]').

other commands:
  lightnet info MODEL    inputs and outputs, op counts before and after
                         compiling, parameters, MACs, the memory plan
                         (lightnet info --help)
  lightnet bench MODEL   latency of a run: min / median / p90 / p99 and
                         throughput, on random inputs (lightnet bench --help)
  lightnet quantize MODEL.onnx --calibrate SAMPLES.npz
                         an int8 model, calibrated on the samples, and its
                         accuracy against the float model (lightnet quantize --help)

A model file named info, bench or quantize is run as ./info, ./bench or ./quantize."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lightnet", usage=USAGE, epilog=COMMANDS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Compile a model for a target and run it once: on the arrays of "
                    "--input (zeros without), printing a summary of every output or "
                    "writing them all with --save.",
    )
    p.add_argument("model", metavar="MODEL", help="the model to run")
    _target(p)
    p.add_argument("--targets", action=_Listing, listing=_targets_listing,
                   help="list the targets, whether each can be used here and why not, and exit")
    p.add_argument("--passes", action=_Listing, listing=_passes_listing,
                   help="print each target's compile pipeline (the passes in the order they "
                        "run, with what each requires and provides), and exit")
    p.add_argument("--input", dest="inputs", action="append", default=[],
                   type=_input, metavar="NAME=FILE.npy|FILE.npy|FILE.npz",
                   help="the array of input NAME (.npy), of the model's one input (a .npy "
                        "without a name), or arrays by input name (.npz); repeatable. Each "
                        "must have its input's dtype and shape (or those the model declares: "
                        "int64 token ids); their shapes give the model's symbolic dims their "
                        "values (1 without)")
    p.add_argument("--save", metavar="FILE.npz",
                   help="write every output to FILE.npz (by name) instead of printing "
                        "their summaries")
    p.add_argument("-c", "--compile", action="store_true",
                   help="compile only, and write the compiled IR to OUT")
    p.add_argument("-o", "--outfile", default="out.json", metavar="OUT",
                   help="where -c writes the compiled IR (default: out.json)")
    p.add_argument("-r", "--run", action="store_true",
                   help="MODEL is already compiled: run it as it is")
    _datafile(p)
    p.add_argument("-w", "--weights-out", metavar="WEIGHTS",
                   help="with -c and -f (or an ONNX model): where to write the compiled "
                        "model's weights, in LightNet's format when it ends in .wts "
                        "(default: OUT with the suffix .npz)")
    p.add_argument("--no-combine", action="store_true",
                   help="lower the model without folding constants or fusing ops (to "
                        "compare results)")
    p.add_argument("--mem-report", action="store_true",
                   help="print the memory plan: arena, all tensors, lower bound")
    p.add_argument("--profile", action="store_true",
                   help="print the time of each op (run once more, timed per op)")
    p.add_argument("--dot", metavar="FILE", help="write the compiled data-flow graph (DOT)")
    p.add_argument("--dot-before", metavar="FILE",
                   help="write the data-flow graph before compiling (DOT)")
    _memory_limit(p)
    _threads_option(p)
    p.add_argument("--seed", type=_count(0), default=0, metavar="N",
                   help="seed of the random values of ops such as create with a range "
                        "(default: 0)")
    _debug(p)
    return p


def info_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lightnet info",
        description="Summarize a model without running it: its inputs and outputs "
                    "(name, dtype, shape), op counts by optype as given and compiled for "
                    "the target, parameters (elements and bytes of the tensors its create "
                    "ops make), multiply-accumulates (MACs) of its convolutions and matrix "
                    "products, and the memory plan's arena and lower bound.")
    p.add_argument("model", metavar="MODEL",
                   help="a JSON IR (compiled or not; - reads standard input) or an ONNX model")
    _target(p)
    _datafile(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    _memory_limit(p)
    _debug(p)
    return p


def bench_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lightnet bench",
        description="Measure the latency of a model: warm-up runs, then timed runs on "
                    "random inputs of each input's dtype and shape; prints min / median / "
                    "p90 / p99 / mean latency, throughput, the target, BLAS threads and the "
                    "kernels in use. Timings on a busy machine vary: compare runs made "
                    "under the same load.")
    p.add_argument("model", metavar="MODEL",
                   help="a JSON IR (- reads standard input) or an ONNX model")
    _target(p)
    _datafile(p)
    p.add_argument("--warmup", type=_count(0), default=3, metavar="N",
                   help="untimed runs first (default: 3)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--runs", type=_count(1), metavar="N", help="timed runs")
    budget.add_argument("--duration", type=_seconds, default=3.0, metavar="SECONDS",
                        help="without --runs: time runs until SECONDS have passed "
                             "(default: 3)")
    p.add_argument("--batch", type=_count(1), metavar="N",
                   help="the batch: the value of the symbolic first dim (\"N\") of every "
                        "input; a model whose batch is fixed takes only that one (default: "
                        "a symbolic dim is 1)")
    p.add_argument("--shape", dest="shapes", metavar="INPUT=D1,D2,...", action="append",
                   type=parse_shape, default=[],
                   help="the shape of input INPUT (repeatable), which gives the model's "
                        "symbolic dims their values (input_ids=1,384)")
    p.add_argument("--input", dest="inputs", action="append", default=[],
                   type=_input, metavar="NAME=FILE.npy|FILE.npy|FILE.npz",
                   help="the array of input NAME, of the model's one input (a .npy without "
                        "a name), or arrays by input name (.npz); repeatable. Inputs not "
                        "given are random (floats) or zeros (integers, bools)")
    _memory_limit(p)
    _threads_option(p)
    _debug(p)
    return p


def quantize_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lightnet quantize",
        description="Quantize an ONNX model to int8 with ONNX Runtime's quantize_static "
                    "(needs pip install 'lightnet[quantize]'): QDQ format, weights int8 "
                    "per channel and symmetric, activations uint8, calibrated on the "
                    "samples of --calibrate. Then run the int8 model and the float one "
                    "with LightNet on those samples and print, per output, the max "
                    "relative error (of the float output's range) and, for a "
                    "classifier's scores, top-1 agreement on the samples that are not "
                    "near-ties (docs/quantization.md).")
    p.add_argument("model", metavar="MODEL", help="the float ONNX model (.onnx)")
    p.add_argument("--calibrate", required=True, metavar="SAMPLES.npz",
                   help="the calibration samples: one array per model input, by input "
                        "name, each with a leading sample axis ([S, *input shape])")
    p.add_argument("-o", "--outfile", metavar="OUT.onnx",
                   help="where to write the int8 model (default: MODEL.int8.onnx)")
    p.add_argument("--reduce-range", choices=("auto", "on", "off"), default="auto",
                   help="7-bit weights: on keeps int8 sums from saturating on CPUs without "
                        "VNNI, whose int8 kernels add pairs of products in int16; auto "
                        "(the default) chooses on where oneDNN reports no VNNI here")
    p.add_argument("-t", "--target", default="auto",
                   help="the target LightNet runs both models on for the report: auto (the "
                        "default), dnnl or cpu")
    _debug(p)
    return p


COMMANDS = {"info": (info_parser, info.info), "bench": (bench_parser, bench.bench),
            "quantize": (quantize_parser, quantize.quantize)}


def _target(p) -> None:
    p.add_argument("-t", "--target", default="auto",
                   help="the target: auto (the default: dnnl where oneDNN can be used, else "
                        "cpu), dnnl or cpu; lightnet --targets lists them")
    p.add_argument("--precision", default="f32", choices=[*targets.PRECISIONS, targets.AUTO],
                   help="the data type the dnnl ops compute in: f32 (the default), bf16 "
                        "(tensors between dnnl ops and their weights in bfloat16; inputs, "
                        "outputs and cpu ops stay float32) or auto (bf16 where oneDNN "
                        "computes it natively)")


class _Listing(argparse.Action):
    """An option that prints the lines `listing()` returns and exits, as --help does."""

    def __init__(self, option_strings, dest, listing, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)
        self.listing = listing

    def __call__(self, parser, namespace, values, option_string=None):
        print("\n".join(self.listing()))
        parser.exit()


def _targets_listing() -> list[str]:
    return targets.describe()


def _passes_listing() -> list[str]:
    """Each target's compile pipeline, as lightnet.compiler.pipeline derives it."""
    lines = []
    for target in targets.names():
        if target != targets.AUTO:
            lines += [f"{target}:", *(f"  {line}" for line in pipeline.describe(target))]
    skipped = ", ".join(pipeline.FUSION_PASSES[:-1]) + " and " + pipeline.FUSION_PASSES[-1]
    return lines + [f"auto: the pipeline of {targets.resolve(targets.AUTO)} here",
                    f"--no-combine leaves out {skipped}"]


def _datafile(p) -> None:
    p.add_argument("-f", "--datafile", metavar="DATAFILE",
                   help="weight file of a JSON IR (.npz or LightNet's .wts); read "
                        "before optimizing, so rules fold constants (a batchnorm into the "
                        "conv's weights). An ONNX model brings its own")


def _memory_limit(p) -> None:
    p.add_argument("--memory-limit", type=_size, metavar="BYTES",
                   help="refuse a model needing more memory than BYTES (suffixes K, M, G: "
                        "512M); default: the memory the machine has available")
    fold_limit_option(p)


def _threads_option(p) -> None:
    p.add_argument("--threads", type=_count(1), metavar="N",
                   help="threads of numpy's BLAS and oneDNN while the model runs (default: "
                        "as the environment sets them, e.g. OPENBLAS_NUM_THREADS, "
                        "OMP_NUM_THREADS)")


def _debug(p) -> None:
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")


def _size(text: str) -> int:
    try:
        return memory_plan.parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _count(least: int):
    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < least:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, "
                                             f"found {text!r}")
        return int(text)
    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, found {text!r}")
    return value


def _input(text: str):
    try:
        return arrays.parse_input(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    command = argv[0] if argv and argv[0] in COMMANDS else None
    if command is None:
        p = parser()
        args = p.parse_args(argv)
        if args.compile and (args.inputs or args.save):
            p.error("--input and --save need a run: not with -c")
        work = run.run
    else:
        args = COMMANDS[command][0]().parse_args(argv[1:])
        work = COMMANDS[command][1]
    with show_warnings("lightnet"):
        return report_errors("lightnet", args.debug, lambda: work(args, sys.stdout))
