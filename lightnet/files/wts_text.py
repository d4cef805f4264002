"""LightNet's weight files (`.wts`), as its ln_tensor_table_load_trt_weight_file reads them.

The file is whitespace-separated text (TensorRT's weight format): first the
number of tensors, then per tensor `NAME TYPE LEN` and LEN values in hex, one
tensor a line by convention:

    2
    conv1_w 0 3 3f800000 bf800000 3e800000
    scale 2 2 7f 80

TYPE 0 is float32, each value the 8 hex digits of its IEEE-754 bits (fewer
digits mean leading zeros); TYPE 2 is int8, each value a byte in hex (`80`
is -128); TYPE 1 is float16, 4 hex digits, which LightNet refuses and this
reader converts to float32. Nothing is evaluated: the values are hex digits.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lightnet.errors import LightNetError

# TYPE -> (the big-endian dtype of the bits, hex digits at most, the dtype read into)
_TYPES = {0: (">f4", 8, np.float32), 1: (">f2", 4, np.float32), 2: ("u1", 2, np.int8)}
_TYPE_OF = {np.dtype(np.float32): 0, np.dtype(np.int8): 2}


def read(path, known=None, expect=None, warn=None) -> dict[str, np.ndarray]:
    """Every tensor of the file by name (flat arrays, float32 or int8).

    `known(name)` says whether the model has the tensor; one it has not is
    skipped, and `warn(message)` told. `expect(name, dtype, shape)` may refuse
    a tensor (LightNetError) before its values are read.
    """
    path = Path(path)
    try:
        tokens = path.read_text(encoding="ascii").split()
    except UnicodeDecodeError:
        raise LightNetError(f"{path}: not a weight file (neither .npz nor LightNet's .wts text)"
                            ) from None
    except OSError as e:
        raise LightNetError(f"{path}: cannot read: {e.strerror}") from None
    if not tokens or not tokens[0].isdigit():
        found = repr(tokens[0][:20]) if tokens else "an empty file"
        raise LightNetError(f"{path}: expected the number of tensors first, found {found}")
    count, at, tensors = int(tokens[0]), 1, {}
    for index in range(count):
        header = tokens[at : at + 3]
        if len(header) < 3:
            raise LightNetError(f"{path}: the file says {count} tensors, but ends after {index}")
        name, type_text, len_text = header
        if not (type_text.isdigit() and len_text.isdigit()):
            raise LightNetError(f"{path}: tensor '{name}': expected 'NAME TYPE LEN' with a "
                                f"whole TYPE and LEN, found '{name} {type_text} {len_text}'")
        kind, length = int(type_text), int(len_text)
        at += 3
        values = tokens[at : at + length]
        at += length
        if len(values) < length:
            raise LightNetError(f"{path}: tensor '{name}': expected {length} values, "
                                f"found {len(values)} before the end of the file")
        if known is not None and not known(name):
            if warn is not None:
                warn(f"{path}: ignoring weight '{name}', which the model does not "
                     "create from a file")
            continue
        if kind not in _TYPES:
            raise LightNetError(f"{path}: tensor '{name}': unknown TYPE {kind} (0 is float32, "
                                "1 float16, 2 int8)")
        if name in tensors:
            raise LightNetError(f"{path}: tensor '{name}' is given twice")
        bits, digits, dtype = _TYPES[kind]
        if expect is not None:
            expect(name, np.dtype(dtype), (length,))
        if any(len(v) > digits for v in values):
            raise LightNetError(f"{path}: tensor '{name}': a value of TYPE {kind} has at most "
                                f"{digits} hex digits")
        try:
            raw = bytes.fromhex("".join(v.rjust(digits, "0") for v in values))
        except ValueError:
            raise LightNetError(f"{path}: tensor '{name}': values must be hex digits") from None
        tensors[name] = np.frombuffer(raw, dtype=bits).astype(dtype)
    if at < len(tokens):
        raise LightNetError(f"{path}: text after the {count} tensors the file announces: "
                            f"{tokens[at][:20]!r}")
    return tensors


def write(path, tensors: dict[str, np.ndarray]) -> None:
    """Write float32 and int8 tensors in LightNet's weight format."""
    for name, array in tensors.items():
        if array.dtype not in _TYPE_OF:
            raise LightNetError(f"{path}: LightNet's weight format holds float32 and int8 "
                                f"tensors, not {array.dtype} ('{name}'): write an .npz instead")
        if not name or not name.isascii() or any(c.isspace() for c in name):
            raise LightNetError(f"{path}: tensor name {name!r} cannot be written in LightNet's "
                                "weight format (ASCII without spaces)")
    with open(path, "w", encoding="ascii") as f:
        f.write(f"{len(tensors)}\n")
        for name, array in tensors.items():
            kind = _TYPE_OF[array.dtype]
            flat = np.ascontiguousarray(array).reshape(-1)
            if kind == 0:
                values = (format(v, "08x") for v in flat.astype(">f4").view(">u4").tolist())
            else:
                values = (format(v, "02x") for v in flat.view(np.uint8).tolist())
            f.write(" ".join([name, str(kind), str(flat.size), *values]) + "\n")
