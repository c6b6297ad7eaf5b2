"""Real .tflite models: nnapi_py (through the C library) beside LiteRT with XNNPACK, without
XNNPACK (builtin kernels) and with its reference kernels; one thread, medians of N runs, same
process, same inputs. Prints "tflite <model> <ours> <xnnpack> <builtin> <reference>" (ms; nan
where LiteRT cannot run a variant), or "tflite unavailable (<reason>)".
"""
import math
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]


def median_ms(fn, runs):
    fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main(runs=10):
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        import nnapi_py.tflite as T
        import tflite_corpus
        models = tflite_corpus.models()
    except Exception as e:          # no LiteRT / parser / corpus: say why, measure nothing
        print(f"tflite unavailable ({type(e).__name__}: {e})")
        return 0
    for name, path in sorted(models.items()):
        m = T.load(path)
        rng = np.random.default_rng(0)
        ins = [(rng.uniform(-1, 1, o.dims) if o.type.dtype.kind == "f" else rng.integers(-128, 128, o.dims))
               .astype(o.type.dtype) for o in m.nn_model.inputs if not o.name.startswith("state:")]
        ours = median_ms(lambda: m.run(ins), runs)
        theirs = []
        for kind in (OpResolverType.AUTO, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, OpResolverType.BUILTIN_REF):
            try:
                it = Interpreter(model_path=path, num_threads=1, experimental_op_resolver_type=kind)
                it.allocate_tensors()
                for d, x in zip(it.get_input_details(), ins):
                    it.set_tensor(d["index"], x)
                theirs.append(median_ms(it.invoke, runs))
            except (RuntimeError, ValueError):
                theirs.append(math.nan)
        print(f"tflite {name} {ours:.3f} {theirs[0]:.3f} {theirs[1]:.3f} {theirs[2]:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
