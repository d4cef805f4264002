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
