"""Hashing and sampling: LSH_PROJECTION and RANDOM_MULTINOMIAL.

LSH_PROJECTION: bit j of hash function i is the sign of sum_k weight_k * h(seed_ij, row_k),
where row_k is the k-th slice of the input along its first dimension (its raw bytes), seed_ij
the hash tensor's value as a float32, and h the 64-bit FarmHash fingerprint (farmhashna::Hash64,
read as a signed integer) of the 4 bytes of the seed followed by the row's bytes, as Android's
reference computes it.  The fingerprint is evaluated with numpy uint64 arithmetic over every
(seed, row) key at once.  Output: dense, one 0/1 per (hash function, bit); sparse, one int32
signature per hash function (its bits, plus i << num_bits for the non-deprecated sparse type).

RANDOM_MULTINOMIAL: per row, the classes' probabilities are softmax(logits) over the finite
logits (non-finite logits have probability 0); samples are drawn by inverting the cumulative
distribution with uniform numbers from a generator seeded by the two seeds, so an execution
is deterministic for given seeds; both seeds 0 draws fresh seeds per execution, as documented.
"""
import numpy as np

from .. import constants as C
from .base import Op, register, value_error
from .common import check_present

F16, F32, I32, Q8 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32, C.TENSOR_INT32, C.TENSOR_QUANT8_ASYMM
SPARSE_DEPRECATED, DENSE, SPARSE = 1, 2, 3


# ---- FarmHash Fingerprint64, vectorised over keys of one length -------------------------------------
_U = np.uint64
_K0, _K1, _K2 = _U(0xC3A5C85C97CB3127), _U(0xB492B66FBE98F273), _U(0x9AE16A3B2F90404F)


def _rot(v, s):
    return (v >> _U(s)) | (v << _U(64 - s))


def _shift_mix(v):
    return v ^ (v >> _U(47))


def _len16(u, v, mul):
    a = (u ^ v) * mul
    a ^= a >> _U(47)
    b = (v ^ a) * mul
    b ^= b >> _U(47)
    return b * mul


def _weak32(keys, off, a, b):
    w, x, y, z = (_fetch64(keys, off + 8 * k) for k in range(4))
    a = a + w
    b = _rot(b + a + z, 21)
    c = a
    a = a + x + y
    b = b + _rot(a, 44)
    return a + z, b + c


def _fetch64(keys, off):
    return np.ascontiguousarray(keys[:, off:off + 8]).view("<u8")[:, 0].astype(_U)


def _fetch32(keys, off):
    return np.ascontiguousarray(keys[:, off:off + 4]).view("<u4")[:, 0].astype(_U)


def fingerprint64(keys):
    """farmhashna::Hash64 of each row of keys ((n, length) uint8) -> (n,) uint64."""
    n, length = keys.shape
    ln = _U(length)
    with np.errstate(over="ignore"):
        if length <= 16:
            if length >= 8:
                mul = _K2 + ln * _U(2)
                a = _fetch64(keys, 0) + _K2
                b = _fetch64(keys, length - 8)
                c = _rot(b, 37) * mul + a
                d = (_rot(a, 25) + b) * mul
                return _len16(c, d, mul)
            if length >= 4:
                mul = _K2 + ln * _U(2)
                a = _fetch32(keys, 0)
                return _len16(ln + (a << _U(3)), _fetch32(keys, length - 4), mul)
            if length > 0:
                a, b, c = (keys[:, k].astype(_U) for k in (0, length >> 1, length - 1))
                y = a + (b << _U(8))
                z = ln + (c << _U(2))
                return _shift_mix(y * _K2 ^ z * _K0) * _K2
            return np.full(n, _K2, _U)
        if length <= 64:
            # HashLen17to32 is the first half of HashLen33to64 (a scaled by k1 instead of k2)
            mul = _K2 + ln * _U(2)
            a = _fetch64(keys, 0) * (_K1 if length <= 32 else _K2)
            b = _fetch64(keys, 8)
            c = _fetch64(keys, length - 8) * mul
            d = _fetch64(keys, length - 16) * _K2
            y = _rot(a + b, 43) + _rot(c, 30) + d
            z = _len16(y, a + _rot(b + _K2, 18) + c, mul)
            if length <= 32:
                return z
            e = _fetch64(keys, 16) * mul
            f = _fetch64(keys, 24)
            g = (y + _fetch64(keys, length - 32)) * mul
            h = (z + _fetch64(keys, length - 24)) * mul
            return _len16(_rot(e + f, 43) + _rot(g, 30) + h, e + _rot(f + a, 18) + g, mul)
        seed = _U(81)
        x = np.full(n, seed, _U)
        y = np.full(n, seed * _K1 + _U(113), _U)
        z = _shift_mix(y * _K2 + _U(113)) * _K2
        v0 = v1 = w0 = w1 = np.zeros(n, _U)
        x = x * _K2 + _fetch64(keys, 0)
        end = ((length - 1) // 64) * 64
        for s in range(0, end, 64):                 # 64-byte blocks; vectorised over the keys
            x = _rot(x + y + v0 + _fetch64(keys, s + 8), 37) * _K1
            y = _rot(y + v1 + _fetch64(keys, s + 48), 42) * _K1
            x ^= w1
            y = y + v0 + _fetch64(keys, s + 40)
            z = _rot(z + w0, 33) * _K1
            v0, v1 = _weak32(keys, s, v1 * _K1, x + w0)
            w0, w1 = _weak32(keys, s + 32, z + w1, y + _fetch64(keys, s + 16))
            z, x = x, z
        mul = _K1 + ((z & _U(0xFF)) << _U(1))
        s = length - 64
        w0 = w0 + _U((length - 1) & 63)
        v0 = v0 + w0
        w0 = w0 + v0
        x = _rot(x + y + v0 + _fetch64(keys, s + 8), 37) * mul
        y = _rot(y + v1 + _fetch64(keys, s + 48), 42) * mul
        x ^= w1 * _U(9)
        y = y + v0 * _U(9) + _fetch64(keys, s + 40)
        z = _rot(z + w0, 33) * mul
        v0, v1 = _weak32(keys, s, v1 * mul, x + w0)
        w0, w1 = _weak32(keys, s + 32, z + w1, y + _fetch64(keys, s + 16))
        z, x = x, z
        return _len16(_len16(v0, w0, mul) + _shift_mix(y) * _K0 + z, _len16(v1, w1, mul) + x, mul)


# ---- LSH_PROJECTION -----------------------------------------------------------------------------------
@register
class LshProjection(Op):
    name = "LSH_PROJECTION"
    optional_inputs = (2,)

    def validate(self, sig):
        sig.count(4, 1)
        for k, what in ((0, "hash functions"), (1, "input"), (3, "projection type")):
            sig.present(k, what)
        t = sig.types("input", 0, {F32: 1, F16: 3}, "hash functions")
        level = 1 if t == F32 else 3
        ti = sig.types("input", 1, {F32: 1, F16: 3, I32: 1, Q8: 1}, "input")
        level = max(level, 3 if ti == F16 else 1)
        if not sig.ins[2].omitted:
            sig.same_type("input", 2, t, "weights", ref="input 0 (hash functions)")
        sig.types("input", 3, (C.INT32,), "projection type")
        kind = sig.scalar_value(3)
        if kind is not None and kind not in (SPARSE_DEPRECATED, DENSE, SPARSE):
            sig.fail(f"input 3 (projection type) must be 1 (sparse, deprecated), 2 (dense) or 3 (sparse), got {kind}")
        if kind == SPARSE:
            level = max(level, 3)
        sig.types("output", 0, (I32,), "output")
        h = sig.ins[0].dims
        if h is not None and len(h) not in (0, 2):
            sig.fail(f"input 0 (hash functions) must be a 2-D tensor, got rank {len(h)}")
        if h and len(h) == 2 and h[1] > 32:
            sig.fail(f"input 0 (hash functions) has {h[1]} bits per function, at most 32")
        return level

    def _shape(self, ins):
        def fail(m):
            raise value_error(f"{self.name}: {m}", at_runtime=False)
        h, x = ins[0].dims, ins[1].dims
        if h is None or len(h) != 2:
            fail(f"input 0 (hash functions) must be a 2-D tensor, got {h}")
        if x is None or len(x) < 1:
            fail(f"input 1 (input) must have rank >= 1, got {x}")
        kind = int(ins[3].value)
        w = ins[2]
        if not w.omitted and w.dims is not None and w.dims != (0,):
            if len(w.dims) != 1 or w.dims[0] != x[0]:
                fail(f"input 2 (weights) has shape {list(w.dims)}, expected [{x[0]}] (one weight per "
                     f"slice of input 1)")
        if h[1] > 32:
            fail(f"input 0 (hash functions) has {h[1]} bits per function, at most 32")
        return kind, h[0], h[1]

    def infer(self, ins):
        kind, nh, nb = self._shape(ins)
        return [(nh * nb,) if kind == DENSE else (nh,)]

    def build(self, ins, outs):
        kind, nh, nb = self._shape(ins)

        def kernel(i, o):
            seeds = np.asarray(i[0]).astype(np.float32).reshape(-1)         # (nh * nb,)
            x = np.ascontiguousarray(i[1])
            rows = x.shape[0]
            row_bytes = x.view(np.uint8).reshape(rows, -1) if rows else np.zeros((0, 0), np.uint8)
            sb = seeds.view(np.uint8).reshape(-1, 4)
            keys = np.concatenate([np.repeat(sb, rows, axis=0),
                                   np.tile(row_bytes, (sb.shape[0], 1))], axis=1)
            sig = fingerprint64(keys).view(np.int64).astype(np.float64).reshape(-1, rows)
            if i[2] is not None and np.size(i[2]):
                sig = sig * np.asarray(i[2]).astype(np.float64)[None, :]
            score = np.zeros(sig.shape[0])
            for k in range(rows):                   # the reference's summation order
                score += sig[:, k]
            bits = (score > 0).astype(np.int32).reshape(nh, nb)
            if kind == DENSE:
                o[0][...] = bits.reshape(-1)
                return
            weights = (1 << np.arange(nb - 1, -1, -1, dtype=np.int64))
            sigs = (bits.astype(np.int64) * weights).sum(axis=1)
            if kind == SPARSE:
                sigs += np.arange(nh, dtype=np.int64) << nb
            o[0][...] = sigs.astype(np.uint32).view(np.int32) if nb >= 31 else sigs
        return kernel


# ---- RANDOM_MULTINOMIAL ----------------------------------------------------------------------------
@register
class RandomMultinomial(Op):
    name = "RANDOM_MULTINOMIAL"
    optional_inputs = ()

    def validate(self, sig):
        sig.count(3, 1)
        check_present(sig)
        sig.types("input", 0, {F32: 3, F16: 3}, "logits")
        sig.types("input", 1, (C.INT32,), "number of samples")
        sig.types("input", 2, (I32,), "seeds")
        sig.types("output", 0, (I32,), "samples")
        n = sig.scalar_value(1)
        if n is not None and n <= 0:
            sig.fail(f"input 1 (number of samples) must be > 0, got {n}")
        for where, idx, rank, what in (("input", 0, 2, "logits"), ("input", 2, 1, "seeds"),
                                       ("output", 0, 2, "samples")):
            d = sig.operand(where, idx).dims
            if d is not None and len(d) not in (0, rank):
                sig.fail(f"{where} {idx} ({what}) must be a {rank}-D tensor, got rank {len(d)}")
        d = sig.ins[2].dims
        if d and len(d) == 1 and d[0] not in (0, 2):
            sig.fail(f"input 2 (seeds) must have 2 elements, got {d[0]}")
        return 3

    def infer(self, ins):
        d = ins[0].dims
        if d is None or len(d) != 2:
            raise value_error(f"{self.name}: input 0 (logits) must be a 2-D tensor, got {d}", at_runtime=False)
        n = int(ins[1].value)
        if n <= 0:
            raise value_error(f"{self.name}: input 1 (number of samples) must be > 0, got {n}", at_runtime=False)
        if ins[2].dims != (2,):
            raise value_error(f"{self.name}: input 2 (seeds) must have shape [2], got {ins[2].dims}",
                              at_runtime=False)
        return [(d[0], n)]

    def build(self, ins, outs):
        n = int(ins[1].value)

        def kernel(i, o):
            logits = np.asarray(i[0]).astype(np.float64)
            s0, s1 = (int(v) for v in np.asarray(i[2]).reshape(-1)[:2])
            if s0 == 0 and s1 == 0:
                rng = np.random.default_rng()
            else:
                rng = np.random.default_rng([s0 & 0xFFFFFFFF, s1 & 0xFFFFFFFF])
            finite = np.isfinite(logits)
            top = np.where(finite, logits, -np.inf).max(axis=1, keepdims=True)
            top = np.where(np.isfinite(top), top, 0.0)
            with np.errstate(all="ignore"):
                p = np.where(finite, np.exp(logits - top), 0.0)
            cdf = np.cumsum(p, axis=1)
            u = rng.random((logits.shape[0], n)) * cdf[:, -1:]
            classes = logits.shape[1]
            for b in range(logits.shape[0]):        # one searchsorted per row
                o[0][b] = np.minimum(np.searchsorted(cdf[b], u[b], side="right"), classes - 1)
        return kernel
