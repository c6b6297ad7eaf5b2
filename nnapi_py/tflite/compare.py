"""The one tolerance policy for nnapi_py's outputs on a .tflite model against LiteRT, used by
`python -m nnapi_py run --compare` and by the real-model tests (nnapi_py/testing/corpus.py ->
tests/test_tflite.py).  Both sides run the same inputs; the reference is LiteRT's reference
kernels (BUILTIN_REF: TFLite's reference_ops, the plain code Android's CPU driver follows).

* Quantized outputs (integer with a scale): at most d + 1 steps (quantized units) from the
  reference, where d is how many steps LiteRT's own optimized kernels (its builtin kernels
  without XNNPACK) are from the reference on the same input.  A step of an input to a softmax or
  a requantization can move an output by several steps, and LiteRT's optimized kernels round
  differently from its reference ones: d says how much rounding this model on this input
  amplifies; the one step more is the rounding in which NNAPI's kernels may differ from both.
  Never less than 1 step.
* Float outputs: max |ours - ref| <= 1e-3 * max(1, max |ref|), whatever LiteRT's optimized
  kernels do.  A float output of a quantized model (a detector's boxes and classes after
  TFLite_Detection_PostProcess) is held to it too: a detection that differs is a different
  answer, and it is reported as such even when LiteRT's optimized kernels differ as much.
* Hybrid models (int8 weights, float activations): NNAPI dequantizes the weights (the
  delegate's DEQUANTIZE + float operation) where LiteRT's hybrid kernels quantize the
  activations on the fly; the float rule is checked against LiteRT's reference kernels on a
  copy of the model with its weights dequantized to float32 (the exact reference for what NNAPI
  computes), and against LiteRT on the model itself within 2e-2 * max(1, max |ref|).
* Integer outputs without a scale (indices, counts) and booleans: no further from the reference
  than LiteRT's optimized kernels are (exact when they are exact).
* When LiteRT's reference kernels cannot run the model (a custom operator they lack), LiteRT's
  default kernels are the reference, and the output says so.

LiteRT XNNPACK (LiteRT's default CPU path) is measured beside and printed for information: it
does not widen the bound.  The helpers here need numpy only; the ones that run LiteRT import it
when called (ai-edge-litert, an optional package).
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

FLOAT_RTOL = 1e-3           # float outputs: max |x - ref| <= FLOAT_RTOL * max(1, max |ref|)
HYBRID_RTOL = 2e-2          # hybrid models against LiteRT's hybrid kernels on the model itself
EXTRA_STEPS = 1             # quantized outputs: LiteRT's optimized kernels' distance + this many steps

REFERENCE = "LiteRT reference kernels"
OPTIMIZED = "LiteRT builtin kernels"         # its optimized kernels, without XNNPACK
XNNPACK = "LiteRT XNNPACK"
INSTALL = "pip install 'ai-edge-litert==2.3.0'"   # the extra nnapi_py[compare] (pyproject.toml)

POLICY = ("quantized outputs: within LiteRT's own optimized kernels' distance from its reference kernels "
          f"(measured on the same input) + {EXTRA_STEPS} step, at least {EXTRA_STEPS}; float outputs: "
          f"max |x - ref| <= {FLOAT_RTOL:g} * max(1, max |ref|); integer outputs without a scale: no further than "
          "LiteRT's optimized kernels")


def distance(x, ref) -> Tuple[float, float]:
    """(max |x - ref|, that over max(1, max |ref|)) of two arrays of one size (booleans as 0 / 1;
    complex by modulus); NaN where one has NaN and the other not."""
    ref = np.asarray(ref)
    x = np.asarray(x).reshape(ref.shape)
    if not ref.size:
        return 0.0, 0.0
    kind = np.complex128 if ref.dtype.kind == "c" or x.dtype.kind == "c" else np.float64
    a, b = x.astype(kind), ref.astype(kind)
    d = np.abs(a - b)
    same_nan = np.isnan(a) & np.isnan(b) if kind is np.float64 else np.zeros(d.shape, bool)
    d = np.where(same_nan, 0.0, d)
    worst = float(np.nanmax(d)) if not np.isnan(d).any() else float("nan")
    scale = max(1.0, float(np.nanmax(np.abs(b))) if np.isfinite(np.abs(b)).any() else 1.0)
    return worst, worst / scale


@dataclass
class OutputCheck:
    """One output against the policy.  error / bound are in steps for a quantized output (kind
    "quantized"), in the output's units otherwise; others: (label, error, rel, within the bound)
    for LiteRT's optimized kernels and XNNPACK, printed for information."""
    name: str
    kind: str                   # "quantized", "float", "integer"
    error: float
    rel: float
    bound: float
    why: str                    # how the bound was obtained
    scale: float = 0.0
    reference: str = REFERENCE
    others: List[tuple] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.error <= self.bound)          # NaN: outside

    def _fmt(self, err, rel):
        if self.kind == "quantized":
            return f"{err:.0f} step(s) ({err * self.scale:.3g} in real value)"
        return f"max abs {err:.3g} (rel {rel:.3g})"

    def line(self, label="ours") -> str:
        """`name: ours <error> from <reference>; bound <bound> (<why>): within|OUTSIDE; beside: <others>`."""
        bound = f"{self.bound:.0f} step(s)" if self.kind == "quantized" else f"{self.bound:.3g}"
        text = (f"{self.name}: {label} {self._fmt(self.error, self.rel)} from the {self.reference}; "
                f"bound {bound} ({self.why}): {'within' if self.ok else 'OUTSIDE'}")
        if self.others:
            text += "; beside: " + ", ".join(f"{other} {self._fmt(err, rel)}" + ("" if inside else " (outside the bound)")
                                             for other, err, rel, inside in self.others)
        return text


def check_output(name: str, ours, ref, optimized=None, scale: float = 0.0, rtol: float = FLOAT_RTOL,
                 xnnpack=None, reference: str = REFERENCE) -> OutputCheck:
    """`ours` (an output of nnapi_py) against `ref` (LiteRT's reference kernels' output on the same
    inputs) under the policy; optimized: LiteRT's optimized kernels' output (the measured
    distance for quantized and unscaled integer outputs; None: not available, counted as 0);
    scale: the output's quantization scale (0: not quantized); rtol: the float bound's factor;
    xnnpack: LiteRT XNNPACK's output, for information."""
    ref = np.asarray(ref)
    err, rel = distance(ours, ref)
    others = []
    if ref.dtype.kind in "fc":
        bound = rtol * max(1.0, float(np.abs(ref.astype(np.complex128 if ref.dtype.kind == "c" else np.float64))
                                      .max()) if ref.size else 1.0)
        c = OutputCheck(name, "float", err, rel, bound, f"{rtol:g} x max(1, max |ref|)", 0.0, reference)
    else:
        d = 0.0 if optimized is None else distance(optimized, ref)[0]
        if scale:
            bound = max(float(EXTRA_STEPS), d + EXTRA_STEPS)
            why = (f"{OPTIMIZED} are {d:.0f} step(s) from the reference on this input, + {EXTRA_STEPS}"
                   if optimized is not None else f"{EXTRA_STEPS} step: no optimized kernels to measure")
            c = OutputCheck(name, "quantized", err, rel, bound, why, float(scale), reference)
        else:
            why = (f"{OPTIMIZED}' distance from the reference on this input" if optimized is not None
                   else "exact: no optimized kernels to measure")
            c = OutputCheck(name, "integer", err, rel, d, why, 0.0, reference)
    for label, x in ((OPTIMIZED, optimized), (XNNPACK, xnnpack)):
        if x is not None:
            e, r = distance(x, ref)
            others.append((label, e, r, e <= c.bound))
    c.others = others
    return c


# ---- LiteRT, for the CLI (and anyone comparing by hand) ----------------------------------------
def litert_available() -> bool:
    try:
        import ai_edge_litert.interpreter  # noqa: F401
    except ImportError:
        return False
    return True


def interpreter(path: str, kind: str, input_shapes: Optional[Sequence[Sequence[int]]] = None, num_threads: int = 1):
    """A LiteRT interpreter on `path` with the op resolver `kind` ("BUILTIN_REF",
    "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "AUTO"), its inputs resized to input_shapes (one per
    input, where they differ from the file's) before its tensors are allocated.  RuntimeError /
    ValueError when LiteRT cannot run the model that way (ImportError without LiteRT)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_path=path, num_threads=num_threads,
                     experimental_op_resolver_type=getattr(OpResolverType, kind))
    for d, shape in zip(it.get_input_details(), input_shapes or ()):
        if tuple(d["shape"]) != tuple(shape):
            it.resize_tensor_input(d["index"], list(shape), strict=False)
    it.allocate_tensors()
    return it


def invoke(it, inputs: Sequence[np.ndarray]) -> Dict[str, np.ndarray]:
    """Run a LiteRT interpreter on inputs (in the model's order): {output name: array}."""
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], np.asarray(x, d["dtype"]).reshape(d["shape"]))
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]).copy() for d in it.get_output_details()}


def output_scales(it) -> Dict[str, float]:
    """{output name: quantization scale (0: not quantized)} of a LiteRT interpreter."""
    return {d["name"]: float(d["quantization"][0]) for d in it.get_output_details()}


def float_weights(path, out):
    """A copy of the model written to `out` whose hybrid weights -- int8 / uint8
    constants with quantization feeding an operator whose input 0 is float32 (dynamic-range
    quantization) -- are float32 constants of their dequantized values; None when the model has
    none.  LiteRT's hybrid kernels quantize the float activations on the fly, NNAPI's DEQUANTIZE
    + float operation (what the delegate does) does not: the float copy on LiteRT's reference
    kernels is the exact reference for that.  Needs LiteRT (its schema module) and flatbuffers."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as S
    m = S.ModelT.InitFromPackedBuf(bytearray(open(path, "rb").read()), 0)
    changed = False
    for g in m.subgraphs:
        for op in g.operators or []:
            ins = list(op.inputs if op.inputs is not None else [])
            if not ins or ins[0] < 0 or g.tensors[ins[0]].type != S.TensorType.FLOAT32:
                continue
            for k in ins[1:]:
                t = g.tensors[k] if k >= 0 else None
                b = m.buffers[t.buffer] if t is not None else None
                if t is None or t.type not in (S.TensorType.INT8, S.TensorType.UINT8) or b is None or \
                        b.data is None or not len(b.data) or t.quantization is None or t.quantization.scale is None:
                    continue
                q = np.frombuffer(bytes(bytearray(b.data)), np.int8 if t.type == S.TensorType.INT8 else np.uint8)
                q = q.reshape(tuple(t.shape)).astype(np.float32)
                scale = np.asarray(t.quantization.scale, np.float32)
                zp = np.asarray(t.quantization.zeroPoint if t.quantization.zeroPoint is not None else [0], np.float32)
                if scale.size > 1:              # per channel along quantizedDimension
                    shape = [1] * q.ndim
                    shape[t.quantization.quantizedDimension] = -1
                    scale, zp = scale.reshape(shape), zp.reshape(shape) if zp.size > 1 else zp
                b.data = np.frombuffer(((q - zp) * scale).astype(np.float32).tobytes(), np.uint8)
                t.type, t.quantization = S.TensorType.FLOAT32, None
                changed = True
    if not changed:
        return None
    builder = flatbuffers.Builder(1024)
    builder.Finish(m.Pack(builder), b"TFL3")
    with open(out, "wb") as f:
        f.write(builder.Output())
    return out
