"""DepthToSpace and SpaceToDepth: blocks of channels to blocks of pixels and back, as a
reshape to 6-D, a transpose and a reshape (modes DCR and CRD)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..dispatch import handler
from ..errors import Unsupported
from ..graph import Node

if TYPE_CHECKING:
    from ..converter import Converter

# The transposes of the 6-D views, by mode: DepthToSpace reads [N, b, b, C', H, W] (DCR)
# or [N, C', b, b, H, W] (CRD) into [N, C', H, b, W, b]; SpaceToDepth is the inverse.
DEPTH_TO_SPACE = {"DCR": (0, 3, 4, 1, 5, 2), "CRD": (0, 1, 4, 2, 5, 3)}
SPACE_TO_DEPTH = {"DCR": (0, 3, 5, 1, 2, 4), "CRD": (0, 1, 3, 5, 2, 4)}


def _input(c: Converter, n: Node, mode: str, blocksize: int):
    x = c.val(n.input(0))
    if x.rank != 4:
        raise Unsupported(f"rank-{x.rank} input (expected NCHW)")
    if mode not in DEPTH_TO_SPACE:
        raise Unsupported(f"mode {mode}")
    if blocksize < 1:
        raise Unsupported(f"blocksize {blocksize}")
    return x


def _rearrange(c: Converter, n: Node, x, view, perm, shape):
    """`x` viewed as `view`, transposed by `perm`, as the ONNX output of `shape`."""
    v = c.reshape(x, view, hint=f"{n.outputs[0]}_blocks")
    t = c.emit("transpose", {"src": v}, {"axes": list(perm)}, x.dtype,
               tuple(view[p] for p in perm), hint=n.name or n.outputs[0])
    c.reshape_output(n, t, shape)


@handler("DepthToSpace", 1, 11, 13, 28)
def depth_to_space(c: Converter, n: Node, *, blocksize, mode="DCR"):
    x = _input(c, n, mode, blocksize)
    b = blocksize
    nn, ch, h, w = x.shape
    if ch % (b * b):
        raise Unsupported(f"{ch} channels for blocksize {b} (not a multiple of {b * b})")
    out = ch // (b * b)
    view = (nn, b, b, out, h, w) if mode == "DCR" else (nn, out, b, b, h, w)
    _rearrange(c, n, x, view, DEPTH_TO_SPACE[mode], (nn, out, h * b, w * b))


@handler("SpaceToDepth", 1, 13, 28)
def space_to_depth(c: Converter, n: Node, *, blocksize, mode="DCR"):
    # mode is an attribute of version 28 only; before it, DCR.
    x = _input(c, n, mode, blocksize)
    b = blocksize
    nn, ch, h, w = x.shape
    if h % b or w % b:
        raise Unsupported(f"spatial size {h}x{w} for blocksize {b} (not multiples of it)")
    view = (nn, ch, h // b, b, w // b, b)
    perm = SPACE_TO_DEPTH[mode]
    _rearrange(c, n, x, view, perm, (nn, ch * b * b, h // b, w // b))
