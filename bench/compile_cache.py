"""Compilation caching (issue 39): a corpus model loaded twice through the importer with
compile(cache_dir=DIR) on an empty DIR, in one process: the first compilation builds the plan
and writes the entry, the second loads it.  Times are those of nn.Model.compile (create,
setCaching, Compilation_finish: what an app waits for), the model's NNAPI compilations summed.
Prints "compile_cache <model> <first ms> <second ms> <entry MB>" per model, or
"compile_cache unavailable (<reason>)".  Default: facenet_uint8 (FaceNet, the row `make bench`
checks) and efficientnet_lite0.
"""
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = ("facenet_uint8", "efficientnet_lite0")


def measure(path, cache_dir):
    """ms of the model's compilations (nn.Model.compile) while T.load(path, cache_dir=...)."""
    import nnapi_py.tflite as T
    from nnapi_py import nn
    spent = []
    orig = nn.Model.compile

    def timed(self, **kw):
        t0 = time.perf_counter()
        try:
            return orig(self, **kw)
        finally:
            spent.append(time.perf_counter() - t0)
    nn.Model.compile = timed
    try:
        T.load(path, cache_dir=cache_dir)
    finally:
        nn.Model.compile = orig
    return sum(spent) * 1e3


def main(names=MODELS):
    try:
        from nnapi_py.testing import corpus
        models = corpus.models()
    except Exception as e:
        print(f"compile_cache unavailable ({type(e).__name__}: {e})")
        return 0
    for name in names:
        if name not in models:
            print(f"compile_cache unavailable ({name}: not in the corpus)")
            continue
        d = tempfile.mkdtemp(prefix="nnapi_py-bench-cache-")
        try:
            first = measure(models[name], d)
            second = measure(models[name], d)
            mb = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) / 1e6
        except Exception as e:
            print(f"compile_cache unavailable ({name}: {type(e).__name__}: {str(e).splitlines()[0]})")
            continue
        finally:
            shutil.rmtree(d, ignore_errors=True)
        print(f"compile_cache {name} {first:.1f} {second:.1f} {mb:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or MODELS))
