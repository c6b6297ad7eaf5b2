"""The plan's graph rewrites before shapes are inferred (plan.Plan's base): a standalone
activation folded into the operation before it, DEQUANTIZE -> QUANTIZE requantization as one
QUANTIZE, a depthwise bias passed on to the 1x1 convolution reading it, and the constants of
float16 partitions rounded once.  Constant folding (plan._ConstantFolds) computes operations."""
import numpy as np

from . import constants as C
from .errors import strict
from .model import TEMP
from .ops.base import Info
from .plan_run import _to_fp16


def _set_constant_input(infos, tmpl, node, pos, type_code, value):
    """A fold's rewiring: input pos of node becomes a new constant operand (type_code, value);
    the model's own operands are untouched."""
    idx = len(infos)
    infos.append(Info(type_code, tuple(np.shape(value)), 0.0, 0, None, value, False, idx))
    tmpl.append(value)
    node.ins = tuple(idx if j == pos else i for j, i in enumerate(node.ins))


class GraphRewrites:
    """Each rewrite changes Plan.nodes (and adds constant operands to infos / tmpl; the
    model's own operands are untouched) and returns how many it made."""

    _ACTIVATIONS = {"RELU": C.FUSED_RELU, "RELU1": C.FUSED_RELU1, "RELU6": C.FUSED_RELU6}

    def _uses_and_producers(self, model):
        """({operand: how many operation inputs and model outputs read it}, {operand: the
        node writing it}) of the current node list (the folds' common view of the graph)."""
        uses = {}
        for node in self.nodes:
            for i in node.ins:
                uses[i] = uses.get(i, 0) + 1
        for i in model.outputs:
            uses[i] = uses.get(i, 0) + 1
        return uses, {o: node for node in self.nodes for o in node.outs}

    def _fold_activations(self, model, infos, tmpl):
        """A float RELU / RELU1 / RELU6 whose input is the only use of a temporary produced by
        an operation with a FuseCode input set to NONE (ADD, MUL, SUB, DIV, the convolutions,
        FULLY_CONNECTED) is folded into that operation: it gets the activation as its fuse
        code (a new constant operand) and writes the activation's output itself, so the
        clamp runs inside its epilogue instead of as a separate pass over memory.  The same
        numbers, except on NaN: a fused clamp keeps NaN (the reference's std::max(x, lo)),
        the standalone operation gives the bound (std::max(lo, x)); docs/decisions.md.
        NNAPI_PY_STRICT=1 folds nothing.  Returns how many folded."""
        if strict():
            return 0
        uses, producer = self._uses_and_producers(model)
        folded = []
        for node in self.nodes:
            code = self._ACTIVATIONS.get(node.name)
            if code is None or len(node.ins) != 1 or len(node.outs) != 1 or node.deferred:
                continue
            x = node.ins[0]
            p = producer.get(x)
            if p is None or p.op.control or p.deferred or len(p.outs) != 1 or uses.get(x) != 1 or p.fp16 != node.fp16 \
                    or model.life[x] != TEMP or infos[x].type not in (C.TENSOR_FLOAT32, C.TENSOR_FLOAT16) \
                    or infos[node.outs[0]].type != infos[x].type:
                continue
            dx, dy = infos[x].dims, infos[node.outs[0]].dims
            if dx and dy and all(dx) and all(dy) and tuple(dx) != tuple(dy):
                continue                           # let the shape check report the conflict
            k = p.op.fuse_input([infos[i] for i in p.ins])
            if k is None or k >= len(p.ins):
                continue
            f = infos[p.ins[k]]
            if f.value is None or f.type != C.INT32 or int(f.value) != C.FUSED_NONE:
                continue
            _set_constant_input(infos, tmpl, p, k, C.INT32, np.int32(code))     # the new FuseCode
            p.outs = tuple(node.outs)
            producer[node.outs[0]] = p
            folded.append(node)
        if folded:
            drop = {id(nd) for nd in folded}
            self.nodes = [nd for nd in self.nodes if id(nd) not in drop]
        return len(folded)

    def _fold_requantize(self, model, infos):
        """DEQUANTIZE of an 8-bit tensor whose float32 result is only the input of a QUANTIZE
        (TFLite's int8 <-> uint8 requantization, as its NNAPI delegate lowers it: a uint8
        model input into an int8 network) becomes that QUANTIZE on the 8-bit tensor itself:
        QUANTIZE.build then computes each code's result once, by its own float path on the
        value DEQUANTIZE gives the code, and looks it up -- the same bytes without the float
        tensor (EfficientNet-Lite0's 224x224x3 input: two passes of about 1.2 ms).  Returns
        how many folded."""
        uses, producer = self._uses_and_producers(model)
        drop = set()
        for node in self.nodes:
            if node.name != "QUANTIZE" or node.deferred or node.fp16 or len(node.ins) != 1:
                continue
            x = node.ins[0]
            p = producer.get(x)
            if p is None or p.name != "DEQUANTIZE" or p.deferred or p.fp16 or uses.get(x) != 1 \
                    or model.life[x] != TEMP or infos[x].type != C.TENSOR_FLOAT32 \
                    or infos[p.ins[0]].type not in (C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED):
                continue
            node.ins = (p.ins[0],)
            drop.add(id(p))
        if drop:
            self.nodes = [nd for nd in self.nodes if id(nd) not in drop]
        return len(drop)

    def _fold_biases(self, model, infos, tmpl):
        """A float32 operation that only adds a constant bias to its per-channel sums
        (DEPTHWISE_CONV_2D without activation, Op.bias_to_pass_on) whose output is a temporary
        read only by an operation linear in it without padding (a 1x1 CONV_2D,
        Op.absorb_bias) passes its bias on: it gets a zero bias (its kernel then skips the
        add, one pass over memory fewer) and the reader the bias W b + c (new constant
        operands; the model's own are untouched).  The converted TFLite face and hand models
        have one per block.  Rounding may differ from adding b first (within float32
        tolerance); NNAPI_PY_STRICT=1 folds nothing.  Returns how many folded."""
        if strict():
            return 0
        readers = {}
        for node in self.nodes:
            for i in node.ins:
                readers.setdefault(i, []).append(node)
        outs = set(model.outputs)
        folded = 0
        for p in self.nodes:
            if p.deferred:
                continue
            got = p.op.bias_to_pass_on([infos[i] for i in p.ins])
            if got is None or len(p.outs) != 1:
                continue
            k, nchw = got
            x = p.outs[0]
            rd = readers.get(x, [])
            if len(rd) != 1 or x in outs or model.life[x] != TEMP:
                continue
            c = rd[0]
            if p.fp16 or c.fp16:        # float16 rounds the depthwise result before the bias
                continue
            if c.op.control or c.deferred or not c.ins or c.ins[0] != x or list(c.ins).count(x) != 1 or len(c.ins) < 3:
                continue
            bias = infos[p.ins[k]].value
            nb = c.op.absorb_bias([infos[i] for i in c.ins], bias, nchw)
            if nb is None:
                continue
            zero = np.zeros_like(np.asarray(bias, np.float32))
            _set_constant_input(infos, tmpl, p, k, infos[p.ins[k]].type, zero)
            _set_constant_input(infos, tmpl, c, 2, infos[c.ins[2]].type, nb)
            folded += 1
        return folded

    def _round_to_fp16(self, infos, tmpl):
        """Float16 partitions: each float32 tensor constant an fp16 operation reads is rounded
        once, here (a new constant operand, shared by its fp16 readers; other readers keep the
        original); float32 tensor inputs no fp16 operation wrote (model inputs, other
        partitions' results) are rounded when the operation runs (Node.round_ins); every float32
        tensor result is rounded (Node.round_outs)."""
        f32 = C.TENSOR_FLOAT32
        writer_fp16 = {o: node.fp16 for node in self.nodes for o in node.outs}
        rounded = {}
        for node in self.nodes:
            if not node.fp16:
                continue
            round_ins = []
            for k, i in enumerate(node.ins):
                inf = infos[i]
                if inf.type != f32:
                    continue
                if inf.value is not None:
                    if i not in rounded:
                        _set_constant_input(infos, tmpl, node, k, f32, _to_fp16(inf.value))
                        rounded[i] = node.ins[k]
                    node.ins = tuple(rounded[i] if j == k else x for j, x in enumerate(node.ins))
                elif not writer_fp16.get(i, False):
                    round_ins.append(k)
            node.round_ins = tuple(round_ins)
            node.round_outs = tuple(k for k, o in enumerate(node.outs) if infos[o].type == f32)
