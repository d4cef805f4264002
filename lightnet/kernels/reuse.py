"""Scratch arrays shared by every op that runs in the same thread.

A model's ops run one after another, so one im2col buffer or one depthwise taps
buffer can serve all of them. Shared, it stays in cache from one op to the next;
a private buffer per op is evicted by the rest of the model and its first writes
go to memory every run (measured on MobileNet v2 depthwise layers: 1.5x-1.9x
slower with cold scratch). The buffers are per thread, so contexts run from
different threads never share one.

A kernel asks for its buffer every run (`scratch`), and must not rely on what it
wrote there before: other ops use the same memory in between. Workspace
functions call `reserve` at load time, so that runs in the loading thread find
the buffer already large enough; a run in another thread grows that thread's
buffer once.
"""

import threading

import numpy as np

__all__ = ["held_bytes", "reserve", "scratch"]

_ALIGN = 64
_local = threading.local()


def _state():
    """This thread's (buffers by name, arrays handed out by (name, shape, dtype))."""
    try:
        return _local.buffers, _local.views
    except AttributeError:
        _local.buffers, _local.views = {}, {}
        return _local.buffers, _local.views


def reserve(name: str, nbytes: int) -> None:
    """Make this thread's buffer `name` hold at least `nbytes` bytes."""
    buffers, views = _state()
    if name not in buffers or buffers[name].size - _ALIGN < nbytes:
        buffers[name] = np.empty(nbytes + _ALIGN, np.uint8)
        for key in [key for key in views if key[0] == name]:
            del views[key]


def scratch(name: str, shape: tuple, dtype) -> np.ndarray:
    """A C-contiguous, 64-byte aligned array of `shape` on this thread's buffer
    `name` (grown if needed). Its contents are whatever the last user left. The
    array is made once per (name, shape, dtype) and thread: later calls cost one
    dictionary lookup."""
    views = _state()[1]
    key = (name, shape, dtype)
    try:
        return views[key]
    except KeyError:
        pass
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    reserve(name, nbytes)
    raw = _state()[0][name]
    start = -raw.ctypes.data % _ALIGN
    views[key] = raw[start:start + nbytes].view(dt).reshape(shape)
    return views[key]


def held_bytes() -> int:
    """Bytes of this thread's shared buffers (what the benchmark reports as scratch)."""
    return sum(raw.nbytes for raw in _state()[0].values())
