"""Damaged .tflite files never blame nnapi_py (issue 40, point 4): the corpus models truncated at
random offsets, with random bytes flipped, with 4 bytes overwritten by large / negative values and
with regions zeroed -- a fixed seed -- each either loads cleanly (and then runs, or fails with a
clear NNAPI / load reason) or is refused with `LoadError: <file>: not a valid .tflite file: <what>`
(or a LoadError listing operators that cannot run).  Never an internal error, a hang or a crash.

The damaged files run in a child process (a crash would show as the child's death, naming the
file); NNAPI_PY_CORRUPT_FILES=N sets how many (default 1,000, on five small corpus models, about
30 s; with N above the default every corpus model up to 1.5 MB takes part).  Where LiteRT is
installed and accepts the same file, float outputs are compared with its reference kernels' (run
in a process of their own: LiteRT itself may abort on a damaged file) within the corpus
tolerance: a damaged weight changes both the same way.

Also: the CLI shows a damaged file as one line, exit 2; the schema the verifier checks offsets
with (nnapi_py/tflite/verify.py) agrees with the generated code of the `tflite` package and of
LiteRT."""
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

DEFAULT_FILES = 1000
# the small corpus models (tens of ms to load and run): a float MLP with a -1 batch, an int8 CNN, a GRU as a WHILE
# loop with hybrid weights, a float wake-word classifier -- twice each -- and a streaming int8 wake-word model with
# resource variables (half a second to compile: once in nine files)
SMALL = ("tflm_sine", "helia_tiny_cnn", "precise_vad", "oww_okay_nabu") * 2 + ("hey_jarvis",)
LARGE_LIMIT = 1_500_000         # NNAPI_PY_CORRUPT_FILES above the default: every corpus model up to 1.5 MB
SLOW = ("basic_pitch",)         # ... but this one (2 s to load and run)
KINDS = ("truncate", "flip", "overwrite", "zero")
SPECIAL = [0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, 0xFFFFFFFE, 0x40000000, 0x00010000, 0x0000FFFF, 0x7FFF, 0x100,
           0x1000000]


# -- the damage --------------------------------------------------------------------------------------
def data_regions(buf):
    """[(start, end)] of the buffers' data (weights): damage there changes values, not structure."""
    import tflite
    m = tflite.Model.GetRootAsModel(buf, 0)
    out = []
    for k in range(m.BuffersLength()):
        b = m.Buffers(k)
        if b.DataLength() > 64:
            o = b._tab.Vector(b._tab.Offset(4))
            out.append((o, o + b.DataLength()))
    return sorted(out)


def pick_offset(rng, n, regions, width=1):
    """An offset: three times in four outside the weights (the flatbuffer's tables), else anywhere."""
    for _ in range(50):
        at = int(rng.integers(0, max(1, n - width)))
        if rng.random() < 0.25 or not any(a <= at < b for a, b in regions):
            return at
    return at


def damage(buf, rng, regions, kind):
    b = bytearray(buf)
    n = len(b)
    if kind == "truncate":
        cut = int(rng.integers(0, n))
        return bytes(b[:cut]), f"truncated to {cut} of {n} bytes"
    if kind == "flip":
        where = []
        for _ in range(int(rng.integers(1, 5))):
            at = pick_offset(rng, n, regions)
            b[at] ^= int(rng.integers(1, 256))
            where.append(at)
        return bytes(b), f"bytes flipped at {where}"
    if kind == "overwrite":
        at = pick_offset(rng, n, regions, 4)
        at -= at % 4 if rng.random() < 0.7 else 0          # mostly aligned: offsets, lengths, indices
        v = SPECIAL[int(rng.integers(0, len(SPECIAL)))] if rng.random() < 0.6 else \
            (n + int(rng.integers(-16, 1 << 20))) & 0xFFFFFFFF if rng.random() < 0.5 else int(rng.integers(0, 1 << 32))
        b[at:at + 4] = int(v).to_bytes(4, "little")
        return bytes(b), f"4 bytes at {at} = {v:#x}"
    at = pick_offset(rng, n, regions)
    size = int(rng.integers(1, 257))
    b[at:at + size] = bytes(len(b[at:at + size]))
    return bytes(b), f"{size} bytes zeroed at {at}"


# -- one damaged file: what happens ------------------------------------------------------------------
def _inputs(m, rng):
    xs = []
    for i in m.inputs:
        shape = tuple(1 if d < 0 else d for d in i.shape)
        if i.dtype is None or int(np.prod(shape)) > 1 << 22:
            return None
        if np.issubdtype(i.dtype, np.floating):
            xs.append(rng.standard_normal(shape).astype(i.dtype))
        elif i.dtype == np.bool_:
            xs.append(rng.random(shape) < 0.5)
        else:
            info = np.iinfo(i.dtype)
            xs.append(rng.integers(max(info.min, -100), min(info.max, 100) + 1, shape).astype(i.dtype))
    return xs


class Reference:
    """LiteRT's reference kernels on a damaged file, in a process of their own: LiteRT may abort on
    a damaged file (a CHECK in a kernel's preparation), which is LiteRT's failure, not ours; the
    process is started again after it dies (`died` counts those files)."""

    def __init__(self):
        self.p = None
        self.died = 0

    def outputs(self, path, xs):
        """LiteRT's outputs, or None (LiteRT refuses the file, is not installed, or died on it)."""
        try:
            import ai_edge_litert  # noqa: F401
        except ImportError:
            return None
        if self.p is None or self.p.poll() is not None:
            self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--reference"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        np.savez(path + ".in.npz", *xs)
        try:
            self.p.stdin.write(path + "\n")
            self.p.stdin.flush()
            answer = self.p.stdout.readline().strip()
        except (BrokenPipeError, OSError):
            answer = ""
        os.unlink(path + ".in.npz")
        if answer != "ok":
            if answer == "":                    # it died on this file
                self.p.wait()
                self.died += 1
            return None
        with np.load(path + ".out.npz") as z:
            out = [z[f"arr_{i}"] for i in range(len(z.files))]
        os.unlink(path + ".out.npz")
        return out


def reference_server():
    """--reference: read a path per line, run LiteRT's reference kernels on it with the inputs in
    PATH.in.npz, write PATH.out.npz, answer "ok" (or "refused")."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    for line in sys.stdin:
        path = line.strip()
        try:
            with np.load(path + ".in.npz") as z:
                xs = [z[f"arr_{i}"] for i in range(len(z.files))]
            it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
            it.allocate_tensors()
            for d, x in zip(it.get_input_details(), xs):
                if tuple(d["shape"]) != x.shape:
                    raise ValueError("another input shape")
                it.set_tensor(d["index"], x)
            it.invoke()
            np.savez(path + ".out.npz", *[it.get_tensor(d["index"]) for d in it.get_output_details()])
            print("ok", flush=True)
        except Exception:                       # noqa: BLE001 -- LiteRT refuses the file
            print("refused", flush=True)


def _comparable(m):
    """(whether outputs can be held to the corpus tolerance, whether the model has hybrid weights).
    Every float constant must be finite and below 1e4 in magnitude: a damaged weight of 1e36
    overflows float32 arithmetic, and where that turns into inf depends on the order of the sums."""
    hybrid = False
    for t in (t for s in range(m.reader.n_graphs) for t in m.reader.graph(s).tensors):     # WHILE bodies too
        v = t.value
        if v is not None and v.dtype.kind == "f" and v.size and \
                (not np.all(np.isfinite(v)) or float(np.max(np.abs(v))) > 1e4):
            return False, False
        if v is not None and t.dtype in (np.int8, np.uint8) and t.scale:
            hybrid = True
    return True, hybrid and any(i.dtype == np.float32 for i in m.inputs)


def _reference_path(path, m):
    """For a model with hybrid weights (int8 weights, float activations): a copy of the file with
    the weights of the operators nnapi_py maps dequantized to float32 -- what NNAPI computes
    exactly (the corpus's rule, nnapi_py/testing/corpus.py float_weights) -- and those of operators left
    on LiteRT's hybrid kernels (a damaged scale NNAPI refuses; the bodies of a control-flow operator
    on the CPU) as they are; None when there is nothing to dequantize or LiteRT's object API refuses
    the file."""
    import tflite_writer
    from nnapi_py.tflite import compare
    cpu = {d.index for d in m.decisions if d.kind == "cpu"}
    bodies_on_cpu = any(m.graph.nodes[k].name in ("IF", "WHILE", "CALL_ONCE") for k in cpu)
    try:
        model = tflite_writer.read_object(path)
    except Exception:                           # noqa: BLE001
        return None
    out = path + ".float.tflite"
    if compare.float_weights(path, out) is None:            # the rule on every operator
        return None
    if not cpu:
        return out
    # operators on LiteRT keep their hybrid weights: the rule's float tensors only where an NNAPI operator reads them
    floats = tflite_writer.read_object(out)
    changed = False
    for s, (g, fg) in enumerate(zip(model.subgraphs, floats.subgraphs)):
        for k, op in enumerate(g.operators or []):
            if (s == 0 and k in cpu) or (s > 0 and bodies_on_cpu):
                continue
            for i in list(op.inputs if op.inputs is not None else [])[1:]:
                if i >= 0 and fg.tensors[i].type != g.tensors[i].type:      # dequantized by the rule
                    g.tensors[i] = fg.tensors[i]
                    model.buffers[fg.tensors[i].buffer] = floats.buffers[fg.tensors[i].buffer]
                    changed = True
    if not changed:
        os.unlink(out)
        return None
    return tflite_writer.write_object(model, out)


def outcome(path, seed, reference=None):
    """(class, detail) of loading and running a damaged file:
    invalid (LoadError: not a valid .tflite file), cannot-run (LoadError listing operators),
    ran, run-failed (a clear NNAPI / input error), not-run (inputs too large), internal (anything
    else: the test fails)."""
    import nnapi_py.tflite as T
    from nnapi_py import nn
    from nnapi_py.__main__ import _failure
    from nnapi_py.tflite.cpu import CpuRunError
    try:
        m = T.load(path)
    except T.LoadError as e:
        line = _failure(e)[1]
        if e.invalid is not None:
            ok = _failure(e)[0] == 2 and "not a valid .tflite file: " in line and "\n" not in line
            return ("invalid" if ok else "internal"), line
        return "cannot-run", line.splitlines()[1] if "\n" in line else line
    except nn.NNAPIError as e:
        return "load-nnapi-error", _failure(e)[1]
    except Exception as e:                      # noqa: BLE001 -- what the test exists to find
        import traceback
        return "internal", f"load: {type(e).__name__}: {e} | {traceback.format_exc()[-600:]}"
    rng = np.random.default_rng(seed)
    xs = _inputs(m, rng)
    if xs is None:
        return "not-run", "inputs too large or of no numpy type"
    try:
        got = m.run(xs)
    except (nn.NNAPIError, CpuRunError) as e:      # a clear reason: NNAPI's, or LiteRT's for a CPU partition
        return "run-failed", _failure(e)[1]
    except Exception as e:                      # noqa: BLE001
        import traceback
        return "internal", f"run: {type(e).__name__}: {e} | {traceback.format_exc()[-600:]}"
    comparable, hybrid = _comparable(m)
    if reference is None or not comparable:
        return "ran", ""
    # the corpus's tolerance (nnapi_py/tflite/compare.py): 1e-3 of max(1, max |ref|) against LiteRT's reference
    # kernels; a model with hybrid weights against them on its copy with the weights nnapi_py's NNAPI operations
    # dequantize dequantized, or within 2e-2 of LiteRT on the file itself (the corpus's two rules)
    refs = [(1e-3, _reference_path(path, m)), (2e-2, path)] if hybrid else [(1e-3, path)]
    worst = None
    for rtol, ref_path in refs:
        want = reference.outputs(ref_path, xs) if ref_path is not None else None
        if ref_path is not None and ref_path != path:
            os.unlink(ref_path)
        if want is None or len(want) != len(got):
            continue
        bad = _beyond(got, want, rtol)
        if bad is None:
            return "ran", "= LiteRT"
        worst = worst or bad
    return ("mismatch", worst) if worst else ("ran", "")


def _beyond(got, want, rtol):
    """None when every float output is within rtol * max(1, max |ref|) of LiteRT's, else what is not."""
    for g, w in zip(got, want):
        if w.dtype != np.float32 or g.size != w.size or not w.size or not np.all(np.isfinite(w)) or \
                not np.all(np.isfinite(g)):
            continue
        span = max(1.0, float(np.max(np.abs(w))))
        err = float(np.max(np.abs(g.reshape(w.shape).astype(np.float64) - w)))
        if err > rtol * span:
            return f"max abs {err:.3g} against LiteRT's reference kernels (bound {rtol * span:.3g})"
    return None


def worker(spec):
    """Child process: damage the files of `spec` and print one JSON line per file (a line before
    each file, so a crash names it)."""
    import signal
    from nnapi_py.testing import corpus
    models = corpus.models()
    rng = np.random.default_rng(spec["seed"])
    names = spec["models"]
    bufs = {n: open(models[n], "rb").read() for n in names}
    regions = {n: data_regions(bufs[n]) for n in names}
    tmp = spec["tmp"]

    def alarm(*_):
        raise TimeoutError("a damaged file took more than 60 s")
    signal.signal(signal.SIGALRM, alarm)
    reference = Reference() if spec.get("reference", True) else None
    for k in range(spec["start"], spec["stop"]):
        name = names[k % len(names)]
        kind = KINDS[(k // len(names)) % len(KINDS)]
        data, how = damage(bufs[name], rng, regions[name], kind)
        path = os.path.join(tmp, f"{k}_{name}.tflite")
        with open(path, "wb") as f:
            f.write(data)
        print(json.dumps({"k": k, "model": name, "kind": kind, "how": how, "start": True}), flush=True)
        t = time.time()
        signal.alarm(60)
        try:
            cls, detail = outcome(path, k, reference)
        except TimeoutError as e:
            cls, detail = "hang", str(e)
        signal.alarm(0)
        os.unlink(path)
        print(json.dumps({"k": k, "model": name, "kind": kind, "how": how, "class": cls, "detail": detail[:900],
                          "s": round(time.time() - t, 3)}), flush=True)


def run_fuzz(tmp_path, n, names, seed=40, chunk=None):
    """Outcomes of n damaged files (several children when chunk is given: each starts fresh)."""
    results, chunk = [], chunk or n
    for start in range(0, n, chunk):
        spec = {"seed": seed + start, "models": list(names), "start": start, "stop": min(n, start + chunk),
                "tmp": str(tmp_path)}
        p = subprocess.run([sys.executable, os.path.abspath(__file__), json.dumps(spec)], capture_output=True,
                           text=True, timeout=max(600, 5 * chunk))
        lines = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
        done = [r for r in lines if "class" in r]
        results += done
        if p.returncode != 0:
            last = lines[-1] if lines else {}
            results.append({**last, "class": "crash", "detail": f"the child died (exit {p.returncode}): "
                                                                  f"{p.stderr.strip()[-800:]}"})
    return results


def summary(results):
    counts = {}
    for r in results:
        counts[r["class"]] = counts.get(r["class"], 0) + 1
    return counts


BAD = ("internal", "crash", "hang", "mismatch")


def test_damaged_files_never_blame_nnapi_py(tmp_path):
    pytest.importorskip("tflite", reason="the tflite parser package is not installed")
    from nnapi_py.testing import corpus
    try:
        models = corpus.models()
    except corpus.Unavailable as e:
        pytest.skip(f"real-model corpus unavailable: {e}")
    n = int(os.environ.get("NNAPI_PY_CORRUPT_FILES", DEFAULT_FILES))
    names = [m for m in SMALL if m in models]
    if n > DEFAULT_FILES:
        names = sorted(m for m, p in models.items() if os.path.getsize(p) <= LARGE_LIMIT and m not in SLOW)
    t = time.time()
    results = run_fuzz(tmp_path, n, names, chunk=2000)
    counts = summary(results)
    by_kind = {}
    for r in results:
        by_kind.setdefault(r["kind"], {}).setdefault(r["class"], 0)
        by_kind[r["kind"]][r["class"]] += 1
    print(f"\n{len(results)} damaged files of {len(set(names))} models in {time.time() - t:.1f} s: {counts}")
    for kind, c in sorted(by_kind.items()):
        print(f"  {kind}: {c}")
    bad = [r for r in results if r["class"] in BAD]
    assert len(results) >= n, f"only {len(results)} of {n} files judged"
    assert not bad, "\n".join(f"{r['model']} ({r['how']}): {r['class']}: {r['detail']}" for r in bad[:10])
    assert counts.get("invalid", 0) > n // 4 and counts.get("ran", 0) > n // 20, counts


# -- the CLI and the reader on a damaged file ---------------------------------------------------------
def _truncated(tmp_path):
    from nnapi_py.testing import corpus
    try:
        src = corpus.models()["tflm_sine"]
    except (corpus.Unavailable, KeyError) as e:
        pytest.skip(f"real-model corpus unavailable: {e}")
    data = open(src, "rb").read()
    path = tmp_path / "truncated.tflite"
    path.write_bytes(data[:len(data) // 2])
    return path


@pytest.mark.parametrize("command", ["run", "show", "check"])
def test_cli_shows_a_damaged_file_as_one_line_exit_2(tmp_path, command):
    pytest.importorskip("tflite", reason="the tflite parser package is not installed")
    path = _truncated(tmp_path)
    args = {"run": ["run", str(path)], "show": ["show", str(path)], "check": ["run", str(path), "--check"]}[command]
    env = {k: v for k, v in os.environ.items() if k != "NNAPI_PY_TRACE"}
    p = subprocess.run([sys.executable, "-m", "nnapi_py", *args], capture_output=True, text=True, env=env,
                       timeout=300, cwd=os.path.dirname(HERE))
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert re.match(r"nnapi_py: truncated\.tflite: not a valid \.tflite file: .*past the end of the file", lines[0]), \
        lines[0]
    assert "internal error" not in lines[0]


def test_load_of_a_truncated_file_is_a_load_error(tmp_path):
    pytest.importorskip("tflite", reason="the tflite parser package is not installed")
    import nnapi_py.tflite as T
    path = _truncated(tmp_path)
    with pytest.raises(T.LoadError) as e:
        T.load(str(path))
    assert e.value.invalid and "not a valid .tflite file" in str(e.value)
    assert e.value.exit_code == 2


def _probe_schema(source):
    """{table: {slot: kind}} from flatc's generated Python (the accessors), offsets only."""
    K = {"Int8": "i8", "Uint8": "u8", "Bool": "u8", "Int16": "i16", "Uint16": "u16", "Int32": "i32",
         "Uint32": "u32", "Int64": "i64", "Uint64": "u64", "Float32": "f32", "Float64": "f64"}
    tables = {}
    for name, body in source:
        if "def Init(self, buf, pos)" not in body:
            continue
        fields = {}
        for m in re.finditer(r"def (\w+)\(self(, j)?\):\n        o = flatbuffers\.number_types\.UOffsetTFlags\."
                             r"py_type\(self\._tab\.Offset\((\d+)\)\)\n(.*?)(?=\n    # |\n    def |\ndef |\nclass |\Z)",
                             body, re.S):
            meth, j, off, b = m.group(1), m.group(2), int(m.group(3)), m.group(4)
            if meth.endswith(("AsNumpy", "Length", "IsNone")):
                continue
            if "self._tab.Union" in b:
                kind = "union"
            elif "self._tab.String" in b:
                kind = "[str]" if j else "str"
            elif "self._tab.Vector" in b:
                mm = re.search(r"(?:obj = (\w+)\(\)|from tflite\.(\w+) import)", b)
                kind = "[" + (mm.group(1) or mm.group(2)) + "]" if mm else \
                    "[" + K[re.search(r"number_types\.(\w+)Flags, a", b).group(1)] + "]"
            elif "Indirect" in b:
                mm = re.search(r"(?:obj = (\w+)\(\)|from tflite\.(\w+) import)", b)
                kind = mm.group(1) or mm.group(2)
            else:
                kind = K[re.search(r"number_types\.(\w+)Flags", b).group(1)]
            fields[(int(off) - 4) // 2] = kind
        tables[name] = fields
    return tables


def test_verifier_schema_matches_the_generated_code():
    """Every table with an offset field in the tflite package's and LiteRT's generated code is in
    verify.SCHEMA with the same fields (scalar-only tables may be left out: they are checked field
    by field against the file's end)."""
    tflite = pytest.importorskip("tflite", reason="the tflite parser package is not installed")
    from nnapi_py.tflite import verify
    d = os.path.dirname(tflite.__file__)
    sources = [("tflite", [(f[:-3], open(os.path.join(d, f)).read()) for f in sorted(os.listdir(d))
                           if f.endswith(".py") and not f.startswith("_")])]
    try:
        from ai_edge_litert import schema_py_generated as S
        parts = re.split(r"\nclass (\w+)\(object\):", open(S.__file__).read())
        sources.append(("LiteRT", [(parts[i], parts[i + 1]) for i in range(1, len(parts), 2)]))
    except ImportError:
        pass
    scalar = set(verify.SIZES)
    enums = [tflite]
    try:
        from ai_edge_litert import schema_py_generated as S
        enums.append(S)
    except ImportError:
        pass
    for (table, slot), (union, count, with_offsets) in verify.UNIONS.items():
        assert verify.SCHEMA[table][slot] == "union"
        for mod in enums:
            members = {v: k for k, v in vars(getattr(mod, union)).items() if not k.startswith("_")}
            assert count >= len(members), (union, count, len(members))     # every member the packages know
            for value, name in with_offsets.items():
                assert members.get(value, name) == name, (union, value, members.get(value), name)
    for origin, source in sources:
        for name, fields in _probe_schema(source).items():
            if all(k in scalar for k in fields.values()) and name not in verify.SCHEMA:
                continue
            assert name in verify.SCHEMA, f"{origin}: table {name} has offset fields {fields}; verify.SCHEMA lacks it"
            for slot, kind in fields.items():
                assert verify.SCHEMA[name].get(slot) == kind, (origin, name, slot, kind, verify.SCHEMA[name])


if __name__ == "__main__":
    if sys.argv[1] == "--reference":
        reference_server()
    else:
        worker(json.loads(sys.argv[1]))
