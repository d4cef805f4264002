"""Weight files: numpy .npz (never unpickled) and LightNet's text format.

The text format has one tensor a line: its name, its element count, then each
float32 value as 8 hex digits of its IEEE-754 bits (big-endian), separated by
spaces. Blank lines and lines starting with `#` are skipped.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from lightnet.errors import LightNetError


def read(path) -> dict[str, np.ndarray]:
    """Every tensor of a weight file by name."""
    path = Path(path)
    if not path.is_file():
        raise LightNetError(f"{path}: no such weight file")
    if zipfile.is_zipfile(path):
        return _read_npz(path)
    return _read_text(path)


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise LightNetError(f"{path}: holds pickled objects, which are never loaded") from None
        raise LightNetError(f"{path}: not a valid .npz weight file: {e}") from None
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise LightNetError(f"{path}: not a valid .npz weight file: {e}") from None
    except Exception as e:  # a damaged archive: zlib.error, TokenError, NotImplementedError, ...
        raise LightNetError(f"{path}: not a valid .npz weight file: "
                            f"{type(e).__name__}: {e}") from None


def _read_text(path: Path) -> dict[str, np.ndarray]:
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except (UnicodeDecodeError, OSError):
        raise LightNetError(f"{path}: not a weight file (neither .npz nor text)") from None
    tensors = {}
    for lineno, line in enumerate(lines, 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        where = f"{path}:{lineno}"
        if len(fields) < 2 or not fields[1].isdigit():
            raise LightNetError(f"{where}: expected 'NAME COUNT HEX...', found {line[:40]!r}")
        name, count, values = fields[0], int(fields[1]), fields[2:]
        if len(values) != count:
            raise LightNetError(f"{where}: tensor '{name}': expected {count} values, found {len(values)}")
        if name in tensors:
            raise LightNetError(f"{where}: tensor '{name}' is given twice")
        if any(len(v) > 8 for v in values):
            raise LightNetError(f"{where}: tensor '{name}': a value has more than 8 hex digits")
        try:
            raw = bytes.fromhex("".join(v.rjust(8, "0") for v in values))
        except ValueError:
            raise LightNetError(f"{where}: tensor '{name}': values must be hex digits") from None
        tensors[name] = np.frombuffer(raw, dtype=">f4").astype(np.float32)
    return tensors


def write_text(path, tensors: dict[str, np.ndarray]) -> None:
    """Write float32 tensors in the text format."""
    with open(path, "w", encoding="ascii") as f:
        for name, array in tensors.items():
            flat = np.ascontiguousarray(array, dtype=">f4").reshape(-1)
            hexes = " ".join(format(v, "08x") for v in flat.view(">u4").tolist())
            f.write(f"{name} {flat.size} {hexes}\n")
