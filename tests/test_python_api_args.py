"""The Python API's arguments (issue 40, points 1 and 5): a shape given is the shape used -- an
array whose shape differs from the operand's is a ValueError naming the input, both shapes and
the fix, never bytes reinterpreted in row order; a missing or unknown input is said in Python
terms; every public function and method refuses a wrong argument with a TypeError / ValueError
naming the argument, the value and what is accepted.  Also the C message for an unknown
operation code (issue 40, point 6)."""
import os

import numpy as np
import pytest

import nnapi_py as nn
import nnhelp

pytestmark = nnhelp.needs_library


def add23(shape=(2, 3), out_shape=None):
    """y = x + 1 for an input declared `shape` (0: given at execution)."""
    m = nn.Model()
    x = m.input("x", nn.float32, shape)
    outputs = None if out_shape is None else [(nn.float32, out_shape)]
    m.output(m.op("ADD", x, np.ones(shape[-1], np.float32), 0, outputs=outputs), "y")
    return m.compile()


# ---- point 1: shapes --------------------------------------------------------------------------------
@pytest.mark.parametrize("run", ["sync", "async", "burst", "reusable", "reusable-later", "execution"])
def test_a_transposed_or_flat_array_is_refused_on_every_path(run):
    c = add23()
    good = np.arange(6, dtype=np.float32).reshape(2, 3)

    def go(a):
        if run == "sync":
            return c.run({"x": a})
        if run == "async":
            return c.run_async({"x": a})
        if run == "burst":
            return c.burst().run({"x": a})
        if run == "execution":
            return c.execution().run({"x": a})
        e = c.execution(reusable=True)
        if run == "reusable-later":
            e.run({"x": good})
        return e.run({"x": a})

    np.testing.assert_array_equal(go(good)["y"], good + 1)
    with pytest.raises(ValueError) as e:
        go(good.T.copy())
    if run == "reusable-later":     # later runs keep the first run's shapes
        assert "input 'x': shape (3, 2) differs from the bound (2, 3)" in str(e.value)
    else:
        assert str(e.value) == ("input 'x': array shape (3, 2) does not match the model's (2, 3); transpose or "
                                "reshape it yourself (a.T / a.reshape(2, 3))")
    with pytest.raises(ValueError, match=r"input 'x': .*shape \(6,\) (does not match the model's|differs from)"):
        go(good.reshape(6))
    with pytest.raises(ValueError, match=r"\(8,\)"):
        go(np.zeros(8, np.float32))


def test_shape_messages_name_the_fix():
    c = add23()
    with pytest.raises(ValueError, match=r"array shape \(6,\) does not match the model's \(2, 3\); reshape it "
                                         r"yourself \(a\.reshape\(2, 3\)\)$"):
        c.run({"x": np.zeros(6, np.float32)})
    with pytest.raises(ValueError, match=r"array shape \(8,\) does not match the model's \(2, 3\); it holds 8 values "
                                         r"where the model's input holds 6: pass an array of shape \(2, 3\)"):
        c.run({"x": np.zeros(8, np.float32)})
    with pytest.raises(ValueError, match=r"array shape \(\) does not match"):
        c.run({"x": 1.0})                       # a number is not broadcast
    m = nn.Model()                              # NCHW given to an NHWC input: the permutation
    x = m.input("img", nn.float32, (1, 4, 5, 3))
    m.output(m.op("RELU", x), "y")
    with pytest.raises(ValueError, match=r"input 'img': array shape \(1, 3, 4, 5\) does not match the model's "
                                         r"\(1, 4, 5, 3\); transpose or reshape it yourself "
                                         r"\(a\.transpose\(0, 2, 3, 1\) / a\.reshape\(1, 4, 5, 3\)\)"):
        m.compile().run({"img": np.zeros((1, 3, 4, 5), np.float32)})


def test_unknown_dimensions_come_from_the_array():
    c = add23((0, 3))
    for rows in (1, 2, 5, 2):
        a = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
        np.testing.assert_array_equal(c.run({"x": a})["y"], a + 1)
    with pytest.raises(ValueError, match=r"input 'x': array shape \(3, 2\) does not match the model's \(\?, 3\); "
                                         r"pass an array of rank 2 with dimension 1 = 3 \('\?': any size\)"):
        c.run({"x": np.zeros((3, 2), np.float32)})
    with pytest.raises(ValueError, match=r"array shape \(6,\) does not match the model's \(\?, 3\)"):
        c.run({"x": np.zeros(6, np.float32)})


def test_scalar_inputs_take_a_number():
    m2 = nn.Model()
    x2 = m2.input("x", nn.float32, (3,))
    beta = m2.input("beta", nn.scalar_float32, ())
    m2.output(m2.op("SOFTMAX", x2, beta), "y")
    c = m2.compile()
    assert c.run({"x": np.zeros(3, np.float32), "beta": 1.0})["y"].shape == (3,)
    with pytest.raises(ValueError, match=r"input 'beta': an array of shape \(1,\) was given for a scalar \(FLOAT32\); "
                                         r"pass a number or a 0-d array"):
        c.run({"x": np.zeros(3, np.float32), "beta": np.array([1.0], np.float32)})


def test_missing_and_unknown_inputs_in_python_terms():
    c = add23()
    with pytest.raises(ValueError) as e:
        c.run({})
    assert str(e.value) == ("input 'x' is missing: give it to run() (the model's inputs: ['x']); only an input that "
                            "feeds an optional operand may be left out, and this one feeds ADD input 0, which is "
                            "not optional")
    with pytest.raises(KeyError) as e:          # a KeyError (as a dict lookup) and a ValueError
        c.run({"z": np.zeros((2, 3), np.float32)})
    assert isinstance(e.value, ValueError)
    assert str(e.value) == "no model input named 'z' (the model's inputs: ['x'])"
    with pytest.raises(TypeError, match=r"inputs: a numpy array was given; expected a dict \{name: array\} or a list"):
        c.run(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"2 inputs given, the model has 1: \['x'\]"):
        c.run([np.zeros((2, 3), np.float32)] * 2)
    with pytest.raises(KeyError, match="no model output named 'w'"):
        c.run({"x": np.zeros((2, 3), np.float32)}, {"w": np.zeros((2, 3), np.float32)})


def test_output_arrays_have_the_results_shape():
    fixed = add23((2, 3), (2, 3))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    mine = np.zeros((2, 3), np.float32)
    np.testing.assert_array_equal(fixed.run({"x": x}, {"y": mine})["y"], x + 1)
    np.testing.assert_array_equal(mine, x + 1)                  # written in place
    for runner in (fixed.run, lambda i, o: fixed.execution(reusable=True).run(i, o)):
        for bad in (np.zeros((3, 2), np.float32), np.zeros(6, np.float32), np.zeros(8, np.float32)):
            with pytest.raises(ValueError, match=rf"output 'y': array shape \({bad.shape[0]},.*does not match the "
                                                 rf"model's \(2, 3\); pass an array of shape \(2, 3\)"):
                runner({"x": x}, {"y": bad})
            assert not bad.any()                # nothing written
    with pytest.raises(ValueError, match=r"output 'y': needs a C-contiguous, writeable float32 numpy array .*float64"):
        fixed.run({"x": x}, {"y": np.zeros((2, 3))})
    dyn = add23((0, 3))                         # a result shape known only after the run
    mine = np.zeros((2, 3), np.float32)
    np.testing.assert_array_equal(dyn.run({"x": x}, {"y": mine})["y"], x + 1)
    np.testing.assert_array_equal(mine, x + 1)
    bigger = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"output 'y': array shape \(4, 3\) does not match the result's \(2, 3\)"):
        dyn.run({"x": x}, {"y": bigger})
    assert not bigger.any()                     # the caller's array is left alone
    with pytest.raises(ValueError, match=r"output 'y': array shape \(6,\) does not match the model's \(\?, \?\)"):
        dyn.run({"x": x}, {"y": np.zeros(6, np.float32)})


def test_bind_checks_shapes():
    c = add23((2, 3), (2, 3))
    e = c.execution(reusable=True)
    with pytest.raises(ValueError, match=r"bind: input 'x': array shape \(3, 2\) does not match the model's \(2, 3\)"):
        e.bind({"x": np.zeros((3, 2), np.float32)})
    with pytest.raises(ValueError, match=r"bind: output 'y': array shape \(6,\) does not match the model's \(2, 3\)"):
        e.bind(outputs={"y": np.zeros(6, np.float32)})
    x = np.zeros((2, 3), np.float32)
    e.bind({"x": x})
    e.run()
    with pytest.raises(ValueError, match=r"input 'x': shape \(3,\) differs from the bound \(2, 3\)"):
        e.run({"x": np.ones(3, np.float32)})   # never broadcast into the bound array
    e2 = c.execution(reusable=True).bind({"x": x})
    with pytest.raises(ValueError, match=r"input 'x': array shape \(3,\) differs from the bound array's \(2, 3\)"):
        e2.run({"x": np.ones(3, np.float32)})
    assert not x.any()


def test_memory_inputs_are_checked():
    c = add23((2, 3), (2, 3))
    with pytest.raises(ValueError, match=r"input 'x': array shape \(3, 2\) does not match .*\(the Memory's array\)"):
        c.run({"x": nn.Memory(np.zeros((3, 2), np.float32))})
    with pytest.raises(ValueError, match=r"input 'x': the Memory holds int32 values, the model's input is float32"):
        c.run({"x": nn.Memory(np.zeros((2, 3), np.int32))})
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        import tempfile
        with tempfile.TemporaryFile() as f:
            f.truncate(32)
            mem = nn.Memory.from_fd(f.fileno(), 32, 1)
            with pytest.raises(ValueError, match=r"input 'x': the Memory holds 32 bytes, the model's input \(2, 3\) "
                                                 r"float32 takes 24"):
                c.run({"x": mem})
    finally:
        os.close(fd)
    dyn = add23((0, 3))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(dyn.run({"x": nn.Memory(a)})["y"], a + 1)   # its shape gives the dims


# ---- point 1: dtypes ---------------------------------------------------------------------------------
def test_dtype_rule():
    """Converted: bool -> integer -> float where exact, a narrower float, integers that fit;
    refused with both dtypes (or the value) named: anything that changes a value's meaning."""
    c = add23((3,), (3,))
    assert c.run({"x": [1, 2, 3]})["y"].tolist() == [2, 3, 4]                    # a list of ints
    assert c.run({"x": np.array([0.5, 1, 2])})["y"].tolist() == [1.5, 2, 3]       # float64 -> float32
    assert c.run({"x": np.array([True, False, True])})["y"].tolist() == [2, 1, 2]
    big = 2 ** 24 - 1                                                            # exact in float32
    assert c.run({"x": np.array([big, 0, -big])})["y"].tolist() == [big + 1, 1, 1 - big]
    with pytest.raises(ValueError, match=r"input 'x': int64 value 16777217 is not exact in float32 \(it would become "
                                         r"16777216\.0\)"):
        c.run({"x": np.array([2 ** 24 + 1, 0, 0])})
    with pytest.raises(ValueError, match="input 'x': complex128 values do not convert to float32 without loss"):
        c.run({"x": np.array([1j, 0, 0])})
    with pytest.raises(ValueError, match="input 'x': <U1 values do not convert to float32"):
        c.run({"x": np.array(["a", "b", "c"])})
    m = nn.Model()
    i = m.input("i", nn.int32, (2,))
    m.output(m.op("ADD", i, i, 0), "s")
    ci = m.compile()
    with pytest.raises(ValueError, match=r"input 'i': float32 values do not convert to int32 without loss .*"
                                         r"np\.round\(x\)\.astype\(np\.int32\)"):
        ci.run({"i": np.float32([1, 2])})
    assert ci.run({"i": np.uint8([200, 1])})["s"].tolist() == [400, 2]


# ---- point 5: every public function's arguments -----------------------------------------------------
def _model():
    m = nn.Model()
    x = m.input("x", nn.float32, (2,))
    m.output(m.op("ADD", x, x, 0), "y")
    return m


def test_model_input_accepts_dtype_names_and_numpy_dtypes():
    m = nn.Model()
    assert m.input("a", "float32", (2,)).type == nn.float32
    assert m.input("b", np.float16, 3).type == nn.float16              # an int shape is (n,)
    assert m.input("c", np.dtype("int32"), (1, 2)).type == nn.int32
    assert m.input("d", "bool", (2,)).type == nn.bool8
    assert m.input("e", np.bool_, (2,)).type == nn.bool8


@pytest.mark.parametrize("call, exc, message", [
    (lambda m: m.input("z", "uint8", (2,)), TypeError,
     r"input\(type='uint8'\): expected an nn type .* \(uint8 tensors are quantized in NNAPI: give the scale and zero "
     r"point, e\.g\. nn\.quant8_asymm\(\.\.\.\)\)"),
    (lambda m: m.input("z", np.float64, (2,)), TypeError, r"\(NNAPI has no float64 tensors\)"),
    (lambda m: m.input("z", "float", (2,)), TypeError, r"input\(type='float'\): expected an nn type"),
    (lambda m: m.input("z", nn.float32, (2, -1)), ValueError,
     r"input\('z', shape=\(2, -1\)\): dimension -1 is out of range \(0\.\.4294967295; 0, not -1, marks a dimension "
     r"given at execution\)"),
    (lambda m: m.input("z", nn.float32, (2.5,)), TypeError, r"dimension 2\.5 is not an integer"),
    (lambda m: m.input("z", nn.float32, "2,3"), TypeError, r"expected a sequence of dimensions"),
    (lambda m: m.input("", nn.float32, (2,)), TypeError, r"input\(name=''\): expected a non-empty str"),
    (lambda m: m.constant("abc"), TypeError, r"constant\(value='abc'\): expected a numpy array"),
    (lambda m: m.constant(np.zeros(2, np.float32), type="int8"), TypeError, r"constant\(type='int8'\)"),
    (lambda m: m.omitted("x"), TypeError, r"omitted\(type='x'\)"),
    (lambda m: m.op("ADD", m.input("a", nn.float32, (2,)), None, 0), TypeError, r"None is not an operand"),
    (lambda m: m.op("ADD", m.input("a", nn.float32, (2,)), "b", 0), TypeError, r"'b' is not an operand"),
    (lambda m: m.op("ADD", m.input("a", nn.float32, (2,)), 1.0, 0, outputs=nn.float32), TypeError,
     r"ADD: outputs=nn\.tensor_float32: expected a list of types"),
    (lambda m: m.op("ADD", m.input("a", nn.float32, (2,)), 1.0, 0, outputs=["complex"]), TypeError,
     r"ADD: outputs\[0\]=\'complex\'"),
    (lambda m: m.op("ADD", m.input("a", nn.float32, (2,)), 1.0, 0, names=[3]), TypeError, r"names=\[3\]"),
    (lambda m: m.op("TURBO", 1), ValueError, r"no NNAPI operation named 'TURBO'"),
    (lambda m: m.output("y"), TypeError, r"output\(operand='y'\): expected an Operand of this model"),
    (lambda m: m.output(nn.Model().input("o", nn.float32, (1,))), ValueError, r"belongs to another model"),
])
def test_model_methods_name_the_bad_argument(call, exc, message):
    with pytest.raises(exc, match=message):
        call(nn.Model())


def test_op_accepts_a_single_name():
    m = nn.Model()
    x = m.input("x", "float32", (2,))
    y = m.op("ADD", x, x, 0, names="sum")
    assert y.name == "sum"


@pytest.mark.parametrize("kwargs, exc, message", [
    (dict(preference="turbo"), ValueError,
     r"^preference='turbo': one of 'low_power', 'fast_single_answer', 'sustained_speed' \(or their codes 0, 1, 2\)$"),
    (dict(preference=7), ValueError, r"^preference=7: out of range; expected one of 'low_power'"),
    (dict(preference=1.0), TypeError, r"^preference=1\.0: expected one of"),
    (dict(priority="urgent"), ValueError, r"^priority='urgent': one of 'low', 'medium', 'high' \(or their codes"),
    (dict(priority=95), ValueError, r"^priority=95: one of 'low', 'medium', 'high' or their codes 90, 100, 110$"),
    (dict(timeout_ns=-1), ValueError,
     r"^timeout_ns=-1: out of range; expected an integer number of nanoseconds, 0\.\.2\*\*64-1 \(None: no timeout\)$"),
    (dict(timeout_ns=1.5), TypeError, r"^timeout_ns=1\.5: expected an integer number of nanoseconds"),
    (dict(timeout_ns=2 ** 64), ValueError, r"^timeout_ns=18446744073709551616: out of range"),
    (dict(cache_dir=123), TypeError, r"^cache_dir=123: expected a directory path \(str or os\.PathLike\)$"),
    (dict(cache_dir=""), ValueError, r"^cache_dir='': name a directory"),
    (dict(cache_dir="/tmp", token=b"short"), ValueError, r"^token: 5 bytes given, a caching token has 32"),
    (dict(cache_dir="/tmp", token="x" * 32), TypeError, r"^token='x+': expected 32 bytes"),
    (dict(token=bytes(32)), ValueError, r"^token= is the caching token: it goes with cache_dir=$"),
    (dict(devices=["nope"]), ValueError, r"^devices: no device named 'nope' \(the devices: \['nnapi_py-cpu'\]"),
    (dict(devices=[]), ValueError, r"^devices=\[\]: name at least one device"),
    (dict(devices=5), TypeError, r"^devices=5: expected a device name or a list of them"),
    (dict(devices=["nnapi_py-cpu", "nnapi_py-cpu"]), ValueError, r"a device is named twice"),
    (dict(devices=[None]), TypeError, r"None is not a device name"),
])
def test_compile_names_the_bad_argument(kwargs, exc, message):
    with pytest.raises(exc, match=message):
        _model().compile(**kwargs)


def test_compile_accepts_one_device_by_name_and_codes():
    name = nn.device_names()[0]
    c = _model().compile(devices=name, preference=0, priority=110, timeout_ns=10 ** 9)
    assert c.run({"x": np.ones(2, np.float32)})["y"].tolist() == [2, 2]
    c = _model().compile(devices=(name,), preference="sustained_speed", priority="low")
    assert c.run([np.ones(2, np.float32)])["y"].tolist() == [2, 2]


def test_execution_and_run_arguments():
    c = _model().compile()
    with pytest.raises(TypeError, match=r"^execution\(reusable='yes'\): expected True or False$"):
        c.execution(reusable="yes")
    with pytest.raises(TypeError, match=r"^execution\(measure_timing=1\): expected True or False$"):
        c.execution(measure_timing=1)
    with pytest.raises(ValueError, match=r"^execution\(timeout_ns=-5\): out of range"):
        c.execution(timeout_ns=-5)
    x = {"x": np.ones(2, np.float32)}
    with pytest.raises(ValueError, match=r"^mode='fast': one of 'sync', 'async', 'burst'$"):
        c.execution().run(x, mode="fast")
    with pytest.raises(TypeError, match=r"^burst=None: mode 'burst' needs the Burst"):
        c.execution().run(x, mode="burst")
    with pytest.raises(TypeError, match=r"^Burst\(compilation=1\): expected a Compilation"):
        nn.Burst(1)
    name = nn.device_names()[0]
    e = _model().compile(devices=[name]).execution(measure_timing=True)
    e.run(x)
    assert isinstance(e.duration("in_driver"), int)
    with pytest.raises(ValueError, match=r"^duration\(kind=7\): out of range; expected 0\.\.3 or one of 'on_hardware'"):
        e.duration(7)
    with pytest.raises(TypeError, match=r"^duration\(kind='x'\): expected 0\.\.3"):
        e.duration("x")


@pytest.mark.parametrize("call, exc, message", [
    (lambda: nn.quant8_asymm("0.5", 0), TypeError, r"^quant8_asymm\(scale='0\.5'\): expected a number"),
    (lambda: nn.quant8_asymm(0.5, 1.5), TypeError, r"^quant8_asymm\(zero_point=1\.5\): expected an integer$"),
    (lambda: nn.quant8_asymm_signed(None, 0), TypeError, r"^quant8_asymm_signed\(scale=None\)"),
    (lambda: nn.quant16_asymm(0.5, "1"), TypeError, r"^quant16_asymm\(zero_point='1'\)"),
    (lambda: nn.quant8_symm_per_channel(0.5), TypeError, r"^quant8_symm_per_channel\(scales=0\.5\): expected a "
                                                         r"sequence"),
    (lambda: nn.quant8_symm_per_channel([0.5], -1), ValueError, r"^quant8_symm_per_channel\(channel_dim=-1\)"),
    (lambda: nn.Model(name=3), TypeError, r"^Model\(name=3\): expected a non-empty str$"),
    (lambda: nn.Model(relaxed="no"), TypeError, r"^Model\(relaxed='no'\): expected True or False$"),
    (lambda: nn.Memory(), TypeError, r"^Memory: give an array .* not neither was given$"),
    (lambda: nn.Memory(np.zeros(2), size=16), TypeError, r"not both$"),
    (lambda: nn.Memory(size=0), ValueError, r"^Memory\(size=0\): out of range; expected a number of bytes >= 1$"),
    (lambda: nn.Memory([1, 2]), TypeError, r"^Memory\(array=list\): expected a numpy array$"),
    (lambda: nn.Memory(np.zeros(0)), ValueError, r"an empty array cannot be shared"),
    (lambda: nn.Memory.from_fd(-1, 8), ValueError, r"^Memory\.from_fd\(fd=-1\): out of range"),
    (lambda: nn.Memory.from_fd(0, 8, prot=4), ValueError, r"^Memory\.from_fd\(prot=4\): out of range; expected "
                                                          r"PROT_READ 1, PROT_WRITE 2 or both 3$"),
])
def test_constructors_name_the_bad_argument(call, exc, message):
    with pytest.raises(exc, match=message):
        call()


def test_quantized_scalars_still_reach_the_library():
    """Range rules (a scale of 0, a zero point out of range) stay the library's, with its reason."""
    with pytest.raises(nn.NNAPIError, match="scale"):
        nn.Model().input("q", nn.quant8_asymm(0.0, 0), (2,))
    assert nn.quant8_asymm(np.float32(0.5), np.int64(3)) == nn.quant8_asymm(0.5, 3)
    assert nn.quant8_asymm(1, 2.0).zero_point == 2          # an integral float is an integer


# ---- point 6: the C message for an unknown operation code --------------------------------------------
def test_unknown_operation_code_is_the_error_reported():
    """Android checks the code before the operand indices (ModelBuilder::addOperation): an
    unknown code is what is reported, whatever the lists hold; BAD_DATA as Android."""
    from nnapi_py import ffi, lib
    p = ffi.new("ANeuralNetworksModel**")
    assert lib.ANeuralNetworksModel_create(p) == 0
    try:
        t = ffi.new("ANeuralNetworksOperandType*", {"type": 3, "dimensionCount": 0, "dimensions": ffi.NULL})
        assert lib.ANeuralNetworksModel_addOperand(p[0], t) == 0
        ins, outs = ffi.new("uint32_t[]", [0, 0, 7]), ffi.new("uint32_t[]", [0])

        def reason(code):
            assert lib.ANeuralNetworksModel_addOperation(p[0], code, 3, ins, 1, outs) == 4     # BAD_DATA
            return ffi.string(lib.nnapi_py_last_error()).decode()
        assert reason(12345) == ("ANeuralNetworksModel_addOperation: unknown operation code 12345 (NNAPI's are "
                                 "0..105, OEM_OPERATION 10000 and extension types, which have a prefix in their upper "
                                 "16 bits)")
        assert reason(0x10001).startswith("ANeuralNetworksModel_addOperation: extension operation type 0x10001")
        assert reason(0) == ("ANeuralNetworksModel_addOperation: ADD: input 2 refers to operand 7, which is out of "
                             "range (model has 1 operands)")
        assert "operation operation" not in reason(12345)
    finally:
        lib.ANeuralNetworksModel_free(p[0])


@pytest.mark.parametrize("kwargs, exc, message", [
    (dict(devices=5), TypeError, r"^devices=5: expected name=preset\[:TYPE\]\[:level\]\[:fp16\],\.\.\. or JSON"),
    (dict(faults=5), TypeError, r"^faults=5: expected device:kind\[=value\]\[@every=K\|@from=N\];\.\.\."),
    (dict(devices="garbage"), ValueError, r"^device 'garbage' has no '='"),
    (dict(devices="gpu=all", faults="zzz"), ValueError, r"^fault 'zzz' is not device:kind"),
    (dict(feature_level="abc"), ValueError, r"^feature level 'abc': expected 1\.\.8 or an Android API level 27\.\.35$"),
])
def test_emulated_names_the_bad_setting(kwargs, exc, message):
    with pytest.raises(exc, match=message):
        with nn.emulated(**kwargs):
            pass
    assert nn.device_names() == ["nnapi_py-cpu"]        # the settings before stay
