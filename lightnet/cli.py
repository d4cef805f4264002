"""The `lightnet` command: compile and run a model.

Exit status: 0 on success, 1 on a user error (one line on stderr), 2 on bad
usage. `--debug` shows the traceback of an error.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

from lightnet.context import Context
from lightnet.errors import LightNetError


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
                   help="weight file (.npz or LightNet text format)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return p


def run(args, out) -> None:
    ctx = Context()
    ctx.init(args.model)
    if args.run:
        ctx.plan()
    else:
        ctx.compile(args.target)
    if args.compile:
        ctx.print(args.outfile)
        return
    ctx.load(args.datafile)
    start = time.perf_counter()
    ctx.run()
    elapsed = time.perf_counter() - start
    out.flush()
    print(f"info: run time: {elapsed:.6f}s", file=out)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        run(args, sys.stdout)
    except LightNetError as e:
        if args.debug:
            traceback.print_exc()
        print(f"lightnet: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lightnet: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug in LightNet, not in the user's input
        if args.debug:
            traceback.print_exc()
        print(f"lightnet: internal error: {type(e).__name__}: {e} "
              "(please report it; --debug shows the traceback)", file=sys.stderr)
        return 1
    return 0
