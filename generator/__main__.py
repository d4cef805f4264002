"""`python -m generator [--check] | new-op NAME`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from generator import model, output, render, scaffold
from generator.source import DescriptionError

ROOT = Path(__file__).resolve().parent.parent


def generate(root: Path, check: bool) -> int:
    try:
        files = render.render_all(root, model.load(root))
    except (DescriptionError, render.RenderError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if check:
        problems = output.differences(root, files)
        for line in problems:
            print(line)
        if problems:
            print("generated code is out of date: run `python -m generator`", file=sys.stderr)
            return 1
        return 0
    done = {"stale": "updated", "missing": "created", "extra": "removed"}
    for line in output.write(root, files):
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
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command")
    new = sub.add_parser("new-op", help="write a commented description skeleton")
    new.add_argument("name")
    args = parser.parse_args(argv)
    if args.command == "new-op":
        try:
            path = scaffold.new_op(args.root, args.name)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"wrote {path.relative_to(args.root)}; edit it, then run `python -m generator`")
        return 0
    return generate(args.root, args.check)


if __name__ == "__main__":
    sys.exit(main())
