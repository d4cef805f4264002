"""Padding kernel (ONNX Pad): constant, reflect, edge and wrap modes on tensors of any rank.

The kernel copies src into dst's interior and then fills the borders axis by axis
from dst itself, so it needs no scratch memory (unlike `np.pad`, which allocates)."""

from lightnet.ir.shapes import split_pads

__all__ = ["pad", "place_in_border"]


def pad(src, dst, *, pads, mode="constant", value=0.0) -> None:
    """Pad src into dst (ONNX Pad). pads is [x1_begin, ..., x1_end, ...]; negative pads crop.

    constant fills with `value`; reflect mirrors without repeating the edge
    (needs pad <= dim - 1); edge repeats the edge; wrap repeats periodically (needs
    pad <= dim). Pads are applied axis after axis, so corners take the value np.pad gives.
    """
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ValueError(f"unknown pad mode {mode!r}")
    ndim = src.ndim
    begins, ends = split_pads(pads, ndim)
    crop = tuple(slice(max(0, -b), d - max(0, -e)) for d, b, e in zip(src.shape, begins, ends))
    src = src[crop]
    begins = [max(0, b) for b in begins]
    ends = [max(0, e) for e in ends]
    inner = tuple(slice(b, b + d) for b, d in zip(begins, src.shape))
    dst[inner] = src

    for axis, (b, e, n) in enumerate(zip(begins, ends, src.shape)):
        if not (b or e):
            continue
        # Axes before `axis` are already padded over their full extent; later ones only inside.
        rest = inner[axis + 1:]
        head = (slice(None),) * axis

        def region(index):
            return dst[head + (index,) + rest]

        before, after = slice(0, b), slice(b + n, b + n + e)
        if mode == "constant":
            region(before)[...] = value
            region(after)[...] = value
        elif mode == "edge":
            region(before)[...] = region(slice(b, b + 1))
            region(after)[...] = region(slice(b + n - 1, b + n))
        elif mode == "reflect":
            if max(b, e) > n - 1:
                raise ValueError(f"reflect pad {max(b, e)} too large for axis {axis} of size {n}")
            stop = b + n - 2 - e
            region(before)[...] = region(slice(2 * b, b, -1))
            region(after)[...] = region(slice(b + n - 2, stop if stop >= 0 else None, -1))
        else:
            if max(b, e) > n:
                raise ValueError(f"wrap pad {max(b, e)} too large for axis {axis} of size {n}")
            region(before)[...] = region(slice(n, b + n))
            region(after)[...] = region(slice(b, b + e))


def place_in_border(padded, src, begins, fill) -> None:
    """Copy src [N, C, ...] into padded at offsets `begins` of its spatial axes and set
    the cells around it to `fill`. For scratch buffers (which hold whatever their last
    user left): only the border is written besides src, not the whole buffer."""
    inner = padded
    for axis, (b, n) in enumerate(zip(begins, src.shape[2:]), start=2):
        lead = (slice(None),) * axis
        inner[lead + (slice(None, b),)] = fill
        inner[lead + (slice(b + n, None),)] = fill
        inner = inner[lead + (slice(b, b + n),)]
    inner[...] = src
