"""`python -m generator [--check] [--debug] | new-op NAME`.

Exit status: 0 on success, 1 on an error in the descriptions or the tree (one
line on stderr: `error: file:line: ...`), 2 on bad usage. `--debug` shows the
traceback of an error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from generator import model, output, render, scaffold
from generator.source import DescriptionError
from lightnet.command import report_errors

ROOT = Path(__file__).resolve().parent.parent


class UserError(Exception):
    """A problem the user can fix (a file that cannot be written, say): one line."""


def generate(root: Path, check: bool) -> int:
    if not (root / "descriptions" / "ops").is_dir():
        raise UserError(f"{root}: no descriptions/ops directory: not a LightNet tree")
    files = render.render_all(root, model.load(root))
    if check:
        problems = output.differences(root, files)
        for line in problems:
            print(line)
        if problems:
            print("generated code is out of date: run `python -m generator`", file=sys.stderr)
            return 1
        return 0
    done = {"stale": "updated", "missing": "created", "extra": "removed"}
    try:
        changed = output.write(root, files)
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        raise UserError(f"{where}cannot write the generated files: {e.strerror or e}") from e
    for line in changed:
        kind, _, rel = line.partition(": ")  # only the kind: a path may contain "extra"
        print(f"{done[kind]}: {rel}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m generator",
        description="Generate lightnet/auto/ and docs/ops.md from descriptions/.",
    )
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 listing every stale, missing or extra file")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command")
    new = sub.add_parser("new-op", help="write a commented description skeleton")
    new.add_argument("name")
    args = parser.parse_args(argv)

    def work():
        if args.command == "new-op":
            try:
                path = scaffold.new_op(args.root, args.name)
            except ValueError as e:
                raise UserError(str(e)) from e
            print(f"wrote {path.relative_to(args.root)}; edit it, then run `python -m generator`")
            return 0
        return generate(args.root, args.check)

    # Lines start `error: `: a description's error names its file next.
    return report_errors("generator", args.debug, work,
                         user_errors=(DescriptionError, render.RenderError, UserError),
                         heads=("error: ", "error: internal error: "))

if __name__ == "__main__":
    sys.exit(main())
