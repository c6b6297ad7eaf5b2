"""ANeuralNetworksExecution's preparation state: setInput / setOutput (and their FromMemory
variants) checked as Android 14 checks them, the execution's settings, and the numpy arrays
over the buffers and memories they bind (nnapi_py/execution.py computes with them)."""
import numpy as np

from . import constants as C
from .cffi_util import view_array
from .errors import NNError, bad_data, bad_state, lenient, null
from .operand import byte_size, check_operand_type, dims_text

PREPARATION, COMPUTATION, COMPLETED = 0, 1, 2
_SCALARS = C.SCALAR_TYPES


# One input or output binding: a tuple (addr, length, dims, memory, offset, omitted).
def _IO(addr, length, dims, memory=None, offset=0, omitted=False):
    return (addr, length, dims, memory, offset, omitted)


def _given_dims(kind, index, declared, given, partial):
    """The dimensions of a tensor input/output from the type given to setInput/setOutput (or
    their FromMemory variants), as Android 14's checkDimensionInfo: the type of an input with a
    buffer must be fully specified (rank >= 1, no 0; `partial` for outputs and omitted inputs);
    a model of known rank fixes the rank and every non-zero dimension, also against a 0."""
    if not partial and (not given or not all(given)):
        raise bad_data(f"{kind} {index}: the operand type given has dimensions {dims_text(given)}; an input's "
                       f"type must be fully specified (rank >= 1, no 0 dimension)")
    if not declared:                         # unknown rank in the model
        return given if given or kind == "input" else None
    if len(given) != len(declared):
        raise bad_data(f"{kind} {index}: rank {len(given)} differs from the model's rank {len(declared)}")
    for i, (a, b) in enumerate(zip(declared, given)):
        if a and a != b:
            raise bad_data(f"{kind} {index}: dimension {i} is given as {b} but the model fixes it to {a} "
                           f"(only the model's unspecified dimensions can be given)")
    return given


class ExecutionIO:
    """The bindings and settings of an execution (the base of execution.Execution)."""
    # defaults as class attributes: creating an execution sets only what differs per object
    state = PREPARATION
    reusable = False
    padding = False
    any_set = False
    measure = False
    timeout = 0
    loop_timeout = C.DEFAULT_LOOP_TIMEOUT_NS

    # ---- preparation -------------------------------------------------------------------------
    def _prep(self):
        if self.state != PREPARATION:
            raise bad_state("the execution is no longer in the preparation state")

    def set_io(self, is_input, index, tdesc, addr, length, memory=None, offset=0):
        if self.state != PREPARATION:
            raise bad_state("the execution is no longer in the preparation state")
        lst = self.ins if is_input else self.outs
        kind = "input" if is_input else "output"
        if not 0 <= index < len(lst):
            raise bad_data(f"{kind} index {index} is out of range (model has {len(lst)} {kind}s)")
        m = self.model
        op = (m.inputs if is_input else m.outputs)[index]
        code = m.types[op]
        declared = m.dims[op]
        if tdesc is not None:
            tcode, tdims, tscale, tzp = tdesc
            if tcode != code:
                raise bad_data(f"{kind} {index}: the operand type given is {C.TYPE_NAMES.get(tcode, tcode)}, "
                               f"the model's is {C.TYPE_NAMES[code]} (only unspecified dimensions may be filled in)")
            if tscale != m.scales[op] or tzp != m.zps[op]:
                check_operand_type(tcode, tuple(tdims), tscale, tzp, f"{kind} {index}: the operand type given")
                lenient("quantization given at setInput/setOutput is ignored",
                        f"{kind} {index}: the operand type given has scale {tscale:g} and zeroPoint {tzp}, the "
                        f"model's has scale {m.scales[op]:g} and zeroPoint {m.zps[op]}; the model's are used")
            if code in _SCALARS:
                if tdims:
                    raise bad_data(f"{kind} {index}: a scalar cannot be given dimensions")
                dims = ()
            else:
                dims = _given_dims(kind, index, declared, tuple(tdims),
                                   partial=not is_input or (memory is None and addr == 0))
        else:
            dims = () if code in _SCALARS else declared
        if lst[index] is not None:
            raise bad_state(f"{kind} {index} has already been set")
        if memory is None and addr == 0:
            if length != 0:
                raise null(f"{kind} {index}: buffer is NULL but length is {length}")
            if is_input and dims and all(dims):
                what = self.plan.required_inputs.get(index)
                if what is not None:           # omission is for optional inputs (a zero-sized one is not omitted)
                    raise bad_data(f"input {index}: a NULL buffer omits the input, but it feeds {what}, which is "
                                   f"not optional")
            lst[index] = _IO(0, 0, dims, omitted=True)
            self.any_set = True
            return
        known = dims is not None and all(dims)
        if is_input and not known:
            raise bad_data(f"{kind} {index}: dimensions {dims_text(dims)} are not fully specified; "
                           f"pass an ANeuralNetworksOperandType with the actual dimensions")
        if memory is not None and memory.kind == "desc":
            if offset != 0 or length != 0:
                raise bad_data(f"{kind} {index}: memory from a descriptor needs offset 0 and length 0")
            roles = memory.roles_in if is_input else memory.roles_out
            if (self.compilation, index) not in roles:
                raise bad_data(f"{kind} {index}: the memory descriptor has no {kind} role for this index")
            if tdesc is not None and dims and memory.dims and (
                    len(dims) != len(memory.dims) or any(a and b and a != b for a, b in zip(dims, memory.dims))):
                # Android 14's DeviceMemoryValidator::validate: against the descriptor's dimensions
                raise bad_data(f"{kind} {index}: dimensions {dims_text(dims)} are incompatible with the memory's "
                               f"{dims_text(memory.dims)} (from its descriptor)")
            lst[index] = _IO(0, 0, dims, memory, 0)
            self.any_set = True
            return
        if known:
            need = byte_size(code, dims)
            if length < need or (length != need and not self.padding):
                raise bad_data(f"{kind} {index}: length {length} does not match the operand size {need} bytes"
                               + ("" if self.padding else " (enable padding to pass a larger buffer)"))
        if memory is not None:
            memory.check_region(offset, length, f"{kind} {index}")
            if not is_input and not memory.writable:
                raise bad_data(f"{kind} {index}: the memory is not writable")
            if is_input and not getattr(memory, "readable", True):
                raise bad_data(f"{kind} {index}: the memory is not readable (it was created without PROT_READ)")
        lst[index] = _IO(addr, length, dims, memory, offset)
        self.any_set = True

    def enable_padding(self, enable):
        self._prep()
        if self.any_set:
            raise bad_state("enableInputAndOutputPadding must be called before any input or output is set")
        self.padding = bool(enable)

    def set_reusable(self, r):
        self._prep()
        self.reusable = bool(r)

    def set_measure(self, measure):
        self._prep()
        if not self.compilation.single_device:
            raise bad_data("setMeasureTiming needs a compilation created by createForDevices with exactly one device")
        self.measure = bool(measure)

    def set_timeout(self, ns):
        self._prep()
        if not self.compilation.single_device:
            raise bad_data("ANeuralNetworksExecution_setTimeout needs a compilation created by "
                           "createForDevices with exactly one device")
        self.timeout = ns

    def set_loop_timeout(self, ns):
        self._prep()
        self.loop_timeout = min(ns, C.MAXIMUM_LOOP_TIMEOUT_NS)

    # ---- the arrays over bound buffers and memories -----------------------------------------------
    def _input_array(self, k, io):
        if io[5]:
            return None
        m = self.model
        code = m.types[m.inputs[k]]
        dt = C.DTYPES[code]
        if io[3] is not None:
            mem = io[3]
            if mem.kind == "desc":
                if not mem.initialized:
                    raise NNError(C.OP_FAILED, f"input {k}: the descriptor memory is not initialized")
                shape = mem.shape
                if code not in _SCALARS and tuple(io[2]) != tuple(shape):
                    # Android 14's validateInputDimensions, at every computation
                    raise NNError(C.OP_FAILED, f"input {k}: dimensions {dims_text(io[2])} differ from the shape "
                                               f"{list(shape)} the descriptor memory holds")
                raw = mem.array[:byte_size(code, shape)]
            else:
                shape = io[2]
                raw = mem.bytes[io[4]:io[4] + byte_size(code, shape)]
            a = raw.view(dt)
            return a[0] if code in _SCALARS else a.reshape(shape)
        if code in _SCALARS:
            return view_array(io[0], dt.itemsize, dt, (1,))[0]
        return view_array(io[0], byte_size(code, io[2]), dt, io[2])

    def _output_region(self, k, io, need):
        """(kind, obj): raw uint8 region able to hold `need` bytes, or None if too small."""
        if io[3] is not None:
            mem = io[3]
            if mem.kind == "desc":
                return mem.ensure(need)[:need]
            if need > io[1]:
                return None
            return mem.bytes[io[4]:io[4] + need]
        if need > io[1]:
            return None
        return view_array(io[0], need, np.uint8, (need,)) if need else np.empty(0, np.uint8)

    def has_desc_memory(self):
        return any(io[3] is not None and io[3].kind == "desc" for io in self.ins + self.outs)
