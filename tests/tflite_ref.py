"""Write a tiny .tflite model (tflite_writer), load it through nnapi_py.tflite at a feature level
and compare every output with LiteRT's reference kernels (BUILTIN_REF)."""
import numpy as np

import tflite_writer


def interpreter(path, builtin=False, shapes=None):
    """LiteRT's reference kernels; its builtin kernels (no delegate) for an op the reference
    resolver lacks (ELU, ...) or when builtin=True.  shapes: the inputs resized to them first."""
    from ai_edge_litert import interpreter as litert
    try:
        if builtin:
            raise ValueError("builtin kernels asked for")
        ref = litert.Interpreter(model_path=path, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    except ValueError:
        ref = litert.Interpreter(model_path=path,
                                 experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    for d, shape in zip(ref.get_input_details(), shapes or ()):
        if tuple(d["shape"]) != tuple(shape):
            ref.resize_tensor_input(d["index"], list(shape))
    ref.allocate_tensors()
    return ref


def reference(path, feeds):
    """Outputs of LiteRT's reference kernels on feeds (inputs resized to the feeds' shapes)."""
    ref = interpreter(path, shapes=[np.shape(x) for x in feeds])
    for d, x in zip(ref.get_input_details(), feeds):
        ref.set_tensor(d["index"], x)
    ref.invoke()
    return [ref.get_tensor(d["index"]) for d in ref.get_output_details()]


def compare(tmp_path, tensors, ops, inputs, outputs, feeds, expect=None, level=None, tol=1e-5, steps=1, name="m",
            builtin=False, qtol=0, cpu=False):
    """Load at `level` (None: the runtime's), run `steps` times on feeds, compare with LiteRT's
    reference kernels (float: |ours - ref| <= tol (1 + |ref|); integers / bools: equal);
    `expect` must appear in the model's mapping; builtin=True: against LiteRT's builtin kernels;
    qtol: integer outputs within that many quantization steps; every operator must run on NNAPI
    (or be folded) unless cpu=True.
    Returns the model."""
    import nnapi_py.tflite as T
    path = tflite_writer.write(str(tmp_path / f"{name}.tflite"), tensors, ops, inputs, outputs)
    m = T.load(path, feature_level=level)
    ref = interpreter(path, builtin)
    for _ in range(steps):
        got = m.run(feeds)
        for d, x in zip(ref.get_input_details(), feeds):
            ref.set_tensor(d["index"], x)
        ref.invoke()
        for d, g in zip(ref.get_output_details(), got):
            want = ref.get_tensor(d["index"])
            g = np.asarray(g).reshape(want.shape)
            if want.dtype.kind == "f":
                np.testing.assert_allclose(g, want, rtol=tol, atol=tol, err_msg=d["name"])
            elif qtol:
                assert np.abs(g.astype(np.int64) - want.astype(np.int64)).max() <= qtol, d["name"]
            else:
                np.testing.assert_array_equal(g.astype(want.dtype), want, err_msg=d["name"])
    if not cpu:
        off = [x for x in m.mapping if str(x[2]).startswith(("CPU", "unmapped"))]
        assert not off, off
    if expect:
        text = "\n".join(str(x) for x in m.mapping)
        assert expect in text, text
    return m
