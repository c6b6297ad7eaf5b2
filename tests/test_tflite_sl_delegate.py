"""TensorFlow Lite's real NNAPI delegate on our library loaded by path, as an NNAPI Support Library
(issue 39).

Needs TFLite 2.8's benchmark_model and tools/tflite_sl/sl_client built from source by
tools/tflite_sl/build.sh (about an hour on two cores, so outside `make test`); the build directory
is $NNAPI_PY_TFLITE_BUILD, else ../tflite_build next to this checkout.  Without it every test skips
and says how to build.  docs/support_library.md describes the build and the measured results.

- benchmark_model --use_nnapi=true --nnapi_support_library_path=build/lib/libneuralnetworks.so
  --require_full_delegation=true on corpus models: TFLite's own loader (tflite::nnapi::
  loadNnApiSupportLibrary) dlopens us by path, the delegate takes every node into one partition,
  and the benchmark runs.  build/lib is not on LD_LIBRARY_PATH, so nothing reaches us by name.
- sl_client, the same delegate both ways on the same fixed inputs: through the Support Library
  table (--sl PATH) and linked the classic way (--direct: the delegate's default NnApi dlopens
  "libneuralnetworks.so", found through LD_LIBRARY_PATH=build/lib).  Both delegate every node to
  one partition, and their outputs are bit-identical: the two paths hand our runtime the same
  model, and our kernels are deterministic.  TFLite's own kernels (--cpu) on the same inputs are
  checked against the delegated outputs with the package's comparison policy.
"""
import os
import pathlib
import re
import subprocess

import pytest

from nnapi_py.testing import corpus

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIB = ROOT / "build" / "lib" / "libneuralnetworks.so"
BUILD = pathlib.Path(os.environ.get("NNAPI_PY_TFLITE_BUILD", ROOT.parent / "tflite_build"))
BENCHMARK = BUILD / "tflite" / "tools" / "benchmark" / "benchmark_model"
CLIENT = BUILD / "sl_client"
HOW = (f"TFLite's benchmark_model / sl_client not built in {BUILD}: run "
       "`tools/tflite_sl/build.sh SRC_DIR BUILD_DIR` (TFLite 2.8 from source, about an hour on two cores) "
       "and set NNAPI_PY_TFLITE_BUILD=BUILD_DIR; see docs/support_library.md")

pytestmark = [
    pytest.mark.skipif(not LIB.exists(), reason="run `make lib` first"),
    pytest.mark.skipif(not (BENCHMARK.exists() and CLIENT.exists()), reason=HOW),
]

# Corpus models TFLite 2.8's delegate takes whole (every operation supported at feature level 5+):
# float CNNs, a quantized CNN, a float MLP.
MODELS = ["face_detection_short_range", "facenet_uint8", "tflm_sine"]
BENCH_MODELS = ["face_detection_short_range", "facenet_uint8"]


def _env(direct):
    """The environment of a run: none of our settings, build/lib on LD_LIBRARY_PATH only for the
    classic (--direct) path, so the by-path runs can reach us only through the path given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NNAPI_PY_") and k != "LD_LIBRARY_PATH"}
    if direct:
        env["LD_LIBRARY_PATH"] = str(LIB.parent)
    return env


def _model(name):
    return corpus.model_or_skip(name)


def _client(name, mode):
    args = [str(CLIENT), str(_model(name))] + (["--sl", str(LIB)] if mode == "sl" else [f"--{mode}"])
    proc = subprocess.run(args, env=_env(mode == "direct"), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(args)}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    m = re.search(r"mode=\w+ nodes=(\d+) delegated=(\d+) partitions=(\d+) undelegated=(\d+)", proc.stdout)
    assert m, proc.stdout[-2000:]
    counts = dict(zip(("nodes", "delegated", "partitions", "undelegated"), map(int, m.groups())))
    outputs = [line for line in proc.stdout.splitlines() if line.startswith(("output ", "values"))]
    assert outputs, proc.stdout[-2000:]
    return counts, outputs, proc.stdout + proc.stderr


def _values(outputs):
    """[(array, quantization scale)] of the client's printed outputs."""
    import numpy as np
    arrays = []
    for head, values in zip(outputs[0::2], outputs[1::2]):
        kind = re.search(r"type=(\w+)", head).group(1)
        dtype = {"FLOAT32": np.float32, "UINT8": np.uint8, "INT8": np.int8, "INT16": np.int16,
                 "INT32": np.int32}[kind]
        scale = float(re.search(r"scale=(\S+)", head).group(1)) if dtype is not np.float32 else 0.0
        arrays.append((np.array(values.split()[1:], dtype=np.float64).astype(dtype), scale))
    return arrays


@pytest.mark.parametrize("name", BENCH_MODELS)
def test_benchmark_model_loads_us_by_path(name):
    model = _model(name)
    args = [str(BENCHMARK), f"--graph={model}", "--use_nnapi=true", f"--nnapi_support_library_path={LIB}",
            "--require_full_delegation=true", "--warmup_runs=1", "--num_runs=3", "--min_secs=0",
            "--warmup_min_secs=0", "--max_secs=120"]
    proc = subprocess.run(args, env=_env(False), capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit {proc.returncode}\n{log[-3000:]}"
    assert "Couldn't load NNAPI support library" not in log, log[-3000:]
    # one delegate kernel and nothing else in the plan (--require_full_delegation fails the run otherwise)
    assert "the model graph will be completely executed by the delegate" in log, log[-3000:]
    assert re.search(r"count=3 .*avg=", log), log[-3000:]


@pytest.mark.parametrize("name", MODELS)
def test_support_library_equals_direct_link(name):
    sl_counts, sl_out, sl_log = _client(name, "sl")
    direct_counts, direct_out, direct_log = _client(name, "direct")
    for counts, log in ((sl_counts, sl_log), (direct_counts, direct_log)):
        assert counts["delegated"] == counts["nodes"] > 0 and counts["partitions"] == 1 \
            and counts["undelegated"] == 0, log[-2000:]
    assert "implFeatureLevel=" in sl_log
    # bit-identical: same fnv1a of every output's bytes and the same printed values
    assert sl_out == direct_out


@pytest.mark.parametrize("name", MODELS)
def test_delegated_outputs_agree_with_tflite_kernels(name):
    _, sl_out, _ = _client(name, "sl")
    _, cpu_out, _ = _client(name, "cpu")
    ours, want = _values(sl_out), _values(cpu_out)
    assert len(ours) == len(want)
    for i, ((a, scale), (b, _)) in enumerate(zip(ours, want)):
        for check in corpus.check_output(f"{name}:{i}", a, b, scale=scale):
            assert check.ok, check.line()
