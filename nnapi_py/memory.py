"""ANeuralNetworksMemory (fd-backed and descriptor-backed) and ANeuralNetworksMemoryDesc."""
import mmap

import numpy as np

from . import constants as C
from .errors import NNError, bad_data, bad_state
from .operand import merge_dims, byte_size

PROT_READ, PROT_WRITE = 1, 2


class Memory:
    """Memory from a file descriptor, mapped (MAP_SHARED; the mapping holds its own duplicate
    of the fd).  ANeuralNetworksMemory_free only drops the handle: a model constant, an
    execution's input or output, an execution in flight keep using the memory, which is
    released with its last user (docs/decisions.md, "A memory freed while in use")."""
    kind = "fd"

    def __init__(self, size, protect, fd, offset):
        if fd < 0:
            raise bad_data(f"invalid file descriptor {fd}")
        if size == 0:
            raise bad_data("memory size must be greater than 0")
        if protect & ~(PROT_READ | PROT_WRITE) or not protect & PROT_READ and protect != 0:
            raise bad_data(f"unsupported protection flags {protect:#x} (use PROT_READ and/or PROT_WRITE)")
        if fd >= 1 << 31:
            raise bad_data(f"invalid file descriptor {fd}")
        page = mmap.ALLOCATIONGRANULARITY
        base = offset - offset % page
        prot = (mmap.PROT_READ if protect & PROT_READ else 0) | (mmap.PROT_WRITE if protect & PROT_WRITE else 0)
        try:      # the mapping keeps its own duplicate of fd, closed when the mapping goes
            self._map = mmap.mmap(fd, size + offset - base, flags=mmap.MAP_SHARED, prot=prot, offset=base)
        except (OSError, ValueError, OverflowError) as e:
            raise bad_data(f"cannot map fd {fd} (size {size}, offset {offset}): {e}") from None
        self.writable = bool(protect & PROT_WRITE)
        self.readable = bool(protect & PROT_READ)     # PROT_NONE is allowed; reading it would fault
        self.size = size
        self.bytes = np.frombuffer(self._map, np.uint8, size, offset - base)
        self.initialized = True

    def view(self, offset, length):
        return memoryview(self.bytes[offset:offset + length])

    def check_region(self, offset, length, what):
        if offset > self.size or length > self.size - offset:
            raise bad_data(f"{what}: offset {offset} + length {length} exceeds the memory size {self.size}")

    def check_constant_region(self, offset, length):
        self.check_region(offset, length, "setOperandValueFromMemory")
        self.check_readable("setOperandValueFromMemory")

    def check_readable(self, what):
        if not self.readable:
            raise bad_data(f"{what}: the memory is not readable (it was created without PROT_READ)")


class DescMemory:
    """Runtime-allocated memory from a finished ANeuralNetworksMemoryDesc."""
    kind = "desc"
    writable = True
    readable = True

    def __init__(self, desc):
        if not desc.finished:
            raise bad_state("the memory descriptor has not been finished")
        self.type = desc.type
        self.scale, self.zp, self.channel = desc.scale, desc.zp, desc.channel
        self.dims = desc.dims                # may contain 0 / be None (unknown)
        self.roles_in = set(desc.roles_in)   # (compilation, index)
        self.roles_out = set(desc.roles_out)
        self.initialized = False
        self.shape = None                    # shape last written
        if desc.dims is not None and all(desc.dims):
            self.array = np.zeros(byte_size(desc.type, desc.dims), np.uint8)
        else:
            self.array = None
        self.size = 0 if self.array is None else self.array.size

    def check_constant_region(self, offset, length):
        raise bad_data("memory created from a descriptor cannot hold model constants")

    def ensure(self, nbytes):
        if self.array is None or self.array.size < nbytes:
            self.array = np.zeros(nbytes, np.uint8)
            self.size = nbytes
        return self.array


class MemoryDesc:
    def __init__(self):
        self.roles_in = []
        self.roles_out = []
        self.type = None
        self.scale = 0.0
        self.zp = 0
        self.channel = None
        self.dims = None
        self.finished = False

    def _mutable(self):
        if self.finished:
            raise bad_state("the memory descriptor has been finished and can no longer be modified")

    def add_role(self, compilation, index, frequency, is_input):
        self._mutable()
        if not compilation.finished or compilation.invalid:
            raise bad_data("the compilation of a memory role must be finished")
        ios = compilation.model.inputs if is_input else compilation.model.outputs
        kind = "input" if is_input else "output"
        if not 0 <= index < len(ios):
            raise bad_data(f"{kind} index {index} is out of range (model has {len(ios)} {kind}s)")
        if not 0.0 < frequency <= 1.0:
            raise bad_data(f"frequency {frequency} must be in (0, 1]")
        role = (compilation, index)
        if role in (self.roles_in if is_input else self.roles_out):
            raise bad_data(f"the {kind} role {index} of this compilation was already added")
        m = compilation.model
        op = ios[index]
        t, d, s, z, ch = m.types[op], m.dims[op], m.scales[op], m.zps[op], m.channel.get(op)
        if self.type is not None and ((t, s, z) != (self.type, self.scale, self.zp) or ch != self.channel):
            raise bad_data(f"the {kind} role {index} has an operand type incompatible with earlier roles")
        if t in C.SCALAR_TYPES and self.dims:
            # Android 14's MemoryBuilder::addRole: a scalar role after setDimensions gave a rank
            raise bad_data(f"the {kind} role {index} is a scalar but the descriptor has dimensions {list(self.dims)}")
        self.dims = self._merge(self.dims, d)
        if self.type is None:
            self.type, self.scale, self.zp, self.channel = t, s, z, ch
        (self.roles_in if is_input else self.roles_out).append(role)

    @staticmethod
    def _merge(a, b):
        """Android's combineDimensions: an unknown rank (None or empty) takes the other side."""
        if not a:
            return b if b is not None else a
        if not b:
            return a
        try:
            return merge_dims(a, b, "memory descriptor")
        except NNError:
            raise bad_data(f"incompatible dimensions {list(a)} and {list(b)} between memory roles") from None

    def set_dimensions(self, dims):
        self._mutable()
        if self.type is not None and self.type in C.SCALAR_TYPES and dims:
            raise bad_data("a scalar operand's memory descriptor must have rank 0")
        self.dims = self._merge(self.dims, tuple(dims))

    def finish(self):
        self._mutable()
        if not self.roles_in and not self.roles_out:
            raise bad_data("a memory descriptor needs at least one input or output role")
        self.finished = True


def copy(src, dst):
    if src is dst:
        return
    if src.kind == "desc" and not src.initialized:
        raise bad_data("the source memory is not initialized (no execution or copy has written it)")
    if src.kind == "desc":
        data = src.array[:byte_size(src.type, src.shape)] if src.shape is not None else src.array
    else:
        src.check_readable("Memory_copy source")
        data = src.bytes
    if dst.kind == "desc":
        if src.kind == "desc":
            if dst.dims is not None and src.shape is not None:
                try:
                    merge_dims(dst.dims, src.shape, "Memory_copy")
                except NNError:
                    dst.initialized = False
                    raise bad_data(f"Memory_copy: dimensions {list(src.shape)} are incompatible with the destination's {list(dst.dims)}") from None
            shape = src.shape
        else:
            if dst.dims is None or not all(dst.dims):
                raise bad_data("Memory_copy: the destination descriptor memory has unspecified dimensions")
            shape = dst.dims
        need = byte_size(dst.type, shape)
        if need != data.size:
            dst.initialized = False
            raise bad_data(f"Memory_copy: size mismatch ({data.size} bytes into {need} bytes)")
        dst.ensure(need)[:need] = data
        dst.shape = tuple(shape)
        dst.initialized = True
    else:
        if data.size != dst.size:
            raise bad_data(f"Memory_copy: size mismatch (source {data.size} bytes, destination {dst.size} bytes)")
        if not dst.writable:
            raise bad_data("Memory_copy: the destination memory is read-only")
        dst.bytes[:] = data
