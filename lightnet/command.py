"""The contract every LightNet command keeps (`lightnet`, `il2json`, `onnx2ln`,
`python -m generator`).

Exit status 0 on success, 1 on a user error (one line on stderr), 2 on bad
usage (argparse's own); a bug is one `internal error` line and status 1;
`--debug` adds the traceback. Each command's main parses its arguments and
hands its work to report_errors, so the contract is kept in one place.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
import warnings

from lightnet.compiler import memory_plan
from lightnet.errors import LightNetError, LightNetWarning, one_line
from lightnet.ir import limits


def report_errors(prog: str, debug: bool, body, user_errors=(LightNetError,),
                  heads: tuple[str, str] | None = None) -> int:
    """Run `body()`, a command's work, and return its exit status: what body
    returns (None is 0), or 1 for an error, one line on stderr: `PROG: error: `
    and the message of one of `user_errors`, or `PROG: internal error: ` and
    the exception of anything else (`heads`: other starts for these two
    lines). `debug` (--debug) prints the traceback first."""
    error_head, internal_head = heads or (f"{prog}: error: ", f"{prog}: internal error: ")
    try:
        status = body()
    except user_errors as e:
        if debug:
            traceback.print_exc()
        print(f"{error_head}{e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (prog ... | head): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug, not a problem of the user's input
        if debug:
            traceback.print_exc()
        print(f"{internal_head}{type(e).__name__}: {e} "
              "(please report it; --debug shows the traceback)", file=sys.stderr)
        return 1
    return 0 if status is None else status


@contextlib.contextmanager
def show_warnings(prog: str):
    """While in it, a LightNetWarning (a weight the model does not read, an
    op named for another architecture) prints as one `PROG: warning:` line."""
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


def fold_limit_option(p) -> None:
    """--fold-limit, of lightnet's commands and onnx2ln."""
    p.add_argument("--fold-limit", type=_elements, metavar="ELEMENTS",
                   help="elements evaluating constants before the run (an ONNX model's "
                        "constant folding, a weight folded into another) may touch; past "
                        "it, ops compute when the model runs (suffixes K, M, G; default: "
                        f"{limits.DEFAULT_FOLD_LIMIT // 2**20}M)")


def _elements(text: str) -> int:
    try:
        return memory_plan.parse_size(text, unit="elements")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """A `--shape INPUT=D1,D2,...` argument: (INPUT, dims)."""
    name, sep, value = text.partition("=")
    dims = value.split(",")
    if not sep or not name or not all(d.strip().isdigit() and int(d) >= 1 for d in dims):
        raise argparse.ArgumentTypeError(f"expected NAME=D1,D2,... with every D >= 1, "
                                         f"found {text!r}")
    return name, tuple(int(d) for d in dims)
