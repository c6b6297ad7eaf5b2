"""ANeuralNetworksModel: operands, operations, constants and graph validation."""
import os
import sys

import numpy as np

from . import constants as C
from . import devices
from . import describe
from .errors import NNError, bad_data, bad_state
from .operand import check_operand_type, fully_specified, byte_size, dims_text
from .ops import registry
from .ops.base import Info, ChannelQuant, check_operation

# operand lifetimes
TEMP, INPUT, OUTPUT, CONST, CONST_REF, NO_VALUE, SUBGRAPH = range(7)
_LIFE_NAMES = ("temporary", "input", "output", "constant", "constant", "omitted", "model")


def _dump_setting():
    """NNAPI_PY_DUMP=DIR: every finished model as JSON + dot into DIR (made when missing); off
    when unset, empty or 0/false/no/off; 1/true/yes/on name no directory: said once, off."""
    from .errors import FLAG_OFF, FLAG_ON, bad_setting
    raw = os.environ.get("NNAPI_PY_DUMP", "")
    v = raw.strip().lower()
    if v in FLAG_OFF:
        return False
    if v in FLAG_ON:
        bad_setting("NNAPI_PY_DUMP", raw, "a directory to write the models to (NNAPI_PY_DUMP=DIR)", "nothing is dumped")
        return False
    where = os.path.abspath(raw.strip())        # made at the first dump: its nearest existing part writable
    while not os.path.exists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    if not os.path.isdir(where) or not os.access(where, os.W_OK):
        bad_setting("NNAPI_PY_DUMP", raw, f"a directory nnapi_py can create and write ({where} is "
                    f"{'not a directory' if not os.path.isdir(where) else 'not writable'})", "nothing is dumped")
        return False
    return True


_DUMP = _dump_setting()


def _dump_failed(e):
    """A dump that could not be written: said once, and the process dumps nothing more."""
    global _DUMP
    _DUMP = False
    from .errors import bad_setting
    bad_setting("NNAPI_PY_DUMP", os.environ.get("NNAPI_PY_DUMP", ""), "a directory nnapi_py can create and write "
                f"({e.strerror}: {e.filename})", "nothing is dumped")
_SMALL = C.MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES


class Operation:
    __slots__ = ("code", "op", "ins", "outs", "level", "deferred")

    def __init__(self, code, op, ins, outs, level, deferred=None):
        self.code, self.op, self.ins, self.outs, self.level = code, op, ins, outs, level
        self.deferred = deferred    # reason of a failed check Android makes at execution (Sig.at_execution)


class Model:
    def __init__(self):
        self.types = []
        self.dims = []        # tuple per operand; None = tensor of unknown rank
        self.scales = []
        self.zps = []
        self.life = []
        self.values = {}      # index -> bytes | (addr, length) | (Memory, offset, length) | Model
        self.channel = {}     # index -> ChannelQuant
        self.operations = []
        self.inputs = ()
        self.outputs = ()
        self.identified = False
        self.finished = False
        self.invalid = False
        self.relaxed = False
        self.order = None     # operations in execution order (set by finish)
        self.level = 1        # minimum feature level the model needs
        self._infos = None

    # ---- building ---------------------------------------------------------------------
    def _mutable(self):
        if self.finished:
            raise bad_state("the model has been finished and can no longer be modified")
        if self.invalid:
            raise bad_state("the model is invalid (an earlier finish failed)")

    def _index(self, index, what="operand index"):
        if not 0 <= index < len(self.types):
            raise bad_data(f"{what} {index} is out of range (model has {len(self.types)} operands)")
        return index

    def add_operand(self, code, dims, scale, zp):
        if self.finished or self.invalid:
            self._mutable()
        check_operand_type(code, dims, scale, zp, f"operand {len(self.types)}")
        if C.TYPE_LEVEL.get(code, 1) > devices.CONFIG.level:
            devices.check_level(C.TYPE_LEVEL[code], f"operand {len(self.types)} of type {C.TYPE_NAMES[code]}")
        self.types.append(code)
        self.dims.append(dims)
        self.scales.append(scale)
        self.zps.append(zp)
        self.life.append(TEMP)

    def set_value(self, index, data):
        """data: bytes (already copied), (addr, length) reference, or None to omit."""
        self._mutable()
        self._index(index)
        code = self.types[index]
        if data is None:
            self.life[index] = NO_VALUE
            self.values.pop(index, None)
            return
        if code == C.MODEL:
            raise bad_data(f"operand {index} is of type MODEL: use ANeuralNetworksModel_setOperandValueFromModel")
        length = len(data) if isinstance(data, bytes) else data[1]
        self._check_length(index, length)
        self.life[index] = CONST if isinstance(data, bytes) else CONST_REF
        self.values[index] = data

    def _check_length(self, index, length):
        code = self.types[index]
        if code in (C.OEM_SCALAR, C.TENSOR_OEM_BYTE):
            return
        d = self.dims[index]
        if code in C.TENSOR_TYPES and not fully_specified(d):
            raise bad_data(f"operand {index}: a constant tensor must have fully specified dimensions, got {dims_text(d)}")
        need = byte_size(code, d)
        if length != need:
            raise bad_data(f"operand {index}: value length {length} does not equal the operand size {need} bytes")

    def set_value_from_memory(self, index, memory, offset, length):
        self._mutable()
        self._index(index)
        if self.types[index] == C.MODEL:
            raise bad_data(f"operand {index} is of type MODEL: use ANeuralNetworksModel_setOperandValueFromModel")
        memory.check_constant_region(offset, length)
        self._check_length(index, length)
        self.life[index] = CONST_REF
        self.values[index] = (memory, offset, length)

    def set_value_from_model(self, index, value):
        self._mutable()
        self._index(index)
        if self.types[index] != C.MODEL:
            raise bad_data(f"operand {index} has type {C.TYPE_NAMES.get(self.types[index])}, not MODEL")
        if not value.finished or value.invalid:
            raise bad_state("the referenced model must be finished (and valid) before it is used as a value")
        self.life[index] = SUBGRAPH
        self.values[index] = value

    def set_channel_quant(self, index, channel_dim, scales):
        self._mutable()
        self._index(index)
        if self.types[index] != C.TENSOR_QUANT8_SYMM_PER_CHANNEL:
            raise bad_data(f"operand {index} has type {C.TYPE_NAMES.get(self.types[index])}; per-channel "
                           f"parameters apply only to TENSOR_QUANT8_SYMM_PER_CHANNEL")
        d = self.dims[index]
        if d is None or channel_dim >= len(d):
            raise bad_data(f"operand {index}: channelDim {channel_dim} is not below the rank {0 if d is None else len(d)}")
        if d[channel_dim] == 0:
            raise bad_data(f"operand {index}: the channel dimension {channel_dim} must be specified")
        if len(scales) != d[channel_dim]:
            raise bad_data(f"operand {index}: scaleCount {len(scales)} does not equal dimension {channel_dim} ({d[channel_dim]})")
        if not (np.asarray(scales, np.float32) > 0.0).all():
            raise bad_data(f"operand {index}: every per-channel scale must be > 0")
        self.channel[index] = ChannelQuant(channel_dim, np.asarray(scales, dtype=np.float32))

    def info(self, i, with_value=False):
        ch = self.channel.get(i)
        inf = Info(self.types[i], self.dims[i], self.scales[i], self.zps[i], ch, None,
                   self.life[i] == NO_VALUE, i)
        if with_value:
            if self.life[i] in (CONST, CONST_REF):
                inf.value = self.constant_array(i)
            elif self.life[i] == SUBGRAPH:
                inf.value = self.values[i]          # the referenced (finished) Model
        return inf

    def check_operation_counts(self, code, nin, nout):
        """Before an operation's operand lists are read: the operation code (Android's first check:
        an unknown code is the error reported, whatever the lists hold), then their lengths against
        the most this implementation allows, so a list of millions of entries costs nothing
        (docs/decisions.md)."""
        self._mutable()
        op = registry.lookup(code)          # Android's first check: an unknown code is the error
        for kind, n in (("inputs", nin), ("outputs", nout)):
            if n > C.MAX_OPERATION_OPERANDS:
                raise bad_data(f"{op.name}: {n} {kind}, more than this implementation allows in one operation "
                               f"({C.MAX_OPERATION_OPERANDS})")

    def check_io_counts(self, nin, nout):
        """Model inputs and outputs are distinct operands: more of them than operands is an error,
        found before the lists are read."""
        self._mutable()
        if nin + nout > len(self.types):
            raise bad_data(f"{nin} inputs and {nout} outputs name more operands than the model has "
                           f"({len(self.types)}): an operand may be listed only once")

    def add_operation(self, code, ins, outs):
        self._mutable()
        op = registry.lookup(code)
        n = len(self.types)
        for kind, lst in (("input", ins), ("output", outs)):      # Android: the indices, then the signature
            for k, i in enumerate(lst):
                if not 0 <= i < n:
                    raise bad_data(f"{op.name}: {kind} {k} refers to operand {i}, "
                                   f"which is out of range (model has {n} operands)")
        sig = registry.OPS.get(code)        # (OEM_OPERATION takes any operands)
        for kind, n_, most in (("inputs", len(ins), sig and sig.max_inputs), ("outputs", len(outs),
                                                                             sig and sig.max_outputs)):
            if most is not None and n_ > most:
                raise bad_data(f"{op.name}: {n_} {kind}, more than any signature of the operation has")
        # a MODEL operand shows its referenced model, so IF / WHILE are checked against it here
        # as Android 14 does; other constants are seen only at finish
        level, deferred = check_operation(op, [self.info(i, self.life[i] == SUBGRAPH) for i in ins],
                                          [self.info(i) for i in outs])
        k = len(self.operations)
        if level > devices.CONFIG.level:
            devices.check_level(level, f"operation {k} ({op.name}) with these operand types")
        self.operations.append(Operation(code, op, tuple(ins), tuple(outs), level,
                                         deferred and f"operation {k}: {deferred}"))

    def identify(self, ins, outs):
        self._mutable()
        seen = set()
        for kind, lst in (("input", ins), ("output", outs)):
            for i in lst:
                self._index(i, f"model {kind} operand")
                if self.life[i] in (CONST, CONST_REF, NO_VALUE, SUBGRAPH):
                    raise bad_data(f"operand {i} is a constant and cannot be a model {kind}")
                if i in seen:
                    raise bad_data(f"operand {i} is listed more than once among the model inputs and outputs")
                seen.add(i)
        self.inputs, self.outputs = tuple(ins), tuple(outs)
        self.identified = True

    def relax(self, allow):
        self._mutable()
        self.relaxed = bool(allow)

    # ---- finish ---------------------------------------------------------------------------
    def finish(self):
        if self.finished:
            raise bad_state("ANeuralNetworksModel_finish was already called on this model")
        if self.invalid:
            raise bad_state("the model is invalid (an earlier finish failed)")
        try:
            self._validate_graph()
        except NNError:
            self.invalid = True
            raise
        self.finished = True
        if _DUMP:
            try:
                describe.dump_runtime_model(self, [_LIFE_NAMES[x] for x in self.life])
            except OSError as e:        # a dump directory problem must not fail the client's call
                _dump_failed(e)

    def _validate_graph(self):
        n = len(self.types)
        if not self.operations:
            raise bad_data("the model has no operations")
        if not self.inputs or not self.outputs:
            raise bad_data("the model needs at least one input and one output (ANeuralNetworksModel_identifyInputsAndOutputs)")
        life = self.life
        for i in self.inputs:
            if life[i] != TEMP:
                raise bad_data(f"model input operand {i} was given a value")
            life[i] = INPUT
        for i in self.outputs:
            if life[i] != TEMP:
                raise bad_data(f"model output operand {i} was given a value")
            life[i] = OUTPUT
        writer = [-1] * n
        for k, op in enumerate(self.operations):
            for o in op.outs:
                if life[o] in (INPUT, CONST, CONST_REF, NO_VALUE, SUBGRAPH):
                    raise bad_data(f"operation {k} ({op.op.name}) writes operand {o}, which is a model input or constant")
                if writer[o] >= 0:
                    raise bad_data(f"operand {o} is written by operation {writer[o]} and operation {k}")
                writer[o] = k
        for i in range(n):
            if life[i] in (TEMP, OUTPUT) and writer[i] < 0:
                raise bad_data(f"operand {i} is never written: it is not a model input, a constant or an operation output")
            if self.types[i] == C.TENSOR_QUANT8_SYMM_PER_CHANNEL and i not in self.channel:
                raise bad_data(f"operand {i}: TENSOR_QUANT8_SYMM_PER_CHANNEL needs ANeuralNetworksModel_setOperandSymmPerChannelQuantParams")
            if self.types[i] == C.MODEL and life[i] != SUBGRAPH:
                raise bad_data(f"operand {i}: MODEL operand needs ANeuralNetworksModel_setOperandValueFromModel")
        # topological order (Kahn); the order of addOperation is kept where possible
        ops = self.operations
        pending = [0] * len(ops)
        users = [[] for _ in range(n)]
        for k, op in enumerate(ops):
            for i in set(op.ins):
                if writer[i] >= 0:
                    pending[k] += 1
                    users[i].append(k)
        ready = [k for k in range(len(ops)) if pending[k] == 0]
        order = []
        import heapq
        heapq.heapify(ready)
        while ready:
            k = heapq.heappop(ready)
            order.append(ops[k])
            for o in ops[k].outs:
                for u in users[o]:
                    pending[u] -= 1
                    if pending[u] == 0:
                        heapq.heappush(ready, u)
        if len(order) != len(ops):
            raise bad_data("the model graph has a cycle")
        # second validation pass, now with constant values and omitted operands known
        level = 1
        for k, op in enumerate(ops):
            for pos, i in enumerate(op.ins):     # the one presence rule: only declared positions may be omitted
                if self.life[i] == NO_VALUE and not op.op.may_omit(pos, len(op.ins), self.types[i]):
                    raise bad_data(f"operation {k}: {op.op.name}: input {pos} (operand {i}) is omitted (no value), "
                                   f"but it is not an optional input of {op.op.name}")
            try:
                op.level, deferred = check_operation(op.op, [self.info(i, with_value=True) for i in op.ins],
                                                     [self.info(i) for i in op.outs])
            except NNError as e:
                raise bad_data(f"operation {k}: {e.reason}") from None
            op.deferred = deferred and f"operation {k}: {deferred}"
            level = max(level, op.level)
            if op.level > devices.CONFIG.level:
                devices.check_level(op.level, f"operation {k} ({op.op.name}) with these operands")
        self.level = level
        self.order = order

    # ---- constants ----------------------------------------------------------------------
    def constant_bytes(self, i):
        v = self.values[i]
        if isinstance(v, bytes):
            return memoryview(v)
        if len(v) == 2:          # (addr, length): a caller buffer larger than 128 bytes
            from .cffi_util import view_bytes
            return view_bytes(v[0], v[1])
        mem, off, length = v
        return mem.view(off, length)

    def constant_array(self, i):
        code = self.types[i]
        dt = C.DTYPES.get(code)
        if dt is None:
            return np.frombuffer(self.constant_bytes(i), np.uint8)
        a = np.frombuffer(self.constant_bytes(i), dt)
        if code in C.SCALAR_TYPES:
            return a[0]
        return a.reshape(self.dims[i])
