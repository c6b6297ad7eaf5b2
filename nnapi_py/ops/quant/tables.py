"""Tables of 8-bit operands: the 256 codes of a type (byte_codes, as_bytes, take), one-byte and
two-byte lookups (ByteLookup), the 256 x 256 pair table of quantized ADD / SUB in float32
arithmetic (PairAffine), and the 256-entry tables of dequantization, requantization and unary
functions (dequant_table, requant_table, affine_requant_table, unary_table)."""
import numpy as np

from ... import constants as C
from .clamp import clip_inplace, qrange
from .f32search import _walk_to_least
from .fixedpoint import requantize_into, round_half_away
from .work import _work


def byte_codes(dtype):
    """The 256 integer values of an 8-bit type ordered by bit pattern (index = x.view(uint8))."""
    c = np.arange(256, dtype=np.uint8)
    return c.view(np.dtype(dtype)).astype(np.int64)


def as_bytes(a):
    """The byte pattern of an 8-bit array (a view, no copy): the index into a 256-entry table."""
    return a.view(np.uint8)


def take(table, a, out):
    """out[...] = table[byte of a]: one gather written into out (mode "clip": every byte is a
    valid index of a 256-entry table, so no index is clipped; it skips "wrap"'s modulo)."""
    np.take(table, as_bytes(a), out=out, mode="clip")


def small_lookup(table, in_dtype, size):
    """Kernel k(i, o): o[0] = table[byte of i[0]] for a small 8-bit input (common.SMALL) of
    `size` values.  One value (a streaming model's last QUANTIZE or LOGISTIC): its Python
    value (item(); an int8 value v reads the list's entry v, from the end when negative: its
    byte pattern) looked up in the table as a list and stored by fill() -- the table's values
    as Python numbers, exact for its dtype.  More: the table's own take straight into the
    output with the input's values as indices (int8: mode "wrap", entry v mod 256; uint8
    values are in range, "clip" clips nothing).  One numpy call, no byte view made."""
    if size == 1:
        values = table.tolist()

        def one(i, o):
            o[0].fill(values[i[0].item()])
        return one
    tk = table.take
    mode = "wrap" if np.dtype(in_dtype) == np.int8 else "clip"

    def k(i, o):
        tk(i[0], None, o[0], mode)
    return k


PAIR_LOOKUP_MIN = 4096      # ByteLookup: values from which two bytes are looked up at once


class ByteLookup:
    """A kernel's out[...] = table[byte of a] for a 256-entry table (out any view).  numpy's gather costs
    about 2 ns an index whatever the table, so for an 8-bit output of at least
    PAIR_LOOKUP_MIN values (contiguous) the input is read as 16-bit indices
    into the table of every pair of bytes (65536 entries of 2 bytes, made at the first such
    call): half as many gathers, the same bytes (176K values: 242 -> 119 us)."""

    def __init__(self, table):
        self.table = table
        self._pairs = None

    def pairs(self):
        p = self._pairs
        if p is None:
            # entry r holds the output bytes of the two input bytes r is made of, in memory
            # order (so the byte order of the machine does not matter)
            both = np.arange(1 << 16, dtype=np.uint16).view(np.uint8)
            p = self._pairs = np.ascontiguousarray(self.table.view(np.uint8)[both]).view(np.uint16)
        return p

    def __call__(self, a, out):
        n = out.size
        if n >= PAIR_LOOKUP_MIN and self.table.itemsize == 1 and a.itemsize == 1 and a.size == n \
                and a.flags.c_contiguous and out.flags.c_contiguous:
            x, y = a.reshape(-1), out.reshape(-1)
            e = n - n % 2                               # an odd count: the last value alone
            np.take(self.pairs(), x[:e].view(np.uint16), out=y[:e].view(np.uint16), mode="clip")
            if e < n:
                take(self.table, x[e:], y[e:])
        elif out.flags.c_contiguous:
            take(self.table, a, out)
        else:                                           # a strided view of an output
            out[...] = self.table[as_bytes(a)]


# ---- a 256 x 256 pair table in float32 arithmetic (quantized ADD / SUB) -------------------------
_PAIR_NUDGES = 2            # PairAffine.prove: each multiplier nudged by up to this many ulps each way
_PAIR_WALK = 4              # ... and each pair's constant walked up to this many ulps to its least
PAIR_AFFINE_MIN = 8192      # outputs from which the float form beats the pair table's gather (in the
                            # CNNs, both forms timed on each call: 57K values 145 against 172 us,
                            # 9.4K 55 against 69 us)


class PairAffine:
    """out = table[a, b] for a table affine in the two inputs' values up to its rounding (the
    reference ADD / SUB): computed as float32 passes, clamp(fl(fl(fl(a A) + fl(b B)) + K)),
    truncated by the byte store (int8: an offset of 128 in K and the clamp, the top bit flipped
    after).  prove() finds the constants and checks them against every one of the 65536 pairs,
    with the numpy float32 operations __call__ runs in the same order: exact by construction,
    or None.  Its passes (a cast and a multiply per input, two adds, the clamp and the store)
    cost less than the pair index and numpy's gather (about 1.8 ns a value) on large tensors."""

    def __init__(self, a_mul, b_mul, k, lo, hi, off):
        self.A, self.B, self.K = a_mul, b_mul, k
        self.lo, self.hi, self.off = np.float32(lo), np.float32(hi), off

    @classmethod
    def prove(cls, table, da, db, ra, rb, out_dtype):
        """table: the 65536 outputs (index byte(a) << 8 | byte(b)); da, db: the inputs' dtypes;
        ra, rb: the real multipliers of their values (scale / output scale; negative for
        SUB's second input).  For each multiplier nudged by up to _PAIR_NUDGES ulps, K is the
        least float32 constant found (each pair's estimate t - u walked a few ulps) that lifts
        every pair to its output: the value is non-decreasing in K, so a smaller K only eases
        the pairs' upper bounds.  Whatever the search finds, the check on all pairs decides."""
        if not (2.0 ** -40 < abs(ra) < 2.0 ** 24 and 2.0 ** -40 < abs(rb) < 2.0 ** 24):
            return None             # (NaN too) a multiplier float32 cannot hold, or no table to fit
        with np.errstate(all="ignore"):
            return cls._prove(table, da, db, ra, rb, out_dtype)

    @classmethod
    def _prove(cls, table, da, db, ra, rb, out_dtype):
        f32 = np.float32
        off = 128 if np.dtype(out_dtype) == np.int8 else 0
        t = np.asarray(table).astype(np.int64).reshape(256, 256) + off
        lo, hi = int(t.min()), int(t.max())
        if lo == hi:
            return None
        xa = byte_codes(da).astype(f32)[:, None]
        xb = byte_codes(db).astype(f32)[None, :]
        tf = t.astype(f32)
        need_lo = t > lo                       # pairs whose value must reach t (t = lo: clamped up)
        for a_mul in cls._nudged(f32(ra)):
            pa = np.multiply(xa, a_mul)
            for b_mul in cls._nudged(f32(rb)):
                u = np.add(pa, np.multiply(xb, b_mul))          # [256, 256] float32
                k = cls._least_constant(u[need_lo], tf[need_lo])
                if k is None:
                    continue
                got = np.clip(np.add(u, k), f32(lo), f32(hi)).astype(np.uint8)     # the kernel's store
                if np.array_equal(got.astype(np.int64), t):
                    return cls(a_mul, b_mul, k, lo, hi, off)
        return None

    @staticmethod
    def _nudged(x):
        yield x
        for d in range(1, _PAIR_NUDGES + 1):
            for to in (np.inf, -np.inf):
                y = x
                for _ in range(d):
                    y = np.nextafter(y, np.float32(to))
                yield np.float32(y)

    @staticmethod
    def _least_constant(u, t):
        """The least float32 k with fl(u + k) >= t at every position (None: none found in
        a few ulps of the estimate t - u; prove's check decides in any case)."""
        if u.size == 0:
            return None
        k = _walk_to_least(np.subtract(t, u), lambda kk: np.add(u, kk) >= t, _PAIR_WALK)
        return np.float32(k.max())

    def __call__(self, a, b, out):
        """a, b: arrays of out's shape (8-bit); out: 8-bit."""
        fa = _work(("pair_a", np.float32), out.shape)
        fb = _work(("pair_b", np.float32), out.shape)
        np.copyto(fa, a, casting="unsafe")          # exact: 8-bit values
        np.multiply(fa, self.A, out=fa)
        np.copyto(fb, b, casting="unsafe")
        np.multiply(fb, self.B, out=fb)
        np.add(fa, fb, out=fa)
        np.add(fa, self.K, out=fa)
        clip_inplace(fa, self.lo, self.hi)
        o = out.view(np.uint8)
        o[...] = fa                                  # >= 0 after the clamp: truncation is the floor
        if self.off:
            o ^= 0x80


def dequant_table(type_code, scale, zp):
    """float32 real value of every byte of an 8-bit operand: (q - zp) * scale in float32."""
    return (byte_codes(C.DTYPES[type_code]) - zp).astype(np.float32) * np.float32(scale)


def requant_table(src_type, src_scale, src_zp, dst_type, dst_scale, dst_zp):
    """Byte -> value of dst's type: the reference requantize() (float32 dequantization,
    double division, clamp, round half away from zero)."""
    real = dequant_table(src_type, src_scale, src_zp).astype(np.float64)
    v = real / float(dst_scale) + dst_zp
    lo, hi = qrange(dst_type)
    v = np.clip(v, lo, hi)
    return round_half_away(v).astype(C.DTYPES[dst_type])


def affine_requant_table(dtype, src_scale, src_zp, dst_scale, dst_zp):
    """Byte -> value of the 8-bit type dtype: the reference's float32 requantization of
    CONCATENATION -- multiplier src_scale * (1 / dst_scale) and bias -src_zp * multiplier in
    float32, x * multiplier + bias rounded half away from zero, plus dst_zp, saturated;
    signed values go through the unsigned domain (+128) like the reference."""
    shift = 128 if np.dtype(dtype) == np.int8 else 0
    sc = np.float32(np.float32(src_scale) * (np.float32(1.0) / np.float32(dst_scale)))
    bias = np.float32(np.float32(-(src_zp + shift)) * sc)
    v = (byte_codes(dtype) + shift).astype(np.float32) * sc + bias
    r = round_half_away(v).astype(np.int64) + (dst_zp + shift)
    return (np.clip(r, 0, 255) - shift).astype(dtype)


def unary_table(in_dtype, in_scale, in_zp, out_dtype, out_scale, out_zp, real_fn):
    """256-entry table: requantize real_fn(dequantized input code) to the output's parameters."""
    real = real_fn((byte_codes(in_dtype) - in_zp).astype(np.float64) * in_scale)
    tab = np.empty(256, out_dtype)
    requantize_into(tab, real, out_scale, out_zp)
    return tab
