"""Model inspection shared by the runtime (NNAPI_PY_DUMP: every finished model, from any client)
and the Python API (Model.summary / to_json / to_dot): one dict form, three renderings.

    {"operands": [{"index", "type", "dims", "scale", "zero_point", "name", "lifetime",
                   "value" (small constants)}],
     "operations": [{"index", "type", "inputs", "outputs"}], "inputs": [...], "outputs": [...]}
"""
import itertools
import json
import os
import shutil
import subprocess
import threading

import numpy as np

from . import constants as C

_SMALL = 16        # constants with at most this many elements are shown with their values


def model_dict(operands, operations, inputs, outputs, values, lifetimes=None):
    """operands: (type code, dims, scale, zero point, name); operations: (name, ins, outs);
    values: index -> array (constants)."""
    ins, outs = set(inputs), set(outputs)
    ops = []
    for k, (code, dims, scale, zp, name) in enumerate(operands):
        life = (lifetimes[k] if lifetimes else None) or (
            "input" if k in ins else "output" if k in outs else "constant" if k in values else "temporary")
        d = {"index": k, "type": C.TYPE_NAMES.get(code, str(code)), "dims": None if dims is None else list(dims),
             "scale": float(scale), "zero_point": int(zp), "name": name or f"t{k}", "lifetime": life}
        v = values.get(k)
        if isinstance(v, np.ndarray) and v.size <= _SMALL:
            d["value"] = v.reshape(-1).tolist() if v.ndim else v.item()
        ops.append(d)
    return {"operands": ops,
            "operations": [{"index": k, "type": n, "inputs": list(i), "outputs": list(o)}
                           for k, (n, i, o) in enumerate(operations)],
            "inputs": list(inputs), "outputs": list(outputs)}


def _type_text(o):
    q = f" (scale {o['scale']:g}, zp {o['zero_point']})" if o["scale"] or o["zero_point"] else ""
    dims = "[?]" if o["dims"] is None else "[" + ", ".join(str(d) if d else "?" for d in o["dims"]) + "]"
    return f"{o['type']}{dims if o['dims'] != [] else ''}{q}"


def summary(d):
    """A text table: one line per operation, then the model inputs and outputs."""
    ops = d["operands"]
    lines = [f"{'#':>3}  {'operation':<28} {'inputs':<44} outputs"]
    for op in d["operations"]:
        def name(i):
            o = ops[i]
            if "value" in o and o["lifetime"] == "constant" and o["dims"] == []:
                return f"{o['value']}"
            return o["name"]
        lines.append(f"{op['index']:>3}  {op['type']:<28} {', '.join(name(i) for i in op['inputs']):<44} "
                     f"{', '.join(ops[i]['name'] for i in op['outputs'])}")
    lines.append("inputs:  " + "; ".join(f"{ops[i]['name']}: {_type_text(ops[i])}" for i in d["inputs"]))
    lines.append("outputs: " + "; ".join(f"{ops[i]['name']}: {_type_text(ops[i])}" for i in d["outputs"]))
    lines.append(f"{len(d['operations'])} operations, {len(ops)} operands")
    return "\n".join(lines)


def to_json(d):
    return json.dumps(d, indent=1)


def _q(s):
    return '"' + str(s).replace('"', r'\"') + '"'


def to_dot(d):
    """Graphviz: operations as boxes, tensors as ellipses (constants grey, model inputs and
    outputs bold); scalar constants are folded into their operation's label."""
    ops = d["operands"]
    out = ["digraph model {", "  rankdir=TB; node [fontsize=10];"]
    shown = set()
    for op in d["operations"]:
        scalars = [str(ops[i].get("value", "")) for i in op["inputs"] if ops[i]["dims"] == [] and "value" in ops[i]]
        label = op["type"] + (f"\\n({', '.join(scalars)})" if scalars else "")
        out.append(f"  op{op['index']} [shape=box, style=filled, fillcolor=lightblue, label={_q(label)}];")
        for i in op["inputs"]:
            if ops[i]["dims"] == [] and "value" in ops[i]:
                continue
            shown.add(i)
            out.append(f"  t{i} -> op{op['index']};")
        for i in op["outputs"]:
            shown.add(i)
            out.append(f"  op{op['index']} -> t{i};")
    for i in sorted(shown):
        o = ops[i]
        style = {"constant": "style=filled, fillcolor=grey90", "input": "style=bold", "output": "style=bold"}.get(
            o["lifetime"], "")
        out.append(f"  t{i} [label={_q(o['name'] + chr(92) + 'n' + _type_text(o))}{', ' + style if style else ''}];")
    out.append("}")
    return "\n".join(out) + "\n"


def render_svg(dot_text):
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError("Graphviz is not installed (no `dot` on PATH): use to_dot() and render it elsewhere")
    return subprocess.run([exe, "-Tsvg"], input=dot_text, capture_output=True, text=True, check=True).stdout


# ---- NNAPI_PY_DUMP: every model a client finishes --------------------------------------------------
_counter = itertools.count()
_lock = threading.Lock()


def dump_runtime_model(model, lifetimes):
    """Write DIR/model-<pid>-<n>.json and .dot for a finished runtime Model when NNAPI_PY_DUMP=DIR
    (lifetimes: a name per operand)."""
    where = os.environ.get("NNAPI_PY_DUMP")
    if not where:
        return None
    values = {}
    for i, v in model.values.items():
        if isinstance(v, (bytes, bytearray)) and model.types[i] in C.DTYPES:
            a = np.frombuffer(bytes(v), C.DTYPES[model.types[i]])
            values[i] = a if model.dims[i] else a.reshape(())
    operands = [(model.types[i], model.dims[i], model.scales[i], model.zps[i], "") for i in range(len(model.types))]
    operations = [(C.OPERATION_NAMES[op.code] if 0 <= op.code < len(C.OPERATION_NAMES) else str(op.code),
                   op.ins, op.outs) for op in model.operations]
    d = model_dict(operands, operations, model.inputs, model.outputs, values, lifetimes)
    os.makedirs(where, exist_ok=True)
    with _lock:
        n = next(_counter)
    base = os.path.join(where, f"model-{os.getpid()}-{n}")
    with open(base + ".json", "w") as f:
        f.write(to_json(d))
    with open(base + ".dot", "w") as f:
        f.write(to_dot(d))
    return base
