"""The repository itself: its generated code is up to date with its descriptions."""

from __future__ import annotations

import subprocess
import sys

from genutil import REPO


def test_repository_is_up_to_date():
    done = subprocess.run([sys.executable, "-m", "generator", "--check"], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_generated_op_modules_hold_what_is_their_ops_own():
    """At most 40 generated lines per op prototype: a variant refers to its
    parent's tables and a group's params instead of copying them, and shared
    checks are made by shared verifiers (lightnet/auto/archs.py, params.py)."""
    modules = [p for p in (REPO / "lightnet" / "auto" / "ops").glob("*.py")
               if p.name != "__init__.py"]
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in modules)
    protos = sum(len(__import__(f"lightnet.auto.ops.{p.stem}", fromlist=["PROTOS"]).PROTOS)
                 for p in modules)
    assert lines <= 40 * protos, f"{lines} lines for {protos} op prototypes"
