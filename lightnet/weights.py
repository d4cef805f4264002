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


def read(path, expect_names=None, expect=None) -> dict[str, np.ndarray]:
    """Every tensor of a weight file by name.

    The optional checks raise LightNetError to refuse the file:
    `expect_names(names)` sees every tensor name, and `expect(name, dtype,
    shape)` each tensor, before its data is read when the file says what the
    data is (an .npz array's header): a small compressed file could expand to
    gigabytes no model wants.
    """
    path = Path(path)
    if not path.is_file():
        raise LightNetError(f"{path}: no such weight file")
    if zipfile.is_zipfile(path):
        return _read_npz(path, expect_names, expect)
    tensors = _read_text(path)
    if expect_names is not None:
        expect_names(list(tensors))
    if expect is not None:
        for name, array in tensors.items():
            expect(name, array.dtype, array.shape)
    return tensors


def _header(npz, name: str):
    """(dtype, shape) that the .npy header of member `name` declares; None
    when it has no header numpy's public readers take (np.load reports it)."""
    member = name + ".npy" if name + ".npy" in npz.zip.namelist() else name
    readers = {(1, 0): np.lib.format.read_array_header_1_0,
               (2, 0): np.lib.format.read_array_header_2_0}
    with npz.zip.open(member) as f:
        try:
            reader = readers.get(np.lib.format.read_magic(f))
            if reader is None:
                return None
            shape, _, dtype = reader(f)
        except ValueError:
            return None
    return dtype, shape


def _read_npz(path: Path, expect_names, expect) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            if expect_names is not None:
                expect_names(list(npz.files))
            tensors = {}
            for name in npz.files:
                header = None if expect is None else _header(npz, name)
                if header is not None:
                    if header[0].hasobject:  # refused as np.load would, before any check
                        raise LightNetError(f"{path}: holds pickled objects, which are "
                                            "never loaded")
                    expect(name, *header)
                tensors[name] = npz[name]
                if expect is not None and header is None and isinstance(tensors[name], np.ndarray):
                    expect(name, tensors[name].dtype, tensors[name].shape)
    except LightNetError:
        raise
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise LightNetError(f"{path}: holds pickled objects, which are never loaded") from None
        raise LightNetError(f"{path}: not a valid .npz weight file: {e}") from None
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise LightNetError(f"{path}: not a valid .npz weight file: {e}") from None
    except Exception as e:  # a damaged archive: zlib.error, TokenError, NotImplementedError, ...
        raise LightNetError(f"{path}: not a valid .npz weight file: "
                            f"{type(e).__name__}: {e}") from None
    for name, value in tensors.items():
        # np.load gives the raw bytes of a member that is not a .npy array.
        if not isinstance(value, np.ndarray):
            raise LightNetError(f"{path}: not a valid .npz weight file: member '{name}' is "
                                "not a .npy array")
    return tensors


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


def write_npz(path, tensors: dict[str, np.ndarray]) -> None:
    """Write `tensors` as an .npz (one .npy member per tensor, no pickles).
    Unlike np.savez(**tensors), any tensor name works, even 'file'."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, array in tensors.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.ascontiguousarray(array), allow_pickle=False)


def write_text(path, tensors: dict[str, np.ndarray]) -> None:
    """Write float32 tensors in the text format."""
    with open(path, "w", encoding="ascii") as f:
        for name, array in tensors.items():
            flat = np.ascontiguousarray(array, dtype=">f4").reshape(-1)
            hexes = " ".join(format(v, "08x") for v in flat.view(">u4").tolist())
            f.write(f"{name} {flat.size} {hexes}\n")
