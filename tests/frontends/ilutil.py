"""Shared pieces of the IL tests: a text converted as the file m.net, its params, the
ILError it raises, and the preprocessors to run it with."""

from __future__ import annotations

import shutil

import pytest

from lightnet.frontends.il import ILError, to_ir

HAS_CPP = shutil.which("cpp") is not None
PREPROCESSORS = ["pcpp", pytest.param("cpp", marks=pytest.mark.skipif(
    not HAS_CPP, reason="no system cpp"))]


def ops(text, **kw):
    """The ops of the IR the IL `text` converts to, as the file m.net."""
    return to_ir(text, filename="m.net", **kw)["ops"]


def params(text, **kw):
    """The params of the only op of `text`, as a dict."""
    (op,) = ops(text, **kw)
    return {p["arg_name"]: p["value"] for p in op["params"]}


def error(text, **kw) -> str:
    """The message of the ILError converting `text` (as the file m.net, unless `kw`
    names another) raises."""
    kw.setdefault("filename", "m.net")
    with pytest.raises(ILError) as e:
        to_ir(text, **kw)
    return str(e.value)
