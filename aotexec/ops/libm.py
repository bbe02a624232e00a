"""float64 math IREE 3.13's llvm-cpu cannot link (no float64 sin, cos, tan, atan2, cbrt, tanh,
fmod, lgamma, digamma in its runtime; MXNet's own float64 tests failed to compile and ask for
1e-7 relative): sin / cos from fdlibm's reduction and kernel polynomials, tan = sin / cos, asin /
acos / atan / cbrt as the float32 result refined by float64 Newton steps, tanh from expm1, fmod
from trunc.  lgamma / digamma stay at float32 precision."""
from __future__ import annotations

import numpy as np

NO_F64 = frozenset({"atan", "asin", "acos", "lgamma", "digamma", "tan", "cbrt", "sine", "cosine"})
# fdlibm (k_sin.c, k_cos.c, e_rem_pio2.c): pi/2 in two parts, the kernels' coefficients
_PIO2 = (1.57079632673412561417e+00, 6.07710050650619224932e-11)
_SIN = (-1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04,
        2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10)
_COS = (4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05,
        -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11)


def _f64(x) -> bool:
    return np.dtype(x.dtype) == np.float64


def _newton(b, y, step, guard=None, steps: int = 2):
    """``steps`` Newton updates y <- y - step(y); where ``guard(y)`` is false y stays."""
    for _ in range(steps):
        delta = step(y)
        y = b.sub(y, delta if guard is None else b.select(guard(y), delta, b.full_like(delta, 0.0)))
    return y


def _nonzero(b, v):
    return b.compare(b.abs(v), 1e-300, "GT")


def _poly(b, z, coefs):
    acc = b.full_like(z, coefs[-1])
    for c in reversed(coefs[:-1]):
        acc = b.add(b.mul(acc, z), c)
    return acc


def sin_cos(b, x):
    """float64 (sin x, cos x): x = k pi/2 + r, |r| <= pi/4, the kernels on r, the quadrant k mod 4."""
    k = b.unary("round_nearest_even", b.mul(x, 2.0 / np.pi))
    r = b.sub(b.sub(x, b.mul(k, _PIO2[0])), b.mul(k, _PIO2[1]))
    z = b.mul(r, r)
    s = b.add(r, b.mul(b.mul(z, r), _poly(b, z, _SIN)))
    c = b.add(b.sub(1.0, b.mul(z, 0.5)), b.mul(b.mul(z, z), _poly(b, z, _COS)))
    q = b.sub(k, b.mul(b.unary("floor", b.mul(k, 0.25)), 4.0))       # k mod 4 in 0..3
    pick = lambda v0, v1, v2, v3: b.select(b.compare(q, 0.5, "LT"), v0, b.select(  # noqa: E731
        b.compare(q, 1.5, "LT"), v1, b.select(b.compare(q, 2.5, "LT"), v2, v3)))
    return pick(s, c, b.neg(s), b.neg(c)), pick(c, b.neg(s), b.neg(c), s)


def _refine(b, name: str, x, y):
    """One float64 root of the defining equation near the float32 estimate ``y``."""
    sin, cos = (lambda v: sin_cos(b, v)[0]), (lambda v: sin_cos(b, v)[1])
    if name == "atan":      # sin y - x cos y = 0
        return _newton(b, y, lambda v: b.div(b.sub(sin(v), b.mul(x, cos(v))), b.add(cos(v), b.mul(x, sin(v)))))
    if name == "asin":      # sin y = x, away from |x| = 1 where cos y = 0
        return _newton(b, y, lambda v: b.div(b.sub(sin(v), x), cos(v)), lambda v: _nonzero(b, cos(v)))
    if name == "acos":      # cos y = x
        return _newton(b, y, lambda v: b.div(b.sub(x, cos(v)), sin(v)), lambda v: _nonzero(b, sin(v)))
    if name == "cbrt":      # y^3 = x
        return _newton(b, y, lambda v: b.div(b.sub(b.mul(b.mul(v, v), v), x), b.mul(b.mul(v, v), 3.0)),
                       lambda v: _nonzero(b, v))
    return y                # lgamma, digamma: float32 precision


# float32 ops computed through the float64 forms above and rounded once (llvm-cpu): IREE 3.13's
# float32 expansions were off by up to 40 ulp (asin, acos, atan), 11 (cbrt) and thousands near
# the zeros of sin / cos / tan, where MXNet's libm rounds within one (its float32 tests ask 1e-6)
VIA_F64 = frozenset({"asin", "acos", "atan", "cbrt", "sine", "cosine", "tan"})


def _via_f64(b, name: str, x) -> bool:
    return name in VIA_F64 and np.dtype(x.dtype) == np.float32 and not b.vulkan


def chlo(b, name: str, x):
    """``chlo.<name>`` (asin, erf, lgamma...), IREE's input pipeline legalizes it on every target."""
    if _via_f64(b, name, x):
        return b.convert(chlo(b, name, b.convert(x, "float64")), x.dtype)
    if name in NO_F64 and _f64(x):
        estimate = b.convert(x, "float32")
        estimate = b.op(f"chlo.{name}", [estimate], x.shape, estimate.dtype)
        return _refine(b, name, x, b.convert(estimate, x.dtype))
    return b.op(f"chlo.{name}", [x], x.shape, x.dtype)


def unary(b, name: str, x):
    """A stablehlo unary op (sine, tan, cbrt...), computed here in float64 where IREE cannot."""
    if _via_f64(b, name, x):
        return b.convert(unary(b, name, b.convert(x, "float64")), x.dtype)
    if name in ("sine", "cosine", "tan") and _f64(x):
        sin, cos = sin_cos(b, x)
        return sin if name == "sine" else cos if name == "cosine" else b.div(sin, cos)
    if name in NO_F64 and _f64(x):
        return _refine(b, name, x, b.convert(b.unary(name, b.convert(x, "float32")), x.dtype))
    return b.unary(name, x)


def tanh(b, x):
    """float64 tanh as sign(x) * -expm1(-2|x|) / (2 + expm1(-2|x|)) (no float64 tanh to link)."""
    if not _f64(x):
        return b.tanh(x)
    e = b.unary("exponential_minus_one", b.mul(b.abs(x), -2.0))
    return b.mul(b.unary("sign", x), b.div(b.neg(e), b.add(e, 2.0)))


def rem(b, x, y):
    """x - trunc(x / y) * y in float64 (no float64 fmod to link); stablehlo.remainder otherwise."""
    if not _f64(x):
        return b.rem(x, y)
    y = y if not isinstance(y, (int, float)) else b.full_like(x, float(y))
    q = b.div(x, y)
    trunc = b.select(b.compare(q, 0.0, "LT"), b.unary("ceil", q), b.unary("floor", q))
    return b.sub(x, b.mul(trunc, y))
