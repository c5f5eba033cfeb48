#!/usr/bin/python3
"""Generates src/testing/op_goldens.inc: expected results of the rounding-sensitive ops.

Run once, and again only when adding cases (the output is committed):

    /usr/bin/python3 scripts/make_op_goldens.py

The values are independent of the Axle interpreter:
  * transcendental ops and float arithmetic come from NumPy, computed in float32 for f32/bf16/f16
    (Axle widens bf16/f16 to float, computes, and rounds back) and in float64 for f64;
  * rounding into a narrower format is done here exactly with fractions.Fraction (round half to
    even), never by chained float casts;
  * sums, dot products and running sums are exact rational sums rounded once;
  * rng_bit_generator uses the Philox-4x32-10 below, checked against Random123's known answers.

Each record is one op-sample (see src/testing/op_samples.h): operands and the expected result as raw
bit patterns, plus the tolerance in ulps of the result type (0 = bitwise).
"""

import math
import os
from fractions import Fraction

import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "src", "testing", "op_goldens.inc")

# (precision in bits, frexp exponent of the smallest normal, frexp exponent of overflow)
FORMATS = {"f32": (24, -125, 128), "bf16": (8, -125, 128), "f16": (11, -13, 16), "f64": (53, -1021, 1024)}
CXX = {"f32": "kF32", "f64": "kF64", "bf16": "kBF16", "f16": "kF16", "i32": "kI32", "i64": "kI64",
       "u32": "kU32"}
RNG = np.random.default_rng(20240601)


def round_to(x, fmt):
    """x (float, int or Fraction) rounded once, to nearest even, into `fmt`; returned as a float."""
    p, emin, emax = FORMATS[fmt]
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return x
    q = Fraction(x)
    negative = q < 0 or (q == 0 and isinstance(x, float) and math.copysign(1, x) < 0)
    q = abs(q)
    if q == 0:
        return -0.0 if negative else 0.0
    e = q.numerator.bit_length() - q.denominator.bit_length()
    while Fraction(2) ** (e - 1) > q:
        e -= 1
    while Fraction(2) ** e <= q:
        e += 1
    ulp = Fraction(2) ** (max(e, emin) - p)
    v = round(q / ulp) * ulp  # Fraction rounds half to even
    if v >= Fraction(2) ** emax:
        return -math.inf if negative else math.inf
    f = float(v)
    assert Fraction(f) == v
    return -f if negative else f


def bits(v, fmt):
    """The bit pattern of v, which must be exactly representable in fmt (NaN: the quiet NaN)."""
    if fmt == "f64":
        return int(np.array(v, np.float64).view(np.uint64))
    if math.isnan(v):
        return {"f32": 0x7FC00000, "bf16": 0x7FC0, "f16": 0x7E00}[fmt]
    if fmt == "f32":
        assert float(np.float32(v)) == v or math.isnan(v)
        return int(np.array(v, np.float32).view(np.uint32))
    if fmt == "bf16":
        u = int(np.array(v, np.float32).view(np.uint32))
        assert u & 0xFFFF == 0, (v, hex(u))
        return u >> 16
    if fmt == "f16":
        assert float(np.float16(v)) == v
        return int(np.array(v, np.float16).view(np.uint16))
    raise ValueError(fmt)


def compute_dtype(fmt):
    return np.float64 if fmt == "f64" else np.float32


def representable(values, fmt):
    return [round_to(float(v), fmt) for v in values]


class Writer:
    def __init__(self):
        self.lines = []

    def tensor(self, fmt, shape, words):
        shape_text = ", ".join(str(d) for d in shape)
        words_text = ", ".join(hex(w) for w in words)
        return "{DType::%s, {%s}, {%s}}" % (CXX[fmt], shape_text, words_text)

    def case(self, name, op, operands, expected, ulps):
        ops = ", ".join(self.tensor(*o) for o in operands)
        self.lines.append('{"%s", "%s", {%s},\n %s, %d},' % (name, op, ops, self.tensor(*expected), ulps))


# ------------------------------------------------------------------------------------------------
# Elementwise float ops.

def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


UNARY = {
    "exp": np.exp,
    "log": np.log,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "logistic": lambda x: x.dtype.type(1) / (x.dtype.type(1) + np.exp(-x)),
    "sqrt": np.sqrt,
    "rsqrt": lambda x: x.dtype.type(1) / np.sqrt(x),
    "sin": np.sin,
    "cos": np.cos,
    "erf": lambda x: erf(x).astype(x.dtype),  # float64 erf, rounded to the compute type
}
UNARY_ULPS = {"exp": 2, "log": 2, "log1p": 2, "tanh": 2, "logistic": 2, "sqrt": 0, "rsqrt": 0,
              "sin": 2, "cos": 2, "erf": 2}
UNARY_INPUTS = [-10, -3.5, -2, -1, -0.75, -0.5, -0.1, -1e-3, 0, 1e-3, 0.1, 0.5, 0.75, 1, 1.5, 2, 3.5,
                10, 20, 88, 100]

BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "rem": np.fmod,
    "pow": np.power, "atan2": np.arctan2,
}
BINARY_ULPS = {"add": 0, "sub": 0, "mul": 0, "div": 0, "rem": 0, "pow": 2, "atan2": 2}


def apply(fn, fmt, *inputs):
    """fn on the compute type, then the result rounded once into fmt."""
    ct = compute_dtype(fmt)
    with np.errstate(all="ignore"):
        y = fn(*[np.array(v, ct) for v in inputs])
    return [round_to(float(v), fmt) for v in np.asarray(y, ct)]


def ulps_for(base, fmt):
    # A 1-ulp difference of the float32 result may flip a bf16/f16 rounding by one of their ulps.
    return min(base, 1) if fmt in ("bf16", "f16") else base


def unary_cases(w):
    for op, fn in UNARY.items():
        for fmt in FORMATS:
            x = representable(UNARY_INPUTS + list(RNG.uniform(-5, 5, 7)), fmt)
            y = apply(fn, fmt, x)
            w.case("%s.%s" % (op, fmt), op, [(fmt, [len(x)], [bits(v, fmt) for v in x])],
                   (fmt, [len(y)], [bits(v, fmt) for v in y]), ulps_for(UNARY_ULPS[op], fmt))


def binary_inputs(op, fmt, n=20):
    a = RNG.standard_normal(n) * 10.0 ** RNG.uniform(-2, 2, n)
    b = RNG.standard_normal(n) * 10.0 ** RNG.uniform(-2, 2, n)
    if op == "pow":
        a = np.abs(a)
        a[:4] = [-2, -1.5, -3, 0.5]
        b[:4] = [3, 2, -2, 0.5]
        b = np.clip(b, -6, 6)
    if op == "atan2":
        a[:4], b[:4] = [0.0, -0.0, 1.0, -1.0], [-1.0, -1.0, 0.0, -0.0]
    return representable(a, fmt), representable(b, fmt)


def binary_cases(w):
    for op, fn in BINARY.items():
        for fmt in FORMATS:
            a, b = binary_inputs(op, fmt)
            y = apply(fn, fmt, a, b)
            n = [len(a)]
            w.case("%s.%s" % (op, fmt), op,
                   [(fmt, n, [bits(v, fmt) for v in a]), (fmt, n, [bits(v, fmt) for v in b])],
                   (fmt, n, [bits(v, fmt) for v in y]), ulps_for(BINARY_ULPS[op], fmt))


# ------------------------------------------------------------------------------------------------
# convert: exact single rounding, with inputs near the target's ties.

def near_ties(fmt, to, n):
    """Values of `fmt` on, just above and just below halfway points of `to`."""
    p_src, p_to = FORMATS[fmt][0], FORMATS[to][0]
    out = []
    for k in range(n):
        lo, hi = (-12, 14) if to == "f16" else (-20, 20)
        base = float(RNG.uniform(1, 2)) * 2.0 ** int(RNG.integers(lo, hi))
        e = math.frexp(base)[1]
        half = Fraction(2) ** (e - p_to - 1)
        ulp_src = Fraction(2) ** (e - p_src)
        nudge = [0, ulp_src, -ulp_src, 3 * ulp_src][k % 4]
        sign = -1 if k % 5 == 4 else 1
        out.append(sign * round_to(Fraction(round_to(base, to)) + half + nudge, fmt))
    return out


def convert_cases(w):
    for src, dst in [("f64", "bf16"), ("f64", "f16"), ("f64", "f32"), ("f32", "bf16"), ("f32", "f16")]:
        x = near_ties(src, dst, 16) + representable(RNG.standard_normal(8) * 100, src)
        y = [round_to(v, dst) for v in x]
        w.case("convert.%s.%s" % (src, dst), "convert", [(src, [len(x)], [bits(v, src) for v in x])],
               (dst, [len(y)], [bits(v, dst) for v in y]), 0)
    for src, dst, hi in [("i64", "bf16", 62), ("i64", "f16", 15), ("i64", "f32", 62), ("i32", "bf16", 30),
                         ("i32", "f16", 15), ("u32", "bf16", 31)]:
        x = []
        for k in range(16):
            e = int(RNG.integers(9, hi + 1))
            v = int(RNG.integers(1 << (e - 1), 1 << e))
            p = FORMATS[dst][0]
            if k % 2 and e > p + 1:  # land on (k % 4 == 1) or just above (k % 4 == 3) a tie
                v = (v >> (e - p)) << (e - p) | (1 << (e - p - 1)) | (k % 4 == 3)
            if src != "u32" and k % 3 == 0:
                v = -v
            x.append(v)
        y = [round_to(v, dst) for v in x]
        width = 64 if src == "i64" else 32
        w.case("convert.%s.%s" % (src, dst), "convert", [(src, [len(x)], [v % (1 << width) for v in x])],
               (dst, [len(y)], [bits(v, dst) for v in y]), 0)


# ------------------------------------------------------------------------------------------------
# Accumulating ops: exact rational results rounded once.

ACC_ULPS = {"f32": 1, "bf16": 1, "f16": 1, "f64": 16}


def random_tensor(fmt, shape, scale):
    # Positive values: no cancellation, so a sequential double sum stays within a few ulps of the
    # exact one (signs and cancellation are covered by the hand-written samples).
    return representable(np.abs(RNG.standard_normal(int(np.prod(shape)))) * scale, fmt)


def accumulation_cases(w):
    for fmt in FORMATS:
        scale = 4.0 if fmt == "f16" else 100.0
        # reduce{sum, dims=[1]} of [4, 16].
        x = random_tensor(fmt, [4, 16], scale)
        y = [round_to(sum(Fraction(v) for v in x[16 * r:16 * r + 16]), fmt) for r in range(4)]
        w.case("reduce.%s" % fmt, "reduce", [(fmt, [4, 16], [bits(v, fmt) for v in x])],
               (fmt, [4], [bits(v, fmt) for v in y]), ACC_ULPS[fmt])
        # dot_general [3, 8] x [8, 4], contracting lhs 1 with rhs 0.
        a = random_tensor(fmt, [3, 8], 4.0)
        b = random_tensor(fmt, [8, 4], 4.0)
        y = [round_to(sum(Fraction(a[8 * i + k]) * Fraction(b[4 * k + j]) for k in range(8)), fmt)
             for i in range(3) for j in range(4)]
        w.case("dot_general.%s" % fmt, "dot_general",
               [(fmt, [3, 8], [bits(v, fmt) for v in a]), (fmt, [8, 4], [bits(v, fmt) for v in b])],
               (fmt, [3, 4], [bits(v, fmt) for v in y]), ACC_ULPS[fmt])
        # cumsum{dim=1} of [2, 12].
        x = random_tensor(fmt, [2, 12], scale)
        y = []
        for r in range(2):
            running = Fraction(0)
            for k in range(12):
                running += Fraction(x[12 * r + k])
                y.append(round_to(running, fmt))
        w.case("cumsum.%s" % fmt, "cumsum", [(fmt, [2, 12], [bits(v, fmt) for v in x])],
               (fmt, [2, 12], [bits(v, fmt) for v in y]), ACC_ULPS[fmt])


# ------------------------------------------------------------------------------------------------
# rng_bit_generator: Philox-4x32-10.

M32 = 0xFFFFFFFF


def philox4x32_10(key, ctr):
    k0, k1 = key
    c = list(ctr)
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & M32, (p0 >> 32) ^ c[3] ^ k1, p0 & M32]
    return c


# Random123 tests/kat_vectors: counter, key -> output.
assert philox4x32_10([0, 0], [0, 0, 0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
assert philox4x32_10([M32, M32], [M32] * 4) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
assert philox4x32_10([0xA4093822, 0x299F31D0], [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344]) == [
    0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def rng_cases(w):
    cases = [("wrap128", [0, 0], [M32, M32, M32, M32], [2, 4]),
             ("carry", [0xA4093822, 0x299F31D0], [M32, 0, 0, 0], [3, 3]),
             ("carry2", [1, 2], [M32 - 1, M32, 5, 0], [10])]
    for name, key, ctr, shape in cases:
        n = int(np.prod(shape))
        words = []
        value = sum(c << (32 * i) for i, c in enumerate(ctr))
        j = 0
        while len(words) < n:
            v = (value + j) % (1 << 128)
            words += philox4x32_10(key, [(v >> (32 * i)) & M32 for i in range(4)])
            j += 1
        w.case("rng_bit_generator." + name, "rng_bit_generator", [("u32", [2], key), ("u32", [4], ctr)],
               ("u32", shape, words[:n]), 0)


def main():
    w = Writer()
    unary_cases(w)
    binary_cases(w)
    convert_cases(w)
    accumulation_cases(w)
    rng_cases(w)
    header = ("// Generated by scripts/make_op_goldens.py (NumPy %s); do not edit.\n"
              "// {name, op, {operands: {dtype, shape, bits}}, expected {dtype, shape, bits}, ulps}\n"
              % np.__version__)
    with open(OUT, "w") as f:
        f.write(header + "\n".join(w.lines) + "\n")
    print("wrote %d cases to %s" % (len(w.lines), os.path.normpath(OUT)))


if __name__ == "__main__":
    main()
