"""A model's inputs and outputs on the command line: arrays read from .npy and
.npz files (`--input`), outputs written to an .npz (`--save`) or summarized
in a few lines a person can read.

Files are read with numpy's own format readers and never unpickled; every
array's dtype and shape is checked against the model's input from the file's
header, before its data is read.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from lightnet.errors import LightNetError
from lightnet.files import weight_file
from lightnet.runtime.borders import Borders

TOP = 5  # how many of a classifier's best scores a summary lists


def parse_input(text: str) -> tuple[str | None, str]:
    """An `--input` argument: `NAME=FILE.npy` gives input NAME, `FILE.npz`
    gives inputs by their names, `FILE.npy` the model's one input: (NAME or
    None, FILE). ValueError otherwise."""
    name, sep, path = text.partition("=")
    if sep and name and path:
        if path.lower().endswith(".npy"):
            return name, path
        raise ValueError(f"expected NAME=FILE.npy (a .npy file for input NAME), found {text!r}")
    if not sep and text.lower().endswith((".npz", ".npy")):
        return None, text
    raise ValueError(f"expected NAME=FILE.npy, FILE.npy (a model's one input) or FILE.npz "
                     f"(arrays by input name), found {text!r}")


def _is_npy(path) -> bool:
    return str(path).lower().endswith(".npy")


def _one_input(names) -> str | None:
    """The input a FILE.npy without a name is for: the model's one input."""
    return names[0] if len(names) == 1 else None


def named(specs, names) -> list[tuple[str | None, str]]:
    """`specs` with a bare FILE.npy given the name of the model's one input
    (`names`: the model's inputs); a model of more inputs or none is an error."""
    result = []
    for name, path in specs:
        if name is None and _is_npy(path):
            name = _one_input(names)
            if name is None:
                raise LightNetError(
                    f"{path}: the model has {len(names)} inputs "
                    f"({', '.join(names) or 'none'}): a .npy file without a name is for a "
                    "model of one input; give NAME=FILE.npy or an .npz of arrays by name")
        result.append((name, path))
    return result


def read_inputs(specs, inputs, declared: dict | None = None) -> dict[str, np.ndarray]:
    """The arrays of `specs` ((name or None, path) pairs, parse_input's) by input
    name, each checked against its entry in `inputs` ({name: TensorEntry}): of the
    tensor's dtype and shape, or of those the model declares for it (`declared`:
    {name: (dtype, shape)}, the model's interface: int64 token ids), which the
    caller converts (Borders.to_tensor)."""
    arrays: dict[str, np.ndarray] = {}
    where: dict[str, str] = {}
    specs = named(specs, list(inputs))
    declared = declared or {}

    def take(path, name, read):
        if name not in inputs:
            known = ", ".join(inputs) or "none"
            raise LightNetError(f"{path}: '{name}' is not an input of the model "
                                f"(inputs: {known})")
        if name in arrays:
            raise LightNetError(f"{path}: input '{name}' is given twice (also by "
                                f"{where[name]})")
        arrays[name] = _checked_read(path, inputs[name], read, declared.get(name))
        where[name] = str(path)

    for name, path in specs:
        path = Path(path)
        if not path.is_file():
            raise LightNetError(f"{path}: no such input file")
        if name is not None:
            take(path, name, lambda f=path: f.open("rb"))
            continue
        try:
            with zipfile.ZipFile(path) as npz:
                for member in npz.namelist():
                    if not member.endswith(".npy"):
                        raise LightNetError(f"{path}: not a valid .npz file: member "
                                            f"'{member}' is not a .npy array")
                    take(path, member[: -len(".npy")], lambda z=npz, m=member: z.open(m))
        except (OSError, zipfile.BadZipFile) as e:
            raise LightNetError(f"{path}: not a valid .npz file: {e}") from None
    return arrays


def read_fed(specs, ctx) -> dict[str, np.ndarray]:
    """The arrays of `specs` for the inputs of `ctx` (initialized), as its tensors
    hold them: an array of an input's declared dtype and shape (int64 token ids
    for a TL_INT32 tensor) converted, its integers range-checked."""
    borders = Borders(ctx)
    declared = {n: borders.declared(n) for n in ctx.inputs}
    fed = read_inputs(specs, {n: ctx.tensors[n] for n in ctx.inputs}, declared)
    return {n: borders.to_tensor(n, a) for n, a in fed.items()}


def input_shapes(specs, names) -> dict[str, tuple[int, ...]]:
    """The shape of every array `specs` give, from the files' headers, by input
    name (`names`: the model's inputs): what binds a model's symbolic dims before
    the arrays are read. A file that cannot be read is left out (read_inputs then
    says what is wrong)."""
    shapes: dict[str, tuple[int, ...]] = {}
    specs = [(_one_input(names) if n is None and _is_npy(p) else n, p) for n, p in specs]

    def header(opener):
        with opener() as f:
            version = np.lib.format.read_magic(f)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            return tuple(read(f)[0])

    for name, path in specs:
        try:
            if _is_npy(path):
                if name is not None:  # (a bare one for a model of several: read_inputs says)
                    shapes.setdefault(name, header(lambda: open(path, "rb")))
                continue
            with zipfile.ZipFile(path) as npz:
                for member in npz.namelist():
                    if member.endswith(".npy"):
                        shapes.setdefault(member[: -len(".npy")],
                                          header(lambda m=member: npz.open(m)))
        except (ValueError, OSError, EOFError, zipfile.BadZipFile):
            continue
    return shapes


def _checked_read(path: Path, entry, opener, declared=None) -> np.ndarray:
    """Read one .npy array from the file object `opener()` opens, checked
    against `entry` (or the `declared` (dtype, shape)) from its header, before the
    data is read."""
    dtypes, shapes = [entry.dtype.np], [tuple(entry.shape)]
    if declared is not None:
        dtypes.insert(0, np.dtype(declared[0]))
        shapes.insert(0, tuple(declared[1]))
    try:
        with opener() as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unknown .npy format version {version}")
            if dtype.hasobject:
                raise LightNetError(f"{path}: holds pickled objects, which are never loaded")
            if dtype not in dtypes:
                raise LightNetError(f"{path}: input '{entry.name}': expected dtype "
                                    f"{dtypes[0]}, found {dtype}")
            if tuple(shape) not in shapes:
                raise LightNetError(f"{path}: input '{entry.name}': expected shape "
                                    f"{shapes[0]}, found {tuple(shape)}")
            nbytes = int(np.prod(shape)) * dtype.itemsize
            data = f.read(nbytes)
    except LightNetError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise LightNetError(f"{path}: input '{entry.name}': not a valid .npy array: "
                            f"{e}") from None
    if len(data) != nbytes:
        raise LightNetError(f"{path}: input '{entry.name}': not a valid .npy array: its data "
                            f"ends after {len(data)} of {nbytes} bytes")
    return np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")


def save(path, outputs: dict[str, np.ndarray]) -> None:
    """Write every output to an .npz, by name (np.load reads it back)."""
    try:
        weight_file.write_npz(path, outputs)
    except OSError as e:
        raise LightNetError(f"{path}: cannot write the outputs: {e.strerror}") from None


def summary(name: str, array: np.ndarray) -> str:
    """`name: float32[1, 1000]  min -3.1  max 9.4  mean 0.0021`, and for a
    classifier's scores ([1, K] or [1, K, 1, 1]) a second line with the top 5:
    `  top 5: 281 (9.4), 282 (8.1), ...` (index into K, value)."""
    shape = ", ".join(map(str, array.shape))
    values = array.astype(np.float64) if array.dtype == np.bool_ else array
    line = (f"{name}: {array.dtype}[{shape}]  min {_number(values.min())}  "
            f"max {_number(values.max())}  mean {_number(values.mean())}")
    if array.ndim in (2, 4) and array.shape[0] == 1 and all(d == 1 for d in array.shape[2:]):
        scores = values.reshape(-1)
        best = np.argsort(-scores.astype(np.float64), kind="stable")[:TOP]
        line += f"\n  top {len(best)}: " + ", ".join(f"{i} ({_number(scores[i])})"
                                                     for i in best)
    return line


def _number(value) -> str:
    return f"{float(value):.6g}"
