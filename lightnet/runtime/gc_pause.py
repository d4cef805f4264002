"""Python's cyclic garbage collector paused while a model is built.

Importing, compiling and loading a model allocate many small objects that live as
long as the model (ops, tensor entries, params, graph edges, IR dicts). The
collector runs every few hundred allocations and, every tenth run of the
youngest generation's, walks every object alive: while a model of N ops is built
that is O(N) walks of O(N) objects, a third of the time of a 10,000-op chain and
most of it at 50,000. What building a model leaves behind is freed by reference
counting, so the collector is paused meanwhile (and runs again as it would after).
"""

from __future__ import annotations

import functools
import gc


def while_building(func):
    """`func` run with the collector paused (left as it is when it is already off,
    or another thread paused it)."""
    @functools.wraps(func)
    def paused(*args, **kwargs):
        if not gc.isenabled():
            return func(*args, **kwargs)
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            gc.enable()
    return paused
