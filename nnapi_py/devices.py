"""The devices a client sees, the Android release the library behaves as, and injected faults.

By default there is one CPU device (`nnapi_py-cpu`, every operation, feature level 8) and the
library behaves as NNAPI feature level 8.  Three settings change that, so that a client's code
paths for older releases, several devices, partial support and failures can be tested on a
desktop (README, "Testing your client's code paths"):

* ``NNAPI_PY_FEATURE_LEVEL=N`` (1..8, or the Android API level 27..35): behave as that release.
  ``getRuntimeFeatureLevel`` and every device report it; operand types, operations and
  signatures of later levels are rejected where Android rejects what it does not know
  (``addOperand``/``addOperation``, value-dependent ones at ``Model_finish``); functions of later
  levels return ``OP_FAILED`` with a reason (the real library would lack the symbol).
* ``NNAPI_PY_DEVICES``: the device list.  Compact form ``name=preset[:TYPE][:level][:fp16]``
  separated by commas (``gpu=float-fast:GPU:fp16,npu=quant:ACCELERATOR:4``): a name (no space,
  none of ``,;:=@{}[]"'``), ``=`` and a preset are required, each option at most once (TYPE one
  of UNKNOWN, OTHER, CPU, GPU, ACCELERATOR; level 1..8 or 27..35; fp16 or fp32).  Or JSON (text,
  or a file path / ``@path``) ``{"devices": [{"name", "preset", "type", "feature_level",
  "version", "operations", "performance", "numerics"}], "faults": [...]}``: unknown keys,
  operation names and performance classes (float32, quant8, relaxed, if, while: ``[exec_time,
  power]``, positive) are errors.  Presets after Android's sample
  drivers: ``all``, ``float-fast``, ``float-slow``, ``quant``, ``minimal`` (and ``cpu``: ``all`` as
  a CPU device).  ``fp16`` (``"numerics": "fp16"``): the device computes a model relaxed with
  ``relaxComputationFloat32toFloat16`` in float16, as accelerators do: its partition's float32
  inputs, constants and every operation's result are rounded to float16 (products and sums
  inside an operation accumulate in float32: docs/decisions.md).  Other models, and devices
  without the option, compute in float32.
* ``NNAPI_PY_FAULTS``: ``device:kind[=value][@every=K|@from=N]`` separated by ``;`` — kinds
  ``compile-fail``, ``execute-fail``, ``timeout`` (MISSED_DEADLINE_TRANSIENT), ``deadline``
  (MISSED_DEADLINE_PERSISTENT), ``busy`` (RESOURCE_EXHAUSTED_TRANSIENT), ``dead`` (DEAD_OBJECT, and
  the device stays dead: every later compilation, execution and ``Device_wait``) and ``delay=MS``.
  Counting is per fault, over the compilations (``compile-fail``) or executions (the others) that
  reach the device: ``@every=3`` fires on the 3rd, 6th, ..., ``@from=2`` on every one from the 2nd,
  neither on every one.  Only ``delay`` takes a value (milliseconds >= 0); ``@every`` and
  ``@from`` take a count >= 1, one of them at most; ``,`` also separates faults.
* A malformed setting is one line on stderr (``nnapi_py: ignoring VAR='value': ... (expected
  FORM)``), once per process, and is ignored: the valid ones still apply.

``Compilation_create`` partitions a model as Android's runtime does: each operation goes to the
listed device that supports it with the best performance figure for the preference; operations
no listed device supports run on the runtime's own CPU implementation (not a listed device);
a partition whose device fails to compile, or an execution that fails on a device, falls back
to that CPU implementation, except missed deadlines, which are returned.  A compilation from
``createForDevices`` uses exactly the given devices and reports every fault's code.
``NNAPI_PY_TRACE=devices`` (or ``calls``/``all``) prints each partition and every injected fault.
Python code can change the settings with ``configure(...)`` or ``with emulated(...):``.

A feature-level library (``build/lib/feature-level-N/libneuralnetworks.so``, exporting only the
functions of levels <= N) behaves as level N without any variable: ``set_library_level(N)``,
called when it starts, makes N the default and the ceiling (``NNAPI_PY_FEATURE_LEVEL`` may
lower it; a higher value is clamped to N: the library cannot offer what it does not export).
"""
import contextlib
import json
import os
import sys
import threading
import time

from . import constants as C
from .errors import NNError, bad_data, say_once

TYPES = {"UNKNOWN": 0, "OTHER": 1, "CPU": 2, "GPU": 3, "ACCELERATOR": 4}
TYPE_NAMES = {v: k for k, v in TYPES.items()}
API_LEVEL_TO_FEATURE_LEVEL = {27: 1, 28: 2, 29: 3, 30: 4, 31: 5, 32: 5, 33: 6, 34: 7, 35: 8}
API_LEVEL = {1: 27, 2: 28, 3: 29, 4: 30, 5: 31, 6: 33, 7: 34, 8: 35}

_FLOATS = frozenset((C.TENSOR_FLOAT32, C.FLOAT32))
_QUANT = frozenset((C.TENSOR_QUANT8_ASYMM, C.TENSOR_QUANT8_ASYMM_SIGNED, C.TENSOR_QUANT8_SYMM,
                    C.TENSOR_QUANT16_ASYMM, C.TENSOR_QUANT16_SYMM))
_MINIMAL = frozenset(C.OPERATION_CODES[n] for n in (
    "ADD", "MUL", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "RELU", "RELU6", "LOGISTIC",
    "SOFTMAX", "RESHAPE", "CONCATENATION", "AVERAGE_POOL_2D", "MAX_POOL_2D"))
_CONTROL = {C.OPERATION_CODES["IF"]: "if", C.OPERATION_CODES["WHILE"]: "while"}

# preset -> (device type, what it supports, performance: class -> (execTime, powerUsage));
# lower is better, 1.0 is the CPU reference (the figures are ours, in the spirit of Android's
# sample drivers: a fast float GPU, a slow but frugal float device, a quantized accelerator)
PRESETS = {
    "all": ("ACCELERATOR", "all", {"float32": (1.1, 1.1), "quant8": (1.1, 1.1), "relaxed": (1.1, 1.1)}),
    "cpu": ("CPU", "all", {"float32": (1.0, 1.0), "quant8": (1.0, 1.0), "relaxed": (1.0, 1.0)}),
    "float-fast": ("GPU", "float32", {"float32": (0.8, 1.1), "relaxed": (0.7, 1.1)}),
    "float-slow": ("GPU", "float32", {"float32": (1.3, 0.7), "relaxed": (1.2, 0.6)}),
    "quant": ("ACCELERATOR", "quant", {"quant8": (0.7, 0.7)}),
    "minimal": ("ACCELERATOR", "minimal", {"float32": (0.4, 0.5), "quant8": (0.4, 0.5)}),
}
FAULT_KINDS = {"compile-fail": C.OP_FAILED, "execute-fail": C.OP_FAILED,
               "timeout": C.MISSED_DEADLINE_TRANSIENT, "deadline": C.MISSED_DEADLINE_PERSISTENT,
               "busy": C.RESOURCE_EXHAUSTED_TRANSIENT, "dead": C.DEAD_OBJECT, "delay": None}

NUMERICS = ("fp32", "fp16")     # how a device computes a relaxed float32 model

_trace = os.environ.get("NNAPI_PY_TRACE", "").strip().lower()
TRACE = _trace in ("devices", "calls", "all")


def trace(text):
    if TRACE:
        sys.stderr.write(f"nnapi_py: {text}\n")
        sys.stderr.flush()


class Device:
    """One device a client sees (an ANeuralNetworksDevice)."""

    def __init__(self, name, type_="CPU", level=8, version="nnapi_py-1.0", supports="all",
                 operations=None, performance=None, preset=None, numerics="fp32"):
        if numerics not in NUMERICS:
            raise ValueError(f"device {name!r}: numerics {numerics!r} (one of {', '.join(NUMERICS)})")
        self.numerics = numerics
        self.name = name
        self.type = TYPES[type_] if isinstance(type_, str) else int(type_)
        self.level = level
        self.version = version
        self.supports_kind = supports
        self.operations = None if operations is None else frozenset(
            C.OPERATION_CODES[o] if isinstance(o, str) else int(o) for o in operations)
        self.performance = dict(performance or PRESETS["cpu"][2])
        self.preset = preset
        self.dead = False
        self.name_c = self.version_c = None      # C strings, made by the ABI layer

    def __repr__(self):
        return f"<device {self.name}>"

    def why_not(self, op, model):
        """None if this device can run operation `op` of `model`, else the reason."""
        if op.op.unsupported:
            return op.op.unsupported
        if self.operations is not None and op.code not in self.operations:
            return f"{self.name} does not list {op.op.name}"
        if op.level > self.level:
            return f"{self.name} has feature level {self.level}, {op.op.name} with these operands needs {op.level}"
        kind = self.supports_kind
        if kind == "all":
            return None
        tensor_types = {model.types[i] for i in op.ins + op.outs if i is not None and model.types[i] > 2}
        if kind == "float32":
            if not tensor_types <= (_FLOATS | {C.TENSOR_INT32, C.TENSOR_BOOL8, C.INT32, C.BOOL, C.UINT32}):
                return f"{self.name} runs float32 operations only"
        elif kind == "quant":
            first = model.types[op.ins[0]] if op.ins else None
            if first not in _QUANT:
                return f"{self.name} runs quantized operations only"
        elif kind == "minimal":
            if op.code not in _MINIMAL:
                return f"{self.name} supports only a minimal set of operations"
        return None

    def cost(self, op, model, preference):
        cls = _CONTROL.get(op.code)
        if cls is None:
            first = model.types[op.ins[0]] if op.ins else C.TENSOR_FLOAT32
            cls = "quant8" if first in _QUANT else ("relaxed" if model.relaxed else "float32")
        exec_time, power = self.performance.get(cls, self.performance.get("float32", (1.0, 1.0)))
        return power if preference == C.PREFER_LOW_POWER else exec_time


class Fault:
    def __init__(self, device, kind, value=None, every=None, start=None):
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r} (one of {', '.join(FAULT_KINDS)})")
        self.device, self.kind, self.value, self.every, self.start = device, kind, value, every, start
        self.calls = 0
        self.phase = "compile" if kind == "compile-fail" else "execute"   # a dead device stays dead

    def fires(self):
        self.calls += 1
        n = self.calls
        if self.every:
            return n % self.every == 0
        if self.start:
            return n >= self.start
        return True

    def text(self):
        when = f"@every={self.every}" if self.every else (f"@from={self.start}" if self.start else "")
        val = f"={self.value}" if self.value is not None else ""
        return f"{self.device}:{self.kind}{val}{when}"


LIBRARY_LEVEL = None     # the level a feature-level-N library was built for (set_library_level)


def default_level():
    return LIBRARY_LEVEL or C.RUNTIME_FEATURE_LEVEL


class Config:
    def __init__(self, level=None, devices=None, faults=()):
        level = default_level() if level is None else min(level, default_level())
        self.level = level
        self.custom = devices is not None
        if devices is None:
            devices = [Device(C.DEVICE_NAME, "CPU", level, C.DEVICE_VERSION)]
        for d in devices:
            d.level = min(d.level, level)
        names = [d.name for d in devices]
        if len(set(names)) != len(names):
            raise ValueError("two devices have the same name")
        self.devices = devices
        self.faults = list(faults)
        for f in self.faults:
            if f.device not in names:
                raise ValueError(f"fault {f.text()} names no listed device")
        self.lock = threading.Lock()
        self.fallback = Device("nnapi_py-cpu-fallback", "CPU", level)

    @property
    def default(self):
        return not self.custom and not self.faults

    def by_name(self, name):
        for d in self.devices:
            if d.name == name:
                return d
        return None

    def fault(self, device, phase):
        """The first fault of `device` that fires for this call in `phase`, or None."""
        if not self.faults:
            return None
        with self.lock:
            if device.dead:
                return Fault(device.name, "dead")
            for f in self.faults:
                if f.device == device.name and f.phase == phase and f.fires():
                    if f.kind == "dead":
                        device.dead = True
                    trace(f"injected fault {f.text()} (call {f.calls} of {f.device}, {phase})")
                    return f
        return None


# ------------------------------------------------------------------------------ parsing
def parse_level(text):
    try:
        v = int(str(text).strip())
    except ValueError:
        v = None
    if v is not None and 1 <= v <= 8:
        return v
    if v in API_LEVEL_TO_FEATURE_LEVEL:
        return API_LEVEL_TO_FEATURE_LEVEL[v]
    raise ValueError(f"feature level {text!r}: expected 1..8 or an Android API level 27..35")


DEVICE_FORM = "name=preset[:TYPE][:level][:fp16],... or JSON (text, a file, or @file)"
FAULT_FORM = "device:kind[=value][@every=K|@from=N];..."
_DEVICE_KEYS = ("name", "preset", "type", "feature_level", "version", "operations", "performance", "numerics")
_PERFORMANCE_CLASSES = ("float32", "quant8", "relaxed", "if", "while")
_NAME_BAD_TEXT = ",;:=@{}[]\"'"
_NAME_BAD = set(" \t\n" + _NAME_BAD_TEXT)


def _device_name(name, text):
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"device {text!r}: a device needs a name (name=preset)")
    if _NAME_BAD & set(name):
        raise ValueError(f"device {text!r}: the name {name!r} has a space or one of {_NAME_BAD_TEXT}")
    return name


def _compact_device(text):
    """name=preset[:TYPE][:level][:fp16] as a JSON-form dict (each option once)."""
    name, eq, rest = text.partition("=")
    if not eq:
        raise ValueError(f"device {text!r} has no '=' (presets: {', '.join(PRESETS)})")
    parts = rest.split(":")
    spec = {"name": _device_name(name.strip(), text), "preset": parts[0].strip()}
    for p in parts[1:]:
        p = p.strip()
        if p.isdigit():
            key, value = "feature_level", int(p)
        elif p.lower() in NUMERICS:
            key, value = "numerics", p.lower()
        elif p.upper() in TYPES:
            key, value = "type", p.upper()
        else:
            raise ValueError(f"device {text!r}: option {p!r} is none of a device type ({', '.join(TYPES)}), a "
                             f"feature level (1..8 or 27..35) or {' / '.join(NUMERICS)}")
        if key in spec:
            raise ValueError(f"device {text!r}: two {key.replace('_', ' ')} options")
        spec[key] = value
    return spec


def device_from(spec):
    if isinstance(spec, Device):
        return spec
    text = spec
    if isinstance(spec, str):               # compact: name=preset[:TYPE][:level][:fp16]
        spec = _compact_device(spec.strip())
    if not isinstance(spec, dict):
        raise ValueError(f"device {text!r}: expected {DEVICE_FORM} (a JSON device is an object)")
    unknown = sorted(set(spec) - set(_DEVICE_KEYS))
    if unknown:
        raise ValueError(f"device {spec.get('name')!r}: unknown keys {unknown} (keys: {', '.join(_DEVICE_KEYS)})")
    preset = spec.get("preset", "all")
    if preset not in PRESETS:
        raise ValueError(f"device {spec.get('name')!r}: unknown preset {preset!r} (one of {', '.join(PRESETS)})")
    type_, supports, perf = PRESETS[preset]
    name = spec.get("name") or preset
    _device_name(name, name)
    perf = dict(perf)
    performance = spec.get("performance") or {}
    if not isinstance(performance, dict):
        raise ValueError(f"device {name!r}: performance is an object {{class: [exec_time, power]}}")
    for cls, v in performance.items():
        if cls not in _PERFORMANCE_CLASSES:
            raise ValueError(f"device {name!r}: performance class {cls!r} (one of {', '.join(_PERFORMANCE_CLASSES)})")
        try:
            pair = (float(v["exec_time"]), float(v["power"])) if isinstance(v, dict) else tuple(map(float, v))
        except (KeyError, TypeError, ValueError):
            pair = ()
        if len(pair) != 2 or not all(0 < x < float("inf") for x in pair):
            raise ValueError(f"device {name!r}: performance {cls!r} {v!r}: expected [exec_time, power] or "
                             f"{{\"exec_time\": t, \"power\": p}}, positive numbers")
        perf[cls] = pair
    level = parse_level(spec["feature_level"]) if "feature_level" in spec else C.RUNTIME_FEATURE_LEVEL
    dtype = spec.get("type", type_)
    if not isinstance(dtype, str) or dtype.upper() not in TYPES:
        raise ValueError(f"device {name!r}: type {dtype!r} (one of {', '.join(TYPES)})")
    operations = spec.get("operations")
    if operations is not None:
        if isinstance(operations, str) or not isinstance(operations, (list, tuple)):
            raise ValueError(f"device {name!r}: operations is a list of operation names or codes")
        for o in operations:
            if not (o in C.OPERATION_CODES if isinstance(o, str) else
                    isinstance(o, int) and not isinstance(o, bool) and 0 <= o < len(C.OPERATION_NAMES)):
                raise ValueError(f"device {name!r}: operations: {o!r} is no NNAPI operation (names as ADD, CONV_2D; "
                                 f"or codes 0..{len(C.OPERATION_NAMES) - 1})")
    version = spec.get("version", f"nnapi_py-{preset}-1.0")
    if not isinstance(version, str):
        raise ValueError(f"device {name!r}: version {version!r} is a string")
    numerics = spec.get("numerics", "fp32")
    if numerics not in NUMERICS:
        raise ValueError(f"device {name!r}: numerics {numerics!r} (one of {', '.join(NUMERICS)})")
    return Device(name, dtype.upper(), level, version, supports, operations, perf, preset, numerics)


def _count(spec, key, text):
    v = spec.get(key)
    if v is None or v == "":
        return None
    try:
        n = int(v) if not isinstance(v, bool) else None
    except (TypeError, ValueError):
        n = None
    if n is None or n < 1:
        raise ValueError(f"fault {text}: @{key} takes a call count from 1 (got {v!r})")
    return n


def fault_from(spec):
    if isinstance(spec, Fault):
        return spec
    text = spec
    if isinstance(spec, str):               # compact: device:kind[=value][@every=K|@from=N]
        text = repr(spec.strip())
        head, at, when = spec.strip().partition("@")
        dev, colon, kind = head.partition(":")
        if not colon or not dev.strip() or not kind.strip():
            raise ValueError(f"fault {text} is not device:kind (kinds: {', '.join(FAULT_KINDS)})")
        kind, eq, value = kind.partition("=")
        spec = {"device": dev.strip(), "kind": kind.strip()}
        if eq:
            spec["value"] = value.strip()
        for w in when.split("@") if at else ():
            k, eq, v = w.partition("=")
            k = k.strip()
            if k not in ("every", "from") or not eq:
                raise ValueError(f"fault {text}: @{w} is neither @every=K nor @from=N")
            if k in spec:
                raise ValueError(f"fault {text}: @{k} given twice")
            spec[k] = v.strip()
    elif isinstance(spec, dict):
        text = json.dumps(spec)
    else:
        raise ValueError(f"fault {spec!r}: expected {FAULT_FORM.rstrip(';.')} or a JSON object")
    unknown = set(spec) - {"device", "kind", "value", "every", "from"}
    if unknown:
        raise ValueError(f"fault {text}: unknown keys {sorted(unknown)} (keys: device, kind, value, every, from)")
    kind = spec.get("kind")
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r} in {text} (one of {', '.join(FAULT_KINDS)})")
    if not isinstance(spec.get("device"), str) or not spec["device"]:
        raise ValueError(f"fault {text}: name the device (device:kind)")
    value = spec.get("value")
    if kind == "delay":
        try:
            value = float(value) if value is not None and not isinstance(value, bool) else None
        except (TypeError, ValueError):
            value = None
        if value is None or not 0 <= value < float("inf"):
            raise ValueError(f"fault {text}: a delay fault needs a value in milliseconds, >= 0 (delay=50)")
    elif value is not None:
        raise ValueError(f"fault {text}: only delay takes a value ({kind} takes none)")
    every, start = _count(spec, "every", text), _count(spec, "from", text)
    if every is not None and start is not None:
        raise ValueError(f"fault {text}: @every and @from together (one or the other)")
    return Fault(spec["device"], kind, value, every, start)


def _load_json(text):
    """The JSON document a setting holds (text, a file path ending in .json or naming a file,
    @path), or None for the compact form."""
    text = text.strip()
    path = None
    if text.startswith("@"):
        path = text[1:].strip()
    elif not text.startswith(("{", "[")) and (text.endswith(".json") or os.path.isfile(text)):
        path = text
    if path is not None:
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise ValueError(f"cannot read {path}: {e.strerror}") from None
    elif not text.startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError(f"{'file ' + path if path else 'the text'} is not valid JSON ({e})") from None


def build(feature_level=None, devices=None, faults=None):
    """A Config from Python values or the settings' text forms."""
    level = parse_level(feature_level) if feature_level is not None else None
    devs = None
    fault_specs = []
    if isinstance(devices, str):
        doc = _load_json(devices)
        if doc is None:
            devices = [s for s in devices.split(",") if s.strip()]
        else:
            if isinstance(doc, dict):
                unknown = sorted(set(doc) - {"devices", "faults"})
                if unknown:
                    raise ValueError(f"unknown keys {unknown} (a JSON setting has \"devices\" and \"faults\")")
                fault_specs += list(doc.get("faults", []))
                devices = doc.get("devices", [])
            else:
                devices = doc
            if not isinstance(devices, list):
                raise ValueError("\"devices\" is a list of device objects")
    if devices is not None:
        if not isinstance(devices, (list, tuple)):
            raise TypeError(f"devices={devices!r}: expected {DEVICE_FORM}, or a list of device specs")
        devs = [device_from(d) for d in devices]
        if not devs:
            raise ValueError("the device list is empty")
    if isinstance(faults, str):
        faults = [s for s in faults.replace(",", ";").split(";") if s.strip()]
    elif faults is not None and not isinstance(faults, (list, tuple)):
        raise TypeError(f"faults={faults!r}: expected {FAULT_FORM}, or a list of fault specs")
    fault_specs += list(faults or ())
    return Config(level, devs, [fault_from(f) for f in fault_specs])


_ENV_FORMS = {       # variable -> (build()'s argument, the expected form, said when a value is refused)
    "NNAPI_PY_FEATURE_LEVEL": ("feature_level", "1..8 or an Android API level 27..35"),
    "NNAPI_PY_DEVICES": ("devices", DEVICE_FORM),
    "NNAPI_PY_FAULTS": ("faults", FAULT_FORM),
}


def _from_environment():
    """The Config the three variables describe.  A malformed one is named with its expected form
    and ignored; the valid ones still apply (faults naming a device no valid setting lists are
    ignored with that reason)."""
    given = {var: os.environ.get(var, "").strip() for var in _ENV_FORMS}
    given = {var: text for var, text in given.items() if text}
    args = {}
    for var, text in given.items():
        key, form = _ENV_FORMS[var]
        try:
            build(**{key: text}) if key != "faults" else [fault_from(f) for f in
                                                          text.replace(",", ";").split(";") if f.strip()]
            args[key] = text
        except (ValueError, KeyError, TypeError, OSError) as e:
            said = "" if "expected" in str(e) else f" (expected {form})"
            say_once(f"ignoring {var}={text!r}: {e}{said}")
    try:
        config = build(**args)
    except (ValueError, KeyError, TypeError, OSError) as e:       # the faults against the devices
        say_once(f"ignoring NNAPI_PY_FAULTS={given.get('NNAPI_PY_FAULTS', '')!r}: {e}")
        args.pop("faults", None)
        config = build(**args)
    sys.stderr.flush()
    return config


CONFIG = _from_environment()
_listeners = []     # called with the new Config after configure() (the ABI layer re-attaches)


def set_library_level(level):
    """Called once by the ABI layer when a feature-level-N library starts (0: the default
    library): N becomes the default and highest level; the settings are read again."""
    global LIBRARY_LEVEL, CONFIG
    if level and level != LIBRARY_LEVEL:
        LIBRARY_LEVEL = int(level)
        CONFIG = _from_environment()


def on_change(fn):
    _listeners.append(fn)


def configure(feature_level=None, devices=None, faults=None):
    """Replace the settings (for objects created from now on); returns the previous Config."""
    global CONFIG
    old, CONFIG = CONFIG, build(feature_level, devices, faults)
    for fn in _listeners:
        fn(CONFIG)
    return old


@contextlib.contextmanager
def emulated(feature_level=None, devices=None, faults=None):
    """``with emulated(feature_level=3, devices="gpu=float-fast", faults="gpu:execute-fail"):``"""
    global CONFIG
    old = configure(feature_level, devices, faults)
    try:
        yield CONFIG
    finally:
        CONFIG = old
        for fn in _listeners:
            fn(CONFIG)


# ------------------------------------------------------------------- feature-level checks
def level_text(level):
    return f"feature level {level} (Android API {API_LEVEL[level]})"


def check_level(needed, what):
    """Reject what needs a later feature level than the one emulated."""
    have = CONFIG.level
    if needed > have:
        raise bad_data(f"{what} needs {level_text(needed)}; this runtime behaves as "
                       f"{level_text(have)} (NNAPI_PY_FEATURE_LEVEL)")


# ------------------------------------------------------------------------- partitioning
FALLBACK = "fallback"     # Partition.before_run: run this execution on the CPU implementation


class Partition:
    """Which device runs each operation of a compilation, and the faults on the way."""

    def __init__(self, config, model, devices, preference):
        self.config = config
        self.explicit = devices is not None
        candidates = devices if devices is not None else config.devices
        self.assign = []
        for op in model.operations:
            ok = [d for d in candidates if d.why_not(op, model) is None]
            if not ok:
                self.assign.append(config.fallback)
            else:
                self.assign.append(min(ok, key=lambda d: d.cost(op, model, preference)))
        self.used = list(dict.fromkeys(self.assign))
        self.model = model
        if TRACE:
            trace("partition: " + ", ".join(f"operation {k} {op.op.name} -> {d.name}"
                                            for k, (op, d) in enumerate(zip(model.operations, self.assign))))

    def numerics(self, device):
        """How `device` computes this model: fp16 only for a relaxed model on an fp16 device."""
        return "fp16" if device.numerics == "fp16" and self.model.relaxed else "fp32"

    def fp16_operations(self):
        """The operations computed in float16 (as a set of ids, for the plan); traced per device."""
        if TRACE:
            for d in self.used:
                ks = [k for k, a in enumerate(self.assign) if a is d]
                trace(f"partition {d.name}: operations {ks}, numerics {self.numerics(d)}"
                      + (" (relaxed model)" if self.model.relaxed else ""))
        return frozenset(id(op) for op, d in zip(self.model.operations, self.assign)
                         if self.numerics(d) == "fp16")

    def compile(self):
        """Compile-time faults: raises for explicit device lists, else falls back to the CPU."""
        for d in list(self.used):
            if d is self.config.fallback:
                continue
            f = self.config.fault(d, "compile")
            if f is None:
                continue
            code = FAULT_KINDS[f.kind] or C.OP_FAILED
            if self.explicit:
                raise NNError(code, f"device {d.name} failed to compile its part of the model "
                                    f"(injected fault {f.text()})")
            self.assign = [self.config.fallback if a is d else a for a in self.assign]
            self.used = list(dict.fromkeys(self.assign))
            trace(f"partition of {d.name} falls back to the CPU implementation")

    def before_run(self, deadline):
        """Execution-time faults: None to run normally, FALLBACK to run this execution on the
        CPU implementation (float32), else (code, reason) to return."""
        for d in self.used:
            if d is self.config.fallback:
                continue
            f = self.config.fault(d, "execute")
            if f is None:
                continue
            if f.kind == "delay":
                time.sleep(f.value / 1000.0)
                if deadline is not None and time.monotonic_ns() > deadline:
                    return C.MISSED_DEADLINE_TRANSIENT, (f"the execution missed its deadline on {d.name} "
                                                         f"(injected {f.text()})")
                continue
            code = FAULT_KINDS[f.kind]
            reason = f"device {d.name} failed the execution (injected fault {f.text()})"
            if not self.explicit and code not in (C.MISSED_DEADLINE_TRANSIENT, C.MISSED_DEADLINE_PERSISTENT):
                trace(f"{reason}: the execution falls back to the CPU implementation")
                return FALLBACK
            return code, reason
        return None
