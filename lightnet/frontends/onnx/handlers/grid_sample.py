"""GridSample, mapped to LightNet's grid_sample: 4-D images, every mode, padding mode and
align_corners (version 16's mode names and version 20's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..dispatch import handler
from ..errors import Unsupported
from ..graph import Node

if TYPE_CHECKING:
    from ..converter import Converter

# Each version's mode names -> grid_sample's (version 20 renamed bilinear and bicubic).
MODES_16 = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
MODES_20 = {"linear": "linear", "nearest": "nearest", "cubic": "cubic"}
PADDING_MODES = ("zeros", "border", "reflection")


@handler("GridSample", 16)
def grid_sample_16(c: Converter, n: Node, *, align_corners=0, mode="bilinear",
                   padding_mode="zeros"):
    _grid_sample(c, n, MODES_16, mode, padding_mode, align_corners)


@handler("GridSample", 20, 22)
def grid_sample(c: Converter, n: Node, *, align_corners=0, mode="linear",
                padding_mode="zeros"):
    _grid_sample(c, n, MODES_20, mode, padding_mode, align_corners)


def _grid_sample(c: Converter, n: Node, modes: dict, mode, padding_mode, align_corners):
    if mode not in modes:
        raise Unsupported(f"mode '{mode}' (GridSample-{n.version} takes "
                          f"{', '.join(modes)})")
    if padding_mode not in PADDING_MODES:
        raise Unsupported(f"padding_mode '{padding_mode}' (expected one of "
                          f"{', '.join(PADDING_MODES)})")
    x, grid = c.val(n.input(0)), c.val(n.input(1))
    x.require_float("GridSample input X")
    if x.rank != 4:  # version 20's volumetric and 1-D samplings
        raise Unsupported(f"a rank-{x.rank} X {list(x.shape)} (LightNet samples 4-D "
                          "images [N, C, H, W] only)")
    if grid.rank != 4 or grid.shape[3] != 2 or grid.shape[0] != x.shape[0]:
        raise Unsupported(f"a grid of shape {list(grid.shape)} for X of shape "
                          f"{list(x.shape)} (expected [{x.shape[0]}, Ho, Wo, 2])")
    if grid.dtype != x.dtype:
        raise Unsupported(f"a grid of dtype {grid.dtype} for X of dtype {x.dtype} "
                          "(expected one dtype)")
    shape = (x.shape[0], x.shape[1], grid.shape[1], grid.shape[2])
    c.emit("grid_sample", {"src": x, "grid": grid},
           {"mode": modes[mode], "padding_mode": padding_mode,
            "align_corners": bool(align_corners)},
           x.dtype, shape, out=n.outputs[0], hint=n.name or n.outputs[0])
