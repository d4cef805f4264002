"""Tensor dtypes, memory types, tensor entries and the tensor table.

A tensor entry is the metadata of one named tensor: who created it, its dtype
and shape, whether it is static, whose memory it shares (its owner) and, after
memory planning, where it lives in its memory type's arena.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from lightnet.errors import LightNetError


# The most elements a tensor may have (and the largest dimension): beyond it a
# shape is an error of the model, not something to try to allocate.
MAX_ELEMENTS = 2**40


class DType(enum.Enum):
    """TensorLight's element types, each mapped to its numpy dtype."""

    TL_DOUBLE = "float64"
    TL_FLOAT = "float32"
    TL_INT32 = "int32"
    TL_INT16 = "int16"
    TL_INT8 = "int8"
    TL_UINT32 = "uint32"
    TL_UINT16 = "uint16"
    TL_UINT8 = "uint8"
    TL_BOOL = "bool"

    # By identity (members are singletons): Enum's own hash runs Python code, and the
    # compiler keys dicts by dtype for every tensor of a model.
    __hash__ = object.__hash__

    @property
    def np(self) -> np.dtype:
        return _NUMPY_DTYPES[self]

    @property
    def size(self) -> int:
        return self.np.itemsize

    @classmethod
    def from_name(cls, name: str) -> "DType":
        """The dtype called `name` (``"TL_FLOAT"``); LightNetError if none is."""
        try:
            return cls[name]
        except KeyError:
            known = ", ".join(d.name for d in cls)
            raise LightNetError(f"unknown dtype '{name}' (known: {known})") from None

    @classmethod
    def from_numpy(cls, dtype) -> "DType":
        dtype = np.dtype(dtype)
        for d in cls:
            if d.np == dtype:
                return d
        raise LightNetError(f"numpy dtype {dtype} has no LightNet dtype")

    def __str__(self) -> str:
        return self.name


_NUMPY_DTYPES = {d: np.dtype(d.value) for d in DType}


class MemType(enum.Enum):
    """Where a tensor's data lives. `none` belongs to abstract ops, which never run."""

    NONE = "none"
    CPU = "cpu"

    __hash__ = object.__hash__  # as DType's

    @property
    def align(self) -> int:
        """Byte alignment of every tensor in this memory type's arena."""
        return 64

    def __str__(self) -> str:
        return self.value


class Layout(Protocol):
    """What an architecture records of a tensor it holds in a layout of its own
    (TensorEntry.layout; lightnet.archs.dnnl.ops.Layout: a oneDNN format, its
    descriptor): the core reads only these. Run-time objects, never in the IR."""

    # How the layout is shown (`--dot`): "aBcd16b", channels in blocks of 16.
    format: str

    @property
    def key(self) -> tuple:
        """What defines the layout, hashable: two layouts of equal keys are read alike
        (lightnet.ir.op.CheckMemo keys the checks of ops by their inputs' layouts)."""

    @property
    def nbytes(self) -> int | None:
        """Bytes the tensor takes in this layout (blocked padding included); None: the
        bytes of its elements."""

    def is_block_of(self, whole: Layout, axis: int) -> bool:
        """Whether a tensor in this layout is one contiguous block of a tensor in
        layout `whole` joined along `axis` (a concat's output it could be written
        into in place)."""


@dataclass
class TensorEntry:
    """One tensor of a model, as registered by its creator op's pre_run."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    creator: str
    mtype: MemType = MemType.CPU
    static: bool = False
    owner: str | None = None
    owner_offset: int | None = None  # bytes into the owner, when a contiguous part of it
    from_file: bool = False
    input: bool = False
    offset: int | None = None
    # A layout other than numpy's C order, as the architecture holding the tensor so
    # records it (Layout); None: plain, `nbytes`.
    layout: Layout | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def len(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the logical tensor (its elements, in C order)."""
        return self.len * self.dtype.size

    @property
    def views_owner(self) -> bool:
        """Whether the tensor is its owner's memory seen in its own shape (a reshape's
        output): not a part of it at an offset, nor in a layout of its own."""
        return self.owner is not None and self.owner_offset is None and self.layout is None

    @property
    def stored_nbytes(self) -> int:
        """Bytes the tensor takes in memory: its layout's, else nbytes."""
        stored = None if self.layout is None else self.layout.nbytes
        return self.nbytes if stored is None else stored

    def describe(self) -> str:
        """``float32[2, 4]``: how messages show a tensor's type."""
        return f"{self.dtype.np}[{', '.join(map(str, self.shape))}]"


class TensorTable(dict):
    """All tensors of a context by name: a dict whose lookups fail clearly."""

    def find(self, name: str) -> TensorEntry | None:
        return self.get(name)

    def entry(self, name: str) -> TensorEntry:
        try:
            return self[name]
        except KeyError:
            raise LightNetError(f"no tensor named '{name}' in the model") from None

    def offset_in_root(self, name: str) -> int:
        """Bytes from the root's start to `name`'s (0 for views that are not
        contiguous parts: their numpy view knows where they start)."""
        offset = 0
        entry = self.entry(name)
        while entry.owner is not None:
            offset += entry.owner_offset or 0
            entry = self.entry(entry.owner)
        return offset

    def root(self, name: str) -> TensorEntry:
        """The tensor that really owns `name`'s memory (following owners)."""
        entry = self.entry(name)
        while entry.owner is not None:
            entry = self.entry(entry.owner)
        return entry
