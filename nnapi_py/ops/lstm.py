"""LSTM layers: LSTM (one step), UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM.

One cell, as the documentation and Android's reference define it (float32 arithmetic;
float16 operands are widened once and results rounded once):

    i = sigmoid(W_xi x + W_hi h + w_ci * c + b_i)        (absent with CIFG: i = 1 - f)
    f = sigmoid(W_xf x + W_hf h + w_cf * c + b_f)
    g = act(W_xc x + W_hc h + b_c)
    c' = clip(f * c + i * g, cell_clip)
    o = sigmoid(W_xo x + W_ho h + w_co * c' + b_o)
    h' = clip(W_proj (o * act(c')) + b_proj, proj_clip)  (without projection: o * act(c'))

Peephole weights (w_c*) and layer normalization are optional; with layer normalization each
gate's pre-activation (without bias) is normalized over the units, scaled by its weights and
then the bias is added.  act is the activation code (0 none, 1 relu, 3 relu6, 4 tanh, 6 sigmoid).
Which optional tensors are present is decided when a run starts (they may be model inputs
given as omitted), as Android's runtime does.

Speed: the four gate weight matrices are packed once into one [input, 4 * units] and one
[output, 4 * units] matrix (gate order i, f, o, g so the sigmoid gates are contiguous); the
input contribution of every time step is one matrix product before the loop; each step is
one matrix product plus a handful of vectorised updates over the batch and units.
"""
import numpy as np

from .. import constants as C
from .base import Op, register, value_error
from .common import check_merge_outputs

F16, F32 = C.TENSOR_FLOAT16, C.TENSOR_FLOAT32
f32 = np.float32
ACTIVATIONS = {0: "none", 1: "relu", 3: "relu6", 4: "tanh", 6: "sigmoid"}


def _f32(a):
    a = np.asarray(a)
    return a if a.dtype == f32 else a.astype(f32)


def _given(a):
    return a is not None and np.size(a) > 0


def _sigmoid(x):
    """In place: 1 / (1 + exp(-x))."""
    np.negative(x, out=x)
    np.exp(x, out=x)
    x += f32(1)
    np.reciprocal(x, out=x)


def _activate(x, code):
    """In place."""
    if code == 4:
        np.tanh(x, out=x)
    elif code == 6:
        _sigmoid(x)
    elif code == 1:
        np.maximum(x, 0, out=x)
    elif code == 3:
        np.clip(x, 0, 6, out=x)


def _layer_norm(x, w, b):
    """In place, per row: (x - mean) / stddev * w + b (stddev of a constant row: sqrt(1e-8))."""
    mean = x.mean(axis=1, keepdims=True)
    var = (x * x).mean(axis=1, keepdims=True) - mean * mean
    inv = np.where(var == 0, f32(1e4), 1 / np.sqrt(np.where(var == 0, f32(1), var)))
    x -= mean
    x *= inv
    x *= w
    x += b


class CellSpec:
    """Input positions of one direction's tensors."""

    def __init__(self, wx, wh, peep, bias, proj_w, proj_b, h, c, aux=None, ln=None):
        self.wx, self.wh, self.peep, self.bias = wx, wh, peep, bias
        self.proj_w, self.proj_b, self.h, self.c, self.aux, self.ln = proj_w, proj_b, h, c, aux, ln

    def tensors(self):
        return (list(self.wx) + list(self.wh) + list(self.peep) + list(self.bias) + [self.proj_w, self.proj_b]
                + list(self.aux or ()) + list(self.ln or ()))


class Cell:
    """One direction's weights for one run: packed, flags resolved."""

    def __init__(self, spec, a):
        g = lambda k: None if k is None or not _given(a[k]) else _f32(a[k])   # noqa: E731
        self.cifg = g(spec.wx[0]) is None
        order = (1, 3, 2) if self.cifg else (0, 1, 3, 2)          # f, o, g   or   i, f, o, g
        self.n_sig = len(order) - 1
        wf = g(spec.wx[1])
        self.units = wf.shape[0]
        self.wx = np.ascontiguousarray(np.concatenate([g(spec.wx[k]) for k in order], axis=0).T)
        self.wh = np.ascontiguousarray(np.concatenate([g(spec.wh[k]) for k in order], axis=0).T)
        self.bias = np.concatenate([g(spec.bias[k]) for k in order])
        aux = [g(k) for k in spec.aux] if spec.aux else []
        self.wa = None
        if aux and all(aux[k] is not None for k in order):
            self.wa = np.ascontiguousarray(np.concatenate([aux[k] for k in order], axis=0).T)
        peep = [g(k) for k in spec.peep]
        self.peep = peep if peep[2] is not None else None
        ln = [g(k) for k in spec.ln] if spec.ln else []
        self.ln = ln if ln and ln[3] is not None else None
        self.wp = g(spec.proj_w)
        self.wp = None if self.wp is None else np.ascontiguousarray(self.wp.T)
        self.bp = g(spec.proj_b)
        self.outputs = self.wh.shape[0]


def run_lstm(cell, x, aux, h, c, out, act, cell_clip, proj_clip, reverse=False):
    """x (T, B, I) float32 time-major; out: a (T, B, O) view to fill or None.
    Returns (h, c, gates of the last step as (i or None, f, o, g, o*act(c)))."""
    steps, batch = x.shape[0], x.shape[1]
    u = cell.units
    pre = (x.reshape(steps * batch, -1) @ cell.wx).reshape(steps, batch, -1)
    if aux is not None and cell.wa is not None:
        pre += (aux.reshape(steps * batch, -1) @ cell.wa).reshape(steps, batch, -1)
    if cell.ln is None:
        pre += cell.bias
    g = np.empty((batch, pre.shape[2]), f32)
    last = None
    h = _f32(h)
    c = _f32(c)
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        np.matmul(h, cell.wh, out=g)
        g += pre[t]
        if cell.cifg:
            gi, gf, go, gc = None, g[:, :u], g[:, u:2 * u], g[:, 2 * u:]
        else:
            gi, gf, go, gc = g[:, :u], g[:, u:2 * u], g[:, 2 * u:3 * u], g[:, 3 * u:]
        if cell.peep is None and cell.ln is None:
            _sigmoid(g[:, :cell.n_sig * u])
        else:
            if cell.peep is not None:
                if gi is not None:
                    gi += c * cell.peep[0]
                gf += c * cell.peep[1]
            if cell.ln is not None:
                ln, b = cell.ln, cell.bias
                k = 0
                for gate, w in ((gi, ln[0]), (gf, ln[1])):
                    if gate is not None:
                        _layer_norm(gate, w, b[k * u:(k + 1) * u])
                        k += 1
                _layer_norm(gc, ln[2], b[(k + 1) * u:(k + 2) * u])
            if gi is not None:
                _sigmoid(gi)
            _sigmoid(gf)
        _activate(gc, act)
        c = gf * c
        c += (f32(1) - gf if gi is None else gi) * gc
        if cell_clip > 0:
            np.clip(c, -cell_clip, cell_clip, out=c)
        if cell.peep is not None or cell.ln is not None:
            if cell.peep is not None:
                go += c * cell.peep[2]
            if cell.ln is not None:
                k = 1 if gi is None else 2
                _layer_norm(go, cell.ln[3], cell.bias[k * u:(k + 1) * u])
            _sigmoid(go)
        hc = c.copy()
        _activate(hc, act)
        hc *= go
        if cell.wp is not None:
            hn = hc @ cell.wp
            if cell.bp is not None:
                hn += cell.bp
            if proj_clip > 0:
                np.clip(hn, -proj_clip, proj_clip, out=hn)
        else:
            hn = hc
        if out is not None:
            out[t] = hn
        h = hn
        last = (gi, gf, go, gc, hc)
    return h, c, last


# ---- validation shared by the three operations -----------------------------------------------------
def _check_types(sig, t, tensor_idx, scalar_idx, float_scalars, bools):
    for k in tensor_idx:
        if k < len(sig.ins) and not sig.ins[k].omitted:
            sig.same_type("input", k, t)
    sig.types("input", scalar_idx, (C.INT32,), "activation")
    v = sig.scalar_value(scalar_idx)
    if v is not None and v not in ACTIVATIONS:
        sig.fail(f"input {scalar_idx} (activation) must be 0 (none), 1 (relu), 3 (relu6), 4 (tanh) or "
                 f"6 (sigmoid), got {v}")
    fs = C.FLOAT16 if t == F16 else C.FLOAT32
    for k, what in float_scalars:
        sig.types("input", k, (fs,), what)
        v = sig.scalar_value(k)
        if v is not None and not v >= 0:
            sig.fail(f"input {k} ({what}) must be >= 0 (0 disables clipping), got {v}")
    for k, what in bools:
        sig.types("input", k, (C.BOOL,), what)


def _required(sig, spec):
    for k in list(spec.wx[1:]) + list(spec.wh[1:]) + list(spec.bias[1:]) + [spec.h, spec.c]:
        sig.present(k)


def _dims_of(info, name, rank, what):
    d = info.dims
    if d is None or len(d) != rank:
        raise value_error(f"{name}: {what} must be a {rank}-D tensor, got {None if d is None else list(d)}",
                          at_runtime=False)
    return d


def _units(ins, spec, name):
    u = _dims_of(ins[spec.wx[1]], name, 2, f"input {spec.wx[1]} (input-to-forget weights)")[0]
    o = _dims_of(ins[spec.wh[1]], name, 2, f"input {spec.wh[1]} (recurrent-to-forget weights)")[1]
    return u, o


def _check_shapes(name, a, spec, batch, n_in, aux_in=None, at_runtime=True):
    """With the present tensors known (at run time, or at compilation for constant weights)."""
    def fail(m):
        raise value_error(f"{name}: {m}", at_runtime=at_runtime)
    wf = np.shape(a[spec.wx[1]])
    u = wf[0]
    o = np.shape(a[spec.wh[1]])[1] if len(np.shape(a[spec.wh[1]])) == 2 else -1
    cifg = not _given(a[spec.wx[0]])
    if cifg == _given(a[spec.wh[0]]):
        fail(f"inputs {spec.wx[0]} and {spec.wh[0]} (input-to-input and recurrent-to-input weights) must "
             f"both be given or both omitted (CIFG)")
    if cifg == _given(a[spec.bias[0]]):
        fail(f"input {spec.bias[0]} (input gate bias) must be given exactly when the input gate is (no CIFG)")
    want = {}
    for k in spec.wx:
        want[k] = (u, n_in)
    for k in spec.wh:
        want[k] = (u, o)
    for k in list(spec.peep) + list(spec.bias):
        want[k] = (u,)
    peep = [_given(a[k]) for k in spec.peep]
    if peep[1] != peep[2] or (peep[0] and not peep[1]) or (peep[1] and not cifg and not peep[0]):
        fail(f"inputs {spec.peep[0]}-{spec.peep[2]} (peephole weights): give all of them (without the "
             f"input one under CIFG) or none")
    if _given(a[spec.proj_w]):
        want[spec.proj_w] = (o, u)
        want[spec.proj_b] = (o,)
    elif _given(a[spec.proj_b]):
        fail(f"input {spec.proj_b} (projection bias) needs input {spec.proj_w} (projection weights)")
    elif o != u:
        fail(f"without projection the output size ({o}) must equal the number of units ({u})")
    want[spec.h] = (batch, o)
    want[spec.c] = (batch, u)
    if spec.ln:
        ln = [_given(a[k]) for k in spec.ln]
        if any(ln) and not (all(ln[1:]) and (cifg or ln[0])):
            fail(f"inputs {spec.ln[0]}-{spec.ln[3]} (layer normalization weights): give all of them (without "
                 f"the input one under CIFG) or none")
        for k in spec.ln:
            want[k] = (u,)
    if spec.aux and aux_in is not None:
        for k in spec.aux:
            want[k] = (u, aux_in)
    for k, shape in want.items():
        if _given(a[k]) and tuple(np.shape(a[k])) != shape:
            fail(f"input {k} has shape {list(np.shape(a[k]))}, expected {list(shape)}")


# ---- LSTM ----------------------------------------------------------------------------------------------
LSTM_SPEC = CellSpec(wx=(1, 2, 3, 4), wh=(5, 6, 7, 8), peep=(9, 10, 11), bias=(12, 13, 14, 15),
                     proj_w=16, proj_b=17, h=18, c=19, ln=(23, 24, 25, 26))
OPTIONAL = (1, 5, 9, 10, 11, 12, 16, 17)


@register
class Lstm(Op):
    name = "LSTM"
    optional_inputs = OPTIONAL + (23, 24, 25, 26)

    def validate(self, sig):
        if len(sig.ins) not in (23, 27) or len(sig.outs) != 4:
            sig.fail(f"expected 23 or 27 inputs and 4 outputs, got {len(sig.ins)} and {len(sig.outs)}")
        sig.present(0, "input")
        _required(sig, LSTM_SPEC)
        t = sig.types("input", 0, {F32: 1, F16: 3}, "input")
        _check_types(sig, t, [k for k in range(len(sig.ins)) if k not in (0, 20, 21, 22)], 20,
                     ((21, "cell clip"), (22, "projection clip")), ())
        for k in range(4):
            sig.same_type("output", k, t)
        return 3 if t == F16 or len(sig.ins) == 27 else 1

    def infer(self, ins):
        b = _dims_of(ins[0], self.name, 2, "input 0 (input)")[0]
        u, o = _units(ins, LSTM_SPEC, self.name)
        w = ins[1]
        cifg = w.omitted or not w.dims or 0 in w.dims
        return [(b, u * (3 if cifg else 4)), (b, o), (b, u), (b, o)]

    def build(self, ins, outs):
        act = int(ins[20].value)
        cell_clip, proj_clip = float(ins[21].value), float(ins[22].value)
        spec = LSTM_SPEC if len(ins) == 27 else CellSpec(**{**LSTM_SPEC.__dict__, "ln": None})
        name = self.name

        def kernel(i, o):
            x = _f32(i[0])
            a = list(i) + [None] * (27 - len(i))
            _check_shapes(name, a, spec, x.shape[0], x.shape[1])
            cell = Cell(spec, a)
            h, c, (gi, gf, go, gc, hc) = run_lstm(cell, x[None], None, a[18], a[19], None, act, cell_clip,
                                                  proj_clip)
            o[1][...] = h
            o[2][...] = c
            o[3][...] = h
            gates = ([] if gi is None else [gi]) + [c.copy(), gf if gi is not None else f32(1) - gf, hc]
            _activate(gates[-3], act)
            o[0].reshape(-1)[...] = np.concatenate([np.ravel(v) for v in gates])
        return kernel


# ---- UNIDIRECTIONAL_SEQUENCE_LSTM ----------------------------------------------------------------------
UNI_SPEC = CellSpec(wx=(1, 2, 3, 4), wh=(5, 6, 7, 8), peep=(9, 10, 11), bias=(12, 13, 14, 15),
                    proj_w=16, proj_b=17, h=18, c=19, ln=(24, 25, 26, 27))


@register
class UnidirectionalSequenceLstm(Op):
    name = "UNIDIRECTIONAL_SEQUENCE_LSTM"
    optional_inputs = OPTIONAL + (24, 25, 26, 27)

    def validate(self, sig):
        if len(sig.ins) != 28 or len(sig.outs) not in (1, 3):
            sig.fail(f"expected 28 inputs and 1 or 3 outputs, got {len(sig.ins)} and {len(sig.outs)}")
        sig.present(0, "input")
        _required(sig, UNI_SPEC)
        t = sig.types("input", 0, {F32: 3, F16: 3}, "input")
        _check_types(sig, t, [k for k in range(28) if k not in (0, 20, 21, 22, 23)], 20,
                     ((21, "cell clip"), (22, "projection clip")), ((23, "time major"),))
        for k in range(len(sig.outs)):
            sig.same_type("output", k, t)
        return 4 if len(sig.outs) == 3 else 3

    def infer(self, ins):
        d = _dims_of(ins[0], self.name, 3, "input 0 (input)")
        tm = bool(ins[23].value)
        steps, b = (d[0], d[1]) if tm else (d[1], d[0])
        u, o = _units(ins, UNI_SPEC, self.name)
        return [(steps, b, o) if tm else (b, steps, o), (b, o), (b, u)]

    def build(self, ins, outs):
        act = int(ins[20].value)
        cell_clip, proj_clip = float(ins[21].value), float(ins[22].value)
        tm = bool(ins[23].value)
        name = self.name
        static = [None]
        if all(ins[k].value is not None or ins[k].omitted for k in UNI_SPEC.tensors()):
            values = [None if ins[k].omitted else ins[k].value for k in range(28)]
            d = ins[0].dims
            _check_shapes(name, values, UNI_SPEC, d[1] if tm else d[0], d[2], at_runtime=False)
            static[0] = Cell(UNI_SPEC, values)

        def kernel(i, o):
            x = _f32(i[0])
            if not tm:
                x = x.swapaxes(0, 1)
            cell = static[0]
            if cell is None:
                _check_shapes(name, i, UNI_SPEC, x.shape[1], x.shape[2])
                cell = Cell(UNI_SPEC, i)
            y = o[0] if tm else o[0].swapaxes(0, 1)
            h, c, _ = run_lstm(cell, x, None, i[18], i[19], y, act, cell_clip, proj_clip)
            if len(o) == 3:
                o[1][...] = h
                o[2][...] = c
        return kernel


# ---- BIDIRECTIONAL_SEQUENCE_LSTM -----------------------------------------------------------------------
FW_SPEC = CellSpec(wx=(1, 2, 3, 4), wh=(5, 6, 7, 8), peep=(9, 10, 11), bias=(12, 13, 14, 15), proj_w=16,
                   proj_b=17, h=35, c=36, aux=(40, 41, 42, 43), ln=(53, 54, 55, 56))
BW_SPEC = CellSpec(wx=(18, 19, 20, 21), wh=(22, 23, 24, 25), peep=(26, 27, 28), bias=(29, 30, 31, 32),
                   proj_w=33, proj_b=34, h=37, c=38, aux=(44, 45, 46, 47), ln=(57, 58, 59, 60))
BIDI_OPTIONAL = (1, 5, 9, 10, 11, 12, 16, 17, 18, 22, 26, 27, 28, 29, 33, 34) + tuple(range(39, 48)) + \
    tuple(range(53, 61))


@register
class BidirectionalSequenceLstm(Op):
    name = "BIDIRECTIONAL_SEQUENCE_LSTM"
    optional_inputs = BIDI_OPTIONAL

    def validate(self, sig):
        if len(sig.ins) != 61 or len(sig.outs) not in (1, 2, 5, 6):
            sig.fail(f"expected 61 inputs and 1, 2, 5 or 6 outputs, got {len(sig.ins)} and {len(sig.outs)}")
        sig.present(0, "input")
        _required(sig, FW_SPEC)
        _required(sig, BW_SPEC)
        t = sig.types("input", 0, {F32: 3, F16: 3}, "input")
        _check_types(sig, t, [k for k in range(61) if k not in (0, 48, 49, 50, 51, 52)], 48,
                     ((49, "cell clip"), (50, "projection clip")), ((51, "merge outputs"), (52, "time major")))
        merge = sig.scalar_value(51)
        if merge is not None and len(sig.outs) not in ((1, 5) if merge else (2, 6)):
            sig.fail(f"expected {'1 or 5' if merge else '2 or 6'} outputs with input 51 (merge outputs) "
                     f"{'true' if merge else 'false'}, got {len(sig.outs)}")
        for k in range(len(sig.outs)):
            sig.same_type("output", k, t)
        return 4 if len(sig.outs) >= 5 else 3

    def infer(self, ins):
        d = _dims_of(ins[0], self.name, 3, "input 0 (input)")
        tm, merge = bool(ins[52].value), bool(ins[51].value)
        steps, b = (d[0], d[1]) if tm else (d[1], d[0])
        uf, of = _units(ins, FW_SPEC, self.name)
        ub, ob = _units(ins, BW_SPEC, self.name)
        seq = (lambda n: (steps, b, n)) if tm else (lambda n: (b, steps, n))
        states = [(b, of), (b, uf), (b, ob), (b, ub)]
        return [seq(of + ob)] + states if merge else [seq(of), seq(ob)] + states

    def build(self, ins, outs):
        act = int(ins[48].value)
        cell_clip, proj_clip = float(ins[49].value), float(ins[50].value)
        merge, tm = bool(ins[51].value), bool(ins[52].value)
        name = self.name
        check_merge_outputs(name, "input 51 (merge_outputs)", merge, len(outs), 4)

        def seq(a):
            return a if tm else a.swapaxes(0, 1)

        def kernel(i, o):
            x = seq(_f32(i[0]))
            if _given(i[39]) and (np.ndim(i[39]) != 3 or seq(i[39]).shape[:2] != x.shape[:2]):
                raise value_error(f"{name}: input 39 (aux input) has dimensions {list(np.shape(i[39]))}, "
                                  f"expected a 3-D tensor with the time steps and batches of input 0",
                                  at_runtime=True)
            aux = seq(_f32(i[39])) if _given(i[39]) else None
            aux_w = [_given(i[k]) for k in range(40, 48)]
            if any(aux_w) and aux is None:
                raise value_error(f"{name}: aux weights (inputs 40-47) need input 39 (aux input)", at_runtime=True)
            cross = aux is not None and any(aux_w)
            bw_in = aux if aux is not None and not cross else x            # parallel linking: the aux input
            _check_shapes(name, i, FW_SPEC, x.shape[1], x.shape[2], aux.shape[2] if cross else None)
            _check_shapes(name, i, BW_SPEC, x.shape[1], bw_in.shape[2], aux.shape[2] if cross else None)
            fw, bw = Cell(FW_SPEC, i), Cell(BW_SPEC, i)
            if cross and (fw.wa is None or bw.wa is None):
                raise value_error(f"{name}: with aux weights, give all of them for both directions "
                                  f"(inputs 40-47; the input-gate ones may be omitted under CIFG)", at_runtime=True)
            of = fw.outputs
            if merge:
                y = seq(o[0])
                yf, yb, states = y[..., :of], y[..., of:], o[1:]
            else:
                yf, yb, states = seq(o[0]), seq(o[1]), o[2:]
            hf, cf, _ = run_lstm(fw, x, aux if cross else None, i[35], i[36], yf, act, cell_clip, proj_clip)
            hb, cb, _ = run_lstm(bw, bw_in, aux if cross else None, i[37], i[38], yb, act, cell_clip, proj_clip,
                                 reverse=True)
            if states:
                for arr, v in zip(states, (hf, cf, hb, cb)):
                    arr[...] = v
        return kernel
