"""Recurrent layers: LSTM, UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM, RNN,
UNIDIRECTIONAL_SEQUENCE_RNN, SVDF.

TFLite keeps their state in variable tensors between invocations; NNAPI has no state, so (as the
delegate does) each state is a model input and its next value a model output, carried by
TfliteModel.run() from one call to the next (the sequence layers give their final states as
outputs from feature level 4; below, the state restarts from its initial value on each run,
as with the delegate)."""
from __future__ import annotations

import numpy as np

from .base import F32, FLOAT, NEVER, QUANT, Rule, Unmapped, fuse_code, maps, not_of_type

_HYBRID_LSTM = Rule(NEVER, "quantized weights with float input (hybrid)",
                    lambda c, n: c.tensors[n.ins[0]].dtype in FLOAT and c.tensors[n.ins[2]].dtype in QUANT)


def _ins(ctx, node, idx, like):
    return [ctx.optional(node.ins[i] if i < len(node.ins) else -1, like) for i in idx]


def _act(o):
    a = o.FusedActivationFunction() if o is not None else 0
    if a not in (0, 1, 3, 4, 6):
        raise Unmapped("activation not supported by NNAPI's LSTM")
    return int(a)


def _clip(o, name):
    return float(getattr(o, name)()) if o is not None else 0.0


@maps("LSTM", level=2, rules=[
    Rule(3, "quantized weights with float input (hybrid)",
         lambda c, n: len(n.ins) >= 20 and c.tensors[n.ins[0]].dtype in FLOAT and c.tensors[n.ins[2]].dtype in QUANT),
    Rule(3, "layer normalization (24 inputs)", lambda c, n: len(n.ins) == 24),
    Rule(NEVER, "the basic 5-input kernel (QUANTIZED_16BIT_LSTM)", lambda c, n: len(n.ins) == 5, own=True),
    Rule(NEVER, "quantized input (QUANTIZED_LSTM)", lambda c, n: c.tensors[n.ins[0]].dtype in QUANT, own=True)])
def lstm(ctx, node):
    """One LSTM step: NNAPI LSTM with its scratch buffer and both states as outputs."""
    if len(node.ins) not in (20, 24):
        raise Unmapped("only the full LSTM kernel (20 or 24 inputs) is mapped")
    o = node.options("LSTMOptions")
    x = ctx.tensors[node.ins[0]]
    if x.dtype not in FLOAT:
        raise Unmapped("only float LSTM is mapped")
    ws = _ins(ctx, node, range(1, 18), x)
    h_in, c_in = ctx.state_input(node.ins[18]), ctx.state_input(node.ins[19])
    args = [ctx.operand(node.ins[0])] + ws + [h_in, c_in, _act(o), _clip(o, "CellClip"), _clip(o, "ProjClip")]
    if len(node.ins) == 24:
        args += _ins(ctx, node, range(20, 24), x)
    h, c = ctx.tensors[node.ins[18]], ctx.tensors[node.ins[19]]
    units = c.shape[-1]
    cifg = len(node.ins) < 2 or node.ins[1] < 0
    typ = ctx.type(x)
    outs = ctx.op("LSTM", *args, outputs=[(typ, (x.shape[0], units * (3 if cifg else 4))), (typ, h.shape),
                                          (typ, c.shape), ctx.out(node.outs[0])],
                  names=["", "", "", ctx.tensors[node.outs[0]].name])
    ctx.bind(node.outs[0], outs[3])
    ctx.state_output(node.ins[18], outs[1])
    ctx.state_output(node.ins[19], outs[2])
    return "LSTM (states carried)"


def _seq_rules(hybrid_rule):
    return [hybrid_rule, Rule(NEVER, "non-float input", not_of_type(*FLOAT))]


@maps("UNIDIRECTIONAL_SEQUENCE_LSTM", level=3, rules=_seq_rules(_HYBRID_LSTM) + [
    Rule(NEVER, "a variant other than 20 or 24 inputs", lambda c, n: len(n.ins) not in (20, 24))])
def unidirectional_sequence_lstm(ctx, node):
    o = node.options("UnidirectionalSequenceLSTMOptions")
    x = ctx.tensors[node.ins[0]]
    ws = _ins(ctx, node, range(1, 18), x)
    h_in, c_in = ctx.state_input(node.ins[18]), ctx.state_input(node.ins[19])
    args = [ctx.operand(node.ins[0])] + ws + [h_in, c_in, _act(o), _clip(o, "CellClip"), _clip(o, "ProjClip"),
                                              bool(o.TimeMajor()) if o else True]
    args += _ins(ctx, node, range(20, 24), x) if len(node.ins) == 24 else []
    if ctx.level < 4:
        ctx.emit("UNIDIRECTIONAL_SEQUENCE_LSTM", args, node.outs[0])
        return "UNIDIRECTIONAL_SEQUENCE_LSTM (state not carried below feature level 4)"
    if len(node.ins) == 20:
        args += [ctx.nn_model.omitted(ctx.type(x)) for _ in range(4)]
    h, c = ctx.tensors[node.ins[18]], ctx.tensors[node.ins[19]]
    typ = ctx.type(x)
    y, h_out, c_out = ctx.op("UNIDIRECTIONAL_SEQUENCE_LSTM", *args,
                             outputs=[ctx.out(node.outs[0]), (typ, h.shape), (typ, c.shape)],
                             names=[ctx.tensors[node.outs[0]].name, "", ""])
    ctx.bind(node.outs[0], y)
    ctx.state_output(node.ins[18], h_out)
    ctx.state_output(node.ins[19], c_out)
    return "UNIDIRECTIONAL_SEQUENCE_LSTM (states carried)"


@maps("BIDIRECTIONAL_SEQUENCE_LSTM", level=3, rules=_seq_rules(_HYBRID_LSTM))
def bidirectional_sequence_lstm(ctx, node):
    """48 TFLite inputs -> NNAPI's 61 (activation, clips, merge_outputs, time_major, eight omitted
    layer-normalization weights, as the delegate writes them); final states as outputs (level 4+)."""
    o = node.options("BidirectionalSequenceLSTMOptions")
    x = ctx.tensors[node.ins[0]]
    merge = bool(o.MergeOutputs()) if o else False
    args = [ctx.operand(node.ins[0])] + _ins(ctx, node, range(1, 35), x)
    states = node.ins[35:39]
    args += [ctx.state_input(k) for k in states]
    args += _ins(ctx, node, range(39, 48), x)
    args += [_act(o), _clip(o, "CellClip"), _clip(o, "ProjClip"), merge, bool(o.TimeMajor()) if o else True]
    args += [ctx.nn_model.omitted(ctx.type(x)) for _ in range(8)]
    typ = ctx.type(x)
    fw = ctx.out(node.outs[0])
    bw = ctx.out(node.outs[1]) if not merge and len(node.outs) > 1 else (typ, fw[1])
    outputs = [fw, bw]
    carry = ctx.level >= 4
    if carry:
        outputs += [(typ, ctx.tensors[k].shape) for k in states]
    res = ctx.op("BIDIRECTIONAL_SEQUENCE_LSTM", *args, outputs=outputs)
    ctx.bind(node.outs[0], res[0])
    if not merge and len(node.outs) > 1:
        ctx.bind(node.outs[1], res[1])
    if carry:
        for k, r in zip(states, res[2:]):
            ctx.state_output(k, r)
    return "BIDIRECTIONAL_SEQUENCE_LSTM" + (" (states carried)" if carry else "")


_FLOAT_WEIGHTS = Rule(NEVER, "non-float32 weights", not_of_type(F32, which=1))


@maps("RNN", rules=[_FLOAT_WEIGHTS, Rule(NEVER, "a variant other than 5 inputs", lambda c, n: len(n.ins) != 5)])
def rnn(ctx, node):
    o = node.options("RNNOptions")
    x = ctx.tensors[node.ins[0]]
    h = ctx.tensors[node.ins[4]]
    args = [ctx.operand(k) for k in node.ins[:4]] + [ctx.state_input(node.ins[4]), fuse_code(o)]
    h_out, y = ctx.op("RNN", *args, outputs=[(ctx.type(x), h.shape), ctx.out(node.outs[0])],
                      names=["", ctx.tensors[node.outs[0]].name])
    ctx.bind(node.outs[0], y)
    ctx.state_output(node.ins[4], h_out)
    return "RNN (state carried)"


@maps("UNIDIRECTIONAL_SEQUENCE_RNN", level=3, rules=[
    Rule(NEVER, "quantized weights with float input (hybrid)",
         lambda c, n: c.tensors[n.ins[0]].dtype in FLOAT and c.tensors[n.ins[1]].dtype in QUANT),
    Rule(NEVER, "non-float input", not_of_type(*FLOAT))])
def unidirectional_sequence_rnn(ctx, node):
    o = node.options("SequenceRNNOptions")
    x = ctx.tensors[node.ins[0]]
    h = ctx.tensors[node.ins[4]]
    args = [ctx.operand(k) for k in node.ins[:4]] + [ctx.state_input(node.ins[4]), fuse_code(o),
                                                     int(bool(o.TimeMajor())) if o else 1]
    if ctx.level < 4:
        ctx.emit("UNIDIRECTIONAL_SEQUENCE_RNN", args, node.outs[0])
        return "UNIDIRECTIONAL_SEQUENCE_RNN (state not carried below feature level 4)"
    y, h_out = ctx.op("UNIDIRECTIONAL_SEQUENCE_RNN", *args, outputs=[ctx.out(node.outs[0]), (ctx.type(x), h.shape)],
                      names=[ctx.tensors[node.outs[0]].name, ""])
    ctx.bind(node.outs[0], y)
    ctx.state_output(node.ins[4], h_out)
    return "UNIDIRECTIONAL_SEQUENCE_RNN (state carried)"


@maps("SVDF", level=2, rules=[_FLOAT_WEIGHTS, Rule(NEVER, "a variant other than 5 inputs",
                                                   lambda c, n: len(n.ins) != 5)])
def svdf(ctx, node):
    o = node.options("SVDFOptions")
    x = ctx.tensors[node.ins[0]]
    s = ctx.tensors[node.ins[4]]
    w = ctx.tensors[node.ins[1]]
    rank = int(o.Rank()) if o else 1
    bias = ctx.operand(node.ins[3]) if node.ins[3] >= 0 else ctx.constant(
        np.zeros(w.shape[0] // max(rank, 1), x.dtype), ctx.type(x))
    args = [ctx.operand(k) for k in node.ins[:3]] + [bias, ctx.state_input(node.ins[4]), rank, fuse_code(o)]
    s_out, y = ctx.op("SVDF", *args, outputs=[(ctx.type(x), s.shape), ctx.out(node.outs[0])],
                      names=["", ctx.tensors[node.outs[0]].name])
    ctx.bind(node.outs[0], y)
    ctx.state_output(node.ins[4], s_out)
    return "SVDF (state carried)"
