"""Compilation caching (issue 39, points 2 and 3): ANeuralNetworksCompilation_setCaching, the
Python API's compile(cache_dir=...) and the SL's cache fds store the finished plan; a later
compilation of the same model with the same token loads it.  Each stale case (model, constant
bytes, devices, options, library version), each damaged file (truncated, a byte flipped, random
bytes, another model's entry), an unwritable directory, threads and processes compiling with the
same token at once; results bit-identical with and without the cache; a C host; the conformance
runner's --cache mode on a subset.  nnapi_py/cache.py."""
import hashlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nnapi_py as nn
from nnapi_py import cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import nnhelp  # noqa: E402

pytestmark = nnhelp.needs_library

TOKEN = bytes(range(32))


def conv_model(seed=0, quant=False, scale=1.0):
    """A CONV_2D + DEPTHWISE + FULLY_CONNECTED network (float32 or quant8) whose constants are
    large enough to be referenced, not copied."""
    rng = np.random.default_rng(seed)
    m = nn.Model("cached")
    if quant:
        t_in = nn.quant8_asymm(0.05, 128)
        x = m.input("x", t_in, (1, 8, 8, 4))
        w = m.constant((rng.integers(0, 256, (16, 3, 3, 4))).astype(np.uint8), nn.quant8_asymm(0.02 * scale, 120))
        b = m.constant(rng.integers(-500, 500, 16).astype(np.int32), bias_type(0.05 * 0.02 * scale))
        y = m.op("CONV_2D", x, w, b, 1, 1, 1, 1, outputs=[nn.quant8_asymm(0.1, 100)])
        m.output(y, "y")
        return m
    x = m.input("x", nn.float32, (1, 8, 8, 4))
    w = m.constant(rng.standard_normal((16, 3, 3, 4)).astype(np.float32) * scale)
    b = m.constant(rng.standard_normal(16).astype(np.float32))
    y = m.op("CONV_2D", x, w, b, 1, 1, 1, 1)          # SAME padding, stride 1, RELU
    dw = m.constant(rng.standard_normal((1, 3, 3, 16)).astype(np.float32))
    db = m.constant(np.zeros(16, np.float32))
    z = m.op("DEPTHWISE_CONV_2D", y, dw, db, 1, 1, 1, 1, 0)
    r = m.op("RESHAPE", z, np.array([1, 8 * 8 * 16], np.int32), outputs=[(nn.float32, (1, 1024))])
    fw = m.constant(rng.standard_normal((10, 1024)).astype(np.float32))
    fb = m.constant(rng.standard_normal(10).astype(np.float32))
    m.output(m.op("FULLY_CONNECTED", r, fw, fb, 0), "y")
    return m


def bias_type(scale):
    from nnapi_py.nn import OperandType
    from nnapi_py import constants as C
    return OperandType(C.TENSOR_INT32, scale)


def status(c):
    """What the library's compilation cache did for nn.Compilation c."""
    from nnapi_py import _capi, ffi
    return _capi._comp(int(ffi.cast("uintptr_t", c.handle))).cache_status


def x_for(quant=False):
    rng = np.random.default_rng(42)
    if quant:
        return {"x": rng.integers(0, 256, (1, 8, 8, 4)).astype(np.uint8)}
    return {"x": rng.standard_normal((1, 8, 8, 4)).astype(np.float32)}


def entry(d, token=TOKEN):
    return os.path.join(str(d), cache.entry_name(token))


@pytest.mark.parametrize("quant", [False, True], ids=["float32", "quant8"])
def test_miss_then_hit_bit_identical(tmp_path, quant):
    ref = conv_model(quant=quant).compile().run(x_for(quant))["y"]
    c1 = conv_model(quant=quant).compile(cache_dir=str(tmp_path), token=TOKEN)
    assert status(c1).startswith("miss (no entry)") and "written" in status(c1), status(c1)
    assert os.path.getsize(entry(tmp_path)) > cache.HEADER_SIZE
    c2 = conv_model(quant=quant).compile(cache_dir=str(tmp_path), token=TOKEN)
    assert status(c2).startswith("hit"), status(c2)
    for c in (c1, c2):
        for run in (c.run, c.run_async, c.burst().run):
            assert run(x_for(quant))["y"].tobytes() == ref.tobytes()
    # many executions, executions in parallel: arenas of the loaded plan like a fresh one's
    outs = []
    nnhelp.in_threads(lambda k: outs.append(c2.run(x_for(quant))["y"].tobytes()), 4)
    assert outs == [ref.tobytes()] * 4


def test_default_token_from_content(tmp_path):
    a, b = conv_model(0), conv_model(1)
    assert a.cache_token() == conv_model(0).cache_token() != b.cache_token()
    assert status(a.compile(cache_dir=str(tmp_path))).startswith("miss")
    assert status(b.compile(cache_dir=str(tmp_path))).startswith("miss")      # its own entry
    assert status(conv_model(0).compile(cache_dir=str(tmp_path))).startswith("hit")
    assert status(conv_model(1).compile(cache_dir=str(tmp_path))).startswith("hit")
    assert len(os.listdir(tmp_path)) == 2


def compile_twice(d, first, second):
    """Compile first (writes), then second with the same token: second's status."""
    first(cache_dir=str(d), token=TOKEN)
    c = second(cache_dir=str(d), token=TOKEN)
    return c, status(c)


def test_stale_changed_model(tmp_path):
    m2 = conv_model(quant=True)
    c, s = compile_twice(tmp_path, conv_model().compile, m2.compile)
    assert s.startswith("stale (written for a different model)") and "written in" in s, s
    assert c.run(x_for(True))["y"].tobytes() == conv_model(quant=True).compile().run(x_for(True))["y"].tobytes()
    assert status(conv_model(quant=True).compile(cache_dir=str(tmp_path), token=TOKEN)).startswith("hit")


def test_stale_changed_constant_bytes(tmp_path):
    c, s = compile_twice(tmp_path, conv_model(scale=1.0).compile, conv_model(scale=0.5).compile)
    assert s.startswith("stale (written for a different model)"), s
    want = conv_model(scale=0.5).compile().run(x_for())["y"]
    assert c.run(x_for())["y"].tobytes() == want.tobytes()


def test_stale_different_device_and_options(tmp_path):
    dev = nn.device_names()[0]
    _, s = compile_twice(tmp_path, conv_model().compile, lambda **k: conv_model().compile(devices=[dev], **k))
    assert s.startswith("stale (written for different devices or options)"), s
    _, s = compile_twice(tmp_path, conv_model().compile, lambda **k: conv_model().compile(preference="low_power", **k))
    assert s.startswith("stale (written for different devices or options)"), s
    _, s = compile_twice(tmp_path, conv_model().compile, lambda **k: conv_model().compile(priority="high", **k))
    assert s.startswith("stale (written for different devices or options)"), s


def test_stale_library_version(tmp_path, monkeypatch):
    conv_model().compile(cache_dir=str(tmp_path), token=TOKEN)
    monkeypatch.setattr(cache, "_library", [])
    monkeypatch.setattr(cache, "version", lambda: "99.0")
    c = conv_model().compile(cache_dir=str(tmp_path), token=TOKEN)
    assert status(c).startswith("stale (written for a different library version)"), status(c)
    assert status(conv_model().compile(cache_dir=str(tmp_path), token=TOKEN)).startswith("hit")
    monkeypatch.undo()
    c = conv_model().compile(cache_dir=str(tmp_path), token=TOKEN)
    assert status(c).startswith("stale (written for a different library version)"), status(c)


def damaged(tmp_path, damage):
    """Write an entry, damage it, compile again: (status, the compilation); the entry is rewritten."""
    conv_model().compile(cache_dir=str(tmp_path), token=TOKEN)
    p = entry(tmp_path)
    with open(p, "rb") as f:
        data = bytearray(f.read())
    with open(p, "wb") as f:
        f.write(damage(data))
    c = conv_model().compile(cache_dir=str(tmp_path), token=TOKEN)
    s = status(c)
    assert c.run(x_for())["y"].tobytes() == conv_model().compile().run(x_for())["y"].tobytes()
    assert status(conv_model().compile(cache_dir=str(tmp_path), token=TOKEN)).startswith("hit")     # rewritten
    return s


def flip(k):
    def f(data):
        data[k % len(data)] ^= 0x10
        return data
    return f


@pytest.mark.parametrize("cut", [0.5, 0.999, 10, cache.HEADER_SIZE + 1])
def test_truncated(tmp_path, cut):
    s = damaged(tmp_path, lambda d: d[:int(len(d) * cut) if cut < 1 else cut])
    assert s.startswith("corrupt (") and ("truncated" in s or "shorter than the header" in s), s


def test_empty_file_is_a_miss(tmp_path):
    assert damaged(tmp_path, lambda d: b"").startswith("miss (empty file)")


def test_longer_than_its_header(tmp_path):
    assert damaged(tmp_path, lambda d: d + b"x").startswith("corrupt (")


@pytest.mark.parametrize("where", ["payload", "last byte", "pickle", "length field", "checksum field", "padding",
                                   "format field"])
def test_byte_flipped(tmp_path, where):
    at = {"payload": -1000, "last byte": -1, "pickle": 128 + 16 + 40, "length field": 108, "checksum field": 116,
          "padding": 124, "format field": 8}[where]
    s = damaged(tmp_path, flip(at))
    assert s.startswith("stale (format" if where == "format field" else "corrupt ("), s


def test_key_byte_flipped_is_stale(tmp_path):
    assert damaged(tmp_path, flip(12)).startswith("stale (written for a different model)")


def test_foreign_files(tmp_path):
    rnd = np.random.default_rng(0).integers(0, 256, 100000, dtype=np.uint8).tobytes()
    assert damaged(tmp_path, lambda d: rnd).startswith("foreign (not a cache file")
    assert damaged(tmp_path, lambda d: b"NNPYCAC1" + rnd).startswith("stale (format")
    # another model's entry under this token: its key says so
    conv_model(quant=True).compile(cache_dir=str(tmp_path), token=b"\1" * 32)
    with open(entry(tmp_path, b"\1" * 32), "rb") as f:
        other = f.read()
    assert damaged(tmp_path, lambda d: other).startswith("stale (written for a different model)")


@pytest.mark.parametrize("call", ["os.system", "numpy.load"])
def test_consistent_but_crafted_payload_is_refused(tmp_path, call):
    """A file whose header, key and checksum are right but whose payload names a callable the
    unpickler does not allow (os.system, numpy's file I/O): refused, compiled afresh, nothing run."""
    import pickle

    class Evil:
        def __reduce__(self):
            if call == "numpy.load":
                return (np.load, (str(tmp_path / "pwned.npy"), None, True))
            return (os.system, ("touch " + str(tmp_path / "pwned"),))
    c = conv_model().compile(cache_dir=str(tmp_path), token=TOKEN)
    from nnapi_py import _capi, ffi
    rc = _capi._comp(int(ffi.cast("uintptr_t", c.handle)))
    key = cache.key(rc, ())
    with open(entry(tmp_path), "wb") as f:
        for part in cache.pack(key, pickle.dumps(Evil(), protocol=5), []):
            f.write(part)
    c = conv_model().compile(cache_dir=str(tmp_path), token=TOKEN)
    assert status(c).startswith("corrupt (cannot read the plan: UnpicklingError"), status(c)
    assert not (tmp_path / "pwned").exists()


def test_unwritable_directory(tmp_path):
    afile = tmp_path / "a_file"
    afile.write_text("not a directory")
    for d in (str(afile / "sub"), str(tmp_path / "missing" / "dir")):
        c = conv_model().compile(cache_dir=d, token=TOKEN)
        assert "not written" in status(c), status(c)
        assert c.run(x_for())["y"].tobytes() == conv_model().compile().run(x_for())["y"].tobytes()
    if os.geteuid() != 0:               # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        try:
            c = conv_model().compile(cache_dir=str(ro), token=TOKEN)
            assert "not written" in status(c) and not os.listdir(ro)
        finally:
            ro.chmod(0o700)


def test_threads_same_token(tmp_path):
    models = [conv_model(0), conv_model(1)]
    want = [m.compile().run(x_for())["y"].tobytes() for m in models]
    errors = []

    def work(k):
        try:
            for r in range(6):
                j = (k + r) % 2             # the two models alternate: entries replaced all the time
                c = models[j].compile(cache_dir=str(tmp_path), token=TOKEN)
                assert c.run(x_for())["y"].tobytes() == want[j]
        except BaseException as e:
            errors.append(e)
    nnhelp.in_threads(work, 4)
    assert not errors, errors
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp")] == []


PROC = textwrap.dedent("""
    import sys, numpy as np
    sys.path[:0] = [{root!r}, {tests!r}]
    import test_caching as T
    d, rounds, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    models = [T.conv_model(0), T.conv_model(1, quant=False, scale=0.5)]
    want = [m.compile().run(T.x_for())["y"].tobytes() for m in models]
    seen = set()
    for r in range(rounds):
        j = (k + r) % 2
        c = models[j].compile(cache_dir=d, token=T.TOKEN)
        assert c.run(T.x_for())["y"].tobytes() == want[j], (r, T.status(c))
        seen.add(T.status(c).split(" ")[0])
    print(" ".join(sorted(seen)))
""")


def test_processes_same_token(tmp_path):
    """Two processes compiling two models under one token at once, many rounds: every result
    right, every file read whole or refused, never a crash or a torn file."""
    script = tmp_path / "proc.py"
    script.write_text(PROC.format(root=ROOT, tests=os.path.join(ROOT, "tests")))
    d = tmp_path / "cache"
    d.mkdir()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env.pop("NNAPI_PY_TRACE", None)
    ps = [subprocess.Popen([sys.executable, str(script), str(d), "25", str(k)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env) for k in range(2)]
    outs = [p.communicate(timeout=300) for p in ps]
    for p, (out, err) in zip(ps, outs):
        assert p.returncode == 0, err[-3000:]
    assert [f for f in os.listdir(d) if f.endswith(".tmp")] == []
    kinds = set(" ".join(o for o, _ in outs).split())
    assert kinds <= {"hit", "miss", "stale"}, kinds        # never "corrupt": no torn file was seen
    c = conv_model(0).compile(cache_dir=str(d), token=TOKEN)
    assert status(c).split(" ")[0] in ("hit", "stale")


def test_cache_fds(tmp_path):
    """The SL's setCachingFromFds: the duplicated fds kept on the compilation
    (compilation.cache_fds); the entry is written into the model cache fd and read from it."""
    from nnapi_py import _capi, ffi, sl
    from nnapi_py.compilation import Compilation
    m = conv_model()
    m._finish()
    rm = _capi._model(int(ffi.cast("uintptr_t", m.handle)))
    mfd = os.open(tmp_path / "model.cache", os.O_RDWR | os.O_CREAT)
    dfd = os.open(tmp_path / "data.cache", os.O_RDWR | os.O_CREAT)
    try:
        got = []
        for _ in range(2):
            c = Compilation(rm)
            sl.record_cache_fds(c, [os.dup(mfd)], [os.dup(dfd)], TOKEN)
            c.finish()
            got.append(c.cache_status)
        assert got[0].startswith("miss (empty file)") and got[1].startswith("hit"), got
        assert os.path.getsize(tmp_path / "model.cache") > cache.HEADER_SIZE
        assert os.path.getsize(tmp_path / "data.cache") == 0        # one file holds the entry
    finally:
        os.close(mfd)
        os.close(dfd)


def test_trace_and_profile_say_it(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{ROOT!r}, {os.path.join(ROOT, "tests")!r}]
        import test_caching as T
        for _ in range(2):
            T.conv_model().compile(cache_dir={str(tmp_path)!r}, token=T.TOKEN)
    """)
    env = dict(os.environ, NNAPI_PY_TRACE="1", NNAPI_PY_PROFILE="1")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "compilation cache" in ln]
    assert any("compilation cache miss (no entry)" in ln for ln in lines), p.stderr
    assert any("compilation cache hit" in ln for ln in lines), p.stderr
    assert "nnapi_py profile (NNAPI_PY_PROFILE)" in p.stderr


C_HOST = r"""
#include <stdio.h>
#include <string.h>
#include <android/NeuralNetworks.h>
int main(int argc, char** argv) {
    ANeuralNetworksModel* m; ANeuralNetworksCompilation* c; ANeuralNetworksExecution* e;
    static float w[64 * 64];
    for (int k = 0; k < 64 * 64; k++) w[k] = (float)((k * 37) % 101) / 50.0f - 1.0f;
    static float b[64];
    for (int k = 0; k < 64; k++) b[k] = (float)k / 64.0f;
    uint32_t d2[2] = {1, 64}, dw[2] = {64, 64}, d1[1] = {64};
    ANeuralNetworksOperandType tx = {ANEURALNETWORKS_TENSOR_FLOAT32, 2, d2, 0, 0};
    ANeuralNetworksOperandType tw = {ANEURALNETWORKS_TENSOR_FLOAT32, 2, dw, 0, 0};
    ANeuralNetworksOperandType tb = {ANEURALNETWORKS_TENSOR_FLOAT32, 1, d1, 0, 0};
    ANeuralNetworksOperandType ti = {ANEURALNETWORKS_INT32, 0, NULL, 0, 0};
    int32_t act = 1;
    if (ANeuralNetworksModel_create(&m)) return 10;
    ANeuralNetworksModel_addOperand(m, &tx);
    ANeuralNetworksModel_addOperand(m, &tw);
    ANeuralNetworksModel_addOperand(m, &tb);
    ANeuralNetworksModel_addOperand(m, &ti);
    ANeuralNetworksModel_addOperand(m, &tx);
    ANeuralNetworksModel_setOperandValue(m, 1, w, sizeof w);
    ANeuralNetworksModel_setOperandValue(m, 2, b, sizeof b);
    ANeuralNetworksModel_setOperandValue(m, 3, &act, sizeof act);
    uint32_t ins[4] = {0, 1, 2, 3}, out[1] = {4}, mi[1] = {0};
    if (ANeuralNetworksModel_addOperation(m, ANEURALNETWORKS_FULLY_CONNECTED, 4, ins, 1, out)) return 11;
    ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, mi, 1, out);
    if (ANeuralNetworksModel_finish(m)) return 12;
    uint8_t token[ANEURALNETWORKS_BYTE_SIZE_OF_CACHE_TOKEN];
    memset(token, 5, sizeof token);
    if (ANeuralNetworksCompilation_create(m, &c)) return 13;
    if (ANeuralNetworksCompilation_setCaching(c, argv[1], token)) return 14;
    if (ANeuralNetworksCompilation_finish(c)) return 15;
    float x[64], y[64];
    for (int k = 0; k < 64; k++) x[k] = (float)(k % 7) - 3.0f;
    if (ANeuralNetworksExecution_create(c, &e)) return 16;
    ANeuralNetworksExecution_setInput(e, 0, NULL, x, sizeof x);
    ANeuralNetworksExecution_setOutput(e, 0, NULL, y, sizeof y);
    if (ANeuralNetworksExecution_compute(e)) return 17;
    const unsigned char* p = (const unsigned char*)y;
    for (size_t k = 0; k < sizeof y; k++) printf("%02x", p[k]);
    printf("\n");
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    ANeuralNetworksModel_free(m);
    return 0;
}
"""


def test_c_host(tmp_path):
    """A C program (the library starts its own interpreter): the first process writes the
    entry, the second loads it; the same output bytes."""
    import shutil
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    src = tmp_path / "host.c"
    src.write_text(C_HOST)
    exe = tmp_path / "host"
    libdir = os.path.dirname(nn.library_path())
    subprocess.run([cc, "-O1", str(src), "-o", str(exe), "-I" + nn.include_dir(), "-L" + libdir,
                    "-lneuralnetworks", "-Wl,-rpath," + libdir], check=True)
    d = tmp_path / "cache"
    d.mkdir()
    env = dict(os.environ, NNAPI_PY_TRACE="1")
    env.pop("NNAPI_PY_LIB", None)
    runs = [subprocess.run([str(exe), str(d)], capture_output=True, text=True, env=env, timeout=120)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, (r.returncode, r.stderr)
    assert "compilation cache miss (no entry)" in runs[0].stderr, runs[0].stderr
    assert "compilation cache hit" in runs[1].stderr, runs[1].stderr
    assert runs[0].stdout == runs[1].stdout and len(runs[0].stdout.strip()) == 64 * 8
    assert len(os.listdir(d)) == 1


def test_conformance_subset_in_cache_mode(tmp_path, capfd, monkeypatch):
    """The conformance runner's --cache mode (nnapi_py/testing/cts.py) on a subset: every compilation
    twice, the second (the one run) from the cache; all pass, and every second compilation was a hit."""
    from nnapi_py.testing import cts
    if not cts.cts_available(cts.default_cts_dir()):
        pytest.skip(cts.skip_message(cts.default_cts_dir()))
    monkeypatch.setenv("NNAPI_PY_TRACE", "1")
    # and the operations with small-tensor kernels (bound C methods such as np.add.reduce, which
    # pickle would write as builtins.getattr: every such entry was once refused as corrupt)
    res = cts.run(ops=["CONV_2D", "FULLY_CONNECTED", "WHILE", "IF", "LSTM", "ADD", "MUL", "SOFTMAX",
                       "AVERAGE_POOL_2D", "MEAN", "REDUCE_ANY", "GATHER", "DEPTHWISE_CONV_2D"],
                  modes=("sync",),
                  cache_dir=str(tmp_path))
    err = capfd.readouterr().err
    assert res.failed == 0, res.failure_report()
    hits = err.count("compilation cache hit")
    misses = err.count("compilation cache miss")
    assert hits == misses > 100, (hits, misses)


def test_cli_run_cache(tmp_path):
    """python -m nnapi_py run MODEL.tflite --cache DIR: the second run loads the compiled plan."""
    pytest.importorskip("tflite", reason="the tflite parser package is not installed")
    import tflite_writer
    f32 = np.float32
    rng = np.random.default_rng(3)
    model = tflite_writer.write(str(tmp_path / "conv.tflite"),
                                [("x", f32, (1, 8, 8, 3), None), ("w", f32, (8, 3, 3, 3), rng.standard_normal((8, 3, 3, 3))),
                                 ("b", f32, (8,), rng.standard_normal(8)), ("y", f32, (1, 8, 8, 8), None)],
                                [("CONV_2D", [0, 1, 2], [3], ("Conv2DOptions", {"Padding": 0, "StrideW": 1,
                                                                                "StrideH": 1}))], [0], [3])
    d = tmp_path / "cache"
    env = dict(os.environ, NNAPI_PY_TRACE="1")
    runs = [subprocess.run([sys.executable, "-m", "nnapi_py", "run", model, "--cache", str(d), "--save",
                            str(tmp_path / f"out{k}")], capture_output=True, text=True, env=env, cwd=ROOT,
                           timeout=300) for k in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert "compilation cache miss (no entry)" in runs[0].stderr, runs[0].stderr
    assert "compilation cache hit" in runs[1].stderr, runs[1].stderr
    assert runs[0].stdout == runs[1].stdout
    a, b = (sorted(os.listdir(tmp_path / f"out{k}")) for k in range(2))
    assert a == b and a
    for f in a:
        assert (tmp_path / "out0" / f).read_bytes() == (tmp_path / "out1" / f).read_bytes()


def relaxed_model():
    m = conv_model()
    m.relaxed = True
    return m


@pytest.mark.parametrize("setting", [dict(devices="gpu=float-fast:fp16"), dict(feature_level=4),
                                     dict(devices="gpu=float-slow,dsp=quant")])
def test_emulated_devices_and_levels(tmp_path, setting):
    """Partitions (a float16 device, several devices) and emulated levels: the entry is keyed by
    them, loaded under the same setting, stale under another, results bit-identical."""
    with nn.emulated(**setting):
        want = relaxed_model().compile().run(x_for())["y"].tobytes()
        c1 = relaxed_model().compile(cache_dir=str(tmp_path), token=TOKEN)
        c2 = relaxed_model().compile(cache_dir=str(tmp_path), token=TOKEN)
        assert status(c1).startswith("miss") and status(c2).startswith("hit"), (status(c1), status(c2))
        assert c1.run(x_for())["y"].tobytes() == want == c2.run(x_for())["y"].tobytes()
    c3 = relaxed_model().compile(cache_dir=str(tmp_path), token=TOKEN)
    assert status(c3).startswith("stale (written for different devices or options)"), status(c3)
