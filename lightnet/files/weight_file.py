"""Weight files: numpy .npz (never unpickled) and LightNet's .wts text format
(lightnet.files.wts_text), told apart by their content: an .npz is a zip archive.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from lightnet.errors import LightNetError
from lightnet.files import wts_text


def read(path, expect_names=None, expect=None, known=None, warn=None) -> dict[str, np.ndarray]:
    """Every tensor of a weight file by name.

    The optional checks raise LightNetError to refuse the file:
    `expect_names(names)` sees every tensor name, and `expect(name, dtype,
    shape)` each tensor, before its data is read when the file says what the
    data is (an .npz array's header): a small compressed file could expand to
    gigabytes no model wants. In a .wts file, as LightNet reads it, a tensor
    for which `known(name)` is false is skipped and `warn(message)` told.
    """
    path = Path(path)
    if not path.is_file():
        raise LightNetError(f"{path}: no such weight file")
    if zipfile.is_zipfile(path):
        return _read_npz(path, expect_names, expect)
    tensors = wts_text.read(path, known, expect, warn)
    if expect_names is not None:
        expect_names(list(tensors))
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


def write_npz(path, tensors: dict[str, np.ndarray]) -> None:
    """Write `tensors` as an .npz (one .npy member per tensor, no pickles).
    Unlike np.savez(**tensors), any tensor name works, even 'file'."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, array in tensors.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.ascontiguousarray(array), allow_pickle=False)
