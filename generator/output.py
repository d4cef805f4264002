"""Writing generated files atomically, and checking them without writing.

Everything is rendered in memory first, so an invalid description leaves the
files on disk as they were. Each file is replaced by rename, never truncated
in place; files under lightnet/auto/ that nothing generates are removed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

GENERATED_DIR = "lightnet/auto"


def _existing(root: Path) -> set[str]:
    auto = root / GENERATED_DIR
    if not auto.is_dir():
        return set()
    return {p.relative_to(root).as_posix() for p in auto.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _up_to_date(path: Path, text: str) -> bool:
    """Byte for byte (reading as text would hide e.g. CRLF line ends)."""
    return path.is_file() and path.read_bytes() == text.encode("utf-8")


def _file_mode() -> int:
    """The mode open() would give a new file (mkstemp's is owner-only, 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def differences(root: Path, files: dict[str, str]) -> list[str]:
    """One line per stale, missing or extra file; empty when all is up to date."""
    lines = []
    for rel, text in sorted(files.items()):
        path = root / rel
        if not path.exists():
            lines.append(f"missing: {rel}")
        elif not _up_to_date(path, text):
            lines.append(f"stale: {rel}")
    for rel in sorted(_existing(root) - set(files)):
        lines.append(f"extra: {rel}")
    return lines


def write(root: Path, files: dict[str, str]) -> list[str]:
    """Bring the tree in line with `files`; returns what changed."""
    changed = differences(root, files)
    for rel, text in sorted(files.items()):
        path = root / rel
        if _up_to_date(path, text):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = _file_mode()
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    for rel in sorted(_existing(root) - set(files)):
        (root / rel).unlink()
    return changed
