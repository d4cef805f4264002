"""The error function, which numpy lacks and GELU needs.

float32 uses the rational approximation erf(x) ~ x * P(x^2) / Q(x^2) on x clamped
to [-4, 4] (P of degree 6 and Q of degree 4 in x^2; the coefficients Eigen, XLA
and TVM use): no branch and no exp, and erf(4) rounds to 1 in float32. Measured
against math.erf on float32 inputs over [-7, 7] (tests/kernels/test_special.py),
its error is at most 4.3e-7 absolute (7 float32 ulp of results near +-1) and
2.3e-7 relative for |x| < 0.5: far below what float32 networks notice.

float64 uses W. J. Cody's rational Chebyshev approximations ("Rational
Chebyshev approximations for the error function", Math. Comp. 23, 1969; the
SPECFUN routine CALERF): erf on |x| <= 0.46875, erfc on (0.46875, 4] and on
(4, inf), erf = 1 - erfc. Cody's fits are good to about 1e-18;
evaluating them in float64 keeps erf within 4 ulp (tests: at most 4.5e-16
relative to math.erf).

Each is a couple of dozen whole-array numpy passes in scratch (`erf_scratch`):
cutting the array into cache-sized blocks was slower (one Python call per
pass per block costs more than the cache misses it saves).
"""

import numpy as np

__all__ = ["erf", "erf_scratch"]

_F32_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
          -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
          -1.60960333262415e-02)
_F32_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
          -7.37332916720468e-03, -1.42647390514189e-02)

# Cody's coefficients, highest degree first (the order Horner's rule takes them).
_SMALL_P = (1.85777706184603153e-1, 3.16112374387056560e0, 1.13864154151050156e2,
            3.77485237685302021e2, 3.20937758913846947e3)
_SMALL_Q = (1.0, 2.36012909523441209e1, 2.44024637934444173e2, 1.28261652607737228e3,
            2.84423683343917062e3)
_MID_P = (2.15311535474403846e-8, 5.64188496988670089e-1, 8.88314979438837594e0,
          6.61191906371416295e1, 2.98635138197400131e2, 8.81952221241769090e2,
          1.71204761263407058e3, 2.05107837782607147e3, 1.23033935479799725e3)
_MID_Q = (1.0, 1.57449261107098347e1, 1.17693950891312499e2, 5.37181101862009858e2,
          1.62138957456669019e3, 3.29079923573345963e3, 4.36261909014324716e3,
          3.43936767414372164e3, 1.23033935480374942e3)
_LARGE_P = (1.63153871373020978e-2, 3.05326634961232344e-1, 3.60344899949804439e-1,
            1.25781726111229246e-1, 1.60837851487422766e-2, 6.58749161529837803e-4)
_LARGE_Q = (1.0, 2.56852019228982242e0, 1.87295284992346047e0, 5.27905102951428412e-1,
            6.05183413124413191e-2, 2.33520497626869185e-3)
_ONE_OVER_SQRT_PI = 5.6418958354775628695e-1


def erf_scratch(shape, dtype) -> tuple:
    """Scratch layout (see kernels.scratch) of `erf` on a tensor of `shape` and
    `dtype`: two arrays of that shape for float32, five for float64."""
    names = "ab" if np.dtype(dtype) == np.float32 else "abcde"
    return tuple((name, tuple(shape), np.dtype(dtype)) for name in names)


def _horner(x, coefficients, out):
    """out = the polynomial in x with `coefficients`, highest degree first."""
    np.multiply(x, coefficients[0], out=out)
    np.add(out, coefficients[1], out=out)
    for c in coefficients[2:]:
        np.multiply(out, x, out=out)
        np.add(out, c, out=out)


def _erf_float32(x, out, ws):
    x2, q = ws["a"], ws["b"]
    np.clip(x, -4.0, 4.0, out=x2)
    np.multiply(x2, x2, out=x2)
    _horner(x2, _F32_Q, q)
    _horner(x2, _F32_P, out)
    np.clip(x, -4.0, 4.0, out=x2)
    np.multiply(out, x2, out=out)
    np.divide(out, q, out=out)


def _erf_float64(x, out, ws):
    """Cody's three intervals."""
    y, t, p, q = ws["a"], ws["b"], ws["c"], ws["d"]
    np.abs(x, out=y)
    # |x| <= 0.46875: erf = x * P(x^2) / Q(x^2).
    np.multiply(y, y, out=t)
    _horner(t, _SMALL_P, p)
    _horner(t, _SMALL_Q, q)
    np.divide(p, q, out=p)
    small = y <= 0.46875
    np.multiply(p, y, out=out)
    if not small.all():
        # erf = 1 - erfc, erfc(y) = exp(-y^2) R(y): R a rational in y up to 4, and
        # (1/sqrt(pi) - R'(1/y^2) / y^2) / y beyond. (Cody splits exp(-y^2) to keep
        # erfc's relative error small far out; erf only needs it absolutely.)
        mid = y <= 4.0
        _horner(y, _MID_P, p)
        _horner(y, _MID_Q, q)
        np.divide(p, q, out=p)
        if not mid.all():
            s, den = t, ws["e"]
            np.divide(1.0, t, out=s)
            _horner(s, _LARGE_P, q)
            np.multiply(q, s, out=q)
            _horner(s, _LARGE_Q, den)
            np.divide(q, den, out=q)
            np.subtract(_ONE_OVER_SQRT_PI, q, out=q)
            np.divide(q, y, out=q)
            np.copyto(p, q, where=~mid)
        np.multiply(y, y, out=t)
        np.negative(t, out=t)
        np.exp(t, out=t)
        np.multiply(p, t, out=p)
        np.subtract(1.0, p, out=p)
        np.copyto(out, p, where=~small)
    np.negative(out, out=out, where=np.signbit(x))


def erf(src: np.ndarray, dst: np.ndarray, ws: dict | None = None) -> None:
    """dst = erf(src) element-wise, float32 or float64 (see the module docstring).

    `ws` is carve(scratch, erf_scratch(dst.shape, dst.dtype)); dst is not src."""
    if ws is None:
        ws = {name: np.empty(shape, dtype) for name, shape, dtype in
              erf_scratch(dst.shape, dst.dtype)}
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # +-inf inputs
        (_erf_float32 if dst.dtype == np.float32 else _erf_float64)(src, dst, ws)
