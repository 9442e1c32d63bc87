"""Python's ``repr(float)`` text, byte for byte, from a numba kernel (JSON payloads).

``json.dumps`` writes a float as ``float.__repr__``: the shortest decimal that reads back
to the same double (closest to it when several are that short), positional for decimal
exponents -4 <= e < 16 (``0.0001``, ``123.0``, ``1e+16``, ``1e-05``, ``-0.0``). CPython
finds the digits with David Gay's ``dtoa``, about 0.6 us per double on the test machine
(2-3 times that with cold caches); the daemon formats thousands per second.

:func:`_shortest` finds the same digits with Schubfach (R. Giulietti, "The Schubfach way to
render doubles", 2020; the 64-bit layout of A. Bolz's public-domain C++ version): one
128 x 64-bit product per boundary against a table of 128-bit powers of ten
(:data:`POW10_HI`, :data:`POW10_LO`, computed exactly with Python integers at import).
:func:`_put_float` lays the digits out as ``repr`` does. Only finite values: the callers
write ``null`` for the others, as the JSON payloads always did. The test compares it with
``repr`` on random bit patterns of every exponent and on the edge cases (zero, subnormals,
powers of two and ten, integers, the largest double).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

K_MIN, K_MAX = -292, 326  # powers of ten the double range needs (q in [-1074, 971])


def _pow10_table() -> tuple[np.ndarray, np.ndarray]:
    """g(k) = ceil(10^k / 2^r), r = floor(log2 10^k) - 127, so 2^127 <= g < 2^128, for
    k = K_MIN .. K_MAX; returned as its high and low 64-bit halves."""
    hi = np.zeros(K_MAX - K_MIN + 1, np.uint64)
    lo = np.zeros_like(hi)
    for j, k in enumerate(range(K_MIN, K_MAX + 1)):
        if k >= 0:
            p = 10 ** k
            r = p.bit_length() - 1 - 127
            g = p << -r if r <= 0 else -((-p) >> r)  # ceil(p / 2^r)
        else:
            p = 10 ** -k  # 10^k = 1/p, p not a power of two: floor(log2 10^k) = -bitlen(p)
            r = -p.bit_length() - 127
            g = -((-(1 << -r)) // p)  # ceil(2^-r / p)
        assert (1 << 127) <= g < (1 << 128), k
        hi[j], lo[j] = g >> 64, g & ((1 << 64) - 1)
    return hi, lo


POW10_HI, POW10_LO = _pow10_table()

_U1, _U2, _U4, _U10, _U32, _U40 = (np.uint64(v) for v in (1, 2, 4, 10, 32, 40))
_M32 = np.uint64(0xFFFFFFFF)
_HIDDEN = np.uint64(1 << 52)
_FRAC = np.uint64((1 << 52) - 1)
_U52, _UEXP = np.uint64(52), np.uint64(0x7FF)


@njit(cache=True, inline="always")
def _mul128(a, b):
    """(high, low) 64-bit halves of the 128-bit product of uint64 ``a`` and ``b``."""
    a0, a1 = a & _M32, a >> _U32
    b0, b1 = b & _M32, b >> _U32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _U32) + (p01 & _M32) + (p10 & _M32)
    return p11 + (p01 >> _U32) + (p10 >> _U32) + (mid >> _U32), (p00 & _M32) | (mid << _U32)


@njit(cache=True, inline="always")
def _round_to_odd(ghi, glo, cp):
    """floor(g cp / 2^128), its lowest bit set when the rest is not zero (round to odd)."""
    x1, _ = _mul128(glo, cp)
    y1, y0 = _mul128(ghi, cp)
    z = y0 + x1
    z1 = y1 + (_U1 if z < y0 else np.uint64(0))
    return z1 | (_U1 if z > _U1 else np.uint64(0))


@njit(cache=True)
def _shortest(x):
    """Digits ``d`` (uint64, no trailing zeros) and exponent ``e`` with ``|x| = d 10^e``,
    ``d`` the shortest that reads back to ``|x|`` (the closest such when there are two).
    ``x`` finite and not zero."""
    bits = np.float64(abs(x)).view(np.uint64)
    fr = bits & _FRAC
    be = (bits >> _U52) & _UEXP
    if be != 0:
        c = _HIDDEN | fr
        q = np.int64(be) - 1075
        if q <= 0 and -q < 53:  # an integer below 2^53: its own digits
            m = (_U1 << np.uint64(-q)) - _U1
            if c & m == 0:
                d = c >> np.uint64(-q)
                e = 0
                while d % _U10 == 0:
                    d //= _U10
                    e += 1
                return d, e
    else:
        c = fr
        q = np.int64(-1074)
    even = c & _U1 == 0
    closer = fr == 0 and be > 1  # the lower neighbour is half as far
    cbl = _U4 * c - _U2 + (_U1 if closer else np.uint64(0))
    cb = _U4 * c
    cbr = _U4 * c + _U2
    # k = floor(log10(2^q)), or floor(log10(3/4 2^q)) when the lower boundary is closer
    k = (q * 1262611 - (524031 if closer else 0)) >> 22
    h = q + ((-k * 1741647) >> 19) + 1  # q + floor(log2(10^-k)) + 1, in 1 .. 4
    j = -k - K_MIN
    ghi, glo = POW10_HI[j], POW10_LO[j]
    sh = np.uint64(h)
    vbl = _round_to_odd(ghi, glo, cbl << sh)
    vb = _round_to_odd(ghi, glo, cb << sh)
    vbr = _round_to_odd(ghi, glo, cbr << sh)
    lower = vbl + (np.uint64(0) if even else _U1)
    upper = vbr - (np.uint64(0) if even else _U1)
    s = vb // _U4
    d = np.uint64(0)
    e = k
    done = False
    if s >= _U10:  # one digit fewer: u' = 10 sp or w' = 10 (sp + 1), if exactly one fits
        sp = s // _U10
        up_in = lower <= _U40 * sp
        wp_in = _U40 * sp + _U40 <= upper
        if up_in != wp_in:
            d = sp + (_U1 if wp_in else np.uint64(0))
            e = k + 1
            done = True
    if not done:
        u_in = lower <= _U4 * s
        w_in = _U4 * s + _U4 <= upper
        if u_in != w_in:
            d = s + (_U1 if w_in else np.uint64(0))
        else:  # both fit: the closer, ties to even
            mid = _U4 * s + _U2
            up = vb > mid or (vb == mid and s & _U1 != 0)
            d = s + (_U1 if up else np.uint64(0))
    while d % _U10 == 0:
        d //= _U10
        e += 1
    return d, e


@njit(cache=True)
def _put_uint(out, p, v):
    """Write the decimal digits of uint64 ``v`` at ``out[p:]``; return the new end."""
    n = 1
    t = v
    while t >= _U10:
        t //= _U10
        n += 1
    for i in range(n - 1, -1, -1):
        out[p + i] = 48 + np.uint8(v % _U10)
        v //= _U10
    return p + n


@njit(cache=True)
def _put_int(out, p, v):
    """Write int64 ``v`` in decimal (``str(int)``) at ``out[p:]``; return the new end."""
    if v < 0:
        out[p] = 45  # '-'
        p += 1
        return _put_uint(out, p, np.uint64(-(v + 1)) + _U1)  # also for -2^63
    return _put_uint(out, p, np.uint64(v))


@njit(cache=True)
def _put_float(out, p, x):
    """Write finite ``x`` as ``repr(x)`` at ``out[p:]`` (at most 24 bytes); return the
    new end."""
    if math.copysign(1.0, x) < 0:  # also -0.0
        out[p] = 45  # '-'
        p += 1
    if x == 0:
        out[p] = 48
        out[p + 1] = 46
        out[p + 2] = 48  # "0.0"
        return p + 3
    d, e = _shortest(x)
    nd = 1
    t = d
    while t >= _U10:
        t //= _U10
        nd += 1
    dp = nd + e  # decimal point after dp digits: |x| = 0.d1 d2 ... x 10^dp
    if -4 < dp <= 16:  # positional, as repr
        if dp <= 0:  # 0.000ddd
            out[p] = 48
            out[p + 1] = 46
            p += 2
            for _ in range(-dp):
                out[p] = 48
                p += 1
            return _put_uint(out, p, d)
        end = _put_uint(out, p, d)
        if dp >= nd:  # ddd000.0
            for _ in range(dp - nd):
                out[end] = 48
                end += 1
            out[end] = 46
            out[end + 1] = 48
            return end + 2
        # ddd.ddd: open a gap for the point
        for i in range(end - 1, p + dp - 1, -1):
            out[i + 1] = out[i]
        out[p + dp] = 46
        return end + 1
    # d.ddde+XX with at least two exponent digits
    end = _put_uint(out, p + 1, d)  # digits one byte on, then the first moves before '.'
    out[p] = out[p + 1]
    if nd > 1:
        out[p + 1] = 46
    else:
        end = p + 1
    out[end] = 101  # 'e'
    ex = dp - 1
    out[end + 1] = 45 if ex < 0 else 43
    ex = abs(ex)
    end += 2
    if ex < 10:
        out[end] = 48
        end += 1
    return _put_uint(out, end, np.uint64(ex))


@njit(cache=True)
def _repr_many(x, out, ends):
    """Test helper: ``repr`` of each of ``x (n,)`` back to back in ``out``; ``ends (n,)``
    receives where each one ends."""
    p = 0
    for i in range(x.shape[0]):
        p = _put_float(out, p, x[i])
        ends[i] = p
    return p
