"""Real .tflite models: nnapi_py (through the C library) beside LiteRT with XNNPACK, without
XNNPACK (builtin kernels) and with its reference kernels; one thread, same process, same
inputs, the four timed in turn: in each of 11 rounds, 4 runs of one then 4 of the next
(medians of the 44; the reference kernels, only shown for scale, 1 run a round), each after
a 0.5 s warm-up. Prints "tflite <model> <ours> <xnnpack> <builtin> <reference>" (ms; nan
where LiteRT cannot run a variant), or "tflite unavailable (<reason>)" (for the whole corpus, or
for one model that does not load).  Inputs whose shape signature has -1 get the corpus's
INPUT_SHAPES (both sides).  A short run: --rounds 1 --per-round 1 --warmup 0 [model ...].
"""
import math
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


WARMUP_S = 0.5     # LiteRT's benchmark_model default (--warmup_min_secs=0.5, at least one run)


def interleaved_ms(fns, rounds, per_round, warmup_s=WARMUP_S):
    """Median ms of each of fns over rounds x per_round runs (per_round: one count for all,
    or one per fn): in every round each fn runs its per_round times in a row (the runs a user's loop makes: the model's own memory in cache),
    then the next fn.  A slow spell of the machine hits all of them alike, so the ratios hold.
    Each fn first runs for warmup_s seconds (at least once), as LiteRT's benchmark_model warms
    up: steady state is what a loop over frames or audio steps sees (a streaming model's step
    tables reach the cache over its first ~50 steps)."""
    for f in fns:
        end = time.perf_counter() + warmup_s
        f()
        while time.perf_counter() < end:
            f()
    ts = [[] for _ in fns]
    counts = per_round if isinstance(per_round, (list, tuple)) else [per_round] * len(fns)
    for _ in range(rounds):
        for f, t, count in zip(fns, ts, counts):
            for _ in range(count):
                t0 = time.perf_counter()
                f()
                t.append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(t) for t in ts]


def main(rounds=11, per_round=4, warmup_s=WARMUP_S, only=()):
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        import nnapi_py.tflite as T
        from nnapi_py.testing import corpus
        models = corpus.models()
    except Exception as e:          # no LiteRT / parser / corpus: say why, measure nothing
        print(f"tflite unavailable ({type(e).__name__}: {e})")
        return 0
    for name, path in sorted(models.items()):
        if only and name not in only:
            continue
        shapes = corpus.INPUT_SHAPES.get(name)
        try:
            m = T.load(path, input_shapes=shapes) if shapes else T.load(path)
        except Exception as e:      # a model that does not load yet: say so, measure the others
            print(f"tflite unavailable ({name}: {type(e).__name__}: {str(e).splitlines()[0]})", flush=True)
            continue
        rng = np.random.default_rng(0)
        ins = [(rng.uniform(-1, 1, shape) if np.dtype(dtype).kind == "f" else rng.integers(-128, 128, shape))
               .astype(dtype) for _, dtype, shape in m.input_specs]
        fns = [lambda: m.run(ins)]
        counts = [per_round]
        where = []                  # position of each LiteRT variant in fns (None: cannot run it)
        for kind in (OpResolverType.AUTO, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, OpResolverType.BUILTIN_REF):
            try:
                it = Interpreter(model_path=path, num_threads=1, experimental_op_resolver_type=kind)
                for d, x in zip(it.get_input_details(), ins):
                    if tuple(d["shape"]) != x.shape:
                        it.resize_tensor_input(d["index"], x.shape)
                it.allocate_tensors()
                for d, x in zip(it.get_input_details(), ins):
                    it.set_tensor(d["index"], x)
                it.invoke()
            except (RuntimeError, ValueError):
                where.append(None)
                continue
            where.append(len(fns))
            fns.append(it.invoke)
            counts.append(1 if kind == OpResolverType.BUILTIN_REF else per_round)   # 10-40x slower: shown only
        try:
            ms = interleaved_ms(fns, rounds, counts, warmup_s)
        except Exception as e:      # loads but does not run yet
            print(f"tflite unavailable ({name}: {type(e).__name__}: {str(e).splitlines()[0]})", flush=True)
            continue
        theirs = [math.nan if k is None else ms[k] for k in where]
        print(f"tflite {name} {ms[0]:.3f} {theirs[0]:.3f} {theirs[1]:.3f} {theirs[2]:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--per-round", type=int, default=4)
    ap.add_argument("--warmup", type=float, default=WARMUP_S, help="seconds of warm-up per variant")
    ap.add_argument("models", nargs="*", help="corpus model names (default: all)")
    a = ap.parse_args()
    sys.exit(main(a.rounds, a.per_round, a.warmup, set(a.models)))
