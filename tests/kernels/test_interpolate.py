"""The interpolate kernel against ONNX's reference Resize (onnx.reference), axis by axis
over every mode, coordinate rule, antialias and exclude_outside, and its planned
scratch (no allocation of the buffers per run)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx.reference.ops.op_resize import Resize  # noqa: E402

from lightnet.archs.cpu import kernels as K  # noqa: E402

RULES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
         "tf_crop_and_resize"]
CASES = [(mode, rule, anti, excl, scales)
         for mode, rule, anti, excl, scales in itertools.product(
             ["nearest", "linear", "cubic"], RULES, [False, True], [False, True],
             [(0.6, 1.7), (2.0, 0.5), (0.25, 1.25)])
         if mode != "nearest" or not (anti or excl)]


@pytest.mark.parametrize("mode,rule,antialias,exclude,scales", CASES)
def test_matches_onnx_reference(mode, rule, antialias, exclude, scales):
    x = np.random.default_rng(0).standard_normal((2, 7, 9))
    full = np.array([1.0, *scales])
    dims = [int(d) for d in np.floor(full * x.shape)]
    roi = [0, 0.1, 0.3, 1, 0.8, 1.2] if rule == "tf_crop_and_resize" else []
    want = Resize._run(None, x, np.array(roi) if roi else None, scales=full, sizes=None,
                       antialias=int(antialias), axes=None, coordinate_transformation_mode=rule,
                       cubic_coeff_a=-0.5, exclude_outside=int(exclude),
                       extrapolation_value=7.0, keep_aspect_ratio_policy="stretch", mode=mode,
                       nearest_mode="round_prefer_ceil")[0]
    params = {"mode": mode, "coordinate_mode": rule, "nearest_mode": "round_prefer_ceil",
              "cubic_coeff_a": -0.5, "exclude_outside": exclude, "antialias": antialias}
    layout = K.interpolate_scratch(x.shape, x.dtype, dims=dims, scales=list(full), mode=mode,
                                   coordinate_mode=rule)
    scratch = np.zeros(K.scratch_bytes(layout), np.uint8)
    ws = K.interpolate_workspace(x.shape, x.dtype, dims=dims, scales=list(full), roi=roi,
                                 scratch=scratch, **params)
    dst = np.empty(dims)
    K.interpolate(x, dst, ws=ws, extrapolation_value=7.0)
    np.testing.assert_allclose(dst, want, rtol=1e-12, atol=1e-12)


def test_nearest_of_integers_reads_values_exactly():
    x = np.array([[2**31 - 1, -2**31, 5]], np.int32)
    ws = K.interpolate_workspace(x.shape, x.dtype, dims=[2, 5], scales=[2.0, 5 / 3],
                                 mode="nearest", coordinate_mode="asymmetric",
                                 nearest_mode="floor")
    dst = np.empty((2, 5), np.int32)
    K.interpolate(x, dst, ws=ws)
    np.testing.assert_array_equal(dst, [[2**31 - 1, 2**31 - 1, -2**31, -2**31, 5]] * 2)


def test_linear_of_integers_is_refused():
    with pytest.raises(ValueError, match="linear interpolation needs a floating dtype"):
        K.interpolate_scratch((4,), np.int32, dims=[8], scales=[2.0], mode="linear",
                              coordinate_mode="half_pixel")
